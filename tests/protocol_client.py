#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""End-to-end test of corestreamd through an independent wire-protocol client.

Written from docs/PROTOCOL.md alone (no C or Go source consulted), to show that the spec is
enough to implement a subscriber. It starts its own corestreamd (synthetic source), assembles
ledgers by the rules of PROTOCOL.md section 2, and checks the close codes (section 4), a
refusal and the run token of the 101 (section 1), the stamp rules (section 3) and /healthz and
/readyz (section 5).

Run:  /usr/bin/python3 tests/protocol_client.py <path to corestreamd>
Needs only Debian packages: python3-websockets, python3-zstandard, python3-xxhash.
Exit status 0 on success; non-zero with a message on any failure.
"""
import asyncio
import http.client
import json
import queue
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

import websockets
import xxhash
import zstandard

VERSION, BEGIN, CHUNK, END = 0x02, 0x10, 0x11, 0x12
MAX_PIECE = 8388608
BUDGET = 38  # seconds for everything before stopping the server


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def decode(msg):
    """One server message -> (type, seq, fields...), by the offsets of section 2."""
    check(isinstance(msg, bytes), f"text message from the server: {msg!r:.80}")
    check(len(msg) >= 6, f"message of {len(msg)} bytes (< 6)")
    check(msg[0] == VERSION, f"message version {msg[0]:#x}")
    typ, seq = msg[1], struct.unpack_from(">I", msg, 2)[0]
    if typ == BEGIN:
        check(len(msg) == 14, f"BEGIN of {len(msg)} bytes")
        return (BEGIN, seq, struct.unpack_from(">q", msg, 6)[0])
    if typ == CHUNK:
        check(len(msg) >= 11, f"CHUNK of {len(msg)} bytes")
        idx, codec = struct.unpack_from(">IB", msg, 6)
        check(codec in (0, 1), f"CHUNK codec {codec:#x}")
        return (CHUNK, seq, idx, codec, msg[11:])
    if typ == END:
        check(len(msg) == 34, f"END of {len(msg)} bytes")
        return (END, seq) + struct.unpack_from(">IQqQ", msg, 6)
    raise Fail(f"message type {typ:#x}")


def unzstd(payload):
    d = zstandard.ZstdDecompressor().decompressobj()
    out = d.decompress(payload)
    check(d.eof and not d.unused_data, "codec 0x01 payload is not exactly one complete zstd frame")
    return out


async def subscribe(port, query, first, end):
    """Subscribe and assemble. first=None: from the tip. Returns (ledgers, close, stats);
    each ledger is (seq, beginStamp, endStamp); close is (code, reason) or None (no close frame);
    stats["run"] is the 101's X-Corestream-Run (None without one)."""
    stats = {"redeliveries": 0, "raw": 0, "zstd": 0}
    out, want, cur = [], first, None  # cur: [seq, stamp, next chunkIdx, bytearray, piece sizes]
    async with websockets.connect(f"ws://127.0.0.1:{port}/stream{query}", compression=None,
                                  ping_interval=None, max_size=2 * MAX_PIECE,
                                  open_timeout=10, close_timeout=5) as ws:
        headers = ws.response_headers if hasattr(ws, "response_headers") else ws.response.headers
        stats["run"] = headers.get("X-Corestream-Run")
        try:
            while True:
                m = decode(await ws.recv())
                typ, seq = m[0], m[1]
                if typ == BEGIN:
                    if cur is not None and seq == cur[0]:
                        stats["redeliveries"] += 1  # rule 4: discard, start again
                    else:
                        check(cur is None, f"BEGIN {seq} while ledger {cur and cur[0]} is open")
                        check(want is None or seq == want, f"BEGIN {seq}, wanted {want}")
                    check(end is None or seq <= end, f"BEGIN {seq} beyond end={end}")
                    cur = [seq, m[2], 0, bytearray(), []]
                    continue
                check(cur is not None and seq == cur[0], f"type {typ:#x} for {seq} outside its ledger")
                if typ == CHUNK:
                    _, _, idx, codec, payload = m
                    check(idx == cur[2], f"ledger {seq}: chunkIdx {idx}, expected {cur[2]}")
                    piece = unzstd(payload) if codec else payload
                    stats["zstd" if codec else "raw"] += 1
                    check(len(piece) <= MAX_PIECE, f"ledger {seq}: piece of {len(piece)} bytes")
                    cur[2] += 1
                    cur[3] += piece
                    cur[4].append(len(piece))
                    continue
                _, _, count, total, stamp, digest = m
                data, sizes = bytes(cur[3]), cur[4]
                check(count == cur[2], f"ledger {seq}: chunkCount {count}, received {cur[2]}")
                check(total == len(data), f"ledger {seq}: totalLen {total}, assembled {len(data)}")
                check(digest == xxhash.xxh64_intdigest(data), f"ledger {seq}: XXH64 mismatch")
                check(all(s == sizes[0] for s in sizes[:-1]) and sizes[-1:] <= sizes[:1],
                      f"ledger {seq}: pieces not cut at one chunk size: {sizes}")
                check((cur[1] == 0) == (stamp == 0), f"ledger {seq}: stamps {cur[1]}/{stamp}")
                check(stamp >= cur[1], f"ledger {seq}: emitEnd {stamp} < emitStart {cur[1]}")
                out.append((seq, cur[1], stamp))
                want, cur = seq + 1, None
        except websockets.ConnectionClosed as e:
            check(cur is None, f"connection closed inside ledger {cur and cur[0]}")
            return out, (e.rcvd.code, e.rcvd.reason) if e.rcvd else None, stats


def run_sub(port, query, first, end, timeout=10):
    return asyncio.run(asyncio.wait_for(subscribe(port, query, first, end), timeout))


def http_get(port, path, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.getheader("Content-Type"), r.read().decode()
    finally:
        conn.close()


def healthz(port):
    status, _, body = http_get(port, "/healthz")
    check(status == 200, f"/healthz answered {status}")
    h = json.loads(body)
    for k in ("oldest", "latest", "subscribers"):
        check(isinstance(h.get(k), int) and h[k] >= 0, f"/healthz field {k!r}: {h.get(k)!r}")
    check(h["oldest"] <= h["latest"], f"/healthz oldest {h['oldest']} > latest {h['latest']}")
    return h


def start_server(binary, data_dir, log):
    proc = subprocess.Popen(
        [binary, "--listen", "127.0.0.1:0", "--data-dir", data_dir, "--source", "synthetic",
         "--synthetic-size", "300000", "--synthetic-compressible", "--synthetic-interval", "50ms",
         "--emit-window", "10ms", "--chunk-size", "65536"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = queue.Queue()

    def drain():  # keep reading so the server never blocks on a full pipe
        for line in proc.stdout:
            log.append(line.rstrip("\n"))
            lines.put(line)
        lines.put(None)
    threading.Thread(target=drain, daemon=True).start()
    deadline = time.monotonic() + 10
    while True:
        try:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            raise Fail("no 'corestreamd listening' line within 10 s")
        if line is None:
            raise Fail(f"corestreamd exited ({stop_server(proc)}) before listening")
        if "corestreamd listening" in line:
            m = re.search(r'(?:^|\s)addr="?127\.0\.0\.1:(\d+)', line)
            check(m, f"no addr=127.0.0.1:PORT in {line.strip()!r}")
            return proc, int(m.group(1))


def stop_server(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
        return "killed after 15 s"


def test(port):
    # /readyz: 200 {"ready":true} while streaming; also wait for some ring so step 2 has a catch-up.
    deadline = time.monotonic() + 10
    while True:
        status, _, body = http_get(port, "/readyz")
        ready = json.loads(body)
        if status == 200 and healthz(port)["latest"] >= 8:
            break
        check(time.monotonic() < deadline, f"/readyz not 200 with latest >= 8: {status} {body}")
        time.sleep(0.05)
    check(ready.get("ready") is True and ready.get("state") == "streaming", f"/readyz 200 body {body}")

    # Section 2: a bounded catch-up 1..20 (ring first, then live), closed 1000 "".
    ring_latest = healthz(port)["latest"]  # ledgers <= this are replayed from the ring
    ledgers, close, st1 = run_sub(port, "?start=1&end=20", 1, 20)
    check([l[0] for l in ledgers] == list(range(1, 21)), f"got {[l[0] for l in ledgers]}")
    check(close == (1000, ""), f"bounded range closed with {close}, expected (1000, '')")
    old = [l for l in ledgers if l[0] <= ring_latest]
    check(all(l[1] == 0 and l[2] == 0 for l in old), f"ring ledgers with stamps: {old}")
    # Section 1: the 101 names the run, as /healthz does.
    run = healthz(port).get("run")
    check(st1["run"] is not None and re.fullmatch(r"[a-z]+-[0-9a-f]{16}", st1["run"]),
          f"101 X-Corestream-Run {st1['run']!r}")
    check(run == st1["run"], f"/healthz run {run!r}, the 101's {st1['run']!r}")
    # The ring may lag the live send (END 20 can arrive before the ring holds 20): poll, bounded.
    deadline = time.monotonic() + 5
    while (latest := healthz(port)["latest"]) < 20:
        check(time.monotonic() < deadline, f"/healthz latest {latest} < 20 5 s after the stream")
        time.sleep(0.02)

    # Section 1: a refusal before the upgrade.
    status, ctype, body = http_get(port, "/stream?start=abc", {
        "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
    check(status == 400 and body == 'invalid start parameter "abc"\n',
          f"start=abc answered {status} {body!r}")
    check(ctype == "text/plain; charset=utf-8", f"refusal Content-Type {ctype!r}")

    # Section 3: from the tip up to latest+3; at least one live-followed (stamped) ledger.
    end = healthz(port)["latest"] + 3
    tip, close, st2 = run_sub(port, f"?end={end}", None, end)
    seqs = [l[0] for l in tip]
    check(seqs and seqs == list(range(seqs[0], end + 1)), f"tip subscription got {seqs}, end={end}")
    check(close == (1000, ""), f"tip range closed with {close}, expected (1000, '')")
    check(any(l[1] and l[2] for l in tip), f"no stamped (live-followed) ledger from the tip: {tip}")
    check(st2["run"] == st1["run"], f"the run changed between subscriptions: {st1['run']} {st2['run']}")
    return (f"run {st1['run']}, catch-up 1..20 ({len(old)} from ring, stampless; {st1['zstd']} zstd/{st1['raw']} raw "
            f"chunks, {st1['redeliveries']} redeliveries), tip {seqs[0]}..{end} "
            f"({sum(1 for l in tip if l[1])} stamped)")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: /usr/bin/python3 tests/protocol_client.py <path to corestreamd>")
    t0, data_dir, proc, log = time.monotonic(), tempfile.mkdtemp(prefix="corestream-proto-"), None, []
    def watchdog(*_):
        raise Fail(f"test phase took over {BUDGET} s")
    signal.signal(signal.SIGALRM, watchdog)
    signal.alarm(BUDGET)  # the test phase, then at most 20 s to stop the server: under 60 s
    try:
        proc, port = start_server(sys.argv[1], data_dir, log)
        summary = test(port)
    except (Fail, OSError, ValueError, asyncio.TimeoutError, websockets.WebSocketException) as e:
        print(f"protocol_client: FAIL: {type(e).__name__}: {e}", file=sys.stderr)
        print("\n".join(["--- corestreamd log tail ---"] + log[-20:]), file=sys.stderr)
        return 1
    finally:
        signal.alarm(0)
        rc = stop_server(proc) if proc else None
        shutil.rmtree(data_dir, ignore_errors=True)
    if rc != 0:
        print(f"protocol_client: FAIL: corestreamd exit status after SIGTERM: {rc}", file=sys.stderr)
        return 1
    print(f"protocol_client: PASS in {time.monotonic() - t0:.1f}s: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
