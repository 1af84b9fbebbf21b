#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A storm of TLS WebSocket connects for bench/cell8-tls-storm.sh: N clients connect to
wss://ADDR/stream at once (TLS handshake, then the upgrade), each until it has read the first
binary message of the live flow. Prints one line: connected=<n> streaming=<n> seconds=<t>
(t = from the first connect until the last client's first message). Bounded by --timeout.
A client closes its connection once it has its first message, so the storm measures connects
(handshake, upgrade, first delivery), not a fan-out to N extra readers that never read again;
--hold keeps them open until the end, as the first version of this script did."""
import argparse, base64, os, selectors, socket, ssl, sys, time

ap = argparse.ArgumentParser()
ap.add_argument("addr")
ap.add_argument("--ca", required=True)
ap.add_argument("-n", type=int, default=256)
ap.add_argument("--timeout", type=float, default=60)
ap.add_argument("--hold", action="store_true", help="keep each connection open until the end")
a = ap.parse_args()
host, port = a.addr.rsplit(":", 1)
ctx = ssl.create_default_context(cafile=a.ca)
sel = selectors.DefaultSelector()
t0 = time.monotonic()
state = {}
for i in range(a.n):
    s = socket.create_connection((host, int(port)))
    s.setblocking(False)
    t = ctx.wrap_socket(s, server_hostname=host, do_handshake_on_connect=False)
    state[t] = {"phase": "tls", "buf": b""}
    sel.register(t, selectors.EVENT_READ | selectors.EVENT_WRITE)
key = base64.b64encode(os.urandom(16)).decode()
req = ("GET /stream HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
       "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (a.addr, key)).encode()
connected = streaming = 0
last = t0
while streaming < a.n and time.monotonic() - t0 < a.timeout:
    for k, _ in sel.select(timeout=0.5):
        t, st = k.fileobj, state[k.fileobj]
        try:
            if st["phase"] == "tls":
                t.do_handshake()
                t.sendall(req)
                st["phase"] = "head"
                sel.modify(t, selectors.EVENT_READ)
                continue
            data = t.recv(65536)
            if not data:
                sel.unregister(t)
                continue
            st["buf"] += data
            if st["phase"] == "head" and b"\r\n\r\n" in st["buf"]:
                head, st["buf"] = st["buf"].split(b"\r\n\r\n", 1)
                if not head.startswith(b"HTTP/1.1 101"):
                    print("refused: " + head.split(b"\r\n")[0].decode(), file=sys.stderr)
                    sel.unregister(t)
                    continue
                st["phase"] = "ws"
                connected += 1
            if st["phase"] == "ws" and len(st["buf"]) >= 2 and st["buf"][0] == 0x82:
                st["phase"] = "done"
                streaming += 1
                last = time.monotonic()
                sel.unregister(t)
                if not a.hold:
                    t.close()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            pass
print("connected=%d streaming=%d seconds=%.3f" % (connected, streaming, last - t0))
for t in state:
    t.close()
