#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Seeds for fuzz_xdrwalk and fuzz_framereader from ledgers stellar-core wrote (../shared/realmeta,
# read in place), written into the build tree only (tests/fuzz/CMakeLists.txt runs this at build
# time; nothing is committed). Without the directory it says so and writes none.
#
# Both targets run with -max_len 8192, and libFuzzer cuts a longer seed to max_len, while the
# real ledgers are 412 B to 1.8 MB. Nothing is lost by cutting them: the walk decides within its
# first CS_XDR_SEQ_PREFIX_WORST (1100) bytes, the frame reader hands over a 4096-byte prefix and
# the target caps its pipe at 64 KiB anyway. So each seed is a prefix, cut here rather than by
# libFuzzer so that the reader's seeds stay well formed:
#   fuzz_xdrwalk      real-<name>: a ledger's first max_len bytes (all of it when shorter);
#   fuzz_framereader  real-<name>: the two knob bytes (64 KiB read-ahead, no frame cap, not
#                     cancelled; 4108-byte body pieces, bodies read), then that ledger's first
#                     max_len - 6 bytes as one whole record-marked frame (last-fragment bit set);
#                     real-pubnet-two-frames: the two smallest public-network ledgers whole, one
#                     frame each; real-v23-stream-cut: core's stream as written, cut at max_len,
#                     its first frame short (the truncation path over real bytes).
# Ledgers: the five public-network ones (LedgerCloseMeta v0), the three frames of core's v23
# stream (v2: ledgers 84, 85, 88) and, when zstd is given, the Galexie batch's one ledger (v1,
# 53312000, after the batch's 12-byte header).
# Usage: real_seeds.sh <realmeta dir> <xdrwalk seed dir> <framereader seed dir> <max_len> [<zstd>]
set -eu
real=$1 walk=$2 reader=$3 max=$4 zstd=${5:-}
if [ ! -r "$real/SHA256SUMS" ]; then
  echo "real_seeds: SKIP: $real is absent: no real-ledger seeds for fuzz_xdrwalk and fuzz_framereader"
  exit 0
fi
mkdir -p "$walk" "$reader"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
knobs='\010\157'

be32() { # the four big-endian bytes of $1
  printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) \
    $(($1 & 255)))"
}
slice() { # file offset length: those bytes of file
  tail -c +$(($2 + 1)) "$1" | head -c "$3"
}
min() { if [ "$1" -le "$2" ]; then echo "$1"; else echo "$2"; fi; }
size() { wc -c <"$1" | tr -d ' '; }

seed() { # name file offset length: a ledger's seeds for both targets
  slice "$2" "$3" "$(min "$4" "$max")" >"$walk/real-$1"
  n=$(min "$4" $((max - 6)))
  { printf "$knobs"; be32 $((0x80000000 | n)); slice "$2" "$3" "$n"; } >"$reader/real-$1"
}

count=0
for f in "$real"/pubnet-ledger-*.xdr; do
  [ -f "$f" ] || continue
  name=$(basename "$f" .xdr)
  seed "pubnet-${name#pubnet-ledger-}" "$f" 0 "$(size "$f")"
  count=$((count + 1))
done
small1=$real/pubnet-ledger-6154623.xdr small2=$real/pubnet-ledger-16154623.xdr
if [ -f "$small1" ] && [ -f "$small2" ]; then
  n1=$(size "$small1") n2=$(size "$small2")
  if [ $((2 + 8 + n1 + n2)) -le "$max" ]; then
    { printf "$knobs"; be32 $((0x80000000 | n1)); cat "$small1"; be32 $((0x80000000 | n2)); cat "$small2"; } \
      >"$reader/real-pubnet-two-frames"
  fi
fi

stream=$real/v23-loadtest-stream.xdr
if [ -f "$stream" ]; then
  total=$(size "$stream") off=0 k=0
  while [ $((off + 4)) -le "$total" ]; do
    set -- $(od -An -tu1 -j "$off" -N4 "$stream")
    len=$(((($1 << 24) | ($2 << 16) | ($3 << 8) | $4) & 0x7fffffff))
    k=$((k + 1))
    seed "v23-frame$k" "$stream" $((off + 4)) "$len"
    off=$((off + 4 + len))
  done
  { printf "$knobs"; head -c $((max - 2)) "$stream"; } >"$reader/real-v23-stream-cut"
  count=$((count + k))
fi

batch=$real/pubnet-batch-53312000.xdr.zst
if [ -f "$batch" ] && [ -n "$zstd" ] && [ -x "$zstd" ]; then
  "$zstd" -dcq "$batch" >"$tmp/batch"
  seed pubnet-batch-53312000 "$tmp/batch" 12 $(($(size "$tmp/batch") - 12))
  count=$((count + 1))
elif [ -f "$batch" ]; then
  echo "real_seeds: no zstd program: the Galexie batch's ledger is left out"
fi
echo "real_seeds: $count real ledgers, cut to $max bytes, seeded into $walk and $reader"
