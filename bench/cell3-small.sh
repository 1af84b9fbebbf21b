#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cell 3: small and fast over loopback. 204800-byte ledgers every 10 ms, each emitted over 5 ms,
# uncompressed, n = 1000, verified (benchrunner's own defaults, written out).
# Target: delivery p99 <= 0.3 ms (the software stack's own tail).
# Wall time: about 10 s.
# Environment: BUILD_DIR (default build), COUNT (default 1000), VERIFY (default 1).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

COUNT=${COUNT:-1000}
VERIFY=${VERIFY:-1}

bench_init cell3-small "small and fast, loopback: 204800 B every 10ms over 5ms, uncompressed, n=$COUNT"

args=(--mode loopback --count "$COUNT" --synthetic-size 204800 --synthetic-interval 10ms
  --emit-window 5ms --chunk-size 262144 --compress=false)
((VERIFY)) && args+=(--verify)

note "running $COUNT ledgers at 10 ms: about $((COUNT / 100 + 3)) s"
run_benchrunner loopback $((COUNT / 100 + 120)) "${args[@]}"

N_MIN=$COUNT P99_TARGET_MS=0.3 MAX_TARGET_MS='' RSS_TARGET_MB='' WINDOW_MS=5 TEMIT_TOL='' RAWFB_TARGET=''
loopback_report loopback
cell_done
