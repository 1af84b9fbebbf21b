#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The long fuzz campaign behind docs/RELIABILITY.md: every libFuzzer target of tests/fuzz runs from
# its committed seeds until it has executed RUNS inputs or spent MAX_SECONDS, two at a time, and
# one Markdown table row per target is printed (executions, rate, coverage, corpus, findings).
#
#   scripts/fuzz-campaign.sh                       # 10^7 runs per target, at most 30 min each
#   RUNS=1000000 MAX_SECONDS=120 scripts/fuzz-campaign.sh fuzz_wire fuzz_toml
#
# Needs a fuzz build (make test-fuzz, or: CC=clang cmake -S . -B build-fuzz -DCS_FUZZ=ON &&
# cmake --build build-fuzz --target fuzz_targets). Logs, scratch corpora and any crash-* files go
# to OUT (default build-fuzz/campaign). Exits 1 when any target found a crash or broke a property.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-fuzz}
RUNS=${RUNS:-10000000}
MAX_SECONDS=${MAX_SECONDS:-1800}
JOBS=${JOBS:-2}
OUT=${OUT:-$BUILD_DIR/campaign}
manifest=$BUILD_DIR/tests/fuzz/fuzz-targets.txt
[[ -f $manifest ]] || { echo "fuzz-campaign: no $manifest; build the fuzz targets first" >&2; exit 2; }
mkdir -p "$OUT"
FUZZ_BIN=$(cd "$BUILD_DIR/tests/fuzz" && pwd)

run_one() { # name max_len seeds [extra seeds]
    local name=$1 max_len=$2 seeds=$3 dir=$OUT/$1
    local extra=("${@:4}")
    mkdir -p "$dir/corpus"
    local start=$SECONDS rc=0
    (cd "$dir" && "$FUZZ_BIN/$name" -runs="$RUNS" -max_total_time="$MAX_SECONDS" \
        -max_len="$max_len" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        corpus "$seeds" "${extra[@]}") >"$dir/log" 2>&1 || rc=$?
    echo "$rc $((SECONDS - start))" >"$dir/result"
}
export -f run_one
export FUZZ_BIN RUNS MAX_SECONDS OUT

selected=("$@")
while read -r name max_len seeds extra; do
    if ((${#selected[@]})) && [[ ! " ${selected[*]} " =~ " $name " ]]; then continue; fi
    [[ -e $seeds ]] || seeds=/dev/null
    [[ -z $extra || -d $extra ]] || extra=""
    echo "$name $max_len $seeds $extra"
done <"$manifest" | xargs -P "$JOBS" -L 1 bash -c 'run_one "$@"' _

echo "| target | executions | seconds | exec/s | coverage (edges) | features | corpus | findings |"
echo "|---|---:|---:|---:|---:|---:|---:|---|"
fail=0
while read -r name _ _; do
    dir=$OUT/$name
    [[ -f $dir/result ]] || continue
    read -r rc secs <"$dir/result"
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
    last=$(grep -E '^#[0-9]+' "$dir/log" | tail -1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$last")
    findings=none
    if [[ $rc != 0 ]]; then
        findings="exit $rc: $(ls "$dir" | grep -E '^(crash|leak|timeout|oom)-' | tr '\n' ' ')"
        fail=1
    fi
    rate=$(( ${execs:-0} / (secs > 0 ? secs : 1) ))
    echo "| $name | ${execs:-?} | $secs | $rate | ${cov:-?} | ${ft:-?} | ${corp:-?} | $findings |"
done <"$manifest"
exit $fail
