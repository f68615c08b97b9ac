import time, sys
duty = float(sys.argv[1]); period = 0.01
while True:
    t = time.perf_counter()
    while time.perf_counter() - t < duty * period:
        pass
    time.sleep((1 - duty) * period)
