#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""corestreamd's request heads checked against an independent HTTP/1.1 parser.

h11 (Debian's python3-h11) implements RFC 9112 on its own. This test generates request heads,
thousands of them (hand-written cases, the fuzz corpus, and single-byte mutations of valid heads:
a byte inserted, dropped or replaced at every position), sends each to a real corestreamd on its
own connection, and reads the answer. For every head:

- h11 accepts it and corestreamd reads it as a request (any answer but one of the head
  refusals of docs/PROTOCOL.md section 1), or
- both refuse it, corestreamd with a status and text from that table, or
- corestreamd refuses it and h11 does not, for one of the stricter readings PROTOCOL.md
  documents, and the head shows the feature that reading names (a bare CR or LF, obs-fold, a
  control character in a value, a malformed or control escape in the target, an empty line before
  the request line, a method over 16 bytes, an invalid Host value, a version that is not 1.0 or
  1.1, a limit).

corestreamd accepting what h11 refuses is a failure, as is any other disagreement. Heads h11
finds incomplete are not sent (the server would only wait for the rest).

Run:  /usr/bin/python3 tests/http_conformance.py <path to corestreamd> <fuzz corpus dir>
Exit status 0 on success; non-zero with the disagreements on failure.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading

import h11

# The head refusals of PROTOCOL.md section 1: (status, text).
TABLE = {
    (400, b"malformed HTTP request"), (400, b"invalid request target"), (505, b"unsupported HTTP version"),
    (400, b"malformed HTTP version"), (400, b"lines must end with CRLF"),
    (400, b"obsolete line folding is not accepted"), (400, b"invalid header field name"),
    (400, b"invalid header field value"), (400, b"missing Host header"), (400, b"more than one Host header"),
    (400, b"invalid Host header"), (414, b"request URI too long"), (431, b"request header fields too large"),
    (400, b"too many query parameters"),
}
# A body declared: refused by the routes, after the head was read (PROTOCOL.md section 1).
BODY = {(413, b"request bodies are not accepted"), (400, b"Transfer-Encoding is not accepted"),
        (400, b"invalid Content-Length")}

BASES = [
    b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    b"HEAD /metrics HTTP/1.1\r\nHost: localhost:8462\r\nAccept: */*\r\nX-A: a b\r\n\r\n",
    b"GET /stream?start=1&end=2 HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    b"GET /readyz HTTP/1.0\r\n\r\n",
    b"GET /nope%41?a=%20&b HTTP/1.1\r\nHost: [::1]:1\r\nConnection: close\r\n\r\n",
]
HAND = [
    b"GET / HTTP/1.1\r\nContent-Length : 29\r\nHost: a\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: a\r\n Content-Length: 36\r\n\r\n",
    b"GET /stream%00.css HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET /%73tream HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET /healthz%00.x HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET / HTTP/9.9\r\nHost: a\r\n\r\n",
    b"GET / FOO\r\nHost: a\r\n\r\n",
    b"GET / HTTP/1.1\rHost: a\r\n\r\n",
    b"GET / HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"GET / HTTP/1.1\nHost: a\n\n",
    b"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: a\r\nX: \x01\r\n\r\n",
    b"GET /a%zz HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET http://a/healthz HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET * HTTP/1.1\r\nHost: a\r\n\r\n",
    b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
]
INTERESTING = b"\x00\x01\t\n\r :%?&\x7f\x80aZ/.H1"
MUTATIONS_PER_BASE = 1200


class Fail(Exception):
    pass


def h11_verdict(head):
    """'accept', 'refuse' or 'incomplete'."""
    conn = h11.Connection(our_role=h11.SERVER)
    try:
        conn.receive_data(head)
        event = conn.next_event()
    except h11.RemoteProtocolError:
        return "refuse"
    if event is h11.NEED_DATA:
        return "incomplete"
    return "accept" if isinstance(event, h11.Request) else "refuse"


def ask(port, head):
    """corestreamd's (status, first line of the body) for head, on a connection of its own."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head)
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        data = b""
        while b"\r\n\r\n" not in data or len(data) < data.index(b"\r\n\r\n") + 4 + length_of(data):
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
    m = re.match(rb"HTTP/1\.1 (\d{3}) ", data)
    if not m:
        raise Fail("no answer to %r: %r" % (head, data[:200]))
    body = data.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in data else b""
    return int(m.group(1)), body.split(b"\n", 1)[0], data


def length_of(data):
    m = re.search(rb"\r\ncontent-length: (\d+)\r\n", data)
    return int(m.group(1)) if m else 0


def request_line(head):
    i = head.find(b"\r\n")
    return head[: i if i >= 0 else len(head)]


def stricter(head, why):
    """Whether head shows the feature of a stricter reading PROTOCOL.md documents as why."""
    line = request_line(head)
    parts = line.split(b" ")
    target = parts[1] if len(parts) > 1 else b""
    fields = head.split(b"\r\n")[1:]
    if why == b"lines must end with CRLF":
        return re.search(rb"\r(?!\n)|(?<!\r)\n", head) is not None
    if why == b"obsolete line folding is not accepted":
        return any(f[:1] in (b" ", b"\t") for f in fields)
    if why == b"invalid header field value":
        return any(re.search(rb"[\x00-\x08\x0a-\x1f\x7f]", f) for f in fields)
    if why == b"invalid request target":
        return re.search(rb"%(?![0-9A-Fa-f]{2})|%[01][0-9A-Fa-f]|%7[Ff]", target) is not None
    if why == b"malformed HTTP request":
        return head.startswith((b"\r", b"\n")) or len(parts[0]) > 16
    if why == b"invalid Host header":
        host = re.compile(rb"^(?:[A-Za-z0-9\-._~%!$&'()*+,;=]*|\[[0-9A-Fa-f:.]+\])(?::[0-9]*)?$")
        return any(f.lower().startswith(b"host:") and not host.match(f[5:].strip(b" \t")) for f in fields)
    if why in (b"unsupported HTTP version", b"malformed HTTP version"):
        return len(parts) > 2 and parts[2] not in (b"HTTP/1.0", b"HTTP/1.1")
    return why in (b"request URI too long", b"request header fields too large", b"too many query parameters")


def mutations(base):
    out = []
    for i in range(len(base) + 1):
        for b in INTERESTING:
            out.append(base[:i] + bytes([b]) + base[i:])
    for i in range(len(base)):
        out.append(base[:i] + base[i + 1:])
        for b in INTERESTING:
            out.append(base[:i] + bytes([b]) + base[i + 1:])
    step = max(1, len(out) // MUTATIONS_PER_BASE)
    return out[::step]


def heads(corpus):
    hs = list(BASES) + list(HAND)
    if os.path.isdir(corpus):
        for name in sorted(os.listdir(corpus)):
            with open(os.path.join(corpus, name), "rb") as f:
                hs.append(f.read()[1:])  # byte 0 picks the fuzz target's limits
    for base in BASES:
        hs.extend(mutations(base))
    return hs


def judge(port, head, tallies):
    theirs = h11_verdict(head)
    if theirs == "incomplete":
        tallies["incomplete"] += 1
        return None
    status, why, raw = ask(port, head)
    if (status, why) in TABLE:
        ours = "refuse"
    elif (status, why) in BODY:
        ours = "body"
    else:
        ours = "accept"
    tallies[ours + "/" + theirs] = tallies.get(ours + "/" + theirs, 0) + 1
    if ours == theirs or (ours == "body" and theirs in ("accept", "refuse")):
        return None
    if ours == "refuse" and theirs == "accept" and stricter(head, why):
        return None
    return "%r: corestreamd %d %r, h11 %s" % (head, status, why, theirs)


def start(corestreamd, tmp):
    proc = subprocess.Popen([corestreamd, "--listen", "127.0.0.1:0", "--data-dir", tmp, "--source",
                             "synthetic", "--synthetic-interval", "1s"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    for line in proc.stdout:
        m = re.search(rb'msg="corestreamd listening".* addr="?127\.0\.0\.1:(\d+)', line)
        if m:
            threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
            return proc, int(m.group(1))
    raise Fail("corestreamd did not start")


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    corestreamd, corpus = sys.argv[1], sys.argv[2]
    tallies = {"incomplete": 0}
    bad = []
    with tempfile.TemporaryDirectory(prefix="httpconf-") as tmp:
        proc, port = start(corestreamd, tmp)
        try:
            hs = heads(corpus)
            for head in hs:
                why = judge(port, head, tallies)
                if why:
                    bad.append(why)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
    print("http_conformance: %d heads: %s" % (len(hs), ", ".join("%s %d" % kv for kv in sorted(tallies.items()))))
    if proc.returncode != 0:
        bad.append("corestreamd exited %d" % proc.returncode)
    if bad:
        print("http_conformance: %d disagreements:" % len(bad), file=sys.stderr)
        for b in bad[:50]:
            print("  " + b, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Fail as e:
        print("http_conformance: %s" % e, file=sys.stderr)
        sys.exit(1)
