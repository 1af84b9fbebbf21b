#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cell 10: the lake beside the live flow (issue 38). A ring of RING ledgers (SIZE bytes,
# compressible, zstd on, so they carry stored frames) is filled unpaced; then a live corestreamd
# of the same run continues it with the lake on (--network-passphrase), one SIZE ledger every
# 100 ms over 15 ms, and one `benchrunner --mode remote` subscriber follows the tip for N
# ledgers, in three phases, each on a fresh live server over the same ring:
#   calm   the tip subscriber alone;
#   lake   plus bench/lake_readers.py: READERS threads on kept-alive connections GET the lake
#          objects of the ring's first RING ledgers, spread evenly over the tip's run (RING
#          objects in N/10 s: a steady demand, as CDP readers catching up make), so that every
#          tip ledger meets them (--lake-readers LAKE_READERS make the objects);
#   flood  the same readers unpaced: every object as fast as the server answers, again and again
#          until the tip's run is over (what the box can serve, and what that costs the tip).
# The two phases alternate ROUNDS times (the machine is noisy). Reported per phase: the tip's
# delivery p50/p99/max and the server's CPU over the tip's run; for the lake phase, objects
# served, bytes, seconds and the server CPU per object (the live flow's share included).
# Target (issue 38): serving RING lake objects to READERS readers leaves the tip's p99 within
# 1.2x of calm (the lake phase; the flood is reported beside it).
# The readers stand for other machines: they run at nice READER_NICE (19), so that on this one
# box their own CPU takes what the server and the tip leave, as remote readers' would not count.
# Environment: BUILD_DIR (default build), RING (1000), SIZE (1048576), N (100), READERS (8),
# LAKE_READERS (2), ROUNDS (2), READER_NICE (19).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RING=${RING:-1000}
SIZE=${SIZE:-1048576}
N=${N:-100}
READERS=${READERS:-8}
ROUNDS=${ROUNDS:-2}
READER_NICE=${READER_NICE:-19}
LAKE_READERS=${LAKE_READERS:-2}
PASS="Test SDF Network ; September 2015"
bench_init cell10-lake "the lake: $READERS readers GET $RING objects of $SIZE B ledgers while a tip subscriber streams one every 100 ms"
need_tools curl python3

SERVER_DATA_DIR=$SCRATCH/ring
mkdir -p "$SERVER_DATA_DIR"
server_start fill 900 --retention $((RING + 5000)) --source synthetic --synthetic-compressible \
  --synthetic-size "$SIZE" --synthetic-interval=-1ns --emit-window 0 --synthetic-count "$RING"
wait_rc "$SERVER_PID"
((RC == 0)) || die "the ring fill failed (see $CELL_DIR/fill.server.log)"
note "ring filled: $(find "$SERVER_DATA_DIR/ledgers" -name 'ledger-*.xdr' | wc -l) ledgers, $(find "$SERVER_DATA_DIR/ledgers" -name 'ledger-*.frames' | wc -l) with stored frames"

phase() { # NAME READ(0 none, 1 paced, 2 flood) corestreamd-flags...
  local name=$1 read=$2 i lat=0 hz
  shift 2
  local next
  next=$(find "$SERVER_DATA_DIR/ledgers" -name 'ledger-*.xdr' | sed 's/.*ledger-\([0-9]*\)\.xdr/\1/' | sort -n | tail -1)
  server_start "$name" 300 --retention $((RING + 5000)) --start-ledger $((next + 1)) --source synthetic \
    --synthetic-compressible --synthetic-size "$SIZE" --synthetic-interval 100ms --emit-window 15ms \
    --network-passphrase "$PASS" --lake-readers "$LAKE_READERS" "$@"
  local spid=$SERVER_PID addr=$SERVER_ADDR csd=$SERVER_CSD_PID
  for ((i = 0; i < 500; i++)); do
    hz=$(healthz "$addr"); lat=$(json_num "$hz" latest); lat=${lat:-0}
    ((lat > next)) && break
    sleep 0.02
  done
  local start=$((lat + 5)) end=$((lat + 5 + N - 1)) tip
  bg_benchrunner tip "$name-tip" $((N / 10 + 60)) --mode remote --url "ws://$addr" --start "$start" --end "$end"
  for ((i = 0; i < 1000; i++)); do
    hz=$(healthz "$addr"); lat=$(json_num "$hz" latest); lat=${lat:-0}
    ((lat >= start)) && break
    sleep 0.02
  done
  local cpu0 cpu1 got="none" lcpu="n/a"
  cpu0=$(proc_cpu_s "$csd")
  if ((read)); then
    local how=()
    ((read == 2)) && how=(--flood)
    record_cmd nice -n "$READER_NICE" python3 "$BENCH_DIR/lake_readers.py" "$addr" 1 "$RING" -t "$READERS" \
      --seconds $((N / 10)) "${how[@]}"
    got=$(nice -n "$READER_NICE" python3 "$BENCH_DIR/lake_readers.py" "$addr" 1 "$RING" -t "$READERS" --seconds $((N / 10)) "${how[@]}" \
      2>"$CELL_DIR/$name.readers.err")
    local lc objs
    lc=$(proc_cpu_s "$csd")
    objs=$(sed -n 's/^objects=\([0-9]*\) .*/\1/p' <<<"$got")
    lcpu=$(awk -v a="$cpu0" -v b="$lc" -v n="${objs:-0}" 'BEGIN { if (n == 0) print "n/a"; else printf "%.2f", (b - a) * 1000 / n }')
  fi
  wait_rc "$tip"
  cpu1=$(proc_cpu_s "$csd")
  bg_interrupt "$spid" corestreamd
  local n p50 p90 p99 pmax cpu
  read -r n p50 p90 p99 pmax _ < <(csv_stats 7 0 "$CELL_DIR/$name-tip.csv")
  cpu=$(awk -v a="$cpu0" -v b="$cpu1" -v n="$N" 'BEGIN { printf "%.1f", (b - a) * 1000 / n }')
  note "$name: tip n=$n p50 $(ns2ms "$p50") ms p99 $(ns2ms "$p99") ms max $(ns2ms "$pmax") ms; server CPU $cpu ms per live ledger; readers: $got (server CPU while they read: $lcpu ms per object, live flow included)"
  metric "${name}_p99_ns" "$p99"
  metric "${name}_cpu_ms_per_ledger" "$cpu"
  metric "${name}_readers" "$got"
  eval "P99_$name=$p99 CPU_$name=$cpu GOT_$name=\"$got\" LCPU_$name=$lcpu"
}

table=()
for ((r = 1; r <= ROUNDS; r++)); do
  phase calm$r 0
  phase lake$r 1
  phase flood$r 2
  eval "c=\$P99_calm$r l=\$P99_lake$r f=\$P99_flood$r cc=\$CPU_calm$r lc=\$CPU_lake$r fc=\$CPU_flood$r"
  eval "got=\$GOT_lake$r lcpu=\$LCPU_lake$r fgot=\$GOT_flood$r fcpu=\$LCPU_flood$r"
  lim=$(awk -v b="$c" 'BEGIN { printf "%.3f", 1.2 * b / 1e6 }')
  table+=("round $r: tip p99 calm|$(ns2ms "$c") ms, CPU $cc ms/ledger|(baseline)|")
  table+=("round $r: tip p99, $READERS paced lake readers|$(ns2ms "$l") ms, CPU $lc ms/ledger|<= $lim ms (1.2x)|$(verdict_le "$(ns2ms "$l")" "$lim")")
  table+=("round $r: lake objects served, paced|$got; server $lcpu ms per object|(measured)|")
  table+=("round $r: tip p99, $READERS readers flooding|$(ns2ms "$f") ms, CPU $fc ms/ledger|(comparison)|")
  table+=("round $r: lake objects served, flood|$fgot; server $fcpu ms per object|(measured)|")
done
table_header
for t in "${table[@]}"; do
  IFS='|' read -r a b c d <<<"$t"
  row "$a" "$b" "$c" "$d"
done
cell_done
