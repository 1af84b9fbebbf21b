#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cell real: ledgers stellar-core wrote, through corestreamd's file source to benchrunner
# --verify-dir (every ledger checked byte-exact against the dump). The data is the realmeta
# directory beside the project (REALMETA, default ../shared/realmeta from the repository; its
# README says what and from where), read in place: the dumps are symlinks or pieces cut into the
# scratch directory, never copies in the repository. Three dumps, each renumbered from 1 by the
# file source and cycled:
#   pubnet   the five public-network ledgers (LedgerCloseMeta v0, 412 B to 1.1 MB)
#   pubnet24 public-network ledger 53312000 (v1, 372 KB) out of the Galexie batch (needs zstd)
#   v23      the Soroban load-test ledgers 84, 85, 88 (v2, 19.8 KB to 1.9 MB) cut out of core's
#            own metadata stream
# Runs, each a fresh corestreamd (--compress, emitted over 7500 us, endless) and one benchrunner
# --mode remote --start S --end E: S is LEAD_MS (3 s) of cadence, at least one ledger, past the
# first /healthz latest, so every measured ledger is delivered live; E is the first whole number
# of dump cycles at least N ledgers on:
#   - the public network's cadence (PUB_CADENCE, 5.5 s) for pubnet and v23 at the default level
#     (auto), PUB_N ledgers (rounded up to whole cycles);
#   - the gate cadence of cells 1 and 2 (STRESS_CADENCE, 600 ms) for every dump at each of
#     LEVELS (1, 3, auto), STRESS_N ledgers;
#   - beside them, --synthetic-compressible at SYN_SIZE bytes, the same cadence and levels
#     (benchrunner --verify): the ratio the synthetic payload gives on the same path.
# Reported per run: the compression ratio raw/wire of corestreamd_emitted_bytes_total (from
# /metrics, read just after the client's last ledger, in the quiet part of the cadence, so over
# ledgers 1..E exactly: the count is printed beside it; for auto, the level it gave the last chunk,
# corestreamd_compress_level), delivery p50/p90/p99/max over the
# client's ledgers, and server CPU per emitted ledger. The ratio of a fixed level is a property
# of the bytes and the 256 KiB chunks (not of the cadence); auto's depends on what the encoders
# sustain. Targets: none; every run must verify (benchrunner exit 0).
# Wall time: about 5 min (the 5.5 s cadence is two of them).
# Environment: BUILD_DIR (default build), REALMETA, PUB_CADENCE (5500ms), PUB_N (10),
# STRESS_CADENCE (600ms), STRESS_N (20), LEVELS ("1 3 auto"), SYN_SIZE (1048576), PUB_DUMPS
# ("pubnet v23"), DUMPS ("pubnet pubnet24 v23"), LEAD_MS (3000).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REALMETA=${REALMETA:-$REPO_DIR/../shared/realmeta}
PUB_CADENCE=${PUB_CADENCE:-5500ms}
PUB_N=${PUB_N:-10}
STRESS_CADENCE=${STRESS_CADENCE:-600ms}
STRESS_N=${STRESS_N:-20}
LEVELS=${LEVELS:-1 3 auto}
SYN_SIZE=${SYN_SIZE:-1048576}
PUB_DUMPS=${PUB_DUMPS:-pubnet v23}
DUMPS=${DUMPS:-pubnet pubnet24 v23}
LEAD_MS=${LEAD_MS:-3000}
EMIT=7500us

bench_init cell-real "real ledgers (../shared/realmeta) through the file source at ${PUB_CADENCE} and ${STRESS_CADENCE}, zstd levels ${LEVELS// /, }"
need_tools curl od dd tail
[[ -r $REALMETA/SHA256SUMS ]] || die "$REALMETA is absent: this cell needs the real ledgers (set REALMETA)"
REALMETA=$(cd "$REALMETA" && pwd)
note "real ledgers from $REALMETA (read in place; the dumps below are in the scratch directory)"

# ---- the dumps ----------------------------------------------------------------------------------

declare -A DUMP_DIR DUMP_N
size_of() { wc -c <"$1" | tr -d ' '; }

mkdir -p "$SCRATCH/pubnet"
i=0
for s in 6154623 16154623 26154623 36154623 46154623; do
  i=$((i + 1))
  ln -s "$REALMETA/pubnet-ledger-$s.xdr" "$SCRATCH/pubnet/ledger-$i.xdr"
done
DUMP_DIR[pubnet]=$SCRATCH/pubnet DUMP_N[pubnet]=5

if command -v zstd >/dev/null 2>&1; then
  mkdir -p "$SCRATCH/pubnet24"
  zstd -dcq "$REALMETA/pubnet-batch-53312000.xdr.zst" >"$SCRATCH/batch"
  # LedgerCloseMetaBatch: startSequence, endSequence, the array's length, then the one ledger.
  tail -c +13 "$SCRATCH/batch" >"$SCRATCH/pubnet24/ledger-1.xdr"
  DUMP_DIR[pubnet24]=$SCRATCH/pubnet24 DUMP_N[pubnet24]=1
else
  note "no zstd program: the pubnet24 dump (the Galexie batch's ledger) is left out"
  DUMPS=${DUMPS//pubnet24/}
fi

# The v23 stream's record-marked frames, one file each.
mkdir -p "$SCRATCH/v23"
stream=$REALMETA/v23-loadtest-stream.xdr
total=$(size_of "$stream") off=0 k=0
while ((off + 4 <= total)); do
  read -r b0 b1 b2 b3 < <(od -An -tu1 -j "$off" -N4 "$stream")
  len=$(((b0 << 24 | b1 << 16 | b2 << 8 | b3) & 0x7fffffff))
  k=$((k + 1))
  dd if="$stream" of="$SCRATCH/v23/ledger-$k.xdr" bs=1M iflag=skip_bytes,count_bytes skip=$((off + 4)) \
    count="$len" status=none
  off=$((off + 4 + len))
done
DUMP_DIR[v23]=$SCRATCH/v23 DUMP_N[v23]=$k

for d in $DUMPS; do
  sizes=$(for f in $(ls "${DUMP_DIR[$d]}" | sort -t- -k2 -n); do size_of "${DUMP_DIR[$d]}/$f"; done | tr '\n' ' ')
  note "dump $d: ${DUMP_N[$d]} ledgers of ${sizes% } bytes"
done
echo | say

# ---- one run ------------------------------------------------------------------------------------

# metric_sample SCRAPE NAME LABELS: one sample of a /metrics text.
metric_sample() {
  printf '%s\n' "$1" | awk -v k="$2$3" '$1 == k { print $2 }'
}

ms_of() { # a Go duration in ms or s -> milliseconds
  case $1 in
  *ms) echo "${1%ms}" ;;
  *s) awk -v v="${1%s}" 'BEGIN { printf "%d", v * 1000 }' ;;
  *) die "cadence $1: give it in ms or s" ;;
  esac
}

RUN_FMT='%-30s %-9s %7s %14s %14s %7s %30s %9s %4s\n'
run_header() {
  {
    printf "$RUN_FMT" "run" "level" "ledgers" "raw bytes" "wire bytes" "ratio" "delivery p50/p90/p99/max ms" "srv ms/l" "exit"
    printf "$RUN_FMT" "---" "-----" "-------" "---------" "----------" "-----" "---------------------------" "--------" "----"
  } | say
}

# whole_cycles N DUMP_N: N rounded up to whole cycles of the dump.
whole_cycles() { echo $((($1 + $2 - 1) / $2 * $2)); }

# first_latest ADDR: /healthz latest once the server has emitted its first ledger (polled every
# 20 ms, at most 15 s).
first_latest() {
  local i lat=0
  for ((i = 0; i < 750; i++)); do
    lat=$(json_num "$(healthz "$1")" latest)
    ((${lat:-0} >= 1)) && break
    sleep 0.02
  done
  echo "${lat:-0}"
}

# one_run LABEL LEVEL CADENCE N CYCLE SERVER-FLAGS... -- CLIENT-FLAGS...
# The client starts LEAD_MS of cadence (at least one ledger) past /healthz latest, so it is
# subscribed before its first ledger is emitted, and ends at the first whole cycle of CYCLE
# ledgers at or past N ledgers later.
one_run() {
  local label=$1 level=$2 cadence=$3 want=$4 cycle=$5
  shift 5
  local sflags=() cflags=()
  while (($#)) && [[ $1 != -- ]]; do
    sflags+=("$1")
    shift
  done
  (($#)) && shift
  cflags=("$@")
  local cms limit lead start end
  cms=$(ms_of "$cadence")
  lead=$(((LEAD_MS + cms - 1) / cms + 1))
  limit=$(((want + 3 * cycle + lead + 2) * cms / 1000 + 120))
  server_start "$label" "$limit" --retention 64 --emit-window "$EMIT" --compress=true \
    --compress-level "$level" "${sflags[@]}"
  local spid=$SERVER_PID addr=$SERVER_ADDR
  start=$(($(first_latest "$addr") + lead))
  end=$(whole_cycles $((start + want - 1)) "$cycle")
  run_benchrunner "$label.client" "$limit" --mode remote --url "ws://$addr" --start "$start" --end "$end" \
    "${cflags[@]}" >"$CELL_DIR/$label.client.show"
  local scrape raw wire emitted
  scrape=$(curl -s --max-time 2 "http://$addr/metrics" 2>/dev/null || true) # one scrape: consistent
  raw=$(metric_sample "$scrape" corestreamd_emitted_bytes_total '{form="raw"}')
  wire=$(metric_sample "$scrape" corestreamd_emitted_bytes_total '{form="wire"}')
  emitted=$(metric_sample "$scrape" corestreamd_ledgers_emitted_total "")
  local now shown=$level
  now=$(metric_sample "$scrape" corestreamd_compress_level "")
  [[ $level != auto ]] || shown="auto(${now:-?})"
  bg_stop "$spid" INT
  local cpu n p50 p90 p99 max ratio exit_s
  cpu=$(timev_cpu_s "$CELL_DIR/$label.server.time")
  read -r n p50 p90 p99 max _ < <(csv_stats 7 0 "$CELL_DIR/$label.client.csv")
  ratio=$(div "${raw:-0}" "${wire:-0}" %.2f)
  exit_s=$BR_RC
  printf "$RUN_FMT" "$label" "$shown" "${emitted:-?}/$n" "${raw:-?}" "${wire:-?}" "$ratio" \
    "$(ns2ms "$p50")/$(ns2ms "$p90")/$(ns2ms "$p99")/$(ns2ms "$max")" "$(div "$(awk -v c="$cpu" 'BEGIN { print c * 1000 }')" "${emitted:-0}" %.1f)" \
    "$exit_s" | say
  if [[ ${emitted:-} != "$end" ]]; then
    note "  (the scrape saw $emitted ledgers emitted, not $end: the ratio covers those)"
  fi
  if ((exit_s != 0)); then
    sed 's/^/  client: /' "$CELL_DIR/$label.client.err" | say
    FAILED=1
  fi
  metric "${label}_level" "$level"
  metric "${label}_level_last" "${now:-}"
  metric "${label}_emitted" "${emitted:-}"
  metric "${label}_raw_bytes" "${raw:-}"
  metric "${label}_wire_bytes" "${wire:-}"
  metric "${label}_ratio" "$ratio"
  metric "${label}_delivery_n" "$n"
  metric "${label}_delivery_p50_ns" "$p50"
  metric "${label}_delivery_p90_ns" "$p90"
  metric "${label}_delivery_p99_ns" "$p99"
  metric "${label}_delivery_max_ns" "$max"
  metric "${label}_server_cpu_s" "$cpu"
  metric "${label}_exit" "$exit_s"
}

FAILED=0
note "'ledgers' is emitted (1..end, whole cycles of the dump: the ratio's) / delivered (start..end, all live: the percentiles')"
note "srv ms/l: server CPU (utime+stime of the whole process, start-up included) per emitted ledger"
note "auto(L): L is the level auto gave the last chunk (corestreamd_compress_level at the scrape)"
echo | say

note "at the public network's cadence ($PUB_CADENCE over $EMIT), zstd auto:"
run_header
for d in $PUB_DUMPS; do
  [[ -n ${DUMP_DIR[$d]:-} ]] || continue
  one_run "pub-$d-auto" auto "$PUB_CADENCE" "$PUB_N" "${DUMP_N[$d]}" --source file --file-dir "${DUMP_DIR[$d]}" --cadence "$PUB_CADENCE" \
    -- --verify-dir "${DUMP_DIR[$d]}"
done
echo | say

note "at the gate cadence of cells 1 and 2 ($STRESS_CADENCE over $EMIT):"
run_header
for d in $DUMPS; do
  for level in $LEVELS; do
    one_run "stress-$d-$level" "$level" "$STRESS_CADENCE" "$STRESS_N" "${DUMP_N[$d]}" --source file --file-dir "${DUMP_DIR[$d]}" \
      --cadence "$STRESS_CADENCE" -- --verify-dir "${DUMP_DIR[$d]}"
  done
done
for level in $LEVELS; do
  one_run "stress-synthetic-$level" "$level" "$STRESS_CADENCE" "$STRESS_N" 1 --source synthetic \
    --synthetic-compressible --synthetic-size "$SYN_SIZE" --synthetic-interval "$STRESS_CADENCE" \
    -- --verify --remote-compressible --synthetic-size "$SYN_SIZE"
done
note "  (synthetic: --synthetic-compressible, $SYN_SIZE-byte ledgers)"

cell_done
exit "$FAILED"
