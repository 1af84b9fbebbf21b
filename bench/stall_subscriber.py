#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# A WebSocket subscriber of /stream that never reads (bench/memory.sh). Usage: PORT SECONDS
import socket, base64, os, sys, time
port = int(sys.argv[1])
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(("127.0.0.1", port))
key = base64.b64encode(os.urandom(16)).decode()
s.sendall(f"GET /stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
t0 = time.time()
time.sleep(float(sys.argv[2]))
s.setblocking(False)
try:
    n = 0
    while True:
        d = s.recv(1 << 20)
        if not d: print("EOF after", n); break
        n += len(d)
except BlockingIOError:
    print("still open, read", n)
except ConnectionResetError:
    print("reset")
