#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Prints the Debian archive this machine already installs bookworm from, read from its apt sources
# (one-line or deb822), and nothing when none names bookworm. scripts/setup.sh takes backports from
# it; scripts/check-clean-chroot.sh bootstraps its chroot from it.
set -euo pipefail
u=$(sed -E 's/\[[^]]*\]//' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
  awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' || true)
if [[ -z $u ]]; then
  u=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
    awk '/^[[:space:]]*$/ { uri = "" } /^URIs:/ { uri = $2 }
         /^Suites:.*[[:space:]]bookworm([[:space:]]|$)/ && uri != "" { print uri; exit }' || true)
fi
printf '%s' "$u"
