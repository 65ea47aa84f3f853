#!/usr/bin/env python3
"""Calls per second of `glovebox run` with N concurrent callers.

Usage: http_load.py SECONDS CALLERS CMD...   Prints one number (calls/s).
Each caller loops running CMD until SECONDS have passed; only calls that
exit 0 count. Stdlib only."""
import subprocess, sys, threading, time

seconds, callers, cmd = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
done, failed = [0] * callers, [0] * callers
end = time.monotonic() + seconds


def loop(i):
    while time.monotonic() < end:
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if r.returncode == 0:
            done[i] += 1
        else:
            failed[i] += 1


start = time.monotonic()
ts = [threading.Thread(target=loop, args=(i,)) for i in range(callers)]
for t in ts:
    t.start()
for t in ts:
    t.join()
elapsed = time.monotonic() - start
if sum(failed):
    print(f"{sum(failed)} calls failed", file=sys.stderr)
print(f"{sum(done) / elapsed:.1f}")
