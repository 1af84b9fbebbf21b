#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cell 2: the gate shape over loopback. The acceptance ledgers (15196160 bytes every 600 ms) with
# a compressible (meta-shaped) payload and per-chunk zstd on, emitted over 7500 us (stellar-core's
# measured burst), n >= 100, verified. Reports raw fallbacks (chunks the encoders were too busy to
# compress) and the observed t_emit beside delivery.
# Targets: delivery p99 <= 2 ms and max <= 5 ms; zero raw fallbacks; t_emit p50 and p99 within
# 10% of 7.5 ms; peak RSS <= 64 MB.
# Wall time: about COUNT x 0.6 s (60 s at the default COUNT=100).
# Environment: BUILD_DIR (default build), COUNT (default 100), VERIFY (default 1), LEVEL (default
# auto: --compress-level, e.g. LEVEL=1 for the prototype's fixed level).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

COUNT=${COUNT:-100}
VERIFY=${VERIFY:-1}
LEVEL=${LEVEL:-auto}

bench_init cell2-gate "gate shape, loopback: 15196160 B compressible every 600ms over 7500us, zstd level $LEVEL, n=$COUNT"

# benchrunner's loopback --compress turns on both chunk compression and the compressible payload.
args=(--mode loopback --count "$COUNT" --synthetic-size 15196160 --synthetic-interval 600ms
  --emit-window 7500us --chunk-size 262144 --compress --compress-level "$LEVEL")
((VERIFY)) && args+=(--verify)

note "running $COUNT ledgers at 600 ms: about $((COUNT * 6 / 10 + 5)) s"
run_benchrunner loopback $((COUNT * 6 / 10 + 120)) "${args[@]}"

N_MIN=100 P99_TARGET_MS=2 MAX_TARGET_MS=5 RSS_TARGET_MB=64 WINDOW_MS=7.5 TEMIT_TOL=0.10 RAWFB_TARGET=0
loopback_report loopback
cell_done
