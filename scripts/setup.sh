#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian 12 packages corestream builds and tests with. As root it runs apt-get;
# otherwise it prints the exact command to run and fails if anything is missing.
set -euo pipefail

packages=(
  gcc make cmake pkg-config
  libzstd-dev libxxhash-dev libssl-dev libcurl4-openssl-dev libcjson-dev
  libsystemd-dev
  debhelper lintian systemd curl groff-base
  libcmocka-dev openssl
  libnats-dev nats-server
  python3 python3-websockets python3-zstandard python3-xxhash python3-h11
  zstd
  prometheus
  gnuplot-nox
  clang libclang-rt-14-dev
  mmdebstrap podman runc catatonit skopeo tini python3-yaml
)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done
# The S3 tests' server (s3rver) comes from the npm registry: Debian's nodejs and npm, unless the
# machine already has a node and an npm of its own (a nodesource nodejs carries npm, and Debian's
# npm package would collide with it).
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
# The image test renders the kustomize overlays with `kubectl kustomize`: Debian's kubectl
# (kubernetes-client), unless the machine has a kubectl of its own (another package's would
# collide with it).
command -v kubectl >/dev/null 2>&1 || missing+=(kubernetes-client)

# s3rver, an S3-compatible server the lake's S3 tests start on 127.0.0.1 (tests/test_lake_s3.c),
# installed from the npm registry the machine is configured with, into .cache/s3rver (ignored by
# git); a pinned version, so every machine tests against the same server.
s3rver_dir=$(cd "$(dirname "$0")/.." && pwd)/.cache/s3rver
s3rver_version=3.7.1
install_s3rver() {
  [[ -x $s3rver_dir/node_modules/.bin/s3rver ]] &&
    grep -qs "\"version\": \"$s3rver_version\"" "$s3rver_dir/node_modules/s3rver/package.json" && return 0
  echo "setup: installing s3rver $s3rver_version from the npm registry into $s3rver_dir" >&2
  mkdir -p "$s3rver_dir"
  npm install --prefix "$s3rver_dir" --no-audit --no-fund --loglevel=error "s3rver@$s3rver_version" >/dev/null
}

# Go 1.23 or later (the Go module's iter API; its test, go_module, runs in `make test`) is not in
# bookworm itself: golang-1.23-go comes from bookworm-backports, added when no source names it.
# Its binary is /usr/lib/go-1.23/bin/go, where CMake looks.
go_package=golang-1.23-go
need_go=false
installed "$go_package" || need_go=true
backports_file=/etc/apt/sources.list.d/corestream-backports.sources
have_backports() {
  grep -rqsE '^[^#]*bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/
}
# The Debian archive this machine already installs bookworm from: backports come from the same
# mirror.
debian_mirror() { "$(dirname "$0")/debian-mirror.sh"; }

if ((${#missing[@]} == 0)) && ! $need_go; then
  install_s3rver
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  export DEBIAN_FRONTEND=noninteractive
  if $need_go && ! have_backports; then
    mirror=$(debian_mirror)
    if [[ -z $mirror ]]; then
      echo "setup: $go_package needs bookworm-backports, and no apt source names a bookworm mirror to take it from; add bookworm-backports to your apt sources" >&2
      exit 1
    fi
    echo "setup: adding bookworm-backports from $mirror (for $go_package) in $backports_file" >&2
    printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$mirror" >"$backports_file"
  fi
  apt-get update -q >/dev/null
  if ((${#missing[@]} > 0)); then
    echo "setup: installing ${missing[*]}" >&2
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
  fi
  if $need_go; then
    echo "setup: installing $go_package from bookworm-backports" >&2
    apt-get install -y -q --no-install-recommends -t bookworm-backports "$go_package" >/dev/null
  fi
  install_s3rver
else
  echo "setup: missing Debian packages; run:" >&2
  if ((${#missing[@]} > 0)); then
    echo "  sudo apt-get install -y ${missing[*]}" >&2
  fi
  if $need_go; then
    if ! have_backports; then
      mirror=$(debian_mirror)
      echo "  printf 'Types: deb\\nURIs: ${mirror:-<your bookworm mirror>}\\nSuites: bookworm-backports\\nComponents: main\\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\\n' | sudo tee $backports_file" >&2
      echo "  sudo apt-get update" >&2
    fi
    echo "  sudo apt-get install -y -t bookworm-backports $go_package" >&2
  fi
  exit 1
fi
