#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Lake readers for bench/cell10-lake.sh: T threads, each on one kept-alive HTTP connection,
GET the lake objects of ledgers FIRST..LAST from http://ADDR/lake (thread i takes every T-th
batch), as fast as the server answers, reading the bytes and nothing more (no decompression: the
readers share the machine with the server). With --seconds S, the batches are spread evenly over
S seconds (each reader waits for its next batch's turn: a steady demand, as CDP readers catching
up make), or with --flood read again from FIRST as fast as answered until S seconds passed. The keys come from tests/lake_client.py's SEP-54
reader. Prints one line: objects=<n> bytes=<total> not_found=<n> busy=<n> other=<n> seconds=<t>."""
import argparse, os, sys, threading, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from lake_client import Lake  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("addr")
ap.add_argument("first", type=int)
ap.add_argument("last", type=int)
ap.add_argument("-t", type=int, default=8)
ap.add_argument("--seconds", type=float, default=0)
ap.add_argument("--flood", action="store_true")
a = ap.parse_args()
host, port = a.addr.rsplit(":", 1)
counts = {"objects": 0, "bytes": 0, "not_found": 0, "busy": 0, "other": 0}
mu = threading.Lock()


def reader(i):
    lake = Lake(host, int(port), "/lake")
    lake.config()
    mine = {k: 0 for k in counts}
    total = a.last - a.first + 1
    while True:
        for seq in range(a.first + i, a.last + 1, a.t):
            if a.seconds and not a.flood:  # batch number n is due at n/total of the way
                time.sleep(max(0.0, t0 + a.seconds * (seq - a.first) / total - time.monotonic()))
            status, _, body = lake.request("GET", lake.path(seq))
            key = {200: "objects", 404: "not_found", 503: "busy"}.get(status, "other")
            mine[key] += 1
            mine["bytes"] += len(body) if status == 200 else 0
        if not a.flood or time.monotonic() - t0 >= a.seconds:
            break
    lake.close()
    with mu:
        for k, v in mine.items():
            counts[k] += v


t0 = time.monotonic()
threads = [threading.Thread(target=reader, args=(i,)) for i in range(a.t)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(" ".join(f"{k}={v}" for k, v in counts.items()) + f" seconds={time.monotonic() - t0:.2f}")
