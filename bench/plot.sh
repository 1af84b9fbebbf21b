#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/plot.sh: delivery-latency CDFs of benchrunner CSVs, as PNG (gnuplot; scripts/setup.sh and
# bench/setup.sh install gnuplot-nox).
#
#   bench/plot.sh [-o OUT.png] [-t TITLE] [-c COLUMN] [-l LABEL] RUN.csv [[-l LABEL] RUN.csv]...
#       One CDF per CSV on one picture, each labelled with -l (for the CSV after it) or its file
#       name, with its p50, p99 and p99.9 marked on the curve and given in the legend. COLUMN is a
#       header name of the CSV (default delivery_ns; pipeline_ns, inter_arrival_ns, emit_ns work
#       too). OUT defaults to delivery-cdf.png in the current directory.
#   bench/plot.sh
#       With no CSV: the cells' pictures from bench/results/ (RESULTS_DIR), one PNG per cell
#       (bench/results/<cell>.png, the cell's p99 target as a dashed red line) plus
#       bench/results/delivery-all.png with every headline series.
#
# x is the column in ms on a log scale, y the fraction of ledgers at or below x. Empty cells
# (stampless rows: ring replays, local modes) and values of 0 or less are left out. Percentiles are
# benchrunner's nearest rank: the ceil(p*n)-th smallest value. Exit 0 with the picture written,
# 1 when it could not be (a CSV that cannot be read, has no such column or no value in it), 2 on a
# usage error.
set -euo pipefail
export LC_ALL=C

usage() {
  sed -n '4,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit "${1:-2}"
}
die() {
  echo "plot: $*" >&2
  exit 1
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
command -v gnuplot >/dev/null || die "gnuplot is missing: install gnuplot-nox (scripts/setup.sh does)"
work=$(mktemp -d -t corestream-plot.XXXXXX)
trap 'rm -rf -- "$work"' EXIT

term="pngcairo size 1100,680 noenhanced font ',10'"
gnuplot -e "set terminal $term" >/dev/null 2>&1 || term="png size 1100,680 noenhanced"

# series OUT COLUMN CSV...: the COLUMN values of the CSVs pooled, in ms, as sorted "ms fraction"
# rows into OUT, and "n p50 p99 p99.9" (ms) on stdout. Fails naming the CSV and the cause.
series() {
  local out=$1 col=$2 f
  shift 2
  : >"$work/vals"
  for f in "$@"; do
    [[ -r $f && -f $f ]] || die "$f: $( [[ -e $f ]] && echo "not a readable file" || echo "no such file")"
    awk -F, -v col="$col" -v file="$f" '
      FNR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i
                 if (!c) { printf "plot: %s: no column %s in its header (%s)\n", file, col, $0 > "/dev/stderr"; exit 3 }
                 next }
      $c != "" && $c > 0 { printf "%.6f\n", $c / 1e6 }' "$f" >>"$work/vals" || exit 1
  done
  sort -g "$work/vals" | awk -v out="$out" '
    { v[NR] = $1 }
    function rank(pm) { r = int((pm * NR + 999) / 1000); return v[r < 1 ? 1 : r > NR ? NR : r] }
    function fmt(x) { return sprintf(x < 1 ? "%.3f" : x < 100 ? "%.2f" : "%.0f", x) }
    END { for (i = 1; i <= NR; i++) print v[i], i / NR > out
          if (NR) print NR, rank(500), rank(990), rank(999), fmt(rank(500)), fmt(rank(990)), fmt(rank(999)) }'
}

# plot PNG TITLE TARGET_MS COLUMN "label|csv csv..." ...: one CDF per spec (its CSVs pooled); a
# spec without values is left out, and with none at all nothing is drawn (return 1).
plot() {
  local png=$1 title=$2 target=$3 col=$4
  shift 4
  local lines=() marks=() i=0 spec label files stats n p50 p99 p999 f50 f99 f999 dat
  for spec in "$@"; do
    label=${spec%%|*}
    files=${spec#*|}
    i=$((i + 1))
    dat=$work/s$i.dat
    # shellcheck disable=SC2086
    stats=$(series "$dat" "$col" $files) || exit 1
    if [[ -z $stats ]]; then
      echo "plot: $files: no $col value above 0 (stampless rows: ring replays, local modes), left out" >&2
      continue
    fi
    read -r n p50 p99 p999 f50 f99 f999 <<<"$stats"
    printf '%s 0.5\n%s 0.99\n%s 0.999\n' "$p50" "$p99" "$p999" >"$work/m$i.dat"
    label=${label//\"/\'}
    lines+=("'$dat' using 1:2 with steps lw 2 lc $i title \"$label (n=$n): p50 $f50  p99 $f99  p99.9 $f999 ms\"")
    marks+=("'$work/m$i.dat' every ::0::0 with points pt 7 ps 1.6 lc $i notitle")
    marks+=("'$work/m$i.dat' every ::1::1 with points pt 9 ps 1.8 lc $i notitle")
    marks+=("'$work/m$i.dat' every ::2::2 with points pt 5 ps 1.4 lc $i notitle")
  done
  ((${#lines[@]})) || return 1
  {
    echo "set terminal $term"
    echo "set output '${png//\'/\'\'}'"
    echo "set title \"${title//\"/\'}\""
    echo "set logscale x"
    echo "set xlabel '$col in ms (log scale)'"
    echo "set ylabel 'fraction of ledgers at or below x'"
    echo "set yrange [0:1.02]"
    echo "set grid xtics mxtics ytics"
    echo "set key bottom right"
    for m in 0.5 0.99 0.999; do
      echo "set arrow from graph 0, first $m to graph 1, first $m nohead dashtype 3 lc rgb 'gray50'"
    done
    echo "set label 'p50' at graph 0.005, first 0.5 offset 0,0.6 textcolor rgb 'gray40'"
    echo "set label 'p99, p99.9' at graph 0.005, first 0.99 offset 0,-0.8 textcolor rgb 'gray40'"
    if [[ -n $target ]]; then
      echo "set arrow from $target, graph 0 to $target, graph 1 nohead dashtype 2 lc rgb 'red'"
      echo "set label 'p99 target $target ms' at $target, graph 0.05 offset 0.5,0 textcolor rgb 'red'"
    fi
    local IFS=,
    echo "plot ${lines[*]}, ${marks[*]}, NaN with points pt 7 lc rgb 'black' title 'p50', NaN with points pt 9 lc rgb 'black' title 'p99', NaN with points pt 5 lc rgb 'black' title 'p99.9'"
  } >"$work/plot.gp"
  gnuplot "$work/plot.gp" || die "gnuplot failed on $png"
  [[ -s $png ]] || die "gnuplot wrote nothing to $png"
  echo "plot: $png"
}

# ---- the CSVs given --------------------------------------------------------------------------

plot_given() {
  local out=delivery-cdf.png title="" col=delivery_ns label="" specs=() f
  while (($#)); do
    case $1 in
      -o | --output) [[ $# -ge 2 ]] || usage; out=$2; shift 2 ;;
      -t | --title) [[ $# -ge 2 ]] || usage; title=$2; shift 2 ;;
      -c | --column) [[ $# -ge 2 ]] || usage; col=$2; shift 2 ;;
      -l | --label) [[ $# -ge 2 ]] || usage; label=$2; shift 2 ;;
      -h | --help) usage 0 ;;
      -*) echo "plot: unknown option $1" >&2; usage ;;
      *)
        f=$1
        [[ $f != *' '* ]] || die "$f: a path with a space is not supported"
        specs+=("${label:-$(basename "$f")}|$f")
        label=""
        shift
        ;;
    esac
  done
  ((${#specs[@]})) || usage
  [[ -z $label ]] || die "-l $label names no CSV after it"
  local dir
  dir=$(dirname -- "$out")
  [[ -d $dir && -w $dir ]] || die "-o $out: $dir is not a writable directory"
  [[ -n $title ]] || title="$col CDF, ${#specs[@]} run(s)"
  plot "$out" "$title" "" "$col" "${specs[@]}" || die "nothing to plot: no CSV given has a $col value above 0"
}

if (($#)); then
  plot_given "$@"
  exit 0
fi

# ---- the cells' pictures -----------------------------------------------------------------------

results=${RESULTS_DIR:-$here/results}
[[ -d $results ]] || die "no results in $results: run a cell first, or give CSVs (bench/plot.sh -h)"
results=$(cd "$results" && pwd)

# cell PNG TITLE TARGET "label|csv..." ...: the specs whose first CSV exists.
cell() {
  local png=$1 title=$2 target=$3 specs=() s first
  shift 3
  for s in "$@"; do
    first=${s#*|}
    first=${first%% *}
    [[ -s $first ]] && specs+=("$s")
  done
  ((${#specs[@]})) || return 0
  plot "$png" "$title" "$target" delivery_ns "${specs[@]}" || true
}

r=$results
cell "$r/cell1-acceptance.png" "cell 1: acceptance shape, loopback (15196160 B / 600 ms / 15 ms, raw)" 2 \
  "cell 1 loopback|$r/cell1-acceptance/loopback.csv" \
  "cell 7 shape 1, two processes|$r/cell7-cost/shape1.client.csv" \
  "cell 6 across 5 Gbit/s link|$r/cell6-twobox/link-c1.client.csv"
cell "$r/cell2-gate.png" "cell 2: gate shape, loopback (15196160 B compressible / 600 ms / 7.5 ms, zstd)" 2 \
  "cell 2 loopback|$r/cell2-gate/loopback.csv" \
  "cell 7 shape 2, two processes|$r/cell7-cost/shape2.client.csv" \
  "cell 6 across 5 Gbit/s link|$r/cell6-twobox/link-c2.client.csv"
cell "$r/cell3-small.png" "cell 3: small and fast, loopback (204800 B / 10 ms / 5 ms)" 0.3 \
  "cell 3 loopback|$r/cell3-small/loopback.csv" \
  "cell 7 shape 3, two processes|$r/cell7-cost/shape3.client.csv"
if [[ -d $r/cell4-fanout ]]; then
  specs=()
  for k in $(ls -d "$r"/cell4-fanout/K* 2>/dev/null | sed 's/.*\/K//' | sort -n); do
    specs+=("K=$k subscribers, pooled|$(ls "$r"/cell4-fanout/K"$k"/sub-*.csv 2>/dev/null | tr '\n' ' ')")
  done
  ((${#specs[@]})) && cell "$r/cell4-fanout.png" "cell 4: fan-out, 1 MiB / 100 ms, K remote subscribers on 127.0.0.1" "" "${specs[@]}"
fi
cell "$r/cell5-catchup.png" "cell 5: the live tip (gate shape) while catch-up replays ran" "" \
  "tip subscriber|$r/cell5-catchup/tip.csv"
cell "$r/cell6-twobox.png" "cell 6: emulated two-box link (netns + veth, tbf 5 Gbit/s)" 2 \
  "cell 1 shape (raw)|$r/cell6-twobox/link-c1.client.csv" \
  "cell 2 shape (zstd)|$r/cell6-twobox/link-c2.client.csv"
cell "$r/cell7-cost.png" "cell 7: server and client as separate processes on 127.0.0.1" "" \
  "shape 1 (cell 1)|$r/cell7-cost/shape1.client.csv" \
  "shape 2 (cell 2)|$r/cell7-cost/shape2.client.csv" \
  "shape 3 (cell 3)|$r/cell7-cost/shape3.client.csv"
cell "$r/delivery-all.png" "delivery CDF, every cell's headline series" "" \
  "cell 1 loopback|$r/cell1-acceptance/loopback.csv" \
  "cell 2 loopback|$r/cell2-gate/loopback.csv" \
  "cell 3 loopback|$r/cell3-small/loopback.csv" \
  "cell 6 link, cell-1 shape|$r/cell6-twobox/link-c1.client.csv" \
  "cell 6 link, cell-2 shape|$r/cell6-twobox/link-c2.client.csv"
exit 0
