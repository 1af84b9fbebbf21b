#!/usr/bin/env bash
# Installs the Debian 12 packages corestream builds and tests with. As root it runs apt-get;
# otherwise it prints the exact command to run and fails if anything is missing.
set -euo pipefail

packages=(
  gcc make cmake pkg-config
  libwebsockets-dev libzstd-dev libxxhash-dev libssl-dev libcurl4-openssl-dev libcjson-dev
  libsystemd-dev
  debhelper lintian systemd curl groff-base
  libcmocka-dev openssl
  libnats-dev nats-server
  prometheus
  clang libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: missing Debian packages; run:" >&2
  echo "  sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
