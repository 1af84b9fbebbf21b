#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The installed unit's sandbox (ctest `unit_security`): `systemd-analyze security` must rate it
# at most 4.0 ("OK"), offline, on the unit as configured in the build tree.
#   check_unit.sh UNIT_FILE
set -euo pipefail
unit=$1
if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: systemd-analyze is not installed"
  exit 77
fi
report=$(cd "$(dirname "$unit")" && systemd-analyze security --offline=true --threshold=40 "./$(basename "$unit")" 2>&1) || {
  echo "$report"
  echo "FAIL: exposure above 4.0"
  exit 1
}
grep 'Overall exposure level' <<<"$report"
