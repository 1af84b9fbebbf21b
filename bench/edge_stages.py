#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Where the edge path's time goes, ledger by ledger, for bench/edge-path.sh.

    edge_stages.py EDGE_LOG CSV

EDGE_LOG is the edge's log at --log-level debug: one `jetstream source ledger verified` line per
ledger with the way it came (path=live: the run's messages as the NATS server received them;
path=stream: read from the JetStream stream), the core's emit end (from the END), when the
JetStream server stored that END (0 on live), when the edge's source loop took it from nats.c, and
when the ledger verified (Unix ns, one host's clock). CSV is build/tests/edge_delivery's (sequence,
direct_delivery_ns, edge_delivery_ns, edge_end_stamp_ns: the latter two relative to the core's
emit end).

Prints one line per stage, `stage n p50_ns p99_ns max_ns` (nearest rank):
  live_hop       core emit end -> taken by the edge (live ledgers: the publisher's send, the
                 server's routing, nats.c's hand-over)
  publish_store  core emit end -> END stored (stream ledgers: the publisher's send, the server's
                 ingest and write)
  push           END stored -> taken by the edge (stream ledgers: the server's push, nats.c)
  verify         taken -> verified (the edge's assembler: length and XXH64)
  forward        verified -> the edge's own END stamp (the edge's source loop emitting END)
  last_hop       the edge's END stamp -> the edge's subscriber verified the ledger
  total          core emit end -> the edge's subscriber (edge_delivery_ns)
Only ledgers present in both files, with a stamped END, are counted."""
import csv
import re
import sys

LINE = re.compile(r'msg="jetstream source ledger verified" .*?ledger=(\d+) (?:path=(\w+) )?emit_end_unix_ns=(-?\d+) '
                  r'stored_unix_ns=(-?\d+) taken_unix_ns=(-?\d+) verified_unix_ns=(-?\d+)')


def rank(v, p):
    return v[max(0, (p * len(v) + 99) // 100 - 1)]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: edge_stages.py EDGE_LOG CSV")
    edge = {}
    with open(sys.argv[1], errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if m:
                seq, end, stored, taken, verified = (int(g) for i, g in enumerate(m.groups()) if i != 1)
                if end > 0:
                    edge[seq] = (end, stored, taken, verified)
    stages = {k: [] for k in ("live_hop", "publish_store", "push", "verify", "forward", "last_hop", "total")}
    with open(sys.argv[2]) as f:
        for row in csv.DictReader(f):
            seq = int(row["sequence"])
            if seq not in edge or not row.get("edge_delivery_ns") or not row.get("edge_end_stamp_ns"):
                continue
            end, stored, taken, verified = edge[seq]
            total, stamp = int(row["edge_delivery_ns"]), int(row["edge_end_stamp_ns"])
            if stored:
                stages["publish_store"].append(stored - end)
                stages["push"].append(taken - stored)
            else:
                stages["live_hop"].append(taken - end)
            stages["verify"].append(verified - taken)
            stages["forward"].append(stamp - (verified - end))
            stages["last_hop"].append(total - stamp)
            stages["total"].append(total)
    for name, v in stages.items():
        v.sort()
        if v:
            print(name, len(v), rank(v, 50), rank(v, 99), v[-1])
        else:
            print(name, 0, 0, 0, 0)


if __name__ == "__main__":
    main()
