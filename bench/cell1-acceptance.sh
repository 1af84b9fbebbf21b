#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cell 1: the acceptance shape over loopback. 15196160-byte ledgers every 600 ms, each emitted
# over 15 ms, uncompressed, n >= 100; corestreamd's server and the libremoteledger client run in
# one benchrunner process over 127.0.0.1 and every ledger is verified byte for byte.
# Targets: delivery p99 <= 2 ms and max <= 5 ms; peak RSS <= 64 MB.
# Wall time: about COUNT x 0.6 s (60 s at the default COUNT=100).
# Environment: BUILD_DIR (default build), COUNT (default 100), VERIFY (default 1).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

COUNT=${COUNT:-100}
VERIFY=${VERIFY:-1}

bench_init cell1-acceptance "acceptance shape, loopback: 15196160 B every 600ms over 15ms, uncompressed, n=$COUNT"

args=(--mode loopback --count "$COUNT" --synthetic-size 15196160 --synthetic-interval 600ms
  --emit-window 15ms --chunk-size 262144 --compress=false)
((VERIFY)) && args+=(--verify)

note "running $COUNT ledgers at 600 ms: about $((COUNT * 6 / 10 + 5)) s"
run_benchrunner loopback $((COUNT * 6 / 10 + 120)) "${args[@]}"

N_MIN=100 P99_TARGET_MS=2 MAX_TARGET_MS=5 RSS_TARGET_MB=64 WINDOW_MS=15 TEMIT_TOL='' RAWFB_TARGET=''
loopback_report loopback
cell_done
