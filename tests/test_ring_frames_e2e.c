/* SPDX-License-Identifier: Apache-2.0 */
/* Stored wire frames (issue 11 item 3, docs/RING.md), end to end: the real corestreamd over
 * 127.0.0.1. A replay sends each ledger's CHUNK messages exactly as they were published live
 * (same boundaries, same codecs, no recompression, even with compression now off); a format-2
 * ring (records, no frames) is served and gets its frames made; a frames file that is truncated,
 * changed, emptied, a symlink or missing, before start or while replayed, never makes a
 * subscriber accept wrong bytes: it gets the ledger whole (re-encoded) or a 1011 naming the
 * ledger with no END, and the daemon logs an ERROR naming the frames file and stays up; a new
 * ring is still a dump `--source file` replays. A catch-up served on the background stream I/O
 * thread crosses to the live tip without a gap or a duplicate, and is moved to a live thread
 * (logged). CORESTREAMD_BIN is the daemon's absolute path. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "common/synthetic.h"
#include "support/procharness.h"
#include "support/ringfiles.h"
#include "support/ringfixture.h"
#include "support/tmpdir.h"
#include "support/wsclient.h"
#include "support/wait.h"
#include "wire/wire.h"

#ifndef CORESTREAMD_BIN
#error "CORESTREAMD_BIN must name the corestreamd binary"
#endif

#define STOP_MS 10000
#define MAX_CHUNKS 128

typedef cs_ringfx fixture;

static int setup(void **state)
{
    return cs_ringfx_setup(state, "ringframes");
}

static int teardown(void **state)
{
    return cs_ringfx_teardown(state);
}

static void start_daemon(fixture *f, const char *const *args)
{
    cs_ringfx_start(f, NULL, CORESTREAMD_BIN, args);
}

static void stop_daemon(fixture *f)
{
    assert_int_equal(cs_proc_stop(&f->proc, SIGTERM, STOP_MS), 0);
    cs_proc_free(&f->proc);
    f->started = false;
}

static void run_to_exit(fixture *f, const char *const *args)
{
    cs_ringfx_run_to_exit(f, CORESTREAMD_BIN, args, 120000);
    cs_ringfx_free_proc(f);
}

static const char *with_pid(const fixture *f, const char *needle)
{
    return cs_ringfx_with_pid(f, needle);
}

static void wait_line(fixture *f, const char *needle)
{
    cs_ringfx_wait_line(f, needle, WAIT_MS);
}

/* For a line that may already have been logged before one waited for earlier (the frames pass
 * can finish before the listening line, which wait_line's matching resumes after). */
static void wait_line_anywhere(fixture *f, const char *needle)
{
    cs_proc_drain(&f->proc);
    if (cs_proc_log_count(&f->proc, with_pid(f, needle)) == 0)
        wait_line(f, needle);
}

static void ring_path(const fixture *f, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", f->ring, name);
}

/* One ledger's flow as received: its CHUNK messages byte for byte. */
typedef struct flow {
    uint32_t seq;
    size_t n;
    uint8_t *chunk[MAX_CHUNKS];
    size_t len[MAX_CHUNKS];
    int zstd;
    bool ended; /* END arrived, and it describes the bytes (checked when no chunk is zstd) */
    int close_code;
    char reason[128];
} flow;

static void flow_free(flow *fl)
{
    for (size_t i = 0; i < fl->n; i++)
        free(fl->chunk[i]);
    memset(fl, 0, sizeof *fl);
}

/* Reads one flow from its BEGIN to its END (1) or to a close (0, code and reason kept). Chunks
 * are kept as received, not decompressed, so a changed zstd frame is seen as what was sent. */
static int read_flow(cs_ws *ws, flow *fl)
{
    memset(fl, 0, sizeof *fl);
    XXH64_state_t *st = XXH64_createState();
    XXH64_reset(st, 0);
    uint64_t raw_total = 0;
    bool begun = false;
    for (int i = 0; i < 100000; i++) {
        cs_ws_msg m;
        int k = cs_ws_read(ws, &m, WAIT_MS);
        if (k == CS_WS_CLOSE) {
            fl->close_code = m.close_code;
            snprintf(fl->reason, sizeof fl->reason, "%s", m.reason);
            XXH64_freeState(st);
            return 0;
        }
        if (k != CS_WS_BINARY)
            fail_msg("read kind %d (%s)", k, m.reason);
        cs_wire_msg w;
        assert_int_equal(cs_wire_decode(m.data, m.len, &w, NULL), 0);
        if (w.type == CS_WIRE_TYPE_BEGIN) {
            assert_false(begun);
            begun = true;
            fl->seq = w.seq;
            continue;
        }
        assert_true(begun);
        assert_int_equal(w.seq, fl->seq);
        if (w.type == CS_WIRE_TYPE_CHUNK) {
            assert_true(fl->n < MAX_CHUNKS);
            assert_int_equal(w.chunk_idx, fl->n);
            fl->chunk[fl->n] = malloc(m.len);
            memcpy(fl->chunk[fl->n], m.data, m.len);
            fl->len[fl->n++] = m.len;
            fl->zstd += w.codec == 1;
            if (w.codec == 0) {
                XXH64_update(st, w.payload, w.payload_len);
                raw_total += w.payload_len;
            }
            continue;
        }
        assert_int_equal(w.type, CS_WIRE_TYPE_END);
        assert_int_equal(w.chunk_count, fl->n);
        if (fl->zstd == 0) {
            assert_int_equal(w.total_len, raw_total);
            assert_true(w.checksum == XXH64_digest(st));
        }
        fl->ended = true;
        XXH64_freeState(st);
        return 1;
    }
    fail_msg("flow never ended");
    return -1;
}

static void assert_same_flow(const flow *a, const flow *b)
{
    assert_int_equal(a->seq, b->seq);
    if (a->n != b->n)
        fail_msg("ledger %u: %zu chunks live, %zu replayed", a->seq, a->n, b->n);
    for (size_t i = 0; i < a->n; i++)
        if (a->len[i] != b->len[i] || memcmp(a->chunk[i], b->chunk[i], a->len[i]) != 0)
            fail_msg("ledger %u chunk %zu: %zu bytes live, %zu replayed, or different bytes", a->seq, i, a->len[i],
                     b->len[i]);
}

/* Reads ledgers first..last, each verified by the client (decompressed, checksum checked), and
 * checks each against the raw file the ring holds. Returns the number of zstd chunks seen. */
static int read_verified(fixture *f, uint32_t first, uint32_t last)
{
    char q[128];
    snprintf(q, sizeof q, "/stream?start=%u&end=%u", first, last);
    cs_ws *ws = cs_ws_connect("127.0.0.1", f->proc.port, q, WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    int zstd = 0;
    for (uint32_t s = first; s <= last; s++) {
        cs_ledger l;
        char err[256];
        int rc = cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err);
        if (rc != 1)
            fail_msg("ledger %u: %d %s", s, rc, err);
        assert_int_equal(l.seq, s);
        char p[1024], name[64];
        snprintf(name, sizeof name, "ledger-%u.xdr", s);
        ring_path(f, name, p, sizeof p);
        FILE *fp = fopen(p, "rb");
        assert_non_null(fp);
        uint8_t *want = malloc(l.len + 1);
        size_t got = fread(want, 1, l.len + 1, fp);
        fclose(fp);
        assert_int_equal(got, l.len);
        assert_memory_equal(want, l.data, l.len);
        free(want);
        zstd += l.n_zstd_chunks;
        cs_ledger_free(&l);
    }
    cs_ws_close(ws);
    return zstd;
}

static bool exists(const fixture *f, const char *name)
{
    char p[1024];
    ring_path(f, name, p, sizeof p);
    struct stat st;
    return lstat(p, &st) == 0;
}

/* Whether ledger seq's record claims stored frames, lying inside its segment's frames file. */
static bool has_frames(const fixture *f, uint32_t seq)
{
    uint64_t off, len;
    char p[1024];
    struct stat st;
    if (!cs_ringfiles_frames(f->ring, seq, &off, &len))
        return false;
    cs_ringfiles_seg_path(p, sizeof p, f->ring, seq);
    return lstat(p, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size >= off + len;
}

/* Waits until the ring's newest ledger is seq or later. At or after, not exactly: a ring writer that
 * falls behind on a busy machine catches up several ledgers between two polls. */
static void wait_retained(fixture *f, uint32_t seq)
{
    char body[512] = "";
    for (int i = 0; i < 4000; i++) {
        assert_int_equal(cs_http_get("127.0.0.1", f->proc.port, "/healthz", WAIT_MS, body, sizeof body, NULL, 0),
                         200);
        const char *p = strstr(body, "\"latest\":");
        if (p && strtoul(p + strlen("\"latest\":"), NULL, 10) >= seq)
            return;
        usleep(5000);
    }
    fail_msg("ledger %u never retained: %s", seq, body);
}

/* ---- replay sends the published messages ------------------------------------------------------ */

/* A subscriber at the tip records ledgers 1..4 as published; a catch-up subscriber afterwards gets
 * the very same CHUNK messages from the ring. Restarted with compression off (the same run,
 * continuing), the ring still sends the stored zstd chunks: they are not re-encoded. */
static void replay_matches_live(fixture *f, bool compressible)
{
    const char *args[] = {"--source", "synthetic", "--synthetic-size", "300000", "--chunk-size", "65536",
                          "--synthetic-interval", "400ms", "--emit-window", "0", "--synthetic-count", "4",
                          compressible ? "--synthetic-compressible" : "--compress=true", NULL};
    start_daemon(f, args);
    if (cs_proc_wait_listening(&f->proc, WAIT_MS) != 0)
        fail_msg("not listening:\n%s", f->proc.log);
    cs_ws *live = cs_ws_connect("127.0.0.1", f->proc.port, "/stream", WAIT_MS, NULL, NULL, 0);
    assert_non_null(live);
    flow got[4], first[4];
    memset(first, 0, sizeof first);
    size_t nlive = 0;
    for (int i = 0; i < 5 && nlive < 4; i++) {
        assert_int_equal(read_flow(live, &got[nlive]), 1);
        if (got[nlive++].seq == 4)
            break;
    }
    cs_ws_close(live);
    assert_true(nlive >= 2); /* paced at 400 ms: at most ledger 1 was missed */
    int st = cs_proc_wait_exit(&f->proc, WAIT_MS);
    cs_proc_drain(&f->proc);
    if (st != 0)
        fail_msg("exit %d:\n%s", st, f->proc.log);
    cs_proc_free(&f->proc);
    f->started = false;
    for (int pass = 0; pass < 2; pass++) {
        /* The same run continues (so the ring is kept), compressing as before, then not at all. */
        const char *serve_args[] = {"--source", "synthetic", "--synthetic-size", "300000", "--chunk-size", "65536",
                                    "--synthetic-interval", "1h", "--emit-window", "0", "--start-ledger",
                                    pass == 0 ? "5" : "6", compressible ? "--synthetic-compressible" : "--compress",
                                    pass == 0 ? "--compress=true" : "--compress=false", NULL};
        start_daemon(f, serve_args);
        if (cs_proc_wait_listening(&f->proc, WAIT_MS) != 0)
            fail_msg("not listening:\n%s", f->proc.log);
        wait_retained(f, pass == 0 ? 5 : 6);
        assert_null(strstr(f->proc.log, "ring reset"));
        int status = 0;
        char body[256] = "";
        cs_ws *ws =
            cs_ws_connect("127.0.0.1", f->proc.port, "/stream?start=1&end=4", WAIT_MS, &status, body, sizeof body);
        if (!ws)
            fail_msg("pass %d: connect: %d %s\n%s", pass, status, body, f->proc.log);
        int zstd = 0;
        for (uint32_t s = 1; s <= 4; s++) {
            flow fl;
            assert_int_equal(read_flow(ws, &fl), 1);
            assert_int_equal(fl.seq, s);
            assert_int_equal(fl.n, 5); /* 300000 bytes at 64 KiB: the live boundaries */
            zstd += fl.zstd;
            for (size_t k = 0; k < nlive; k++)
                if (got[k].seq == s)
                    assert_same_flow(&got[k], &fl);
            /* The second pass (compression off) sends what the first did. */
            if (pass == 0)
                first[s - 1] = fl;
            else
                assert_same_flow(&first[s - 1], &fl);
            if (pass == 1)
                flow_free(&fl);
        }
        /* Live chunks ship raw when every encoder is busy (a loaded machine), so only some zstd
         * is certain; the byte comparisons above say the rest. */
        if (compressible)
            assert_true(zstd > 0);
        else
            assert_int_equal(zstd, 0);
        cs_ws_close(ws);
        assert_true(has_frames(f, 4));
        assert_int_equal(cs_proc_log_count(&f->proc, "level=ERROR"), 0);
        stop_daemon(f);
        if (!compressible)
            break;
    }
    for (size_t k = 0; k < nlive; k++)
        flow_free(&got[k]);
    for (int k = 0; k < 4; k++)
        flow_free(&first[k]);
}

static void replay_matches_live_zstd(void **state)
{
    replay_matches_live(*state, true);
}

static void replay_matches_live_raw(void **state)
{
    replay_matches_live(*state, false);
}

/* ---- older rings ------------------------------------------------------------------------------ */

#define SMALL_ARGS "--source", "synthetic", "--synthetic-size", "300000", "--chunk-size", "65536", \
                   "--synthetic-compressible", "--emit-window", "0"

static const char *const k_fill_small[] = {SMALL_ARGS, "--synthetic-interval=-1ns", "--synthetic-count", "3", NULL};
static const char *const k_serve_small[] = {SMALL_ARGS, "--synthetic-interval", "1h", "--start-ledger", "4", NULL};

static void serve(fixture *f, const char *const *args)
{
    start_daemon(f, args);
    if (cs_proc_wait_listening(&f->proc, WAIT_MS) != 0)
        fail_msg("not listening:\n%s", f->proc.log);
    wait_retained(f, 4);
}

static void read_file(const char *path, char *buf, size_t len)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    size_t n = fread(buf, 1, len - 1, fp);
    buf[n] = '\0';
    fclose(fp);
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    fputs(text, fp);
    assert_int_equal(fclose(fp), 0);
}

/* A ring of format 2 (records of version 1, no frames) opens and is served by re-encoding; the
 * background pass then stores frames for its ledgers, rewrites their records and the marker. */
static void format2_ring_served_then_frames_made(void **state)
{
    fixture *f = *state;
    run_to_exit(f, k_fill_small);
    /* Made a ring of format 2 by hand: a record file of version 1 (no frames fields) per ledger,
     * no segments. */
    char p[1024], text[1100];
    for (int s = 1; s <= 3; s++) {
        char name[64];
        assert_true(cs_ringfiles_record(f->ring, (uint32_t)s, text, sizeof text, NULL));
        char *cut = strstr(text, " frames_len=");
        assert_non_null(cut);
        assert_memory_equal(text, "corestream-ring-record 5 ", 25);
        text[23] = '1';
        strcpy(cut, "\n");
        snprintf(name, sizeof name, "ledger-%d.rec", s);
        ring_path(f, name, p, sizeof p);
        write_file(p, text);
    }
    cs_ringfiles_log_path(p, sizeof p, f->ring, 1);
    assert_int_equal(unlink(p), 0);
    cs_ringfiles_seg_path(p, sizeof p, f->ring, 1);
    assert_int_equal(unlink(p), 0);
    ring_path(f, "ring-format", p, sizeof p);
    write_file(p, "corestream-ring 2\n");
    serve(f, k_serve_small);
    assert_true(read_verified(f, 1, 4) >= 15); /* 1..3 re-encoded: all 15 compress */
    wait_line_anywhere(f, "level=INFO msg=\"ring: stored frames made for ledgers retained without them\" ledgers=3");
    assert_true(has_frames(f, 1) && has_frames(f, 3));
    /* The records moved into the log; the record files are gone. */
    assert_false(exists(f, "ledger-2.rec"));
    assert_true(cs_ringfiles_record(f->ring, 2, text, sizeof text, NULL));
    static const char want[] = "corestream-ring-record 5 seq=2 len=300000 chunks=5 chunk_size=65536 ";
    if (strncmp(text, want, strlen(want)) != 0 || strstr(text, "frames_len=0 "))
        fail_msg("record: %s", text);
    ring_path(f, "ring-format", p, sizeof p);
    read_file(p, text, sizeof text);
    assert_string_equal(text, "corestream-ring 4\n");
    assert_true(read_verified(f, 1, 4) >= 15); /* 1..3 from the pass's frames: all compressed */
    assert_int_equal(cs_proc_log_count(&f->proc, "level=ERROR"), 0);
    stop_daemon(f);
}

/* The ring dir of this build is still a dump: --source file replays its ledger-<seq>.xdr files
 * (skipping the records logs and frames segments) into another data dir, byte for byte. */
static void file_source_replays_new_ring(void **state)
{
    fixture *f = *state;
    run_to_exit(f, k_fill_small);
    assert_true(has_frames(f, 2));
    char other[720];
    memcpy(other, f->data, strlen(f->data) - 5);
    strcpy(other + strlen(f->data) - 5, "/other");
    const char *argv[] = {CORESTREAMD_BIN, "--listen", "127.0.0.1:0", "--data-dir", other, "--source", "file",
                          "--file-dir", f->ring, "--file-count", "3", "--cadence", "1ms", "--emit-window", "0",
                          NULL};
    assert_int_equal(cs_proc_start(&f->proc, (char *const *)argv), 0);
    f->started = true;
    int st = cs_proc_wait_exit(&f->proc, 60000);
    cs_proc_drain(&f->proc);
    if (st != 0 || !strstr(f->proc.log, "msg=\"source exhausted\""))
        fail_msg("exit %d:\n%s", st, f->proc.log);
    for (int s = 1; s <= 3; s++) {
        char cmd[9000];
        snprintf(cmd, sizeof cmd, "cmp -s '%s/ledger-%d.xdr' '%s/ledgers/ledger-%d.xdr'", f->ring, s, other, s);
        if (system(cmd) != 0)
            fail_msg("ledger %d differs after the file source:\n%s", s, f->proc.log);
    }
}

/* ---- corrupt frames --------------------------------------------------------------------------- */

typedef enum fcorrupt { F_TRUNCATE, F_FLIP, F_EMPTY, F_SYMLINK, F_MISSING } fcorrupt;

static off_t file_size(const char *p)
{
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    return st.st_size;
}

/* Where ledger 2's frames lie in frames-0.seg, and the file's length, before the corruption. */
typedef struct frames_at {
    uint64_t off, len;
    off_t seg_size;
} frames_at;

/* Corrupts ledger 2's stored frames in frames-0.seg: a truncation cuts the file 1000 bytes into
 * them (the frames of the ledgers after 2 in the segment go with it), an emptied, replaced or
 * removed file takes the frames of every ledger of the segment; a flip changes ledger 2's last
 * payload byte (before its index), which a replay reads last. */
static void corrupt_frames(const fixture *f, fcorrupt c, frames_at *at)
{
    char p[1024];
    cs_ringfiles_seg_path(p, sizeof p, f->ring, 2);
    assert_true(cs_ringfiles_frames(f->ring, 2, &at->off, &at->len));
    at->seg_size = file_size(p);
    assert_true((uint64_t)at->seg_size >= at->off + at->len);
    switch (c) {
    case F_TRUNCATE:
        assert_int_equal(truncate(p, (off_t)at->off + 1000), 0);
        break;
    case F_EMPTY:
        assert_int_equal(truncate(p, 0), 0);
        break;
    case F_FLIP: {
        char text[1100];
        assert_true(cs_ringfiles_record(f->ring, 2, text, sizeof text, NULL));
        const char *c_at = strstr(text, " chunks=");
        assert_non_null(c_at);
        long chunks = strtol(c_at + 8, NULL, 10);
        /* the trailer, then 16 bytes per index entry, end ledger 2's frames */
        off_t b_at = (off_t)(at->off + at->len) - 24 - 16 * chunks - 1;
        int fd = open(p, O_RDWR);
        assert_true(fd >= 0);
        uint8_t b;
        assert_int_equal(pread(fd, &b, 1, b_at), 1);
        b ^= 0x40;
        assert_int_equal(pwrite(fd, &b, 1, b_at), 1);
        close(fd);
        break;
    }
    case F_SYMLINK:
        assert_int_equal(unlink(p), 0);
        assert_int_equal(symlink("/etc/hostname", p), 0);
        break;
    case F_MISSING:
        assert_int_equal(unlink(p), 0);
        break;
    }
}

static const char *frames_error(const fixture *f)
{
    static char buf[1200];
    snprintf(buf, sizeof buf,
             "level=ERROR msg=\"ring frames failed their integrity check; the ledger is replayed by re-encoding "
             "it\" file=%s/frames-0.seg problem=",
             f->ring);
    return buf;
}

/* Ledger seq's frames ERROR among the lines read so far (any order: the open checks the newest
 * first, replay workers may open the next ledger early), into buf; false when there is none. */
static bool frames_line(fixture *f, uint32_t seq, char *buf, size_t len)
{
    cs_proc_drain(&f->proc);
    char needle[1300], tail[32];
    snprintf(needle, sizeof needle, "%s", with_pid(f, frames_error(f)));
    snprintf(tail, sizeof tail, " ledger=%u", seq);
    size_t tl = strlen(tail);
    for (const char *at = f->proc.log; (at = strstr(at, needle)) != NULL; at++) {
        size_t n = strcspn(at, "\n");
        if (n > tl && memcmp(at + n - tl, tail, tl) == 0) {
            snprintf(buf, len, "%.*s", (int)n, at);
            return true;
        }
    }
    return false;
}

/* Waits for ledger seq's frames ERROR and checks its problem (problem="…" as logged, a prefix). */
static void expect_frames_problem(fixture *f, uint32_t seq, const char *problem)
{
    char line[2048];
    for (int i = 0; i < WAIT_MS / 10; i++) {
        if (frames_line(f, seq, line, sizeof line)) {
            if (!strstr(line, problem))
                fail_msg("wanted %s; line: %s", problem, line);
            return;
        }
        usleep(10000);
    }
    fail_msg("no frames ERROR for ledger %u in:\n%s", seq, f->proc.log);
}

/* Every chunk fl holds, decompressed, is the ledger's own bytes at its place: nothing corrupt
 * was sent. */
static void expect_sent_chunks_intact(const fixture *f, const flow *fl)
{
    char p[1024], text[1100];
    assert_true(cs_ringfiles_record(f->ring, 2, text, sizeof text, NULL));
    const char *at = strstr(text, " chunk_size=");
    assert_non_null(at);
    size_t cs = (size_t)strtoul(at + 12, NULL, 10);
    ring_path(f, "ledger-2.xdr", p, sizeof p);
    int fd = open(p, O_RDONLY);
    assert_true(fd >= 0);
    uint8_t *want = malloc(cs), *got = malloc(cs);
    assert_true(want && got);
    for (size_t k = 0; k < fl->n; k++) {
        ssize_t n = pread(fd, want, cs, (off_t)(k * cs));
        assert_true(n > 0);
        cs_wire_msg w; /* the chunk as received: its message, header and all */
        assert_int_equal(cs_wire_decode(fl->chunk[k], fl->len[k], &w, NULL), 0);
        size_t g = ZSTD_decompress(got, cs, w.payload, w.payload_len);
        if (ZSTD_isError(g) || g != (size_t)n || memcmp(got, want, g) != 0)
            fail_msg("chunk %zu of ledger 2 was sent with bytes that are not the ledger's", k);
    }
    close(fd);
    free(want);
    free(got);
}

/* Reads flows from ws: ledger 2 must end in 1011 naming it, with no END, and every chunk sent
 * before the close intact (the corrupted one never left). */
static void expect_2_closed(const fixture *f, cs_ws *ws)
{
    flow fl;
    int rc = read_flow(ws, &fl);
    if (rc != 0)
        fail_msg("ledger %u ended whole (%zu chunks) with corrupt frames", fl.seq, fl.n);
    assert_int_equal(fl.close_code, 1011);
    assert_string_equal(fl.reason, "ring ledger 2 failed its integrity check");
    assert_int_equal(fl.zstd, (int)fl.n);
    expect_sent_chunks_intact(f, &fl);
    flow_free(&fl);
}

static void check_problem(fixture *f, const char *problem)
{
    char line[2048];
    cs_proc_line(&f->proc, line, sizeof line);
    if (!strstr(line, problem))
        fail_msg("wanted %s; line: %s", problem, line);
}

/* How many ledgers lose their frames to c done to ledger 2's in a ring of 1..3: a truncation
 * inside 2's cuts 3's too; a file emptied, replaced or removed takes the segment's every ledger's. */
static int frames_lost(fcorrupt c)
{
    return c == F_FLIP ? 1 : c == F_TRUNCATE ? 2 : 3;
}

static void frames_corrupt_before_start(fixture *f, fcorrupt c)
{
    run_to_exit(f, k_fill_small);
    frames_at at;
    corrupt_frames(f, c, &at);
    serve(f, k_serve_small);
    if (c == F_FLIP) {
        /* Same length: found by the chunk's hash in the index, before that chunk goes out. */
        cs_ws *ws = cs_ws_connect("127.0.0.1", f->proc.port, "/stream?start=2&end=4", WAIT_MS, NULL, NULL, 0);
        assert_non_null(ws);
        expect_2_closed(f, ws);
        cs_ws_close(ws);
        wait_line(f, frames_error(f));
        check_problem(f, "problem=\"frames-0.seg changed on disk: ledger 2's chunk ");
    } else {
        /* Found at open, before listening: the ledgers stay and are re-encoded. */
        char want[256];
        for (uint32_t s = 2; s <= 3; s++) {
            if (c == F_SYMLINK)
                snprintf(want, sizeof want, "problem=\"is a symbolic link\" ledger=%u", s);
            else if (c == F_MISSING)
                snprintf(want, sizeof want, "problem=\"is missing\" ledger=%u", s);
            else
                snprintf(want, sizeof want, "problem=\"is %lld bytes, its record says ledger 2's frames end at byte %llu\" ledger=2",
                         c == F_EMPTY ? 0 : (long long)at.off + 1000, (unsigned long long)(at.off + at.len));
            char line[2048];
            if (!frames_line(f, s, line, sizeof line))
                fail_msg("no frames ERROR for ledger %u in:\n%s", s, f->proc.log);
            if (s == 2 && !strstr(line, want))
                fail_msg("wanted %s; line: %s", want, line);
        }
    }
    /* Every ledger arrives whole and verified; those that lost their frames by re-encoding. */
    read_verified(f, 1, 4);
    assert_int_equal(cs_proc_log_count(&f->proc, "ring frames failed their integrity check"), frames_lost(c));
    assert_int_equal(cs_proc_log_count(&f->proc, "ring ledger is bad"), 0);
    stop_daemon(f);
}

#define BEFORE_START(kind, fn)                                                                       \
    static void fn(void **state)                                                                   \
    {                                                                                              \
        frames_corrupt_before_start(*state, kind);                                                 \
    }
BEFORE_START(F_TRUNCATE, frames_truncated_before_start)
BEFORE_START(F_FLIP, frames_flipped_before_start)
BEFORE_START(F_EMPTY, frames_emptied_before_start)
BEFORE_START(F_SYMLINK, frames_symlink_before_start)
BEFORE_START(F_MISSING, frames_missing_before_start)

/* A raw chunk's hash changed in the frames index (docs/RING.md, failure table: "a bad frames
 * index"): the replay stops before that chunk with 1011, but the ring proves the ledger against
 * its own record before anything else: the ledger hashes to its record, so it stays and only its
 * frames go; the next subscriber gets it whole by re-encoding, nothing is quarantined. */
static void frames_index_wrong_costs_only_the_frames(void **state)
{
    fixture *f = *state;
    static const char *const fill[] = {SMALL_ARGS, "--compress=false", "--synthetic-interval=-1ns",
                                       "--synthetic-count", "3", NULL};
    static const char *const srv[] = {SMALL_ARGS, "--compress=false", "--synthetic-interval", "1h",
                                      "--start-ledger", "4", NULL};
    run_to_exit(f, fill);
    char p[1024], text[1100];
    uint64_t off, len;
    cs_ringfiles_seg_path(p, sizeof p, f->ring, 2);
    assert_true(cs_ringfiles_frames(f->ring, 2, &off, &len));
    assert_true(cs_ringfiles_record(f->ring, 2, text, sizeof text, NULL));
    const char *c_at = strstr(text, " chunks=");
    assert_non_null(c_at);
    long chunks = strtol(c_at + 8, NULL, 10);
    /* ledger 2's index entry 0: codec, 3 zero bytes, length, then the hash */
    off_t entry0 = (off_t)(off + len) - 24 - 16 * chunks;
    int fd = open(p, O_RDWR);
    assert_true(fd >= 0);
    uint8_t b[16];
    assert_int_equal(pread(fd, b, 16, entry0), 16);
    assert_int_equal(b[0], 0); /* a raw chunk: its bytes are the ledger's */
    b[8] ^= 0x01;
    assert_int_equal(pwrite(fd, b, 16, entry0), 16);
    close(fd);
    serve(f, srv);
    cs_ws *ws = cs_ws_connect("127.0.0.1", f->proc.port, "/stream?start=2&end=4", WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    flow fl;
    if (read_flow(ws, &fl) != 0)
        fail_msg("ledger 2 ended whole with a wrong index");
    assert_int_equal(fl.close_code, 1011);
    assert_string_equal(fl.reason, "ring ledger 2 failed its integrity check");
    assert_int_equal(fl.n, 0); /* stopped before chunk 0 */
    flow_free(&fl);
    cs_ws_close(ws);
    wait_line(f, "level=WARN msg=\"ring ledger was suspected and hashes to its record; it stays\" ledger=2 "
                 "suspicion=\"ledger-2.xdr changed on disk: chunk 0 hashes to ");
    expect_frames_problem(f, 2, "problem=");
    read_verified(f, 1, 4);
    assert_int_equal(cs_proc_log_count(&f->proc, "ring ledger is bad"), 0);
    char body[512];
    assert_int_equal(cs_http_get("127.0.0.1", f->proc.port, "/healthz", WAIT_MS, body, sizeof body, NULL, 0), 200);
    if (!strstr(body, "\"oldest\":1,\"latest\":4,") || !strstr(body, "\"ring_dropped\":0,"))
        fail_msg("healthz: %s", body);
    stop_daemon(f);
}

/* Ledgers big enough that a slow subscriber's replay is mid-file: 48 chunks of 1 MiB, about 7 MiB
 * of frames, more than the socket buffers hold. Re-encoding three of them is real work: the
 * background threads run at the daemon's priority here, so that a machine kept busy at that
 * priority (scripts/stress-tests.sh) slows these replays down instead of starving them, which is
 * what nice 19 is for and not what these tests are about. */
#define BIG_ARGS "--source", "synthetic", "--synthetic-size", "50331648", "--chunk-size", "1048576", \
                 "--synthetic-compressible", "--emit-window", "0", "--background-nice", "0"
static const char *const k_fill_big[] = {BIG_ARGS, "--synthetic-interval=-1ns", "--synthetic-count", "3", NULL};
static const char *const k_serve_big[] = {BIG_ARGS, "--synthetic-interval", "1h", "--start-ledger", "4", NULL};

/* Corrupted after ledger 2's replay began (its BEGIN arrived; the subscriber reads slowly): a
 * truncation or a changed byte ends it in 1011 with no END; a removed frames file is still read
 * whole from the descriptor the replay holds. Either way the next subscriber gets ledger 2 whole,
 * re-encoded, and the daemon stays up. The segment's file holds 3's and 4's frames too: a
 * truncation or a removal costs them theirs (found when they are next opened), never the
 * ledgers. */
static void frames_corrupt_while_replaying(fixture *f, fcorrupt c)
{
    run_to_exit(f, k_fill_big);
    serve(f, k_serve_big);
    cs_ws_opts o = {.rcvbuf = 4096};
    cs_ws *ws = cs_ws_connect_opts("127.0.0.1", f->proc.port, "/stream?start=2&end=4", &o, WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    cs_ws_msg m;
    assert_int_equal(cs_ws_read(ws, &m, WAIT_MS), CS_WS_BINARY);
    cs_wire_msg w;
    assert_int_equal(cs_wire_decode(m.data, m.len, &w, NULL), 0);
    assert_int_equal(w.type, CS_WIRE_TYPE_BEGIN);
    frames_at at;
    corrupt_frames(f, c, &at);
    /* The BEGIN is consumed: read the rest of ledger 2 as a flow missing its BEGIN. */
    int code = 0;
    char reason[128] = "";
    bool ended = false;
    size_t chunks = 0;
    for (int i = 0; i < 100000; i++) {
        int k = cs_ws_read(ws, &m, WAIT_MS);
        if (k == CS_WS_CLOSE) {
            code = m.close_code;
            snprintf(reason, sizeof reason, "%s", m.reason);
            break;
        }
        assert_int_equal(k, CS_WS_BINARY);
        assert_int_equal(cs_wire_decode(m.data, m.len, &w, NULL), 0);
        assert_int_equal(w.seq, 2);
        if (w.type == CS_WIRE_TYPE_END) {
            assert_int_equal(w.chunk_count, chunks);
            ended = true;
            break;
        }
        assert_int_equal(w.chunk_idx, chunks);
        chunks++;
    }
    /* Ledger 4 was retained after 3, so its frames follow theirs in the segment and go with them;
     * but the live ledger may be served from memory, its frames never opened in this run. */
    char want[300], line[2048];
    if (c == F_MISSING) {
        assert_true(ended);
        cs_ws_close(ws);
        /* The next reader finds the file gone, says so, and is served by re-encoding: ledger 2 and
         * the others of the segment, whose frames went with it. */
        read_verified(f, 2, 4);
        for (uint32_t s = 2; s <= 3; s++) {
            snprintf(want, sizeof want, "problem=\"is missing\" ledger=%u", s);
            expect_frames_problem(f, s, want);
        }
    } else {
        if (ended)
            fail_msg("ledger 2 ended (%zu chunks) after its frames were corrupted", chunks);
        assert_int_equal(code, 1011);
        assert_string_equal(reason, "ring ledger 2 failed its integrity check");
        cs_ws_close(ws);
        snprintf(want, sizeof want,
                 c == F_FLIP ? "problem=\"frames-0.seg changed on disk: ledger 2's chunk "
                             : "problem=\"frames-0.seg is shorter than ledger 2's record: ends before byte ");
        expect_frames_problem(f, 2, want);
        read_verified(f, 2, 4);
        if (c == F_TRUNCATE) { /* the cut took 3's frames too: found when they are opened */
            snprintf(want, sizeof want, "problem=\"is %lld bytes, its record says ledger 3's frames end at byte ",
                     (long long)at.off + 1000);
            expect_frames_problem(f, 3, want);
        }
    }
    int lost = c == F_FLIP ? 1 : 2 + frames_line(f, 4, line, sizeof line);
    assert_int_equal(cs_proc_log_count(&f->proc, "ring frames failed their integrity check"), lost);
    assert_int_equal(cs_proc_log_count(&f->proc, "ring ledger is bad"), 0);
    stop_daemon(f);
}

#define WHILE_REPLAYING(kind, fn)                                                                    \
    static void fn(void **state)                                                                   \
    {                                                                                              \
        frames_corrupt_while_replaying(*state, kind);                                              \
    }
WHILE_REPLAYING(F_TRUNCATE, frames_truncated_while_replaying)
WHILE_REPLAYING(F_FLIP, frames_flipped_while_replaying)
WHILE_REPLAYING(F_MISSING, frames_removed_while_replaying)

/* ---- a catch-up reaches the live flow ----------------------------------------------------------- */

/* An unbounded catch-up from ledger 1 of a 20-ledger ring while the source publishes every 50 ms:
 * every ledger in order, byte for byte, from the ring (stampless, on cs-ws-bulk) through to the
 * live flow (stamped), with no gap and no duplicate across the hand-off; the daemon logs the move
 * once, and a SIGTERM with the subscriber now on its live thread ends the daemon cleanly. */
static void catch_up_moves_to_the_live_thread(void **state)
{
    fixture *f = *state;
    enum { SIZE = 200000 };
    const char *args[] = {"--source", "synthetic", "--synthetic-size", "200000", "--chunk-size", "65536",
                          "--synthetic-interval", "50ms", "--emit-window", "0", NULL};
    start_daemon(f, args);
    if (cs_proc_wait_listening(&f->proc, WAIT_MS) != 0)
        fail_msg("not listening:\n%s", f->proc.log);
    wait_retained(f, 20);
    cs_ws *ws = cs_ws_connect("127.0.0.1", f->proc.port, "/stream?start=1", WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    uint8_t *want = malloc(SIZE);
    assert_non_null(want);
    int stamped = 0, stampless = 0;
    for (uint32_t seq = 1; seq < 2000 && stamped < 5; seq++) {
        cs_ledger l;
        char err[256];
        int rc = cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err);
        if (rc != 1)
            fail_msg("ledger %u: %d %s\n%s", seq, rc, err, f->proc.log);
        assert_int_equal(l.seq, seq);
        assert_int_equal(l.len, SIZE);
        /* A client stalled past the rest of an emission (a loaded machine) loses that live flow and
         * gets the ledger again from the ring: stampless, its partial discarded. */
        if (l.discarded)
            assert_int_equal(l.emit_end, 0);
        cs_synthetic_fill(want, SIZE, seq, false);
        assert_memory_equal(l.data, want, SIZE);
        if (l.emit_end)
            stamped++;
        else if (!stamped)
            stampless++;
        cs_ledger_free(&l);
    }
    free(want);
    assert_true(stampless >= 20); /* the ring's part */
    assert_int_equal(stamped, 5);
    wait_line_anywhere(f, "msg=\"caught up, moved to the live thread\"");
    cs_proc_drain(&f->proc);
    assert_int_equal(cs_proc_log_count(&f->proc, "caught up, moved to the live thread"), 1);
    assert_int_equal(cs_proc_log_count(&f->proc, "level=ERROR"), 0);
    stop_daemon(f);
    cs_ws_close(ws);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(catch_up_moves_to_the_live_thread, setup, teardown),
        cmocka_unit_test_setup_teardown(replay_matches_live_zstd, setup, teardown),
        cmocka_unit_test_setup_teardown(replay_matches_live_raw, setup, teardown),
        cmocka_unit_test_setup_teardown(format2_ring_served_then_frames_made, setup, teardown),
        cmocka_unit_test_setup_teardown(file_source_replays_new_ring, setup, teardown),
        cmocka_unit_test_setup_teardown(frames_truncated_before_start, setup, teardown),
        cmocka_unit_test_setup_teardown(frames_flipped_before_start, setup, teardown),
        cmocka_unit_test_setup_teardown(frames_emptied_before_start, setup, teardown),
        cmocka_unit_test_setup_teardown(frames_symlink_before_start, setup, teardown),
        cmocka_unit_test_setup_teardown(frames_missing_before_start, setup, teardown),
        cmocka_unit_test_setup_teardown(frames_index_wrong_costs_only_the_frames, setup, teardown),
        cmocka_unit_test_setup_teardown(frames_truncated_while_replaying, setup, teardown),
        cmocka_unit_test_setup_teardown(frames_flipped_while_replaying, setup, teardown),
        cmocka_unit_test_setup_teardown(frames_removed_while_replaying, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
