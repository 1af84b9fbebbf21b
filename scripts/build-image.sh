#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the corestream container image from this tree's Debian packages, with no container
# registry (`make image`; docs/operations/containers.md):
#   1. the packages (scripts/build-deb.sh), or those already built in --debs DIR;
#   2. a minimal Debian 12 root file system (mmdebstrap, essential packages, from the archive this
#      machine's apt sources name) with the packages' dependencies, tini and curl, imported as the
#      base image localhost/corestream-base:VERSION;
#   3. the Containerfile built on that base (BASE=): the packages installed with dpkg, the user,
#      the volume, tini, the health check and the labels;
#   4. an OCI archive of the image, its layers gzip-compressed: OUTDIR/corestream_VERSION.oci.tar;
# and, from a second such root file system holding Debian's nats-server, the image
# localhost/corestream-nats:VERSION (NAME-nats:TAG) that the plane's NATS runs
# (deploy/podman/corestream-plane.yaml), archived as OUTDIR/corestream-nats_VERSION.oci.tar.
#   scripts/build-image.sh [--debs DIR] [--tag NAME:TAG] [OUTDIR]     (OUTDIR default ./image)
# The image stays in the local container storage as NAME:TAG (default localhost/corestream:VERSION);
# `podman load -i OUTDIR/corestream_VERSION.oci.tar` loads it anywhere else. Root; needs
# mmdebstrap, podman and skopeo (scripts/setup.sh installs them).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/container-env.sh
. "$src/scripts/container-env.sh"

debs='' tag='' out=''
while (($#)); do
  case $1 in
    --debs) debs=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    -h | --help) sed -n '3,19p' "$0"; exit 0 ;;
    -*) echo "build-image: unknown option $1" >&2; exit 2 ;;
    *) out=$1; shift ;;
  esac
done
out=${out:-$PWD/image}
[[ $(id -u) -eq 0 ]] || { echo "build-image: needs root (mmdebstrap, podman)" >&2; exit 1; }
for tool in mmdebstrap podman skopeo; do
  command -v "$tool" >/dev/null || { echo "build-image: needs $tool (scripts/setup.sh installs it)" >&2; exit 1; }
done
version=$(sed -n 's/^project(corestream VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
commit=unknown
if git -C "$src" rev-parse --verify -q HEAD >/dev/null 2>&1; then
  commit=$(git -C "$src" rev-parse HEAD)
  git -C "$src" diff --quiet HEAD -- 2>/dev/null || commit="$commit-dirty"
fi
tag=${tag:-localhost/corestream:$version}
base=${tag%:*}-base:${tag##*:}
nats=${tag%:*}-nats:${tag##*:}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/var/tmp}/corestream-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
cs_container_env "$work"
say() { echo "build-image: $*" >&2; }

if [[ -z $debs ]]; then
  debs=$out/deb
  say "building the Debian packages into $debs"
  "$src/scripts/build-deb.sh" "$debs" >/dev/null
fi
mkdir -p "$work/ctx/deb" "$work/ctx/packaging"
deps=(tini curl)
for p in corestreamd corestream-tools; do
  f=$(ls "$debs"/"${p}_${version}"_*.deb 2>/dev/null | head -n 1)
  [[ -n $f ]] || { echo "build-image: no ${p}_${version}_*.deb in $debs" >&2; exit 1; }
  cp "$f" "$work/ctx/deb/"
  # Each dependency by name (the first of alternatives; the versions are the archive's).
  while read -r d; do [[ -n $d ]] && deps+=("$d"); done < <(dpkg-deb -f "$f" Depends |
    tr ',' '\n' | sed -e 's/|.*//' -e 's/(.*)//' -e 's/[[:space:]]//g')
done
cp "$src/Containerfile" "$work/ctx/"
cp -r "$src/packaging/container" "$work/ctx/packaging/"

# A minimal Debian 12 root file system holding the packages named, from this machine's apt
# sources, as the tarball $1; options before the packages go to mmdebstrap. Timestamps from the
# commit, so that the same tree makes the same base (mmdebstrap honours SOURCE_DATE_EPOCH).
bootstrap() {
  local tar=$1 include opts=()
  shift
  while [[ ${1:-} == --* ]]; do opts+=("$1"); shift; done
  include=$(printf '%s\n' "$@" | sort -u | paste -sd, -)
  SOURCE_DATE_EPOCH=$(git -C "$src" log -1 --format=%ct 2>/dev/null || date +%s) \
    mmdebstrap --variant=essential --include="$include" \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --dpkgopt="$src/packaging/container/dpkg-nodoc.cfg" "${opts[@]}" \
    bookworm "$tar" >"$tar.log" 2>&1 ||
    { tail -n 30 "$tar.log" >&2; echo "build-image: mmdebstrap failed" >&2; return 1; }
}
# What the three names held before, removed at the end once nothing names or uses it (a rebuild
# would otherwise leave it dangling).
before=$(podman image inspect --format '{{.Id}}' "$tag" "$base" "$nats" 2>/dev/null || true)
say "making the Debian 12 bases (mmdebstrap): $base with $(printf '%s\n' "${deps[@]}" | sort -u | paste -sd' ' -), and $nats with nats-server"
# The JetStream store's directory belongs to nats-server's user; as the image's VOLUME, a new
# named volume mounted there gets its owner.
# shellcheck disable=SC2016 # $1 is mmdebstrap's, the root file system's path
bootstrap "$work/nats.tar" --customize-hook='chroot "$1" install -d -o nats -g nats -m 0700 /var/lib/nats' nats-server &
nats_pid=$!
bootstrap "$work/base.tar" "${deps[@]}"
wait "$nats_pid"
podman import --quiet "$work/base.tar" "$base" >/dev/null
# NATS for the plane (deploy/podman, deploy/kubernetes): Debian's nats-server as its own user.
nats_user=$(tar -xOf "$work/nats.tar" ./etc/passwd | awk -F: '$1 == "nats" { print $3 ":" $4 }')
[[ -n $nats_user ]] || { echo "build-image: nats-server made no nats user" >&2; exit 1; }
podman import --quiet --change "USER $nats_user" --change 'ENTRYPOINT ["/usr/sbin/nats-server"]' \
  --change 'EXPOSE 4222' --change 'VOLUME /var/lib/nats' --change "LABEL org.opencontainers.image.title=corestream-nats" \
  --change "LABEL org.opencontainers.image.description=Debian's nats-server for the corestream plane" \
  --change "LABEL org.opencontainers.image.version=$version" \
  --change "LABEL org.opencontainers.image.revision=$commit" \
  --change "LABEL org.opencontainers.image.licenses=Apache-2.0" \
  "$work/nats.tar" "$nats" >/dev/null
rm -f "$work/base.tar" "$work/nats.tar"

say "building $tag from the Containerfile on $base"
# Docker's config format, so that the image in the local storage keeps its HEALTHCHECK (the OCI
# config has no such field: the archive has none); the new layers squashed into one.
# shellcheck disable=SC2154 # cs_ulimits is cs_container_env's
podman build --quiet --format docker --squash --pull=never "${cs_ulimits[@]}" -f "$work/ctx/Containerfile" \
  --build-arg BASE="$base" --build-arg VERSION="$version" --build-arg COMMIT="$commit" \
  -t "$tag" "$work/ctx" >"$work/build.log" 2>&1 ||
  { tail -n 30 "$work/build.log" >&2; echo "build-image: podman build failed" >&2; exit 1; }

archive=$out/corestream_$version.oci.tar nats_archive=$out/corestream-nats_$version.oci.tar
rm -f "$archive" "$nats_archive"
skopeo copy --quiet --dest-compress "containers-storage:$tag" "oci-archive:$archive:$tag" >/dev/null 2>>"$work/skopeo.log"
skopeo copy --quiet --dest-compress "containers-storage:$nats" "oci-archive:$nats_archive:$nats" >/dev/null 2>>"$work/skopeo.log"
report() { say "$1: $(($(podman image inspect --format '{{.Size}}' "$1") / 1000000)) MB unpacked; $2: $(($(stat -c %s "$2") / 1000000)) MB"; }
report "$tag" "$archive"
report "$nats" "$nats_archive"
now=$(podman image inspect --format '{{.Id}}' "$tag" "$base" "$nats")
for i in $before; do
  grep -qx "$i" <<<"$now" || podman rmi "$i" >/dev/null 2>&1 || true
done
echo "$archive"
echo "$nats_archive"
