# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Sourced by scripts/build-image.sh and tests/package/test_image.sh:
#   cs_container_env DIR
# writes DIR/containers.conf and exports CONTAINERS_CONF to it (unless CONTAINERS_CONF is set
# already), so that podman and buildah run here as on a stock host:
# - the OCI runtime is runc when it is installed. crun, podman's default, refuses a hybrid cgroup
#   hierarchy (v1 controllers beside a v2 mount), which runc accepts.
# - the containers' rlimits are this shell's hard limits for open files and processes (processes
#   no more than kernel.pid_max, which podman itself does not exceed here). podman's defaults
#   (1048576 of each) exceed the hard limits of some machines, and then nothing starts.
# Every podman, buildah and `podman kube play` under it reads the file (containers.conf(5));
# a build's RUN steps do not take its rlimits, so the same limits are in cs_ulimits, the options
# to give `podman build`.
cs_container_env() {
  local dir=$1 nofile nproc pid_max runtime=
  nofile=$(ulimit -Hn) nproc=$(ulimit -Hu)
  [[ $nofile == unlimited ]] && nofile=1048576
  [[ $nproc == unlimited ]] && nproc=1048576
  pid_max=$(cat /proc/sys/kernel/pid_max 2>/dev/null || echo 32768)
  ((nproc <= pid_max)) || nproc=$pid_max
  # shellcheck disable=SC2034 # read by the scripts that source this file
  cs_ulimits=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
  [[ -n ${CONTAINERS_CONF:-} ]] && return 0
  command -v runc >/dev/null 2>&1 && runtime='runtime = "runc"'
  mkdir -p "$dir"
  printf '[containers]\ndefault_ulimits = ["nofile=%s:%s", "nproc=%s:%s"]\n\n[engine]\n%s\n' \
    "$nofile" "$nofile" "$nproc" "$nproc" "$runtime" >"$dir/containers.conf"
  export CONTAINERS_CONF=$dir/containers.conf
}
