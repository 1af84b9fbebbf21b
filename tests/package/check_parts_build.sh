#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# corestreamd without its optional parts (ctest `parts_off_build`): configures the tree with
# -DCS_WITH_NATS=OFF -DCS_WITH_SYSTEMD=OFF -DCS_WITH_CAPTIVE=OFF where pkg-config refuses libnats,
# libsystemd and libcurl (as on a machine without their -dev packages), builds all it configures
# (the programs, the library and its tests), and checks what a user sees: the configure messages,
# no such library linked, no systemd unit, each left-out part refused by its flag with an exact
# message and exit status 1, and a synthetic run that streams to its end and exports its ring to a
# --lake-dir (no optional part: the lake's config files are read with cJSON, a plain dependency).
#   check_parts_build.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$1 work=$2
real=$(command -v pkg-config) || { echo "SKIP: no pkg-config"; exit 77; }
rm -rf "$work"
mkdir -p "$work/bin" "$work/data"
cat >"$work/bin/pkg-config" <<WRAP
#!/bin/sh
# libnats, libsystemd and libcurl do not exist here.
for a in "\$@"; do
  case \$a in
    libnats|libsystemd|libcurl) echo "pkg-config (no optional parts): no module \$a" >&2; exit 1 ;;
  esac
done
exec "$real" "\$@"
WRAP
chmod +x "$work/bin/pkg-config"
fail() { echo "FAIL: $*"; exit 1; }

cmake -S "$src" -B "$work/build" -DCS_WITH_NATS=OFF -DCS_WITH_SYSTEMD=OFF -DCS_WITH_CAPTIVE=OFF \
  -DCS_WERROR=ON -DPKG_CONFIG_EXECUTABLE="$work/bin/pkg-config" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; fail "the build without optional parts does not configure"; }
for part in NATS SYSTEMD CAPTIVE; do
  grep -q -- "-- CS_WITH_$part=OFF: corestreamd without" "$work/configure.log" ||
    { cat "$work/configure.log"; fail "configure does not say CS_WITH_$part=OFF"; }
done
# Everything it configures: corestreamd, benchrunner, the library and its tests.
cmake --build "$work/build" -j "$(nproc)" >"$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log"; fail "the tree does not build without the optional parts"; }
[[ ! -e $work/build/packaging/corestreamd.service ]] || fail "a systemd unit was made for a build without systemd"
bin=$work/build/src/corestreamd/corestreamd
if ldd "$bin" | grep -E 'libnats|libsystemd|libcurl'; then
  fail "corestreamd links a library of a part left out"
fi

# refused ARGS... MESSAGE: exit status 1 and the exact error on the log.
refused() {
  local want=${!#} out rc=0
  out=$(env -u NOTIFY_SOCKET "${env_extra[@]}" "$bin" --data-dir "$work/data" --listen 127.0.0.1:0 "${@:1:$#-1}" 2>&1) || rc=$?
  [[ $rc -eq 1 ]] || fail "$* exited $rc, not 1: $out"
  grep -q "corestreamd failed" <<<"$out" && grep -qF -- "error=\"$want\"" <<<"$out" ||
    fail "$*: no \"$want\" in: $out"
}
env_extra=()
refused --source captive --start-ledger 5 --core-config c.cfg --history-archive-urls http://127.0.0.1:1 \
  "--source captive is not available: this corestreamd was configured with -DCS_WITH_CAPTIVE=OFF"
refused --network-passphrase "Test SDF Network ; September 2015" --lake-url s3://lake/pubnet \
  "--lake-url is not available: this corestreamd was configured with -DCS_WITH_CAPTIVE=OFF (it writes to S3 with libcurl)"
refused --source jetstream --jetstream-source-url nats://127.0.0.1:1 \
  "--source jetstream is not available: this corestreamd was configured with -DCS_WITH_NATS=OFF"
refused --jetstream-url nats://127.0.0.1:1 \
  "--jetstream-url is not available: this corestreamd was configured with -DCS_WITH_NATS=OFF"
env_extra=(NOTIFY_SOCKET=/run/nonexistent/notify)
refused --synthetic-count 3 --synthetic-interval 20ms \
  "systemd notify: NOTIFY_SOCKET is set (a Type=notify unit) but this corestreamd was configured with -DCS_WITH_SYSTEMD=OFF; run it as Type=simple or build it with systemd"

# benchrunner's captive mode, likewise.
rc=0
out=$("$work/build/src/benchrunner/benchrunner" --mode local --start 5 --core-config c.cfg \
  --history-archive-urls http://127.0.0.1:1 2>&1) || rc=$?
[[ $rc -ne 0 ]] && grep -qF -- "--mode local is not available: this benchrunner was configured with -DCS_WITH_CAPTIVE=OFF" <<<"$out" ||
  fail "benchrunner --mode local exited $rc: $out"

# What is left works: a bounded synthetic run streams to its end, exports its ring to a lake
# directory (the stop drains the export) and exits 0.
out=$(env -u NOTIFY_SOCKET timeout 60 "$bin" --data-dir "$work/data" --listen 127.0.0.1:0 \
  --synthetic-count 3 --synthetic-interval 20ms --network-passphrase "Test SDF Network ; September 2015" \
  --lake-dir "$work/lake" 2>&1) || fail "a synthetic run failed: $out"
grep -q "msg=\"corestreamd stopped\"" <<<"$out" || fail "the synthetic run did not reach its end: $out"
for f in config.json ledgers/.config.json ledgers/FFFFFFFF--0-63999/FFFFFFFC--3.xdr.zst; do
  [[ -s $work/lake/$f ]] || fail "--lake-dir: no $f in $work/lake: $out"
done
echo "PASS: corestreamd builds without NATS, systemd and captive, refuses each by its flag, and exports to --lake-dir"
