#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The corestream image's entrypoint, run by tini (PID 1, which forwards signals and reaps orphans):
#   <image>                          corestreamd with the image's defaults (a synthetic stream on :8462)
#   <image> --source pipe ...        corestreamd with these flags
#   <image> benchrunner ...          any other program of the image (benchrunner, corestreamd, sh)
# corestreamd always gets --data-dir /var/lib/corestreamd (the volume) first, then
# $CORESTREAMD_OPTS and $CORESTREAMD_START split at blanks as the systemd unit does (no quotes
# inside them; a value with spaces goes in the arguments), then the arguments: a flag given twice
# takes its last value. docs/operations/containers.md.
set -eu
case "${1:-}" in
  "" | -*) ;;
  corestreamd | /usr/sbin/corestreamd) shift ;;
  *) exec "$@" ;;
esac
set -f
# shellcheck disable=SC2086 # split at blanks on purpose, as systemd splits $CORESTREAMD_OPTS
exec /usr/sbin/corestreamd --data-dir /var/lib/corestreamd ${CORESTREAMD_OPTS:-} ${CORESTREAMD_START:-} "$@"
