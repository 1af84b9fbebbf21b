# SPDX-License-Identifier: Apache-2.0
# Shared by edge-path.sh and edge-rate.sh (sourced after lib.sh): a JetStream plane for a bench
# cell, in the cell's scratch dir, stopped with the cell. CLUSTER=1 makes it a 3-node cluster.

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# nats_start: one server (or CLUSTER=1: three, with routes between them) in scratch dirs, ports
# chosen by the server (client) or just before (routes); sets NATS_URLS and NATS_PIDS.
NATS_PIDS=()
nats_start() {
  local n=1 i j routes=() conf dir log port url
  [[ $CLUSTER == 1 ]] && n=3
  for ((i = 0; i < n; i++)); do routes+=("$(free_port)"); done
  NATS_URLS=""
  for ((i = 0; i < n; i++)); do
    dir=$SCRATCH/nats$i conf=$dir/nats.conf log=$CELL_DIR/nats$i.log
    mkdir -p "$dir/store"
    {
      echo "host: 127.0.0.1"
      echo "port: -1"
      echo "jetstream { store_dir: \"$dir/store\", max_file_store: 8G, max_memory_store: 64M }"
      if ((n > 1)); then
        echo "server_name: n$i"
        echo "cluster { name: bench, listen: \"127.0.0.1:${routes[i]}\", routes: ["
        for ((j = 0; j < n; j++)); do ((j == i)) || echo "  \"nats-route://127.0.0.1:${routes[j]}\""; done
        echo "] }"
      fi
    } >"$conf"
    record_cmd nats-server -c "$conf"
    bg_start NATS_PID "$log" timeout -s TERM -k 5 3600 nats-server -c "$conf"
    NATS_PIDS+=("$NATS_PID")
    port=""
    for ((j = 0; j < 200; j++)); do
      [[ -f $log ]] && port=$(sed -n 's/.*Listening for client connections on 127.0.0.1:\([0-9]*\).*/\1/p' "$log" | head -1)
      [[ -n $port ]] && grep -q "Server is ready" "$log" && break
      pid_alive "$NATS_PID" || { cat "$log" >&2; die "nats-server $i exited"; }
      sleep 0.05
    done
    [[ -n $port ]] || die "nats-server $i did not start within 10 s"
    url=nats://127.0.0.1:$port
    NATS_URLS=${NATS_URLS:+$NATS_URLS,}$url
  done
  if ((n > 1)); then
    for ((j = 0; j < 300; j++)); do
      local all=1
      for ((i = 0; i < n; i++)); do grep -q "metadata leader" "$CELL_DIR/nats$i.log" || all=0; done
      ((all)) && break
      sleep 0.1
    done
    ((all)) || die "the JetStream cluster elected no metadata leader within 30 s"
  fi
  note "nats        $NATS_URLS"
}
