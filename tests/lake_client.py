#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""End-to-end test of corestreamd's SEP-54 lake through an independent reader.

The reader (class Lake) is written from SEP-54 ("Ledger Metadata Storage") and docs/PROTOCOL.md
section 7 alone: it reads config.json, forms each batch's object key from the sequence number,
fetches the object, decompresses it (every zstd frame in it) and reads the XDR
LedgerCloseMetaBatch header. The test starts its own corestreamd for each case and checks:

- the public network's ledger 53312000 (../shared/realmeta) fed through the file source is
  served under the key Galexie gives it, and decompresses to exactly Galexie's object's bytes;
- config.json and the Go SDK's manifest, HEAD, keep-alive, ETag and Last-Modified, the 404s,
  405, a Range header (ignored: the whole object), bearer tokens, the lake off without a
  passphrase and on the admin port;
- a layout of 4 ledgers per batch and 2 batches per partition: keys with both ends, partition
  directories, and objects holding exactly the ring's ledger files, read by 8 threads at once.

- a copy of the served lake in a directory reads the same, and benchrunner --mode lake reads
  and verifies both.

Run:  /usr/bin/python3 tests/lake_client.py <path to corestreamd> <realmeta dir> [<benchrunner>]
Needs only Debian packages: python3-zstandard. A missing realmeta dir skips the Galexie case,
saying so. Exit status 0 on success; non-zero with a message on any failure.
"""
import http.client
import json
import os
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

PUBNET = "Public Global Stellar Network ; September 2015"
GALEXIE_SEQ = 53312000
GALEXIE_OBJECT = "pubnet-batch-53312000.xdr.zst"
SANITIZER_MARKS = ("ThreadSanitizer", "AddressSanitizer", "LeakSanitizer", "runtime error:")


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


# ---- the reader, from SEP-54 -----------------------------------------------------------------

class Lake:
    """A SEP-54 lake at an http:// base URL (the directory holding config.json)."""

    def __init__(self, host, port, base, headers=None):
        self.host, self.port, self.base = host, port, base.rstrip("/")
        self.headers = headers or {}
        self.conn = http.client.HTTPConnection(host, port, timeout=30)
        self.cfg = None

    def close(self):
        self.conn.close()

    def request(self, method, path, headers=None):
        """One request on the kept-alive connection: (status, headers dict lower-cased, body)."""
        h = dict(self.headers)
        h.update(headers or {})
        for attempt in (1, 2):
            try:
                self.conn.request(method, path, headers=h)
                r = self.conn.getresponse()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # A kept-alive connection the server closed after its last answer (it answers at
                # most 100 requests on one): once more on a fresh one, as HTTP clients do for GET.
                self.conn.close()
                if attempt == 2:
                    raise
        body = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body

    def config(self):
        status, _, body = self.request("GET", self.base + "/config.json")
        check(status == 200, f"config.json answered {status} {body[:200]!r}")
        self.cfg = json.loads(body)
        for k in ("networkPassphrase", "ledgersPath", "compression", "ledgersPerBatch", "batchesPerPartition"):
            check(k in self.cfg, f"config.json lacks {k}: {self.cfg}")
        check(self.cfg["compression"] == "zstd", f"compression {self.cfg['compression']!r}")
        return self.cfg

    def batch(self, seq):
        n = self.cfg["ledgersPerBatch"]
        start = seq - seq % n
        return start, start + n - 1

    def key(self, seq):
        """The object key of seq's batch: the partition directory (when a partition holds more
        than one batch), then the batch, each named by its inverted start in 8 upper-case hex
        digits, `--`, its first ledger and (for more than one ledger) `-` and its last."""
        n, per = self.cfg["ledgersPerBatch"], self.cfg["batchesPerPartition"]
        start, end = self.batch(seq)
        name = f"{0xFFFFFFFF - start:08X}--{start}" + (f"-{end}" if n > 1 else "") + ".xdr.zst"
        if per == 1:
            return name
        size = n * per
        pstart = seq - seq % size
        pend = (pstart + size - 1) & 0xFFFFFFFF
        return f"{0xFFFFFFFF - pstart:08X}--{pstart}-{pend}/{name}"

    def path(self, seq):
        return self.cfg["ledgersPath"].rstrip("/") + "/" + self.key(seq)

    def get_batch(self, seq):
        """(start, end, [payload]) of seq's batch, or None when the lake has no such object. The
        payload is the LedgerCloseMeta array's bytes after its count."""
        status, h, body = self.request("GET", self.path(seq))
        if status == 404:
            return None
        check(status == 200, f"{self.path(seq)} answered {status} {body[:200]!r}")
        check(int(h["content-length"]) == len(body), f"content-length {h['content-length']} for {len(body)} bytes")
        raw = unzstd(body)
        start, end, count = struct.unpack_from(">III", raw, 0)
        check((start, end) == self.batch(seq), f"object of {seq} holds {start}-{end}")
        check(count == end - start + 1, f"batch {start}-{end} counts {count} ledgers")
        return start, end, raw


class LakeDir(Lake):
    """The same lake copied into a directory: config.json at its root, the objects under the last
    component of ledgersPath (a served lake's "/lake/ledgers" is <dir>/ledgers)."""

    def __init__(self, path):
        self.dir, self.base, self.cfg = path, "", None

    def close(self):
        pass

    def request(self, method, path, headers=None):
        if path != "/config.json":
            lp = self.cfg["ledgersPath"].rstrip("/")
            check(path.startswith(lp + "/"), f"{path} is not under ledgersPath {lp}")
            path = "/" + lp.rsplit("/", 1)[-1] + path[len(lp):]
        try:
            with open(self.dir + path, "rb") as f:
                body = f.read()
            return 200, {"content-length": str(len(body))}, body
        except FileNotFoundError:
            return 404, {}, b""


def unzstd(data):
    """Every frame of a zstd stream, concatenated (RFC 8878: a stream may hold several)."""
    import zstandard  # here, so that bench/lake_readers.py, which decompresses nothing, needs only the stdlib
    reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    out = reader.read()
    while True:
        more = reader.read()
        if not more:
            return out
        out += more


# ---- the daemon -------------------------------------------------------------------------------

class Daemon:
    def __init__(self, binary, args, tmp):
        self.log = []
        self.data = os.path.join(tmp, "data")
        # Lake readers, ring writes and exports run at --background-nice (19 by default): beside
        # busy loops that is about 1.5 % of a core, and this test's subject is the lake's bytes,
        # not scheduling, so the daemon runs them at nice 0 (docs/RELIABILITY.md).
        argv = [binary, "--listen", "127.0.0.1:0", "--data-dir", self.data, "--background-nice", "0"] + args
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        lines = queue.Queue()

        def drain():  # keep reading so the daemon never blocks on a full pipe
            for line in self.proc.stdout:
                self.log.append(line.rstrip("\n"))
                lines.put(line)
            lines.put(None)
        threading.Thread(target=drain, daemon=True).start()
        deadline = time.monotonic() + 30
        self.port = self.admin_port = None
        while self.port is None or ("--admin-listen" in args and self.admin_port is None):
            try:
                line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise Fail("no 'corestreamd listening' line within 30 s")
            if line is None:
                raise Fail(f"corestreamd exited ({self.stop()}) before listening:\n" + "\n".join(self.log))
            m = re.search(r'(?:^|\s)addr="?127\.0\.0\.1:(\d+)', line)
            if m and "corestreamd listening" in line:
                self.port = int(m.group(1))
            elif m and "admin endpoints listening" in line:
                self.admin_port = int(m.group(1))

    def healthz(self):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            c.request("GET", "/healthz")
            return json.loads(c.getresponse().read())
        finally:
            c.close()

    def wait_latest(self, seq):
        """Until the ring holds seq (the daemon reports it in /healthz); bounded at 60 s."""
        deadline = time.monotonic() + 60
        while (latest := self.healthz()["latest"]) < seq:
            check(time.monotonic() < deadline, f"ring latest {latest} < {seq} after 60 s")
            time.sleep(0.02)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
            rc = "killed after 30 s"
        bad = [l for l in self.log if any(m in l for m in SANITIZER_MARKS)]
        check(not bad, "sanitizer report in the daemon's output:\n" + "\n".join(self.log))
        return rc


def request(port, method, path, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request(method, path, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


# ---- the cases --------------------------------------------------------------------------------

def galexie_case(binary, realmeta, tmp):
    """Ledger 53312000 through the file source; the lake's object against Galexie's."""
    with open(os.path.join(realmeta, GALEXIE_OBJECT), "rb") as f:
        galexie = unzstd(f.read())
    dump = os.path.join(tmp, "dump")
    os.makedirs(dump)
    with open(os.path.join(dump, f"ledger-{GALEXIE_SEQ}.xdr"), "wb") as f:
        f.write(galexie[12:])  # the one LedgerCloseMeta after the batch header
    d = Daemon(binary, ["--source", "file", "--file-dir", dump, "--start-ledger", str(GALEXIE_SEQ),
                        "--cadence", "100ms", "--emit-window", "5ms", "--network-passphrase", PUBNET,
                        "--admin-listen", "127.0.0.1:0"], tmp)
    try:
        d.wait_latest(GALEXIE_SEQ)
        lake = Lake("127.0.0.1", d.port, "/lake")
        cfg = lake.config()
        check(cfg == {"networkPassphrase": PUBNET, "ledgersPath": "/lake/ledgers", "compression": "zstd",
                      "ledgersPerBatch": 1, "batchesPerPartition": 64000}, f"config.json {cfg}")
        status, h, body = lake.request("GET", "/lake/ledgers/.config.json")
        check(status == 200 and json.loads(body) == {"networkPassphrase": PUBNET, "version": "1.0",
                                                     "compression": "zstd", "ledgersPerBatch": 1,
                                                     "batchesPerPartition": 64000},
              f".config.json answered {status} {body!r}")
        key = lake.key(GALEXIE_SEQ)
        check(key == "FCD285FF--53312000-53375999/FCD285FF--53312000.xdr.zst", f"key {key}")
        start, end, raw = lake.get_batch(GALEXIE_SEQ)
        check(raw == galexie, f"object of {GALEXIE_SEQ}: {len(raw)} bytes, not Galexie's {len(galexie)}")

        # Headers of an object, and HEAD: the same headers, no body.
        status, h, body = lake.request("GET", lake.path(GALEXIE_SEQ))
        check(h.get("content-type") == "application/zstd", f"content-type {h.get('content-type')}")
        check(re.fullmatch(r'"[0-9a-f]{16}"', h.get("etag", "")), f"etag {h.get('etag')!r}")
        check(re.fullmatch(r"[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT", h.get("last-modified", "")),
              f"last-modified {h.get('last-modified')!r}")
        hs, hh, hbody = lake.request("HEAD", lake.path(GALEXIE_SEQ))
        check(hs == 200 and hbody == b"", f"HEAD answered {hs} with {len(hbody)} body bytes")
        for k in ("content-length", "etag", "content-type"):
            check(hh.get(k) == h.get(k), f"HEAD {k} {hh.get(k)!r}, GET's {h.get(k)!r}")
        # A Range is not served: the whole object, 200.
        rs, rh, rbody = lake.request("GET", lake.path(GALEXIE_SEQ), {"Range": "bytes=0-9"})
        check(rs == 200 and rbody == body, f"Range answered {rs} with {len(rbody)} bytes")

        # Not in the ring yet, not a key, not a method.
        far = GALEXIE_SEQ + 100000
        s404, _, b404 = lake.request("GET", lake.path(far))
        check(s404 == 404 and b404.startswith(f"lake: batch {far}-{far} is not wholly in the ring: it holds ledgers "
                                              f"{GALEXIE_SEQ} to ".encode()), f"far batch: {s404} {b404!r}")
        s, _, b = lake.request("GET", "/lake/ledgers/fcd285ff--53312000-53375999/fcd285ff--53312000.xdr.zst")
        check(s == 404 and b == b"404 page not found\n", f"lower-case key: {s} {b!r}")
        s, h405, b = lake.request("POST", lake.path(GALEXIE_SEQ))
        check(s == 405 and h405.get("allow") == "GET, HEAD", f"POST: {s} {h405}")
        # Everything above went over one kept-alive connection.
        check(lake.conn.sock is not None, "the connection was closed after an answer that keeps it")
        lake.close()

        s, _, b = request(d.admin_port, "GET", "/lake/config.json")
        check(s == 404, f"the admin port answered /lake/config.json {s}")
        s, _, b = request(d.admin_port, "GET", "/metrics")
        metrics = dict(re.findall(r"^(corestreamd_lake_\w+) (\d+)$", b.decode(), re.M))
        # Objects: the batch read, its GET, HEAD, the Range GET; bytes of the three GETs.
        check(metrics.get("corestreamd_lake_objects_total") == "4" and
              metrics.get("corestreamd_lake_object_bytes_total") == str(3 * len(body)) and
              metrics.get("corestreamd_lake_not_found_total") == "1" and
              metrics.get("corestreamd_lake_busy_total") == "0" and metrics.get("corestreamd_lake_failed_total") == "0",
              f"lake metrics {metrics}")
        s, _, b = request(d.port, "GET", lake.path(GALEXIE_SEQ) + ".sig")
        check(s == 404 and b == b"lake: batch 53312000-53312000 has no signatures: ledger 53312000 is unsigned\n",
              f"an unsigned batch's .sig: {s} {b!r}")
        return f"53312000 byte-exact with Galexie's object ({len(body)} bytes served)"
    finally:
        d.stop()


def ring_ledger(d, seq):
    with open(os.path.join(d.data, "ledgers", f"ledger-{seq}.xdr"), "rb") as f:
        return f.read()


def layout_case(binary, tmp):
    """4 ledgers a batch, 2 batches a partition, read by 8 threads at once."""
    d = Daemon(binary, ["--source", "synthetic", "--synthetic-size", "50000", "--synthetic-compressible",
                        "--synthetic-interval", "20ms", "--emit-window", "5ms", "--network-passphrase", "Test SDF Network ; September 2015",
                        "--lake-ledgers-per-batch", "4", "--lake-batches-per-partition", "2", "--lake-readers", "2"], tmp)
    try:
        d.wait_latest(40)
        lake = Lake("127.0.0.1", d.port, "/lake")
        lake.config()
        check(lake.key(13) == "FFFFFFF7--8-15/FFFFFFF3--12-15.xdr.zst", f"key of 13: {lake.key(13)}")
        lake.close()
        errors = queue.Queue()

        def reader(first):
            r = Lake("127.0.0.1", d.port, "/lake")
            try:
                r.config()
                for seq in range(first, 40, 4):
                    start, end, raw = r.get_batch(seq)
                    want = struct.pack(">III", start, end, 4) + b"".join(ring_ledger(d, s) for s in range(start, end + 1))
                    check(raw == want, f"batch {start}-{end}: {len(raw)} bytes, the ring's files {len(want)}")
            except Exception as e:  # reported by the main thread
                errors.put(f"reader from {first}: {e}")
            finally:
                r.close()
        threads = [threading.Thread(target=reader, args=(4 + i % 4,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
            check(not t.is_alive(), "a reader did not finish within 120 s")
        check(errors.empty(), errors.get() if not errors.empty() else "")
        return "batches 4-39 read by 8 threads, each equal to the ring's files"
    finally:
        d.stop()


def directory_case(binary, benchrunner, tmp):
    """A served lake copied into a directory, object by object, reads the same through this
    reader; benchrunner --mode lake reads both and checks them against the ring's files."""
    d = Daemon(binary, ["--source", "synthetic", "--synthetic-size", "30000", "--synthetic-interval", "20ms",
                        "--emit-window", "5ms", "--network-passphrase", PUBNET], tmp)
    try:
        d.wait_latest(12)
        lake = Lake("127.0.0.1", d.port, "/lake")
        lake.config()
        copy = os.path.join(tmp, "copy")
        status, _, text = lake.request("GET", "/lake/config.json")
        os.makedirs(copy)
        with open(os.path.join(copy, "config.json"), "wb") as f:
            f.write(text)
        dump = os.path.join(tmp, "dump")
        os.makedirs(dump)
        for seq in range(1, 11):
            status, _, body = lake.request("GET", lake.path(seq))
            check(status == 200, f"object of {seq}: {status}")
            obj = os.path.join(copy, "ledgers", lake.key(seq))
            os.makedirs(os.path.dirname(obj), exist_ok=True)
            with open(obj, "wb") as f:
                f.write(body)
            shutil.copyfile(os.path.join(d.data, "ledgers", f"ledger-{seq}.xdr"), os.path.join(dump, f"ledger-{seq}.xdr"))
        lake.close()
        local = LakeDir(copy)
        local.config()
        for seq in range(1, 11):
            _, _, raw = local.get_batch(seq)
            check(raw[12:] == ring_ledger(d, seq), f"ledger {seq} from the directory differs from the ring's")
        check(local.get_batch(11) is None, "the directory has no ledger 11, yet it was read")
        if not benchrunner:
            return "the directory reads as the lake did (no benchrunner given)"
        for url in (f"http://127.0.0.1:{d.port}/lake", copy):
            r = subprocess.run([benchrunner, "--mode", "lake", "--url", url, "--start", "1", "--end", "10",
                                "--verify-dir", dump, "--quiet"], capture_output=True, text=True, timeout=60)
            check(r.returncode == 0 and "ledgers      10 (1..10)" in r.stdout,
                  f"benchrunner --mode lake --url {url}: exit {r.returncode}\n{r.stdout}{r.stderr}")
        r = subprocess.run([benchrunner, "--mode", "lake", "--url", copy, "--start", "1", "--end", "11", "--quiet"],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 1 and f"lake: {copy}: ledger 11: no object at FFFFFFFF--0-63999/FFFFFFF4--11.xdr.zst"
              in r.stderr, f"benchrunner past the directory's end: exit {r.returncode}\n{r.stderr}")
        return "a copy in a directory reads the same; benchrunner --mode lake verifies both"
    finally:
        d.stop()


def signed_case(binary, benchrunner, tmp):
    """A signing core serves each batch's signatures beside its object (<key>.sig: u16 length and
    the SIG message per ledger); benchrunner --mode lake --trusted-keys checks every ledger with
    them, and refuses them under another key."""
    key, pub, other = (os.path.join(tmp, n) for n in ("sign.pem", "sign.pub", "other.pub"))
    for cmd in (["openssl", "genpkey", "-algorithm", "ed25519", "-out", key],
                ["openssl", "pkey", "-in", key, "-pubout", "-out", pub]):
        subprocess.run(cmd, check=True, capture_output=True, timeout=30)
    k2 = os.path.join(tmp, "other.pem")
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", k2], check=True, capture_output=True)
    subprocess.run(["openssl", "pkey", "-in", k2, "-pubout", "-out", other], check=True, capture_output=True)
    d = Daemon(binary, ["--source", "synthetic", "--synthetic-size", "20000", "--synthetic-interval", "20ms",
                        "--emit-window", "5ms", "--network-passphrase", PUBNET, "--signing-key", key], tmp)
    try:
        d.wait_latest(6)
        lake = Lake("127.0.0.1", d.port, "/lake")
        lake.config()
        status, h, sig = lake.request("GET", lake.path(3) + ".sig")
        check(status == 200 and h.get("content-type") == "application/octet-stream", f".sig: {status} {h}")
        n = struct.unpack_from(">H", sig, 0)[0]
        check(n == len(sig) - 2 and 200 <= n <= 263, f".sig of one ledger: length {n} in {len(sig)} bytes")
        check(sig[2:4] == bytes([0x02, 0x13]) and struct.unpack_from(">I", sig, 4)[0] == 3,
              f".sig does not hold ledger 3's SIG: {sig[2:8].hex()}")
        lake.close()
        if not benchrunner:
            return "ledger 3's SIG served beside its object (no benchrunner given)"
        base = [benchrunner, "--mode", "lake", "--url", f"http://127.0.0.1:{d.port}/lake", "--start", "1", "--end",
                "6", "--quiet", "--trusted-keys"]
        r = subprocess.run(base + [pub], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and "ledgers      6 (1..6)" in r.stdout, f"--trusted-keys: {r.returncode} {r.stderr}")
        r = subprocess.run(base + [other], capture_output=True, text=True, timeout=60)
        check(r.returncode == 1 and "lake: signature: ledger 1: signed by " in r.stderr and
              "which is not a trusted key" in r.stderr, f"another key: {r.returncode} {r.stderr}")
        return "<key>.sig served; benchrunner --trusted-keys verifies 1..6 and refuses another key"
    finally:
        d.stop()


def tokens_case(binary, tmp):
    tokens = os.path.join(tmp, "tokens")
    with open(tokens, "w") as f:
        f.write("reader s3cret-token-for-the-lake-0123456789\n")
    d = Daemon(binary, ["--source", "synthetic", "--synthetic-interval", "50ms", "--emit-window", "5ms",
                        "--network-passphrase", PUBNET, "--auth-tokens", tokens], tmp)
    try:
        d.wait_latest(2)
        s, h, b = request(d.port, "GET", "/lake/config.json")
        check(s == 401 and b == b"a bearer token is required\n", f"no token: {s} {b!r}")
        lake = Lake("127.0.0.1", d.port, "/lake", {"Authorization": "Bearer s3cret-token-for-the-lake-0123456789"})
        lake.config()
        check(lake.get_batch(1) is not None, "ledger 1's object not served with a token")
        lake.close()
        return "401 without a token, objects with one"
    finally:
        d.stop()


def off_case(binary, tmp):
    d = Daemon(binary, ["--source", "synthetic", "--synthetic-interval", "50ms", "--emit-window", "5ms"], tmp)
    try:
        s, _, b = request(d.port, "GET", "/lake/config.json")
        check(s == 404 and b == b"404 page not found\n", f"lake off: {s} {b!r}")
        return "404 without --network-passphrase"
    finally:
        d.stop()


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: /usr/bin/python3 tests/lake_client.py <path to corestreamd> <realmeta dir> [<benchrunner>]")
    binary, realmeta = sys.argv[1], sys.argv[2]
    benchrunner = sys.argv[3] if len(sys.argv) == 4 else None
    signal.signal(signal.SIGALRM, lambda *_: (print("lake_client: watchdog: 240 s passed", file=sys.stderr),
                                              os._exit(2)))
    signal.alarm(240)
    cases = [("layout", lambda t: layout_case(binary, t)),
             ("directory", lambda t: directory_case(binary, benchrunner, t)),
             ("signed", lambda t: signed_case(binary, benchrunner, t)),
             ("tokens", lambda t: tokens_case(binary, t)),
             ("off", lambda t: off_case(binary, t))]
    if os.path.exists(os.path.join(realmeta, GALEXIE_OBJECT)):
        cases.insert(0, ("galexie", lambda t: galexie_case(binary, realmeta, t)))
    else:
        print(f"lake_client: {realmeta}/{GALEXIE_OBJECT} is absent: the Galexie case is skipped")
    for name, fn in cases:
        tmp = tempfile.mkdtemp(prefix=f"lake-{name}-", dir=os.environ.get("CS_TEST_TMPDIR"))
        try:
            print(f"lake_client: {name}: {fn(tmp)}")
        except Fail as e:
            print(f"lake_client: {name}: FAIL: {e}", file=sys.stderr)
            sys.exit(1)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print("lake_client: ok")


if __name__ == "__main__":
    main()
