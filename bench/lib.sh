# SPDX-License-Identifier: Apache-2.0
# bench/lib.sh: helpers shared by the bench/cell*.sh scripts. Source it; do not run it.
#
# What it gives a cell script:
#   bench_init NAME TITLE [keep]   results dir bench/results/NAME (wiped unless "keep"), a scratch
#                                  dir under mktemp -d, traps that kill every background process
#                                  and remove the scratch dir, and the machine header of summary.txt
#   bg_start VAR LOG cmd...        start cmd in its own session (so its whole tree can be killed by
#                                  its id), output to LOG, pid into VAR; killed by the exit trap
#   server_start LABEL LIMIT flags...
#                                  corestreamd on ${LISTEN:-127.0.0.1:0} with a scratch --data-dir,
#                                  under timeout(1) and /usr/bin/time -v; waits for its
#                                  "corestreamd listening" log line and sets SERVER_ADDR/SERVER_PID
#   run_benchrunner NAME LIMIT args...
#                                  benchrunner (waited for) under timeout(1) and
#                                  /usr/bin/time -v, with --csv NAME.csv
#   csv_stats COL SKIP FILE...     "n p50 p90 p99 max min" of a CSV column (benchrunner's
#                                  nearest-rank rule), SKIP data rows skipped per file
#   proc_cpu_s / proc_kb           CPU seconds (utime+stime) and VmRSS/VmHWM from /proc
#   row / verdict_le / metric      the table printed beside the targets and metrics.txt
#
# Environment: BUILD_DIR (default build, relative to the current directory or else to the repo),
# RESULTS_DIR (default bench/results).

set -euo pipefail
export LC_ALL=C

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$BENCH_DIR/.." && pwd)
TIME_BIN=/usr/bin/time
CLK_TCK=$(getconf CLK_TCK)

BG_PIDS=()
CLEANUP_HOOKS=()
SCRATCH=""
CELL_DIR=""
SUMMARY=""
CELL_T0=$SECONDS

die() {
  echo "bench: $*" >&2
  exit 1
}

# say: print stdin to the terminal and append it to the cell's summary.txt.
say() {
  if [[ -n $SUMMARY ]]; then tee -a "$SUMMARY"; else cat; fi
}

note() { printf '%s\n' "$*" | say; }

bench_resolve_build_dir() {
  local d=${BUILD_DIR:-build}
  if [[ $d != /* ]]; then
    if [[ -d $PWD/$d ]]; then d=$PWD/$d; else d=$REPO_DIR/$d; fi
  fi
  [[ -d $d ]] || die "build dir '$d' not found: run 'make build' (or cmake -S . -B build && cmake --build build) first, or set BUILD_DIR"
  BUILD_DIR=$(cd "$d" && pwd)
  CORESTREAMD=$BUILD_DIR/src/corestreamd/corestreamd
  BENCHRUNNER=$BUILD_DIR/src/benchrunner/benchrunner
  [[ -f $CORESTREAMD && -x $CORESTREAMD ]] || die "$CORESTREAMD is missing: build first (BUILD_DIR=$BUILD_DIR)"
  [[ -f $BENCHRUNNER && -x $BENCHRUNNER ]] || die "$BENCHRUNNER is missing: build first (BUILD_DIR=$BUILD_DIR)"
}

need_tools() {
  local t miss=()
  for t in "$@"; do command -v "$t" >/dev/null 2>&1 || miss+=("$t"); done
  ((${#miss[@]} == 0)) || die "missing ${miss[*]}: run bench/setup.sh (as root it installs them)"
}

# ---------------------------------------------------------------------------------------------
# Processes and cleanup

pid_alive() {
  local st
  [[ -r /proc/$1/stat ]] || return 1
  st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [[ -n $st && $st != Z && $st != X ]]
}

# bg_start VAR LOG cmd...: cmd runs in a new session (setsid), so its process group id is its
# pid and "kill -- -PID" reaches timeout, time and the program under them.
bg_start() {
  local __var=$1 log=$2
  shift 2
  setsid "$@" >"$log" 2>&1 </dev/null &
  local pid=$!
  BG_PIDS+=("$pid")
  printf -v "$__var" '%s' "$pid"
}

# bg_stop PID [SIGNAL]: signal the process group, wait at most 15 s, then SIGKILL it.
bg_stop() {
  local pid=$1 sig=${2:-TERM} i
  kill -s "$sig" -- "-$pid" 2>/dev/null || kill -s "$sig" "$pid" 2>/dev/null || true
  for ((i = 0; i < 150; i++)); do
    pid_alive "$pid" || break
    sleep 0.1
  done
  if pid_alive "$pid"; then kill -KILL -- "-$pid" 2>/dev/null || true; fi
  wait "$pid" 2>/dev/null || true
}

# bg_interrupt PID NAME: SIGINT to the program NAME alone in PID's session (not to timeout or
# time around it), so it ends the way Ctrl-C ends it; bounded wait, then bg_stop.
bg_interrupt() {
  local pid=$1 name=$2 target i
  target=$(session_pid "$pid" "$name") || target=""
  if [[ -n $target ]]; then
    kill -INT "$target" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do
      pid_alive "$pid" || break
      sleep 0.1
    done
  fi
  bg_stop "$pid"
}

# wait_rc PID: the exit status of a background job into RC (every job runs under timeout(1), so
# this is bounded). Never call it inside $(...): a subshell cannot wait for the script's children.
wait_rc() {
  RC=0
  wait "$1" || RC=$?
}

# session_pid SID NAME: the pid of the process called NAME in session SID (the program under
# setsid/ip netns exec/timeout/time).
session_pid() {
  local sid=$1 name=$2 f line
  for f in /proc/[0-9]*/stat; do
    line=$(cat "$f" 2>/dev/null) || continue
    [[ $line == *"($name)"* ]] || continue
    # fields after "(comm) ": state ppid pgrp session ...
    set -- ${line##*) }
    if [[ ${4:-} == "$sid" ]]; then
      f=${f#/proc/}
      echo "${f%/stat}"
      return 0
    fi
  done
  return 1
}

bench_cleanup() {
  local rc=$? pid i any hook
  trap - EXIT INT TERM
  for pid in "${BG_PIDS[@]}"; do
    kill -TERM -- "-$pid" 2>/dev/null || true
  done
  for ((i = 0; i < 100; i++)); do
    any=0
    for pid in "${BG_PIDS[@]}"; do pid_alive "$pid" && any=1; done
    ((any)) || break
    sleep 0.1
  done
  for pid in "${BG_PIDS[@]}"; do
    kill -KILL -- "-$pid" 2>/dev/null || true
  done
  for ((i = ${#CLEANUP_HOOKS[@]} - 1; i >= 0; i--)); do
    eval "${CLEANUP_HOOKS[i]}" || true
  done
  if [[ -n $SCRATCH && -d $SCRATCH ]]; then rm -rf -- "$SCRATCH"; fi
  exit "$rc"
}

# ---------------------------------------------------------------------------------------------
# Cell set-up

# bench_init NAME TITLE [keep]
bench_init() {
  local name=$1 title=$2 keep=${3:-}
  bench_resolve_build_dir
  need_tools "$TIME_BIN" timeout setsid awk sort
  local root=${RESULTS_DIR:-$BENCH_DIR/results}
  mkdir -p "$root"
  RESULTS_ROOT=$(cd "$root" && pwd)
  CELL_DIR=$RESULTS_ROOT/$name
  if [[ -z $keep && -d $CELL_DIR ]]; then
    rm -rf -- "${CELL_DIR:?}"
  fi
  mkdir -p "$CELL_DIR"
  SUMMARY=$CELL_DIR/summary.txt
  : >"$SUMMARY"
  : >"$CELL_DIR/commands.txt"
  [[ -n $keep ]] || : >"$CELL_DIR/metrics.txt"
  SCRATCH=$(mktemp -d -t corestream-bench.XXXXXX)
  trap bench_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  CELL_T0=$SECONDS
  {
    echo "=== $name: $title ==="
    echo "date        $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host        $(uname -n), kernel $(uname -r), $(nproc) CPUs ($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)), $(awk '/^MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo) RAM"
    echo "repo        $(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$REPO_DIR" status --porcelain 2>/dev/null | grep -q . && echo ' (with uncommitted changes)')"
    echo "binaries    $CORESTREAMD ($(date -u -r "$CORESTREAMD" +%FT%TZ)), $BENCHRUNNER ($(date -u -r "$BENCHRUNNER" +%FT%TZ))"
    echo "load        $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15-min load average before the cell)"
    echo "results     $CELL_DIR"
    echo
  } | say
}

# record_cmd cmd...: the exact command line, shell-quoted, into commands.txt.
record_cmd() {
  local q
  q=$(printf '%q ' "$@")
  printf '%s\n' "${q% }" >>"${CMD_FILE:-$CELL_DIR/commands.txt}"
}

cell_done() {
  local wall=$((SECONDS - CELL_T0))
  metric wall_seconds "$wall"
  {
    echo
    echo "wall time   ${wall} s (load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
    if [[ -s $CELL_DIR/commands.txt ]]; then
      echo "commands    $CELL_DIR/commands.txt"
      sed 's/^/  $ /' "$CELL_DIR/commands.txt"
    fi
  } | say
}

# ---------------------------------------------------------------------------------------------
# Servers and clients

# The prefix arrays put a program into a network namespace (cell 6); empty on the host.
SRV_PREFIX=()
CLI_PREFIX=()

# HEALTHZ_CURL: extra curl arguments and HEALTHZ_SCHEME (default http) for a TLS server, e.g.
# HEALTHZ_SCHEME=https HEALTHZ_CURL=(--cacert ca.pem).
HEALTHZ_SCHEME=${HEALTHZ_SCHEME:-http}
HEALTHZ_CURL=()
healthz() {
  "${SRV_PREFIX[@]}" curl -s --max-time 2 "${HEALTHZ_CURL[@]}" "$HEALTHZ_SCHEME://$1/healthz" 2>/dev/null || true
}

# tls_material DIR: a CA and a server certificate for 127.0.0.1 (the tests' generator), made with
# the openssl CLI; sets TLS_CA, TLS_CERT, TLS_KEY.
tls_material() {
  mkdir -p "$1"
  sh "$(dirname "${BASH_SOURCE[0]}")/../tests/support/makecerts.sh" "$1" >/dev/null 2>&1 ||
    die "tls_material: makecerts.sh failed in $1"
  TLS_CA=$1/ca.pem TLS_CERT=$1/server.pem TLS_KEY=$1/server.key
}

# json_num JSON FIELD: a numeric field of the flat /healthz object.
json_num() {
  printf '%s' "$1" | sed -n "s/.*\"$2\":\\(-\\{0,1\\}[0-9][0-9]*\\).*/\\1/p"
}

# server_start LABEL LIMIT_S corestreamd-flags...
# Starts "timeout LIMIT time -v corestreamd --listen $LISTEN --data-dir <scratch> flags..." in
# its own session, waits up to 15 s for the "corestreamd listening" line and sets SERVER_ADDR,
# SERVER_PID (the session) and SERVER_CSD_PID (corestreamd itself, for /proc).
server_start() {
  local label=$1 limit=$2
  shift 2
  local data=${SERVER_DATA_DIR:-$SCRATCH/$label-data} log=$CELL_DIR/$label.server.log i addr=""
  mkdir -p "$data"
  local cmd=("${SRV_PREFIX[@]}" timeout -s TERM -k 15 "$limit" "$TIME_BIN" -v -o "$CELL_DIR/$label.server.time"
    "$CORESTREAMD" --listen "${LISTEN:-127.0.0.1:0}" --data-dir "$data" "$@")
  record_cmd "${cmd[@]}"
  bg_start SERVER_PID "$log" "${cmd[@]}"
  for ((i = 0; i < 300; i++)); do
    # The log may not exist yet: the redirection happens in the background child.
    [[ -f $log ]] && addr=$(sed -n 's/.*msg="corestreamd listening" pid=[0-9]* addr=\([^ ]*\).*/\1/p' "$log" | head -1)
    [[ -n $addr ]] && break
    if ! pid_alive "$SERVER_PID"; then
      cat "$log" >&2
      die "corestreamd ($label) exited before listening"
    fi
    sleep 0.05
  done
  [[ -n $addr ]] || die "corestreamd ($label) did not log 'corestreamd listening' within 15 s"
  SERVER_ADDR=$addr
  SERVER_DATA=$data
  SERVER_CSD_PID=$(session_pid "$SERVER_PID" corestreamd) || SERVER_CSD_PID=""
}

# run_benchrunner NAME LIMIT_S args...: benchrunner under timeout (SIGINT first, so it still
# prints its summary and CSV) and /usr/bin/time -v; writes NAME.out (stdout), NAME.err,
# NAME.time and NAME.csv in the cell dir. Sets BR_RC.
run_benchrunner() {
  local name=$1 limit=$2
  shift 2
  local cmd=("${CLI_PREFIX[@]}" timeout -s INT -k 20 "$limit" "$TIME_BIN" -v -o "$CELL_DIR/$name.time"
    "$BENCHRUNNER" "$@" --csv "$CELL_DIR/$name.csv")
  record_cmd "${cmd[@]}"
  # In the background plus wait, so that a signal to the script runs its trap at once (bash
  # defers traps until a foreground child has finished).
  setsid "${cmd[@]}" >"$CELL_DIR/$name.out" 2>"$CELL_DIR/$name.err" </dev/null &
  local pid=$!
  BG_PIDS+=("$pid")
  wait_rc "$pid"
  BR_RC=$RC
  sed 's/^/    /' "$CELL_DIR/$name.out"
  if [[ -s $CELL_DIR/$name.err ]]; then sed 's/^/    stderr: /' "$CELL_DIR/$name.err"; fi
  if ((BR_RC == 124)); then echo "    (timed out after ${limit} s)"; fi
  if ((BR_RC != 0)); then echo "    benchrunner exit status $BR_RC"; fi
}

# bg_benchrunner VAR NAME LIMIT_S args...: the same in the background; stdout and stderr both go
# to NAME.out.
bg_benchrunner() {
  local __v=$1 name=$2 limit=$3
  shift 3
  local cmd=("${CLI_PREFIX[@]}" timeout -s INT -k 20 "$limit" "$TIME_BIN" -v -o "$CELL_DIR/$name.time"
    "$BENCHRUNNER" "$@" --csv "$CELL_DIR/$name.csv")
  record_cmd "${cmd[@]}"
  bg_start "$__v" "$CELL_DIR/$name.out" "${cmd[@]}"
}

# ---------------------------------------------------------------------------------------------
# Reading results

# csv_stats COL SKIP FILE...: "n p50 p90 p99 max min" of the non-empty values of column COL
# (1-based), skipping the header and SKIP data rows of each file. Percentiles use benchrunner's
# nearest-rank rule (k = floor((p*n+99)/100)). All zeros when there is no value.
csv_stats() {
  local col=$1 skip=$2 f
  shift 2
  for f in "$@"; do
    [[ -s $f ]] && tail -n +$((2 + skip)) "$f"
  done | awk -F, -v c="$col" '$c != "" {print $c}' | sort -n |
    awk '{ v[NR] = $1 }
      END {
        if (NR == 0) { print "0 0 0 0 0 0"; exit }
        n = NR; printf "%d", n
        split("50 90 99", p, " ")
        for (i = 1; i <= 3; i++) { k = int((p[i] * n + 99) / 100); if (k < 1) k = 1; if (k > n) k = n; printf " %s", v[k] }
        printf " %s %s\n", v[n], v[1]
      }'
}

# csv_count_empty COL FILE...: data rows whose column COL is empty (stampless ring replays).
csv_count_empty() {
  local col=$1
  shift
  awk -F, -v c="$col" 'FNR > 1 && $c == "" { n++ } END { print n + 0 }' "$@" /dev/null
}

# csv_sum COL FILE...
csv_sum() {
  local col=$1
  shift
  awk -F, -v c="$col" 'FNR > 1 && $c != "" { s += $c } END { printf "%.0f\n", s }' "$@" /dev/null
}

csv_rows() {
  awk 'FNR > 1 { n++ } END { print n + 0 }' "$@" /dev/null
}

# From benchrunner's stdout summary.
sum_ledgers() { sed -n 's/^ledgers  *\([0-9]*\) .*/\1/p' "$1" | head -1; }
sum_range() { sed -n 's/^ledgers  *[0-9]* (\(.*\))/\1/p' "$1" | head -1; }
sum_fallbacks() { sed -n 's/^fallbacks  *\([0-9]*\) .*/\1/p' "$1" | head -1; }
sum_raw_fallbacks() {
  local v
  v=$(sed -n 's/^raw fallbacks  *\([0-9]*\) .*/\1/p' "$1" | head -1)
  echo "${v:-0}"
}
sum_excluded() {
  local v
  v=$(sed -n 's/^ *\([0-9]*\) ledger(s) excluded.*/\1/p' "$1" | head -1)
  echo "${v:-0}"
}
sum_mibps() { sed -n 's/^throughput .*, \([0-9.]*\) MiB\/s/\1/p' "$1" | head -1; }

# timev FILE KEY: a field of /usr/bin/time -v output, e.g. "Maximum resident set size (kbytes)".
timev() {
  [[ -s $1 ]] || return 0
  awk -v k="$2" '{ line = $0; sub(/^[ \t]+/, "", line)
                   if (index(line, k ": ") == 1) { print substr(line, length(k) + 3); exit } }' "$1"
}
timev_cpu_s() {
  local u s
  u=$(timev "$1" "User time (seconds)")
  s=$(timev "$1" "System time (seconds)")
  awk -v u="${u:-0}" -v s="${s:-0}" 'BEGIN { printf "%.2f\n", u + s }'
}
timev_rss_kb() { timev "$1" "Maximum resident set size (kbytes)"; }
timev_wall_s() { # h:mm:ss or m:ss.cc -> seconds
  timev "$1" "Elapsed (wall clock) time (h:mm:ss or m:ss)" |
    awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.2f\n", s }'
}
timev_exit() {
  local v
  v=$(timev "$1" "Exit status")
  if grep -q 'Command terminated by signal' "$1" 2>/dev/null; then
    v="$(sed -n 's/.*Command terminated by signal \([0-9]*\).*/signal \1/p' "$1" | head -1)"
  fi
  echo "${v:-?}"
}

# wait_latest ADDR MIN MAX_ITER [SLEEP_S]: poll /healthz every SLEEP_S (0.02) s until its latest is
# MIN or more, at most MAX_ITER times; prints the latest it saw.
wait_latest() {
  local addr=$1 want=$2 max=$3 pause=${4:-0.02} i lat=0
  for ((i = 0; i < max; i++)); do
    lat=$(json_num "$(healthz "$addr")" latest)
    lat=${lat:-0}
    ((lat >= want)) && break
    sleep "$pause"
  done
  echo "$lat"
}

# /proc accounting for a live pid.
proc_cpu_s() {
  sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null |
    awk -v hz="$CLK_TCK" '{ printf "%.2f\n", ($12 + $13) / hz }'
}
proc_kb() { # PID VmRSS|VmHWM
  awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null
}

# ---------------------------------------------------------------------------------------------
# Formatting and verdicts

ns2ms() { awk -v v="${1:-0}" 'BEGIN { printf "%.3f", v / 1e6 }'; }
kb2mb() { awk -v v="${1:-0}" 'BEGIN { printf "%.1f", v * 1024 / 1e6 }'; }
div() { awk -v a="${1:-0}" -v b="${2:-0}" -v f="${3:-%.3f}" 'BEGIN { if (b == 0) print "n/a"; else printf f "\n", a / b }'; }

# verdict_le VALUE LIMIT / verdict_ge / verdict_eq / verdict_between VALUE LO HI: PASS or MISS.
verdict_le() { awk -v a="$1" -v b="$2" 'BEGIN { print (a != "" && a + 0 <= b + 0) ? "PASS" : "MISS" }'; }
verdict_ge() { awk -v a="$1" -v b="$2" 'BEGIN { print (a != "" && a + 0 >= b + 0) ? "PASS" : "MISS" }'; }
verdict_eq() { [[ "$1" == "$2" ]] && echo PASS || echo MISS; }
verdict_between() { awk -v a="$1" -v l="$2" -v h="$3" 'BEGIN { print (a != "" && a + 0 >= l + 0 && a + 0 <= h + 0) ? "PASS" : "MISS" }'; }

ROW_FMT='%-50s %-26s %-18s %s\n'
table_header() {
  {
    printf "$ROW_FMT" "metric" "measured" "target" "verdict"
    printf "$ROW_FMT" "------" "--------" "------" "-------"
  } | say
}
# row METRIC MEASURED [TARGET] [VERDICT]
row() { printf "$ROW_FMT" "$1" "$2" "${3:--}" "${4:-}" | say; }

# metric KEY VALUE: key=value into metrics.txt (read back by cell 7 and run-all.sh).
metric() { printf '%s=%s\n' "$1" "$2" >>"$CELL_DIR/metrics.txt"; }

# metric_of FILE KEY: read a metric another cell wrote.
metric_of() { [[ -f $1 ]] && sed -n "s/^$2=//p" "$1" | tail -1; }

# delivery_rows LABEL CSV...: the standard delivery rows (p50/p90/p99/max of delivery_ns over
# every stamped row) against P99_TARGET_MS / MAX_TARGET_MS (empty = no target); sets D_N, D_P50,
# D_P90, D_P99, D_MAX (ns) and prints the warm-up-excluded percentiles for information.
delivery_rows() {
  local label=${1:+$1 }
  shift
  read -r D_N D_P50 D_P90 D_P99 D_MAX _ < <(csv_stats 7 0 "$@")
  local xn xp50 xp90 xp99 xmax
  read -r xn xp50 xp90 xp99 xmax _ < <(csv_stats 7 1 "$@")
  row "${label}delivery p50" "$(ns2ms "$D_P50") ms (n=$D_N)"
  row "${label}delivery p90" "$(ns2ms "$D_P90") ms"
  if [[ -n ${P99_TARGET_MS:-} ]]; then
    row "${label}delivery p99" "$(ns2ms "$D_P99") ms" "<= $P99_TARGET_MS ms" "$(verdict_le "$(ns2ms "$D_P99")" "$P99_TARGET_MS")"
  else
    row "${label}delivery p99" "$(ns2ms "$D_P99") ms"
  fi
  if [[ -n ${MAX_TARGET_MS:-} ]]; then
    row "${label}delivery max" "$(ns2ms "$D_MAX") ms" "<= $MAX_TARGET_MS ms" "$(verdict_le "$(ns2ms "$D_MAX")" "$MAX_TARGET_MS")"
  else
    row "${label}delivery max" "$(ns2ms "$D_MAX") ms"
  fi
  row "${label}  (first ledger excluded) p50/p99/max" "$(ns2ms "$xp50")/$(ns2ms "$xp99")/$(ns2ms "$xmax") ms" "(information)"
}

# loopback_report NAME: the table of a loopback cell (cells 1-3) from NAME.out/.csv/.time.
# Targets come from: N_MIN, P99_TARGET_MS, MAX_TARGET_MS, RSS_TARGET_MB (empty: no target),
# WINDOW_MS with TEMIT_TOL (t_emit p50 and p99 within +-TOL of the window; empty: information
# only) and RAWFB_TARGET (raw fallbacks must equal it; empty: information only).
loopback_report() {
  local name=$1 out=$CELL_DIR/$1.out csv=$CELL_DIR/$1.csv tf=$CELL_DIR/$1.time
  local n exit_s fb rawfb excl rss_kb cpu_s
  n=$(sum_ledgers "$out")
  n=${n:-0}
  exit_s=$(timev_exit "$tf")
  fb=$(sum_fallbacks "$out")
  rawfb=$(sum_raw_fallbacks "$out")
  excl=$(csv_count_empty 7 "$csv")
  rss_kb=$(timev_rss_kb "$tf")
  cpu_s=$(timev_cpu_s "$tf")
  echo | say
  table_header
  row "ledgers delivered (n)" "$n ($(sum_range "$out"))" ">= $N_MIN" "$(verdict_ge "$n" "$N_MIN")"
  row "benchrunner exit status (0: all verified)" "$exit_s" "0" "$(verdict_eq "$exit_s" 0)"
  delivery_rows "" "$csv"
  local tn t50 t90 t99 tmax
  read -r tn t50 t90 t99 tmax _ < <(csv_stats 6 0 "$csv")
  if [[ -n ${TEMIT_TOL:-} ]]; then
    local lo hi
    lo=$(awk -v w="$WINDOW_MS" -v t="$TEMIT_TOL" 'BEGIN { printf "%.3f", w * (1 - t) }')
    hi=$(awk -v w="$WINDOW_MS" -v t="$TEMIT_TOL" 'BEGIN { printf "%.3f", w * (1 + t) }')
    row "t_emit p50" "$(ns2ms "$t50") ms" "$lo..$hi ms" "$(verdict_between "$(ns2ms "$t50")" "$lo" "$hi")"
    row "t_emit p99" "$(ns2ms "$t99") ms" "$lo..$hi ms" "$(verdict_between "$(ns2ms "$t99")" "$lo" "$hi")"
    row "t_emit max" "$(ns2ms "$tmax") ms" "(information)"
  else
    row "t_emit p50/p99/max (window ${WINDOW_MS} ms)" "$(ns2ms "$t50")/$(ns2ms "$t99")/$(ns2ms "$tmax") ms" "(information)"
  fi
  if [[ -n ${RAWFB_TARGET:-} ]]; then
    row "raw fallbacks (chunks shipped uncompressed)" "$rawfb" "$RAWFB_TARGET" "$(verdict_eq "$rawfb" "$RAWFB_TARGET")"
  else
    row "raw fallbacks (chunks shipped uncompressed)" "$rawfb" "(information)"
  fi
  row "discarded partials (live flow abandoned)" "${fb:-?}" "0" "$(verdict_eq "${fb:-?}" 0)"
  row "stampless rows (excluded from delivery)" "$excl" "0" "$(verdict_eq "$excl" 0)"
  if [[ -n ${RSS_TARGET_MB:-} ]]; then
    row "peak RSS, server+client in ONE process" "$(kb2mb "$rss_kb") MB" "<= $RSS_TARGET_MB MB" "$(verdict_le "$(kb2mb "$rss_kb")" "$RSS_TARGET_MB")"
    note "  (loopback runs corestreamd's server and the client in one process; cell7-cost.sh measures each alone)"
  else
    row "peak RSS, server+client in ONE process" "$(kb2mb "$rss_kb") MB" "(information)"
  fi
  row "CPU s/ledger, server+client in ONE process" "$(div "$cpu_s" "$n" %.4f) s ($cpu_s s total)" "(information)"
  metric n "$n"
  metric exit "$exit_s"
  metric delivery_n "$D_N"
  metric delivery_p50_ns "$D_P50"
  metric delivery_p90_ns "$D_P90"
  metric delivery_p99_ns "$D_P99"
  metric delivery_max_ns "$D_MAX"
  metric temit_p50_ns "$t50"
  metric temit_p99_ns "$t99"
  metric temit_max_ns "$tmax"
  metric raw_fallbacks "$rawfb"
  metric discarded_partials "${fb:-}"
  metric stampless "$excl"
  metric rss_kb "$rss_kb"
  metric cpu_s "$cpu_s"
}

# remote_pair LABEL N LEAD INTERVAL_MS corestreamd-flags... -- benchrunner-flags...
# corestreamd (under /usr/bin/time -v, --retention 64) emits N+LEAD ledgers and ends by itself;
# benchrunner --mode remote (under /usr/bin/time -v) joins at the tip as soon as the server logs
# its listening line and stops by itself at ledger N+LEAD-PAIR_TAIL, so it measures at least N live
# ledgers when it joins within LEAD-PAIR_TAIL intervals. /healthz is read right after the client ends
# (the server still has PAIR_TAIL intervals to go; default 2). Uses SRV_PREFIX/CLI_PREFIX, LISTEN and
# CONNECT_HOST (default: the host the server logged). Sets PAIR_COUNT, PAIR_SERVER_RC and
# PAIR_HEALTHZ.
remote_pair() {
  local label=$1 n=$2 lead=$3 ims=$4
  shift 4
  local sflags=() cflags=()
  while (($#)) && [[ $1 != -- ]]; do
    sflags+=("$1")
    shift
  done
  (($#)) && shift
  cflags=("$@")
  local tail=${PAIR_TAIL:-2}
  local count=$((n + lead)) end=$((n + lead - tail))
  local limit=$((count * ims / 1000 + 120))
  server_start "$label" "$limit" --retention 64 "${sflags[@]}" --synthetic-count "$count"
  local spid=$SERVER_PID addr=$SERVER_ADDR
  local host=${CONNECT_HOST:-${addr%:*}} port=${addr##*:}
  note "  $label: server on $addr emits $count ledgers; client joins at the tip, ends at $end (about $((count * ims / 1000 + 3)) s)"
  run_benchrunner "$label.client" "$limit" --mode remote --url "ws://$host:$port" --end "$end" "${cflags[@]}"
  PAIR_HEALTHZ=$(healthz "$addr")
  wait_rc "$spid"
  PAIR_SERVER_RC=$RC
  PAIR_COUNT=$count
  printf '%s\n' "$PAIR_HEALTHZ" >"$CELL_DIR/$label.healthz.json"
}
