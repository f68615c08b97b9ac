import sys, re, collections
lines=[l.split() for l in open(sys.argv[1]+'/toggle.txt') if l[0].isdigit()]
res=collections.defaultdict(list)
for i in range(len(lines)-1):
    a=lines[i]; b=lines[i+1]
    def parse(l):
        d=collections.Counter()
        for kv in l[3:]:
            k,v=kv.rsplit(':',1); d[k]+=int(v)
        return d
    da,db=parse(a),parse(b)
    diff={k: (db[k]-da[k])/30/100 for k in db}
    res[a[1]].append(diff)
for k,v in res.items():
    keys=sorted(set().union(*v))
    print(k, len(v), ' '.join(f"{kk}={sum(x.get(kk,0) for x in v)/len(v):.3f}" for kk in keys if sum(x.get(kk,0) for x in v)>0))
