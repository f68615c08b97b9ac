import sys, re
# parse blk.txt: blocks separated by time lines; for @small_read compute p50/p99/p999 and mean, count
txt=open(sys.argv[1]).read().split('\n')
cur=None; hists={}; out=[]
def pct(h, q):
    tot=sum(c for _,c in h); acc=0
    for lo,c in h:
        acc+=c
        if acc>=q*tot: return lo
    return h[-1][0]
for line in txt:
    m=re.match(r'^(\d\d:\d\d:\d\d)$', line)
    if m:
        if cur: out.append((cur,hists))
        cur=m.group(1); hists={}; name=None; continue
    m=re.match(r'^@(\w+):', line)
    if m: name=m.group(1); hists[name]=[]; continue
    m=re.match(r'^\[(\d+), (\d+)\)\s+(\d+)', line) or re.match(r'^\[(\d+), \.\.\.\)\s+(\d+)', line)
    if m and name:
        if len(m.groups())==3: hists[name].append((int(m.group(1)),int(m.group(3))))
        else: hists[name].append((int(m.group(1)),int(m.group(2))))
if cur: out.append((cur,hists))
for t,h in out:
    s=h.get('small_read',[]); b=h.get('big_read',[]); w=h.get('write',[])
    if not s: continue
    n=sum(c for _,c in s)
    print(t, f"small reads {n/30:.0f}/s p50 {pct(s,.5)} p90 {pct(s,.9)} p99 {pct(s,.99)} p99.9 {pct(s,.999)}",
          f"| big reads {sum(c for _,c in b)/30:.0f}/s p50 {pct(b,.5) if b else '-'} p99 {pct(b,.99) if b else '-'}",
          f"| writes {sum(c for _,c in w)/30:.0f}/s p50 {pct(w,.5) if w else '-'} p99 {pct(w,.99) if w else '-'}")
