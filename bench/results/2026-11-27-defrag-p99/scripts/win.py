import csv, sys, statistics as st, collections
d=sys.argv[1]
rows=list(csv.DictReader(open(d+'/run/timeseries.csv')))
by={}
for r in rows: by.setdefault(int(r['elapsed_s']),{})[r['operation']]=r
tog=[l.split()[:2] for l in open(d+"/toggle.txt") if l[0].isdigit()]
tog=[(int(a),b) for a,b in tog]
res=collections.defaultdict(list)
for i,(s,name) in enumerate(tog):
    e = tog[i+1][0] if i+1 < len(tog) else s+30
    win=[by[x] for x in range(s+3, e+1) if x in by and 'READ' in by[x]]  # skip 2 s of transition
    if len(win)<20: continue
    rp99=st.median(float(w['READ']['p99_us']) for w in win)
    up99=st.median(float(w['UPDATE']['p99_us']) for w in win)
    rmean=st.mean(float(w['READ']['mean_us']) for w in win)
    ops=st.mean(float(w['READ']['count'])+float(w['UPDATE']['count']) for w in win)
    res[name].append((rp99,up99,rmean,ops))
    print(s,name,f"read p99 {rp99:.0f} upd p99 {up99:.0f} read mean {rmean:.0f} ops {ops:.0f}")
for k,v in res.items():
    print(k, len(v), "read p99 %.0f  upd p99 %.0f  read mean %.0f  ops %.0f" % tuple(st.mean(x[i] for x in v) for i in range(4)))
