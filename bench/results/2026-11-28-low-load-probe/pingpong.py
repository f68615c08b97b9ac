# Round trip of one byte between two processes over loopback TCP, back to back and after an
# idle gap: what a wake-up costs on this machine. Not a benchmark of hayate.
import socket, time, os, sys, statistics
port=19999
if os.fork()==0:
    s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR,1); s.bind(('127.0.0.1',port)); s.listen(1)
    c,_=s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY,1)
    while True:
        d=c.recv(100)
        if not d: break
        c.send(d)
    sys.exit(0)
time.sleep(0.3)
c=socket.create_connection(('127.0.0.1',port)); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY,1)
for gap in (0.0, 0.0015, 0.01):
    r=[]
    for i in range(2000):
        if gap: time.sleep(gap)
        t=time.perf_counter(); c.send(b'x'); c.recv(100); r.append((time.perf_counter()-t)*1e6)
    r.sort(); print(f"gap {gap*1000:.1f}ms: p50 {r[len(r)//2]:.0f} us p95 {r[int(len(r)*.95)]:.0f} p99 {r[int(len(r)*.99)]:.0f}")
c.close()
