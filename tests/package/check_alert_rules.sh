#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The shipped alert rules (ctest `prometheus_alert_rules`): promtool checks their syntax, runs their
# unit tests (corestreamd-alerts.test.yml), and every series they name is one the daemon exports
# (a misspelt metric would make a rule that never fires).
#   check_alert_rules.sh PROMTOOL SOURCE_DIR
set -euo pipefail
promtool=$1 src=$2
[[ -x $promtool ]] || { echo "SKIP: no promtool (Debian's prometheus package; scripts/setup.sh installs it)"; exit 77; }
rules=$src/packaging/prometheus/corestreamd-alerts.yml
"$promtool" check rules "$rules"
(cd "$src/packaging/prometheus" && "$promtool" test rules corestreamd-alerts.test.yml)
names=$(grep -E '^\s+expr:' "$rules" | grep -oE '\b(corestreamd|process)_[a-z_]+' | sort -u)
for n in $names; do
  grep -q "\"$n\"" "$src/src/corestreamd/stream/metrics.c" ||
    { echo "FAIL: the rules name $n, which corestreamd does not export"; exit 1; }
done
echo "PASS: rules check, their tests pass, and the $(echo $names | wc -w) series they name exist"
