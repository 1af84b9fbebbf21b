#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cell 13: the small shape's cost per ledger, build against build (issue 41, item 1). Cell 3's
# shape (204800 B every 10 ms over 5 ms, uncompressed, one subscriber) with corestreamd and
# `benchrunner --mode remote` as two processes over 127.0.0.1, as cell 7 runs them:
#   1. for each round, each build in BUILDS in turn (alternated, so the machine's drift falls on
#      both): the server's CPU seconds (user + system, /usr/bin/time -v, start-up included) per
#      ledger it emitted, and the client's delivery p50/p99;
#   2. once per build, the same pair with the server under `strace -f -c`: the system calls per
#      ledger by name (strace slows the server, so this run's CPU and delivery are not used).
# Reported per build: server CPU per ledger (median of the rounds, and each round), user and
# system apart, delivery p99 (median), and the system calls per ledger; then the ratio of each
# build's median CPU to the first build's. Target (with BUILDS="<before> <after>"): the after
# build's server CPU per ledger <= 0.7x the before build's, delivery p99 no worse.
# Wall time: about ROUNDS x builds x (COUNT/100 + 3) s plus one strace run per build: ~2 minutes
# at the defaults.
# Environment: BUILDS (default "build": build dirs, as BUILD_DIR), ROUNDS (3), COUNT (1000),
# STRACE (1; 0 skips the system-call counts).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BUILDS=${BUILDS:-build}
ROUNDS=${ROUNDS:-3}
COUNT=${COUNT:-1000}
STRACE=${STRACE:-1}
LEAD=200

bench_init cell13-small-cost "the small shape's cost per ledger: server and client as two processes, builds alternated"
need_tools curl
((STRACE)) && need_tools strace

builds=()
for b in $BUILDS; do
  BUILD_DIR=$b
  bench_resolve_build_dir
  builds+=("$BUILD_DIR")
done
note "builds: ${builds[*]}; $ROUNDS rounds of $COUNT ledgers each"

SHAPE=(--source synthetic --synthetic-size 204800 --synthetic-interval 10ms --emit-window 5ms --chunk-size 262144
  --compress=false)

# pair BUILD LABEL: one server/client pair at the small shape with BUILD's binaries.
pair() {
  CORESTREAMD=$1/src/corestreamd/corestreamd BENCHRUNNER=$1/src/benchrunner/benchrunner
  PAIR_TAIL=100 remote_pair "$2" "$COUNT" "$LEAD" 10 "${SHAPE[@]}" --
}

declare -A CPU USR SYS P99
for ((r = 1; r <= ROUNDS; r++)); do
  for i in "${!builds[@]}"; do
    label=b$i-r$r
    pair "${builds[$i]}" "$label"
    st=$CELL_DIR/$label.server.time
    cnt=$PAIR_COUNT
    u=$(sed -n 's/^[[:space:]]*User time (seconds): //p' "$st")
    s=$(sed -n 's/^[[:space:]]*System time (seconds): //p' "$st")
    read -r _ _ _ d99 _ _ < <(csv_stats 7 0 "$CELL_DIR/$label.client.csv")
    CPU[$i]+=" $(awk -v u="$u" -v s="$s" -v n="$cnt" 'BEGIN {printf "%.4f", (u + s) * 1000 / n}')"
    USR[$i]+=" $(awk -v u="$u" -v n="$cnt" 'BEGIN {printf "%.4f", u * 1000 / n}')"
    SYS[$i]+=" $(awk -v s="$s" -v n="$cnt" 'BEGIN {printf "%.4f", s * 1000 / n}')"
    P99[$i]+=" $(awk -v d="$d99" 'BEGIN {printf "%.3f", d / 1e6}')"
    note "  round $r, ${builds[$i]}: server $(awk -v u="$u" -v s="$s" -v n="$cnt" 'BEGIN {printf "%.3f", (u + s) * 1000 / n}') ms CPU per ledger (user $u s, system $s s, $cnt ledgers), delivery p99 $(awk -v d="$d99" 'BEGIN {printf "%.3f", d / 1e6}') ms"
  done
done

median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else printf "%.4f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

declare -A SC
if ((STRACE)); then
  for i in "${!builds[@]}"; do
    label=b$i-strace
    SRV_PREFIX=(strace -f -c -o "$CELL_DIR/$label.strace")
    pair "${builds[$i]}" "$label"
    SRV_PREFIX=()
    SC[$i]=$(awk -v n="$PAIR_COUNT" '$NF != "total" && $NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ {c[$NF] = $4; t += $4}
      END {printf "%.1f:", t / n; for (k in c) if (c[k] / n >= 0.05) printf " %s %.2f", k, c[k] / n; print ""}' \
      "$CELL_DIR/$label.strace")
  done
fi

note ""
note "| build | server CPU ms/ledger (median; rounds) | user | system | delivery p99 ms (median; rounds) | system calls per ledger |"
note "|---|---|---|---|---|---|"
base=""
for i in "${!builds[@]}"; do
  m=$(median "${CPU[$i]}")
  [[ -n $base ]] || base=$m
  note "| ${builds[$i]##*/} | $m (${CPU[$i]# }) | $(median "${USR[$i]}") | $(median "${SYS[$i]}") | $(median "${P99[$i]}") (${P99[$i]# }) | ${SC[$i]:-not counted} |"
  metric "b${i}_server_cpu_ms_per_ledger" "$m"
  metric "b${i}_delivery_p99_ms" "$(median "${P99[$i]}")"
done
if ((${#builds[@]} > 1)); then
  last=$((${#builds[@]} - 1))
  m=$(median "${CPU[$last]}")
  ratio=$(awk -v a="$m" -v b="$base" 'BEGIN {printf "%.2f", a / b}')
  p0=$(median "${P99[0]}") p1=$(median "${P99[$last]}")
  note ""
  if awk "BEGIN {exit !($ratio <= 0.7)}"; then v=PASS; else v=MISS; fi
  note "$v  server CPU per ledger ${builds[$last]##*/} / ${builds[0]##*/} = $ratio (target <= 0.70)"
  if awk "BEGIN {exit !($p1 <= $p0 * 1.1 || $p1 <= $p0 + 0.1)}"; then v=PASS; else v=MISS; fi
  note "$v  delivery p99 ${p1} ms against ${p0} ms (no worse: within 10 % or 0.1 ms)"
fi
cell_done
