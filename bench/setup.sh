#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/setup.sh: the Debian 12 packages the benchmark scripts need beyond the build itself
# (scripts/setup.sh covers the build). As root it installs them with apt-get; as another user it
# prints the exact command to run and exits 1 if anything is missing.
#
#   time        /usr/bin/time -v: whole-process CPU seconds and peak RSS (cells 1-3, 6, 7)
#   iproute2    ip netns, veth and tc tbf/netem for the emulated two-box link (cell 6)
#   iperf3      the single-flow rate actually measured across that link (cell 6)
#   gnuplot-nox delivery-latency CDF pictures (plot.sh; scripts/setup.sh installs it too, for its test)
#   curl        corestreamd's /healthz (cells 4-7)
set -euo pipefail

packages=(time iproute2 iperf3 gnuplot-nox curl)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "bench setup: all present (${packages[*]})"
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  echo "bench setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
  echo "bench setup: installed ${missing[*]}"
else
  echo "bench setup: missing Debian packages; run:" >&2
  echo "  sudo DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
