#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The flag lists of the docs keep up with the programs (ctest `manpages_cover_flags_*` and
# `docs_cover_flags_*`): the flags `PROG -h` prints and the flags DOC documents must be the same
# set, with the same value placeholder (`-listen address` ↔ `--listen \fIaddress\fR`, a table's
# type column; a flag without one is `bool` in a table).
#   check_flag_docs.sh PROG DOC
# DOC is a man page (its OPTIONS section: `.B \-\-flag \fItype\fR`; it must also format without
# warnings) or a markdown file (every table row whose first cell is `--flag`: | `--flag` | type |
# default | meaning |; where -h prints "(default V)", the default cell must hold `V`).
set -euo pipefail
prog=$1 doc=$2
fail=0
problem() { echo "FAIL: $doc: $*"; fail=1; }

# -h: "  -name placeholder" lines, then the help text indented by a tab.
re_flag='^  -([a-z0-9-]+)( ([a-z]+))?$'
re_default='[(]default "?([^")]*)"?[)]$'
re_row='^\| `--([a-z0-9-]+)` \| ([^|]*) \| ([^|]*) \|'
re_man='^\.B \\-\\-([a-z0-9\\-]+)( \\fI([a-z]+)\\fR)?$'
declare -A help_type help_default
name=
while IFS= read -r line; do
  if [[ $line =~ $re_flag ]]; then
    name=${BASH_REMATCH[1]}
    help_type[$name]=${BASH_REMATCH[3]:-bool}
    help_default[$name]=
  elif [[ -n $name && $line =~ $re_default ]]; then
    help_default[$name]=${BASH_REMATCH[1]}
  fi
done < <("$prog" -h 2>&1)
((${#help_type[@]})) || { echo "FAIL: $prog -h lists no flags"; exit 1; }

declare -A doc_type doc_default
if [[ $doc == *.md ]]; then
  while IFS= read -r line; do
    [[ $line =~ $re_row ]] || continue
    f=${BASH_REMATCH[1]}
    [[ -n ${doc_type[$f]:-} ]] && continue # a flag listed twice: its first row counts
    doc_type[$f]=${BASH_REMATCH[2]}
    doc_default[$f]=${BASH_REMATCH[3]}
  done <"$doc"
else
  in_options=0
  while IFS= read -r line; do
    if [[ $line == .SH* ]]; then
      [[ $line == ".SH OPTIONS" ]] && in_options=1 || in_options=0
      continue
    fi
    ((in_options)) || continue
    [[ $line =~ $re_man ]] || continue
    f=${BASH_REMATCH[1]//\\-/-}
    doc_type[$f]=${BASH_REMATCH[3]:-bool}
  done <"$doc"
fi

for f in "${!help_type[@]}"; do
  if [[ -z ${doc_type[$f]:-} ]]; then
    problem "does not document --$f"
    continue
  fi
  [[ ${doc_type[$f]} == "${help_type[$f]}" ]] ||
    problem "--$f is '${doc_type[$f]}' here, '${help_type[$f]}' in -h"
  if [[ $doc == *.md && -n ${help_default[$f]} ]]; then
    [[ ${doc_default[$f]} == *"\`${help_default[$f]}\`"* ]] ||
      problem "--$f defaults to '${help_default[$f]}' in -h, not '${doc_default[$f]}'"
  fi
done
for f in "${!doc_type[@]}"; do
  [[ -n ${help_type[$f]:-} ]] || problem "documents --$f, which $(basename "$prog") -h does not have"
done
((fail == 0)) || exit 1

if [[ $doc != *.md ]] && command -v groff >/dev/null; then
  warnings=$(groff -man -ww -z "$doc" 2>&1 || true)
  [[ -z $warnings ]] || { echo "FAIL: $doc: $warnings"; exit 1; }
fi
echo "PASS: $doc documents exactly the ${#help_type[@]} flags of $(basename "$prog") -h"
