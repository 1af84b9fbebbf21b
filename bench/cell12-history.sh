#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cell 12: history at the public network's size (issue 41, item 3). stellar-rpc keeps seven days,
# 120,960 ledgers; this cell builds a ring of that many real-sized ledgers and measures what its
# size costs.
#   1. fill:   bench/ring_scale (built with the tests) puts ledgers 1..N straight through the ring's
#              own put: 64-384 KiB each (200 KiB on average), the synthetic compressible payload,
#              stored frames zstd level 1 in 256 KiB chunks, as the live flow stores them. The put's
#              CPU per ledger over the 1,000 puts ending at 1k, 10k, 100k and N ledgers.
#   2. open:   ring_scale open, warm (the directory and logs in the page cache) and cold (after
#              `sync; echo 3 > /proc/sys/vm/drop_caches`, root only): open and claim time, the RSS
#              the open added, the descriptors it holds. Then corestreamd on the ring: start to
#              "corestreamd listening" (warm and cold), its RSS and descriptors once listening.
#   3. catch-up: one `benchrunner --mode remote --start <oldest> --end <oldest + CATCHUP - 1>`
#              replays the oldest ledgers (stored frames) while the daemon publishes its tip every
#              second: ledgers/s and MB/s of raw ledger, and the server's CPU per GiB replayed.
#   4. evict:  ring_scale put: COUNT more ledgers into the full ring, each evicting the oldest (a
#              segment removed every 1,024): put CPU per ledger at the ring's size.
# Targets: put CPU flat in the ring's size (the 100k and N windows within 1.5x of the 1k one) and
# the open's RSS flat (RSS_ADD_TARGET_MB, 16 MB, for the whole ring); open (start to listening)
# <= 2 s at N = 120,960 (warm; cold reported beside it).
# Disk: about N x 230 KB (27 GB at 120,960) in a scratch dir removed at exit (KEEP_RING=<dir>
# writes the ring there instead and keeps it, REUSE_RING=<dir> skips the fill).
# Wall time: about 3 minutes for the fill here (it writes 27 GB), 1 minute for the rest.
# Environment: BUILD_DIR (default build), N (120960), CATCHUP (5000), COUNT (2000),
# KEEP_RING, REUSE_RING.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N=${N:-120960}
CATCHUP=${CATCHUP:-5000}
COUNT=${COUNT:-2000}
RSS_ADD_TARGET_MB=16

bench_init cell12-history "history at scale: a ring of $N ledgers (64-384 KiB, stored frames), open, catch-up, eviction"
need_tools curl
RING_SCALE=$BUILD_DIR/tests/ring_scale
[[ -x $RING_SCALE ]] || die "$RING_SCALE is missing: build the tests (cmake --build $BUILD_DIR --target ring_scale)"

if [[ -n ${REUSE_RING:-} ]]; then
  DATA=$REUSE_RING
  note "reusing the ring in $DATA (no fill)"
else
  DATA=${KEEP_RING:-$SCRATCH/data}
  need=$((N * 240 / 1024)) # MiB, with the frames
  avail=$(df -Pm "$(dirname "$DATA")" | awk 'NR == 2 {print $4}')
  ((avail > need + 2048)) || die "the fill needs about $need MiB on $(dirname "$DATA"); $avail MiB are free"
  mkdir -p "$DATA"
  note "1. fill: $N ledgers into $DATA/ledgers (about $need MiB)"
  record_cmd "$RING_SCALE" fill "$DATA/ledgers" "$N"
  "$RING_SCALE" fill "$DATA/ledgers" "$N" | tee "$CELL_DIR/fill.txt" | sed 's/^/   /' | say
  sync
fi

put_at() { sed -n "s/^$1 ledgers=$2 put_cpu_ms_per_ledger=\\([0-9.]*\\).*/\\1/p" "$CELL_DIR/$3"; }

drop_caches() {
  sync
  if [[ $(id -u) == 0 ]] && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then return 0; fi
  return 1
}

note ""
note "2. open"
record_cmd "$RING_SCALE" open "$DATA/ledgers" "$N"
"$RING_SCALE" open "$DATA/ledgers" "$N" >"$CELL_DIR/open-warm.txt"
"$RING_SCALE" open "$DATA/ledgers" "$N" >>"$CELL_DIR/open-warm.txt"
sed 's/^/   warm: /' "$CELL_DIR/open-warm.txt" | say
COLD=0
if drop_caches; then
  COLD=1
  "$RING_SCALE" open "$DATA/ledgers" "$N" >"$CELL_DIR/open-cold.txt"
  sed 's/^/   cold: /' "$CELL_DIR/open-cold.txt" | say
else
  note "   cold: not measured (dropping the page cache needs root)"
fi

# daemon_start LABEL: corestreamd on the ring; sets START_MS (exec to "listening").
daemon_start() {
  local t0 t1
  t0=$(date +%s%N)
  SERVER_DATA_DIR=$DATA server_start "$1" 600 --retention "$N" --source synthetic --synthetic-size 262144 \
    --synthetic-compressible --compress=true --synthetic-interval 1s
  t1=$(date +%s%N)
  START_MS=$(((t1 - t0) / 1000000))
}

stop_server() {
  kill -TERM "$SERVER_CSD_PID" 2>/dev/null || true
  wait_rc "$SERVER_PID"
}

START_COLD=""
if ((COLD)) && drop_caches; then
  daemon_start start-cold
  START_COLD=$START_MS
  stop_server
fi
daemon_start start-warm
START_WARM=$START_MS
rss=$(awk '/^VmRSS/ {print $2}' "/proc/$SERVER_CSD_PID/status")
fds=$(find "/proc/$SERVER_CSD_PID/fd" -mindepth 1 -maxdepth 1 | wc -l)
hz=$(healthz "$SERVER_ADDR")
oldest=$(json_num "$hz" oldest)
note "   corestreamd: start to listening ${START_WARM} ms warm${START_COLD:+, ${START_COLD} ms cold}; RSS ${rss} KiB, ${fds} descriptors once listening; ring oldest=$oldest"

note ""
note "3. catch-up: ledgers $oldest..$((oldest + CATCHUP - 1)) from the oldest, one subscriber"
read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$SERVER_CSD_PID/stat")
t0=$(date +%s%N)
run_benchrunner catchup 600 --mode remote --url "ws://$SERVER_ADDR" --start "$oldest" --end $((oldest + CATCHUP - 1))
t1=$(date +%s%N)
read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$SERVER_CSD_PID/stat")
tck=$(getconf CLK_TCK)
got=$(grep -c . "$CELL_DIR/catchup.csv" 2>/dev/null || echo 0)
bytes=$(awk -F, 'NR > 1 {s += $2} END {print s + 0}' "$CELL_DIR/catchup.csv" 2>/dev/null || echo 0)
wall_ms=$(((t1 - t0) / 1000000))
cpu_s=$(awk -v a="$u0" -v b="$s0" -v c="$u1" -v d="$s1" -v t="$tck" 'BEGIN {printf "%.2f", (c + d - a - b) / t}')
note "   exit $BR_RC; $((got - 1)) rows in $wall_ms ms: $(awk -v n="$CATCHUP" -v w="$wall_ms" 'BEGIN {printf "%.0f", n * 1000 / w}') ledgers/s, $(awk -v b="$bytes" -v w="$wall_ms" 'BEGIN {printf "%.0f", b / w / 1000}') MB/s of raw ledger; server CPU ${cpu_s} s ($(awk -v c="$cpu_s" -v b="$bytes" 'BEGIN {if (b > 0) printf "%.3f", c / (b / 1073741824); else print "-"}') s/GiB, the tip's included)"
stop_server

note ""
note "4. evict: $COUNT more ledgers into the full ring"
record_cmd "$RING_SCALE" put "$DATA/ledgers" "$N" "$COUNT"
"$RING_SCALE" put "$DATA/ledgers" "$N" "$COUNT" | tee "$CELL_DIR/evict.txt" | sed 's/^/   /' | say

note ""
p1=$(put_at fill 1000 fill.txt)
pn=$(put_at fill "$N" fill.txt)
pe=$(put_at put_full "$COUNT" evict.txt)
open_ms=$(sed -n 's/.*open_ms=\([0-9]*\).*/\1/p' "$CELL_DIR/open-warm.txt" | tail -1)
rss_add=$(sed -n 's/.*rss_added_kib=\([0-9-]*\).*/\1/p' "$CELL_DIR/open-warm.txt" | tail -1)
metric put_ms_1k "$p1"
metric put_ms_n "$pn"
metric put_ms_evict "$pe"
metric open_ms_warm "$open_ms"
metric start_ms_warm "$START_WARM"
metric start_ms_cold "$START_COLD"
metric open_rss_added_kib "$rss_add"
verdict() { if awk "BEGIN {exit !($2)}"; then note "PASS  $1"; else note "MISS  $1"; fi; }
if [[ -n $p1 && -n $pn ]]; then
  verdict "put CPU flat: ${pn} ms at $N ledgers, ${pe:-?} ms evicting, against ${p1} ms at 1k (<= 1.5x)" "$pn <= 1.5 * $p1 && ${pe:-0} <= 1.5 * $p1"
fi
verdict "open RSS flat: the open adds ${rss_add} KiB for $N ledgers (<= $RSS_ADD_TARGET_MB MB)" "$rss_add <= $RSS_ADD_TARGET_MB * 1024"
verdict "open <= 2 s at $N ledgers: start to listening ${START_WARM} ms warm${START_COLD:+ (${START_COLD} ms cold)}" "$START_WARM <= 2000"
cell_done
