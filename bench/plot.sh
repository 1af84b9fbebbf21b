#!/usr/bin/env bash
# bench/plot.sh: delivery-latency CDFs from the CSVs under bench/results/, one PNG per cell
# (bench/results/<cell>.png) plus bench/results/delivery-all.png with every headline series.
# x is delivery_ns (the CSV's 7th column) in ms on a log scale, y the fraction of ledgers delivered
# within x; the cell's p99 target is drawn as a dashed vertical line. Stampless rows (ring replays)
# have no delivery and are left out. Needs gnuplot (bench/setup.sh installs gnuplot-nox).
# Environment: RESULTS_DIR (default bench/results).
set -euo pipefail
export LC_ALL=C

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
results=${RESULTS_DIR:-$here/results}
command -v gnuplot >/dev/null || {
  echo "plot: gnuplot is missing: run bench/setup.sh" >&2
  exit 1
}
[[ -d $results ]] || {
  echo "plot: no results in $results: run a cell first" >&2
  exit 1
}
results=$(cd "$results" && pwd)
work=$(mktemp -d -t corestream-plot.XXXXXX)
trap 'rm -rf -- "$work"' EXIT

term="pngcairo size 1100,680 noenhanced font ',10'"
gnuplot -e "set terminal $term" >/dev/null 2>&1 || term="png size 1100,680 noenhanced"

# cdf OUT CSV...: "ms fraction" rows of the pooled delivery values.
cdf() {
  local out=$1 f files=()
  shift
  for f in "$@"; do [[ -s $f ]] && files+=("$f"); done
  awk -F, 'FNR > 1 && $7 != "" && $7 > 0 { printf "%.6f\n", $7 / 1e6 }' "${files[@]}" /dev/null | sort -g |
    awk '{ v[NR] = $1 } END { for (i = 1; i <= NR; i++) print v[i], i / NR }' >"$out"
  [[ -s $out ]]
}

# plot PNG TITLE TARGET_MS "label|csv csv..." ...
plot() {
  local png=$1 title=$2 target=$3
  shift 3
  local series=() i=0 spec label files dat
  for spec in "$@"; do
    label=${spec%%|*}
    files=${spec#*|}
    i=$((i + 1))
    dat=$work/s$i.dat
    # shellcheck disable=SC2086
    if cdf "$dat" $files; then
      series+=("'$dat' using 1:2 with steps lw 2 title \"$label (n=$(wc -l <"$dat"))\"")
    fi
  done
  ((${#series[@]})) || return 0
  {
    echo "set terminal $term"
    echo "set output '$png'"
    echo "set title \"$title\""
    echo "set logscale x"
    echo "set xlabel 'delivery: source END to verified on the client (ms, log scale)'"
    echo "set ylabel 'fraction of ledgers delivered within x'"
    echo "set yrange [0:1.02]"
    echo "set grid xtics mxtics ytics"
    echo "set key bottom right"
    if [[ -n $target ]]; then
      echo "set arrow from $target, graph 0 to $target, graph 1 nohead dashtype 2 lc rgb 'red'"
      echo "set label 'p99 target $target ms' at $target, graph 0.05 offset 0.5,0 textcolor rgb 'red'"
    fi
    local IFS=,
    echo "plot ${series[*]}"
  } >"$work/plot.gp"
  gnuplot "$work/plot.gp"
  echo "plot: $png"
}

r=$results
[[ -f $r/cell1-acceptance/loopback.csv ]] && plot "$r/cell1-acceptance.png" "cell 1: acceptance shape, loopback (15196160 B / 600 ms / 15 ms, raw)" 2 \
  "cell 1 loopback|$r/cell1-acceptance/loopback.csv" \
  "cell 7 shape 1, two processes|$r/cell7-cost/shape1.client.csv" \
  "cell 6 across 5 Gbit/s link|$r/cell6-twobox/link-c1.client.csv"
[[ -f $r/cell2-gate/loopback.csv ]] && plot "$r/cell2-gate.png" "cell 2: gate shape, loopback (15196160 B compressible / 600 ms / 7.5 ms, zstd)" 2 \
  "cell 2 loopback|$r/cell2-gate/loopback.csv" \
  "cell 7 shape 2, two processes|$r/cell7-cost/shape2.client.csv" \
  "cell 6 across 5 Gbit/s link|$r/cell6-twobox/link-c2.client.csv"
[[ -f $r/cell3-small/loopback.csv ]] && plot "$r/cell3-small.png" "cell 3: small and fast, loopback (204800 B / 10 ms / 5 ms)" 0.3 \
  "cell 3 loopback|$r/cell3-small/loopback.csv" \
  "cell 7 shape 3, two processes|$r/cell7-cost/shape3.client.csv"
if [[ -d $r/cell4-fanout ]]; then
  specs=()
  for k in $(ls -d "$r"/cell4-fanout/K* 2>/dev/null | sed 's/.*\/K//' | sort -n); do
    specs+=("K=$k subscribers, pooled|$(ls "$r"/cell4-fanout/K"$k"/sub-*.csv 2>/dev/null | tr '\n' ' ')")
  done
  ((${#specs[@]})) && plot "$r/cell4-fanout.png" "cell 4: fan-out, 1 MiB / 100 ms, K remote subscribers on 127.0.0.1" "" "${specs[@]}"
fi
[[ -f $r/cell5-catchup/tip.csv ]] && plot "$r/cell5-catchup.png" "cell 5: the live tip (gate shape) while catch-up replays ran" "" \
  "tip subscriber|$r/cell5-catchup/tip.csv"
[[ -f $r/cell6-twobox/link-c1.client.csv ]] && plot "$r/cell6-twobox.png" "cell 6: emulated two-box link (netns + veth, tbf 5 Gbit/s)" 2 \
  "cell 1 shape (raw)|$r/cell6-twobox/link-c1.client.csv" \
  "cell 2 shape (zstd)|$r/cell6-twobox/link-c2.client.csv"
[[ -d $r/cell7-cost ]] && plot "$r/cell7-cost.png" "cell 7: server and client as separate processes on 127.0.0.1" "" \
  "shape 1 (cell 1)|$r/cell7-cost/shape1.client.csv" \
  "shape 2 (cell 2)|$r/cell7-cost/shape2.client.csv" \
  "shape 3 (cell 3)|$r/cell7-cost/shape3.client.csv"
plot "$r/delivery-all.png" "delivery CDF, every cell's headline series" "" \
  "cell 1 loopback|$r/cell1-acceptance/loopback.csv" \
  "cell 2 loopback|$r/cell2-gate/loopback.csv" \
  "cell 3 loopback|$r/cell3-small/loopback.csv" \
  "cell 6 link, cell-1 shape|$r/cell6-twobox/link-c1.client.csv" \
  "cell 6 link, cell-2 shape|$r/cell6-twobox/link-c2.client.csv"
exit 0
