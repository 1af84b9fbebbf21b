#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A replay-amplification attacker for bench/cell9-replay-storm.sh: N plain WebSocket
connections to ws://ADDR/stream?start=S&end=E, opened at once, each reading and discarding
whatever arrives until the server closes it or --seconds pass. No token, no verification: it
asks for the most expensive thing an unauthenticated stranger can ask for. Prints one line:
conns=<n> upgraded=<n> bytes=<total> closed=<n> seconds=<t>."""
import argparse, base64, os, selectors, socket, sys, time

ap = argparse.ArgumentParser()
ap.add_argument("addr")
ap.add_argument("-n", type=int, default=50)
ap.add_argument("--start", type=int, default=1)
ap.add_argument("--end", type=int, default=10000)
ap.add_argument("--seconds", type=float, default=10)
a = ap.parse_args()
host, port = a.addr.rsplit(":", 1)
sel = selectors.DefaultSelector()
key = base64.b64encode(os.urandom(16)).decode()
req = ("GET /stream?start=%d&end=%d HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
       "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n"
       % (a.start, a.end, a.addr, key)).encode()
buf = bytearray(1 << 20)
t0 = time.monotonic()
socks = []
for _ in range(a.n):
    s = socket.create_connection((host, int(port)))
    s.sendall(req)
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ, {"head": True, "acc": b""})
    socks.append(s)
upgraded = closed = 0
total = 0
open_n = a.n
while open_n and time.monotonic() - t0 < a.seconds:
    for k, _ in sel.select(timeout=0.2):
        s, st = k.fileobj, k.data
        try:
            n = s.recv_into(buf)
        except (BlockingIOError, InterruptedError):
            continue
        except OSError:
            n = 0
        if n == 0:
            sel.unregister(s)
            closed += 1
            open_n -= 1
            continue
        total += n
        if st["head"]:
            st["acc"] += bytes(buf[:n])
            if b"\r\n\r\n" in st["acc"]:
                st["head"] = False
                if st["acc"].startswith(b"HTTP/1.1 101"):
                    upgraded += 1
                else:
                    print("refused: " + st["acc"].split(b"\r\n")[0].decode(), file=sys.stderr)
                st["acc"] = b""
print("conns=%d upgraded=%d bytes=%d closed=%d seconds=%.3f"
      % (a.n, upgraded, total, closed, time.monotonic() - t0))
for s in socks:
    s.close()
