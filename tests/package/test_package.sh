#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Debian packages end to end (ctest `package`): builds them from the tree
# (scripts/build-deb.sh), runs lintian, installs them with dpkg -i on this machine, runs the
# installed corestreamd (--version, then serving on 127.0.0.1) and a consumer compiled against
# the installed library through pkg-config, upgrades corestreamd to itself repacked with a higher
# version (a restart must be asked for), then purges them (a stop must be asked for) and checks
# nothing is left.
#   test_package.sh SOURCE_DIR WORK_DIR PROJECT_VERSION
# Needs root (dpkg -i). Skips (77) when not root, or when one of the packages is already installed
# here (the test would replace an operator's install). Every wait is bounded.
set -euo pipefail
src=$1 work=$2 version=$3
pkgs=(corestreamd corestream-tools libremoteledger1 libremoteledger-dev)

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: dpkg -i needs root"
  exit 77
fi
for p in "${pkgs[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    echo "SKIP: $p is already installed on this machine; the test would replace it"
    exit 77
  fi
done
for tool in dpkg-buildpackage dh cc pkg-config curl; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is missing (scripts/setup.sh installs it)"; exit 1; }
done

# One package test at a time on a machine: they install the same packages.
exec 9>/tmp/corestream-package-test.lock
flock -w 900 9 || { echo "FAIL: another package test holds /tmp/corestream-package-test.lock"; exit 1; }

rm -rf "$work" && mkdir -p "$work"
daemon_pid=
installed=0
cleanup() {
  [[ -n $daemon_pid ]] && kill -KILL "$daemon_pid" 2>/dev/null || true
  if ((installed)); then dpkg --purge "${pkgs[@]}" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

echo "== build"
timeout 900 "$src/scripts/build-deb.sh" "$work/deb" >/dev/null
debs=()
for p in "${pkgs[@]}"; do
  f=$(ls "$work"/deb/"${p}"_"${version}"_*.deb 2>/dev/null | head -n 1)
  [[ -n $f ]] || fail "no ${p}_${version}_*.deb was built (is debian/changelog at $version?)"
  debs+=("$f")
done

echo "== lintian"
if command -v lintian >/dev/null; then
  findings=$(timeout 300 lintian "${debs[@]}" 2>&1 | grep -E '^[EW]:' || true)
  [[ -z $findings ]] || fail "lintian: $findings"
else
  echo "lintian is not installed: not run"
fi

echo "== dpkg -i"
installed=1
timeout 300 dpkg -i "${debs[@]}" >"$work/dpkg-i.log" 2>&1 || { cat "$work/dpkg-i.log"; fail "dpkg -i"; }
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" | grep -q "install ok installed" || fail "$p is not installed"
done
conffiles=$(dpkg-query -W -f='${Conffiles}' corestreamd)
grep -q '/etc/default/corestreamd' <<<"$conffiles" || fail "/etc/default/corestreamd is not a conffile"
[[ -f /lib/systemd/system/corestreamd.service ]] || fail "no unit at /lib/systemd/system"
[[ -f /usr/share/man/man8/corestreamd.8.gz && -f /usr/share/man/man1/benchrunner.1.gz ]] || fail "man pages"
# The alert rules, where the docs say, and good as installed.
rules=/usr/share/corestream/corestreamd-alerts.yml
[[ -f $rules ]] || fail "no alert rules at $rules"
if [[ -x /usr/bin/promtool ]]; then
  (cd /usr/share/corestream && promtool test rules corestreamd-alerts.test.yml >"$work/promtool.log" 2>&1) ||
    { cat "$work/promtool.log"; fail "the installed alert rules fail their tests"; }
fi
# The benchmark harness is corestream-tools', not the daemon package's.
dpkg -L corestreamd | grep -qE '/bin/benchrunner$|/benchrunner\.1' && fail "corestreamd carries benchrunner"
dpkg -L corestream-tools | grep -qx /usr/bin/benchrunner || fail "corestream-tools lacks benchrunner"
# The docs the man pages point at (SEE ALSO, FILES) are where they say, compressed or not.
for page in /usr/share/man/man8/corestreamd.8.gz /usr/share/man/man1/benchrunner.1.gz; do
  named=$(zcat "$page" | grep -o '/usr/share/doc/[^ ]*' | sort -u)
  [[ -n $named ]] || fail "$page names no installed doc"
  while read -r doc; do
    [[ -e $doc ]] || fail "$page names $doc, which is not installed"
  done <<<"$named"
done
ls /usr/share/doc/corestreamd/operations/*.md* >/dev/null 2>&1 || fail "no operator's manual in operations/"

echo "== corestreamd --version"
out=$(timeout 30 /usr/sbin/corestreamd --version)
head -n 1 <<<"$out" | grep -qx "corestreamd $version" || fail "first line of: $out"
grep -qx 'build type: RelWithDebInfo' <<<"$out" || fail "build type in: $out"
if git -C "$src" rev-parse --verify -q HEAD >/dev/null 2>&1; then
  grep -q "^commit: $(git -C "$src" rev-parse HEAD)" <<<"$out" || fail "commit in: $out"
fi
timeout 30 /usr/bin/benchrunner --version | head -n 1 | grep -qx "benchrunner $version" || fail "benchrunner --version"

echo "== consumer against the installed library"
cc -Wall -Werror -o "$work/consumer" "$src/tests/package/consumer.c" $(pkg-config --cflags --libs remoteledger)
# Captured first: grep -q would stop reading early, and under pipefail ldd's SIGPIPE fails the test.
libs=$(ldd "$work/consumer")
grep -Eq "libremoteledger\.so\.[0-9]+ => /(usr/)?lib/" <<<"$libs" || fail "consumer does not load the installed library: $libs"
mkdir "$work/data"
/usr/sbin/corestreamd --listen 127.0.0.1:0 --data-dir "$work/data" --synthetic-interval 50ms \
  --emit-window 0 --synthetic-size 4096 >"$work/daemon.log" 2>&1 &
daemon_pid=$!
port=
for _ in $(seq 1 200); do # up to 20 s for the listening line
  port=$(grep -o 'msg="corestreamd listening" .*addr=127.0.0.1:[0-9]*' "$work/daemon.log" | head -n 1 | sed 's/.*://' || true)
  [[ -n $port ]] && break
  kill -0 "$daemon_pid" 2>/dev/null || break
  sleep 0.1
done
[[ -n $port ]] || { cat "$work/daemon.log"; fail "the installed corestreamd did not listen"; }
got=$(timeout 60 "$work/consumer" "ws://127.0.0.1:$port")
want="ledger 1 bytes 4096 head ok
ledger 2 bytes 4096 head ok
ledger 3 bytes 4096 head ok
result RL_OK, wire version 2, path /stream"
[[ $got == "$want" ]] || fail "consumer printed: $got"
curl -fsS --max-time 10 "http://127.0.0.1:$port/healthz" | grep -q "\"version\":\"$version\"" || fail "/healthz version"
kill -TERM "$daemon_pid"
timeout 10 tail --pid="$daemon_pid" -f /dev/null || fail "corestreamd did not stop on SIGTERM"
wait "$daemon_pid" || fail "corestreamd exited $? on SIGTERM"
daemon_pid=

# The maintainer scripts act only where systemd runs (/run/systemd/system): here they run in a
# private mount namespace that has it, with deb-systemd-invoke, deb-systemd-helper and systemctl
# stubbed to record their calls.
stubs=$work/stubs calls=$work/systemd-calls
mkdir -p "$stubs"
for t in deb-systemd-invoke deb-systemd-helper systemctl; do
  printf '#!/bin/sh\necho "%s $*" >>"%s"\n' "$t" "$calls" >"$stubs/$t"
  chmod +x "$stubs/$t"
done
with_systemd() {
  : >"$calls"
  timeout 300 unshare -m sh -c 'mount -t tmpfs tmpfs /run/systemd && mkdir /run/systemd/system && exec "$@"' sh \
    env PATH="$stubs:$PATH" "$@"
}

echo "== upgrade restarts the unit"
# The installed package repacked with a higher version: an upgrade's maintainer scripts as dpkg
# runs them (old prerm upgrade, new preinst upgrade, new postinst configure <old version>).
rm -rf "$work/repack" && dpkg-deb -R "${debs[0]}" "$work/repack"
sed -i "s/^Version: .*/Version: ${version}+upgrade1/" "$work/repack/DEBIAN/control"
dpkg-deb -b "$work/repack" "$work/corestreamd-upgrade.deb" >/dev/null
with_systemd dpkg -i "$work/corestreamd-upgrade.deb" >"$work/dpkg-upgrade.log" 2>&1 ||
  { cat "$work/dpkg-upgrade.log"; fail "dpkg -i of the upgrade"; }
dpkg-query -W -f='${Version}' corestreamd | grep -qx "${version}+upgrade1" || fail "the upgrade is not installed"
grep -qx "deb-systemd-invoke restart corestreamd.service" "$calls" || fail "no restart asked on upgrade: $(cat "$calls")"
grep -q "deb-systemd-invoke stop" "$calls" && fail "the upgrade stopped the unit: $(cat "$calls")"

echo "== dpkg --purge stops the unit"
with_systemd dpkg --purge "${pkgs[@]}" >"$work/dpkg-r.log" 2>&1 || { cat "$work/dpkg-r.log"; fail "dpkg --purge"; }
installed=0
grep -qx "deb-systemd-invoke stop corestreamd.service" "$calls" || fail "no stop asked on removal: $(cat "$calls")"
for p in "${pkgs[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "installed"; then fail "$p still installed"; fi
done
for f in /usr/sbin/corestreamd /usr/bin/benchrunner /etc/default/corestreamd /lib/systemd/system/corestreamd.service \
  /usr/include/corestream /usr/share/doc/corestreamd /usr/lib/x86_64-linux-gnu/pkgconfig/remoteledger.pc; do
  [[ ! -e $f ]] || fail "$f is left after purge"
done
ls /usr/lib/*/libremoteledger* >/dev/null 2>&1 && fail "libremoteledger files left after purge"
echo "PASS"
