#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The container image and the plane end to end (ctest `image`, docs/operations/containers.md):
#   1. scripts/build-image.sh builds the image from the Debian packages (those the `package` test
#      just built, when they are of this commit) on a base mmdebstrap made, through the
#      Containerfile, and archives it; the archive is loaded back under another name;
#   2. the loaded image, configured by the environment (CORESTREAMD_OPTS), published on
#      127.0.0.1::8462, streams ledgers 1..100 to this build's benchrunner --verify; SIGTERM stops
#      it, exit 0, within 5 s; tini, PID 1, reaps an orphan;
#   3. the image as built (with its HEALTHCHECK) on the same volume continues the ring: no reset,
#      the next ledger after the last one, ledgers 1.. verified across the restart; its health
#      check passes;
#   4. deploy/podman/corestream-plane.yaml plays (the test's images, pod and claim names, no host
#      ports): both verifiers, through the core and through the edge, exit 0;
#   5. every kustomize overlay of deploy/kubernetes renders (kubectl kustomize); every key of
#      their pod templates, and of the plane's pod, is a field name of the Kubernetes types podman
#      carries (tests/package/pod_keys.py: podman itself ignores unknown keys); the pod spec of the
#      core's StatefulSet plays under podman: the daemon starts with its flags, mounts and probes,
#      and answers /readyz.
#   test_image.sh SOURCE_DIR WORK_DIR BENCHRUNNER PROJECT_VERSION [DEBS_DIR]
# Root (podman, mmdebstrap); skips (77) when not root. Every container, pod, volume and image it
# made is removed on exit, whatever happened. The hosts' quirks (a hybrid cgroup hierarchy, hard
# rlimits below podman's defaults) are handled by scripts/container-env.sh.
set -euo pipefail
src=$1 work=$2 bench=$3 version=$4 debs=${5:-}

if [[ $(id -u) -ne 0 ]]; then
  echo "SKIP: podman and mmdebstrap need root here"
  exit 77
fi
for tool in mmdebstrap podman skopeo runc catatonit kubectl curl; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool is missing (scripts/setup.sh installs it)"; exit 1; }
done
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=scripts/container-env.sh
. "$src/scripts/container-env.sh"
cs_container_env "$work"

id=cstest$$
tag=localhost/corestream-$id:$version
loaded=localhost/corestream-$id-loaded:$version
vol=$id-ring
# The volumes of the test's containers, the anonymous ones (the image's VOLUME) included, noted
# before their containers go.
vols=("$vol" "$id-core-ring" "$id-edge-ring" "$id-nats-store" "$id-sts-ring")
note_volumes() {
  local c v
  for c in $(podman ps -a --format '{{.Names}}' | grep "^$id"); do
    for v in $(podman inspect --format '{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}' "$c"); do
      vols+=("$v")
    done
  done
}
cleanup() {
  set +e
  note_volumes
  for p in "$id" "$id-sts"; do podman pod rm -f -t 0 "$p" >/dev/null 2>&1; done
  podman rm -f -v -t 0 "$id-a" "$id-b" >/dev/null 2>&1
  podman volume rm -f "${vols[@]}" >/dev/null 2>&1
  podman secret ls --format '{{.Name}}' 2>/dev/null | grep "^$id-sts-" | xargs -r podman secret rm >/dev/null 2>&1
  podman rmi -f "$tag" "$loaded" "${tag%:*}-base:$version" "${tag%:*}-nats:$version" >/dev/null 2>&1
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# The `package` test's packages, when they are of this commit: reused, not built again.
commit=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)
reuse=()
if [[ -n $debs ]] && f=$(ls "$debs"/corestreamd_"$version"_*.deb 2>/dev/null | head -n 1) && [[ -n $f ]]; then
  dpkg-deb --fsys-tarfile "$f" | tar -xO ./usr/sbin/corestreamd >"$work/corestreamd.deb-bin"
  chmod +x "$work/corestreamd.deb-bin"
  if [[ $("$work/corestreamd.deb-bin" --version) == *"commit: $commit"* ]]; then
    reuse=(--debs "$debs")
    echo "== reusing the packages in $debs"
  fi
fi

echo "== build-image.sh"
t0=$(date +%s)
"$src/scripts/build-image.sh" "${reuse[@]}" --tag "$tag" "$work/out" >"$work/build-image.out" 2>"$work/build-image.err" ||
  { cat "$work/build-image.err"; fail "build-image.sh"; }
cat "$work/build-image.err"
echo "built in $(($(date +%s) - t0)) s"
archive=$work/out/corestream_$version.oci.tar
[[ -s $archive ]] || fail "no $archive"
skopeo copy --quiet "oci-archive:$archive" "containers-storage:$loaded" 2>"$work/skopeo.err" ||
  { cat "$work/skopeo.err"; fail "the archive does not load"; }
labels=$(podman image inspect --format '{{json .Labels}}' "$loaded")
for want in "\"org.opencontainers.image.version\":\"$version\"" "\"org.opencontainers.image.licenses\":\"Apache-2.0\"" \
  "\"org.opencontainers.image.revision\":\"$commit" '"org.opencontainers.image.source":"https://'; do
  grep -qF "$want" <<<"$labels" || fail "label $want missing in $labels"
done
[[ $(podman image inspect --format '{{.User}}' "$loaded") == 8462:8462 ]] || fail "the image does not run as 8462:8462"
[[ $(podman image inspect --format '{{json .Config.Volumes}}' "$loaded") == *'"/var/lib/corestreamd"'* ]] || fail "no volume"
# Small: no compiler, no documentation beyond the two man pages.
podman run --rm --entrypoint /bin/sh "$loaded" -c \
  'for f in /usr/bin/cc /usr/bin/gcc /usr/bin/apt-get; do [ ! -e $f ] || echo "has $f"; done
   find /usr/share/doc -type f ! -name copyright | head -n 3
   find /usr/share/man -type f ! -name corestreamd.8.gz ! -name benchrunner.1.gz | head -n 3' >"$work/extra.txt"
[[ ! -s $work/extra.txt ]] || fail "the image holds: $(cat "$work/extra.txt")"

# port_of NAME: the host port podman published 8462 on; ready_on PORT: /readyz answers 200.
port_of() { podman port "$1" 8462/tcp | head -n 1 | sed 's/.*://'; }
ready_on() { curl -fsS --max-time 2 "http://127.0.0.1:$1/readyz" >/dev/null 2>&1; }
wait_ready() { # NAME: up to 30 s for /readyz (and the port) while the container runs
  local p=
  for _ in $(seq 1 300); do
    p=$(port_of "$1" 2>/dev/null || true)
    if [[ -n $p ]] && ready_on "$p"; then echo "$p"; return 0; fi
    [[ $(podman inspect --format '{{.State.Running}}' "$1") == true ]] || break
    sleep 0.1
  done
  podman logs "$1" | tail -n 20
  return 1
}
# latest_of PORT: the latest ledger /healthz reports.
field_of() { curl -fsS --max-time 5 "http://127.0.0.1:$1/healthz" | sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p"; }
opts="--synthetic-interval 50ms --synthetic-size 65536 --emit-window 0"
run_core() { # NAME IMAGE: a core on the ring's volume, configured by the environment
  podman run -d --name "$1" -p 127.0.0.1::8462 -v "$vol:/var/lib/corestreamd" --stop-timeout 5 \
    -e CORESTREAMD_OPTS="$opts" "$2" >/dev/null
}

echo "== the archive's image: 100 ledgers to the host's benchrunner --verify"
run_core "$id-a" "$loaded"
port=$(wait_ready "$id-a") || fail "the container did not become ready"
timeout 120 "$bench" --mode remote --url "ws://127.0.0.1:$port" --start 1 --end 100 --verify \
  --synthetic-size 65536 --quiet >"$work/bench-a.txt" 2>&1 || { cat "$work/bench-a.txt"; fail "benchrunner through the container"; }
grep -q '^ledgers *100 (1\.\.100)' "$work/bench-a.txt" || fail "benchrunner: $(cat "$work/bench-a.txt")"
[[ $(podman exec "$id-a" cat /proc/1/comm) == tini ]] || fail "PID 1 is not tini"
# An orphan (its parent exits first) is reparented to PID 1, which must reap it.
podman exec "$id-a" sh -c 'sh -c "sleep 0.3 & exit 0"'
reaped=0
for _ in $(seq 1 100); do # up to 10 s for the sleep to end and its zombie to go
  if ! podman exec "$id-a" sh -c 'grep -qs "^sleep" /proc/[0-9]*/comm'; then reaped=1; break; fi
  sleep 0.1
done
((reaped)) || fail "an orphan was not reaped: $(podman exec "$id-a" sh -c 'grep -H State /proc/[0-9]*/status')"

echo "== SIGTERM stops it within 5 s"
before=$(field_of "$port" latest)
t0=$(date +%s%N)
podman kill --signal TERM "$id-a" >/dev/null
timeout 30 podman wait "$id-a" >"$work/exit-a.txt" || fail "the container did not stop"
ms=$((($(date +%s%N) - t0) / 1000000))
echo "stopped in $ms ms, exit $(cat "$work/exit-a.txt")"
((ms < 5000)) || fail "SIGTERM took $ms ms"
[[ $(cat "$work/exit-a.txt") == 0 ]] || fail "exit $(cat "$work/exit-a.txt") on SIGTERM"
# Logs captured first: grep -q would stop reading early, and under pipefail podman's SIGPIPE fails.
podman logs "$id-a" >"$work/a.log" 2>&1
grep -q 'msg="corestreamd stopped"' "$work/a.log" || fail "no 'corestreamd stopped' line"
last=$(sed -n 's/.*msg="source loop cancelled".* ledgers=\([0-9]*\).*/\1/p' "$work/a.log" | tail -n 1)
[[ -n $last && $last -ge $before ]] || fail "no ledger count at the stop (before=$before last=$last)"

echo "== a restarted container on the same volume continues the ring"
run_core "$id-b" "$tag"
port=$(wait_ready "$id-b") || fail "the restarted container did not become ready"
podman logs "$id-b" >"$work/b.log" 2>&1
grep -q "msg=\"corestreamd listening\".* start_ledger=$((last + 1)) start=continue " "$work/b.log" ||
  fail "the restart does not continue at $((last + 1)): $(grep listening "$work/b.log")"
grep 'ring reset' "$work/b.log" && fail "the ring was reset"
[[ $(field_of "$port" oldest) == 1 ]] || fail "oldest is not 1 after the restart"
end=$((last + 20))
timeout 120 "$bench" --mode remote --url "ws://127.0.0.1:$port" --start 1 --end "$end" --verify \
  --synthetic-size 65536 --quiet >"$work/bench-b.txt" 2>&1 || { cat "$work/bench-b.txt"; fail "benchrunner across the restart"; }
grep -q "^ledgers *$end (1\.\.$end)" "$work/bench-b.txt" || fail "benchrunner: $(cat "$work/bench-b.txt")"
podman healthcheck run "$id-b" >/dev/null 2>&1 || fail "the image's health check (/readyz) fails on a ready core"
podman rm -f -v -t 5 "$id-b" >/dev/null

echo "== podman kube play deploy/podman/corestream-plane.yaml"
# The test's images, pod and claim names; no host ports (the verifiers run inside the pod).
sed -e "s|localhost/corestream:0.1.0|$tag|; s|localhost/corestream-nats:0.1.0|${tag%:*}-nats:$version|" \
  -e "s|^  name: corestream$|  name: $id|; s|claimName: corestream-|claimName: $id-|" \
  -e '/hostIP:/d; /hostPort:/d' "$src/deploy/podman/corestream-plane.yaml" >"$work/plane.yaml"
if ! grep -q "$id-core-ring" "$work/plane.yaml" || grep -q 'localhost/corestream:' "$work/plane.yaml"; then
  fail "the plane's file changed shape: update the substitutions above"
fi
podman kube play "$work/plane.yaml" >"$work/play.txt" 2>&1 || { cat "$work/play.txt"; fail "podman kube play"; }
for v in verify-core verify-edge; do
  st=
  for _ in $(seq 1 1800); do # up to 180 s for 100 ledgers every 200 ms through both
    st=$(podman inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$id-$v" 2>/dev/null || true)
    [[ $st == exited* ]] && break
    sleep 0.1
  done
  podman logs "$id-$v" >"$work/$v.txt" 2>&1 || true
  [[ $st == "exited 0" ]] || { tail -n 20 "$work/$v.txt"; podman logs "$id-edge" 2>&1 | tail -n 10; fail "$v: $st"; }
  grep -q '^ledgers *100 (1\.\.100)' "$work/$v.txt" || fail "$v: $(cat "$work/$v.txt")"
  echo "$v: 100 ledgers verified"
done
# The grace of the plane's pod (its terminationGracePeriodSeconds): NATS stops with the core, whose
# publisher then waits up to 5 s for its acks before it exits.
note_volumes
podman pod rm -f -t 30 "$id" >"$work/pod-rm.txt" 2>&1 || { cat "$work/pod-rm.txt"; fail "podman pod rm of the plane"; }

echo "== kustomize overlays render; the StatefulSet's pod spec plays"
for o in "$src"/deploy/kubernetes/overlays/*/; do
  kubectl kustomize "$o" >"$work/$(basename "$o").yaml" 2>"$work/kustomize.err" ||
    { cat "$work/kustomize.err"; fail "kubectl kustomize $o"; }
  for kind in StatefulSet Service PodDisruptionBudget NetworkPolicy PodMonitor PrometheusRule; do
    grep -q "^kind: $kind$" "$work/$(basename "$o").yaml" || fail "$o renders no $kind"
  done
  echo "$(basename "$o"): $(grep -c '^kind:' "$work/$(basename "$o").yaml") objects"
done
# podman plays a pod ignoring keys it does not know: each key must be a field name of its types.
python3 "$src/tests/package/pod_keys.py" "$(command -v podman)" "$work"/single-core.yaml "$work"/core-nats-edges.yaml \
  "$src/deploy/podman/corestream-plane.yaml" || fail "a key of a pod spec is no field"
python3 "$src/tests/package/sts_pod.py" "$work/single-core.yaml" "$id-sts" "$tag" "$id-sts-ring" >"$work/sts-pod.yaml" ||
  fail "no StatefulSet pod spec in the single-core overlay"
podman kube play "$work/sts-pod.yaml" >"$work/play-sts.txt" 2>&1 || { cat "$work/play-sts.txt"; fail "podman kube play of the StatefulSet's pod"; }
ok=0
for _ in $(seq 1 300); do # up to 30 s for the core of the StatefulSet to answer /readyz
  if podman exec "$id-sts-corestreamd" curl -fsS --max-time 2 http://127.0.0.1:8462/readyz >/dev/null 2>&1; then ok=1; break; fi
  [[ $(podman inspect --format '{{.State.Status}}' "$id-sts-corestreamd" 2>/dev/null) == exited ]] && break
  sleep 0.1
done
((ok)) || { podman logs "$id-sts-corestreamd" 2>&1 | tail -n 20; fail "the StatefulSet's pod is not ready under podman"; }
echo "PASS"
