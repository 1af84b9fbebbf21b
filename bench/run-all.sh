#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/run-all.sh: every cell, one after another (never two at once: they would measure each
# other), then the plots, then one verdict list. Took 598 s (10 minutes) on a 2-CPU VM:
#   cell3-small       ~10 s      cell7-cost        ~2.5 min
#   cell1-acceptance  ~60 s      cell4-fanout      ~2.5 min (K = 1, 8, 32, 128)
#   cell2-gate        ~60 s      cell5-catchup     ~45 s (replays run as fast as they can)
#                                cell6-twobox      ~2.5 min (root only; skipped otherwise)
# A cell that fails is reported and the rest still run; the exit status is 1 if any cell failed
# to run (a MISS is a measurement, not a failure).
# Environment: BUILD_DIR (default build), CELLS (default "3 1 2 7 4 5 6"; "real" adds cell-real.sh,
# which needs ../shared/realmeta; "11" adds cell11-scale-subscribers.sh, ~8 min), plus each cell's own
# variables (see bench/README.md).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
results=${RESULTS_DIR:-$here/results}
CELLS=${CELLS:-3 1 2 7 4 5 6}

declare -A script=([1]=cell1-acceptance [2]=cell2-gate [3]=cell3-small [4]=cell4-fanout
  [5]=cell5-catchup [6]=cell6-twobox [7]=cell7-cost [11]=cell11-scale-subscribers [real]=cell-real)
status=0
log=()
t_all=$SECONDS
for c in $CELLS; do
  name=${script[$c]:-}
  if [[ -z $name ]]; then
    echo "run-all: no cell $c" >&2
    status=1
    continue
  fi
  if [[ $c == 6 && $(id -u) -ne 0 ]]; then
    log+=("$(printf '%-18s skipped: needs root (network namespaces and tc)' "$name")")
    continue
  fi
  echo
  echo "################ $name ################"
  t0=$SECONDS
  rc=0
  "$here/$name.sh" || rc=$?
  log+=("$(printf '%-18s exit %d, %d s' "$name" "$rc" $((SECONDS - t0)))")
  ((rc == 0)) || status=1
done

echo
echo "################ plots ################"
if command -v gnuplot >/dev/null; then
  "$here/plot.sh" || status=1
else
  echo "gnuplot missing: run bench/setup.sh, then bench/plot.sh"
fi

echo
echo "################ summary ################"
printf '%s\n' "${log[@]}"
echo "total wall time $((SECONDS - t_all)) s"
echo
for c in $CELLS; do
  f=$results/${script[$c]:-none}/summary.txt
  [[ -f $f ]] || continue
  echo "${script[$c]}:"
  grep -E ' (PASS|MISS)$' "$f" | sed 's/^/  /'
  grep -E 'NOT sustained' "$f" | sed 's/^/  /'
done
exit $status
