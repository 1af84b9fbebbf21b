#!/usr/bin/env bash
# The man pages keep up with the programs (ctest `manpages_cover_flags`): every flag `PROG -h`
# lists must appear as \-\-flag in PROG's man page, and the page must format without warnings.
#   check_manpages.sh PROG MANPAGE
set -euo pipefail
prog=$1 page=$2
missing=()
while read -r flag; do
  esc=${flag//-/\\-}
  grep -qF -- "\\-\\-$esc" "$page" || missing+=("--$flag")
done < <("$prog" -h 2>&1 | sed -n 's/^  -\([a-z0-9-]*\).*/\1/p')
if ((${#missing[@]})); then
  echo "FAIL: $page does not document ${missing[*]}"
  exit 1
fi
if command -v groff >/dev/null; then
  warnings=$(groff -man -ww -z "$page" 2>&1 || true)
  [[ -z $warnings ]] || { echo "FAIL: $page: $warnings"; exit 1; }
fi
echo "PASS: $page documents every flag of $(basename "$prog")"
