#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Signing cost end to end: corestreamd and benchrunner --mode remote as two processes on
# 127.0.0.1, at the two named shapes, in three modes run alternately:
#   unsigned   corestreamd as today; the client checks XXH64 only
#   signed     corestreamd --signing-key (SHA-256 per chunk, one Ed25519 signature per ledger);
#              the client has no keys, so it does not ask for SIG (sig=1) and checks nothing more
#   verified   corestreamd --signing-key; benchrunner --trusted-keys (SHA-256 per chunk and one
#              Ed25519 verify per ledger before the ledger is handed over)
# Shapes (the flags of cell3-small.sh and cell1-acceptance.sh, remote as in cell7-cost.sh):
#   small   204800 B every 10 ms over 5 ms, uncompressed, N_SMALL ledgers (1000) measured
#   accept  15196160 B every 600 ms over 15 ms, uncompressed, N_ACCEPT ledgers (100) measured
# Each run is a fresh corestreamd (--synthetic-count n + lead) and a client that joins at the tip
# and ends by itself (no --verify: what an RPC pays). Per run: delivery p50/p99 and t_emit p50 from
# the client's CSV; server CPU per ledger from /proc/<corestreamd>/stat utime+stime just before the
# client starts and just after it ends, over the ledgers /healthz says were published meanwhile;
# client CPU per ledger from /usr/bin/time (start-up included). The table gives, per shape and mode,
# the median over ROUNDS runs and the [min..max] beside it. Modes rotate each round (U S V, S V U,
# V U S; with BASE_BUILD_DIR each mode's base run comes right after it) so drift in the machine's
# load falls on all of them.
# bench/sig_cost (built with the tests) gives the same costs per operation on one thread.
# Wall time: ROUNDS x 3 x (13 s + 65 s), about 12 minutes at the defaults.
# Environment: BUILD_DIR (default build), ROUNDS (3), N_SMALL (1000), N_ACCEPT (100),
# SHAPES ("small accept"), MODES ("unsigned signed verified": any of them, in that order),
# BASE_BUILD_DIR (unset: none): a second build, typically of the code before a change, whose
# corestreamd runs every mode too, as mode "<mode>-base", rotated with the others in each round
# (the client is BUILD_DIR's benchrunner for both).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=${ROUNDS:-3}
N_SMALL=${N_SMALL:-1000}
N_ACCEPT=${N_ACCEPT:-100}
SHAPES=${SHAPES:-small accept}
read -r -a MODES <<<"${MODES:-unsigned signed verified}"
BASE_CSD=""
if [[ -n ${BASE_BUILD_DIR:-} ]]; then
  BASE_CSD=$(cd "$BASE_BUILD_DIR" && pwd)/src/corestreamd/corestreamd
  [[ -x $BASE_CSD ]] || { echo "sign-cost: $BASE_CSD is missing" >&2; exit 1; }
  both=()
  for m in "${MODES[@]}"; do both+=("$m" "$m-base"); done
  MODES=("${both[@]}")
fi

bench_init sign-cost "signing cost, remote on 127.0.0.1: ${MODES[*]}, $ROUNDS rounds"
need_tools curl openssl
[[ -n $BASE_CSD ]] && note "base        $BASE_CSD ($(date -u -r "$BASE_CSD" +%FT%TZ)) for the -base modes"

KEY=$SCRATCH/core.key PUB=$SCRATCH/core.pub
openssl genpkey -algorithm ed25519 -out "$KEY" 2>/dev/null && openssl pkey -in "$KEY" -pubout -out "$PUB" 2>/dev/null ||
  die "openssl could not make an Ed25519 key pair"
note "keys        $(openssl version), Ed25519 made for the run; CPU $(grep -q sha_ni /proc/cpuinfo && echo has || echo lacks) SHA-NI"

# run_one SHAPE MODE ROUND: one server and one client; appends a line to $CELL_DIR/runs.txt:
# shape mode round ledgers d_p50_ns d_p99_ns temit_p50_ns srv_ms_per_ledger cli_ms_per_ledger
run_one() {
  local shape=$1 mode=$2 round=$3 n lead tail ims sflags=() cflags=() CORESTREAMD=$CORESTREAMD
  local variant=$mode
  if [[ $mode == *-base ]]; then
    mode=${mode%-base}
    CORESTREAMD=$BASE_CSD # server_start runs this one
  fi
  case $shape in
  small)
    n=$N_SMALL lead=200 tail=100 ims=10
    sflags=(--synthetic-size 204800 --synthetic-interval 10ms --emit-window 5ms) ;;
  accept)
    n=$N_ACCEPT lead=8 tail=2 ims=600
    sflags=(--synthetic-size 15196160 --synthetic-interval 600ms --emit-window 15ms) ;;
  esac
  sflags=(--source synthetic "${sflags[@]}" --chunk-size 262144 --compress=false)
  [[ $mode != unsigned ]] && sflags+=(--signing-key "$KEY")
  [[ $mode == verified ]] && cflags+=(--trusted-keys "$PUB")
  local label=$shape-$variant-$round count=$((n + lead)) end=$((n + lead - tail))
  local limit=$((count * ims / 1000 + 120))
  server_start "$label" "$limit" --retention 64 "${sflags[@]}" --synthetic-count "$count"
  local spid=$SERVER_PID addr=$SERVER_ADDR cpu0 cpu1 l0 l1
  cpu0=$(proc_cpu_s "$SERVER_CSD_PID")
  l0=$(json_num "$(healthz "$addr")" latest)
  note "  $label: server $addr emits $count ledgers, client ends at $end"
  run_benchrunner "$label.client" "$limit" --mode remote --url "ws://$addr" --end "$end" "${cflags[@]}" >/dev/null
  cpu1=$(proc_cpu_s "$SERVER_CSD_PID")
  l1=$(json_num "$(healthz "$addr")" latest)
  wait_rc "$spid"
  rm -rf -- "$SERVER_DATA"
  local got d50 d99 t50 srv cli
  got=$(sum_ledgers "$CELL_DIR/$label.client.out")
  read -r _ d50 _ d99 _ _ < <(csv_stats 7 0 "$CELL_DIR/$label.client.csv")
  read -r _ t50 _ _ _ _ < <(csv_stats 6 0 "$CELL_DIR/$label.client.csv")
  srv=$(awk -v a="${cpu0:-0}" -v b="${cpu1:-0}" -v x="${l0:-0}" -v y="${l1:-0}" 'BEGIN { if (y > x) printf "%.3f", (b - a) * 1000 / (y - x); else print "nan" }')
  cli=$(awk -v c="$(timev_cpu_s "$CELL_DIR/$label.client.time")" -v n="${got:-0}" 'BEGIN { if (n > 0) printf "%.3f", c * 1000 / n; else print "nan" }')
  if [[ ${got:-0} -lt $n || $(timev_exit "$CELL_DIR/$label.client.time") != 0 ]]; then
    note "    client: $(timev_exit "$CELL_DIR/$label.client.time") exit, ${got:-0} ledgers (want >= $n); see $label.client.err"
  fi
  note "    ledgers $got  delivery p50 $(ns2ms "$d50") p99 $(ns2ms "$d99") ms  t_emit p50 $(ns2ms "$t50") ms  server $srv ms/ledger ($((${l1:-0} - ${l0:-0})) ledgers)  client $cli ms/ledger"
  echo "$shape $variant $round ${got:-0} $d50 $d99 $t50 $srv $cli" >>"$CELL_DIR/runs.txt"
}

: >"$CELL_DIR/runs.txt"
for shape in $SHAPES; do
  note ""
  note "$shape:"
  for ((r = 1; r <= ROUNDS; r++)); do
    for ((k = 0; k < ${#MODES[@]}; k++)); do
      run_one "$shape" "${MODES[(k + r - 1) % ${#MODES[@]}]}" "$r"
    done
  done
done

# med COLUMN SHAPE MODE [SCALE]: "median [min..max]" of one column of runs.txt over the rounds.
med() {
  awk -v c="$1" -v s="$2" -v m="$3" -v k="${4:-1}" '$1 == s && $2 == m { print $c / k }' "$CELL_DIR/runs.txt" | sort -g |
    awk '{ v[NR] = $1 } END { if (!NR) { print "-"; exit }
      printf "%.3f [%.3f..%.3f]", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), v[1], v[NR] }'
}

echo | say
note "median over $ROUNDS runs [min..max]; delivery and t_emit in ms, CPU in ms per ledger"
fmt='%-7s %-14s %-24s %-24s %-24s %-24s %s\n'
printf "$fmt" shape mode "delivery p50" "delivery p99" "t_emit p50" "server CPU/ledger" "client CPU/ledger" | say
for shape in $SHAPES; do
  for mode in "${MODES[@]}"; do
    printf "$fmt" "$shape" "$mode" "$(med 5 "$shape" "$mode" 1e6)" "$(med 6 "$shape" "$mode" 1e6)" \
      "$(med 7 "$shape" "$mode" 1e6)" "$(med 8 "$shape" "$mode")" "$(med 9 "$shape" "$mode")" | say
    metric "${shape}_${mode//-/_}_delivery_p50_ms" "$(med 5 "$shape" "$mode" 1e6 | cut -d' ' -f1)"
    metric "${shape}_${mode//-/_}_delivery_p99_ms" "$(med 6 "$shape" "$mode" 1e6 | cut -d' ' -f1)"
    metric "${shape}_${mode//-/_}_t_emit_p50_ms" "$(med 7 "$shape" "$mode" 1e6 | cut -d' ' -f1)"
    metric "${shape}_${mode//-/_}_server_ms_per_ledger" "$(med 8 "$shape" "$mode" | cut -d' ' -f1)"
    metric "${shape}_${mode//-/_}_client_ms_per_ledger" "$(med 9 "$shape" "$mode" | cut -d' ' -f1)"
  done
done
cell_done
