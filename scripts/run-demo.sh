#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job: a loopback measurement at the prototype's acceptance shape. corestreamd's server
# and a libremoteledger client run in one process over 127.0.0.1; the summary reports how long
# after the source finished emitting each ledger it was assembled and verified.
set -euo pipefail
builddir=${1:-build}
exec "$builddir/src/benchrunner/benchrunner" --mode loopback \
  --count 50 --synthetic-size 15196160 --synthetic-interval 600ms --emit-window 15ms --verify
