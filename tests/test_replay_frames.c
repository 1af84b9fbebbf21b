/* SPDX-License-Identifier: Apache-2.0 */
/* cs_replay over a ring ledger with stored frames: the CHUNK messages come out exactly as they
 * were published (the stored "zstd" payloads here are not even zstd, so any recompression or
 * decoding would show), END carries the recorded checksum; frames changed on disk end the replay
 * CS_REPLAY_CORRUPT with no END and cost only the frames, so the next replay re-encodes the
 * intact ledger. The window bounds what a replay holds ahead of its reader, and every wake carries
 * the argument its replay was started with. Only a held replay pins its ledger's descriptors
 * while its reader waits; a per-read one gets the ledger again for each read. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "corestreamd/stream/replay.h"
#include "store/ring.h"
#include "support/ringfiles.h"
#include "support/tmpdir.h"
#include "wire/wire.h"

#define CS 4096
#define LEN (2 * CS + 100)

typedef struct fixture {
    cs_tmpdir dir;
    char ring_dir[600];
    cs_ring *ring;
    uint8_t raw[LEN];
    uint8_t msg[3][CS_WIRE_CHUNK_HEADER_LEN + CS];
    struct iovec chunks[3];
    cs_ledger_record rec;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned wakes;
    int last_arg, other_args; /* the wakes' arguments: the last one, and how many differed from it */
} fixture;

static void wake(void *ctx, int arg)
{
    fixture *f = ctx;
    pthread_mutex_lock(&f->mu);
    if (f->wakes && arg != f->last_arg)
        f->other_args++;
    f->last_arg = arg;
    f->wakes++;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || cs_tmpdir_make(&f->dir, "replayframes") != 0) {
        free(f);
        return -1;
    }
    size_t n = strlen(f->dir.path);
    if (n > sizeof f->ring_dir - 16) {
        cs_tmpdir_remove(&f->dir);
        free(f);
        return -1;
    }
    memcpy(f->ring_dir, f->dir.path, n);
    strcpy(f->ring_dir + n, "/ledgers");
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    /* Compressible raw bytes, so a re-encoding replay does compress chunks 0 and 2. */
    for (size_t i = 0; i < LEN; i++)
        f->raw[i] = (uint8_t)(i / 64);
    static const size_t zlen[3] = {300, 0, 40};
    for (uint32_t k = 0; k < 3; k++) {
        bool raw = k == 1;
        size_t len = raw ? CS : zlen[k];
        cs_wire_put_chunk_header(f->msg[k], 7, k, raw ? 0 : 1);
        for (size_t i = 0; i < len; i++)
            f->msg[k][CS_WIRE_CHUNK_HEADER_LEN + i] = raw ? f->raw[CS + i] : (uint8_t)(0xA0 + k + i);
        f->chunks[k] = (struct iovec){f->msg[k], CS_WIRE_CHUNK_HEADER_LEN + len};
    }
    f->rec = (cs_ledger_record){.len = LEN, .chunks = 3, .chunk_size = CS, .xxh64 = XXH64(f->raw, LEN, 0)};
    cs_err err = {0};
    if (cs_ring_open(&f->ring, f->ring_dir, 10, &err) != 0)
        return -1;
    struct iovec part = {f->raw, LEN};
    bool reset;
    if (cs_ring_put(f->ring, 7, &part, 1, f->chunks, 3, &f->rec, &reset, &err) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    cs_ring_close(f->ring);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    cs_tmpdir_remove(&f->dir);
    free(f);
    return 0;
}

static struct timespec in_10s(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    return until;
}

static unsigned wakes_seen(fixture *f)
{
    pthread_mutex_lock(&f->mu);
    unsigned n = f->wakes;
    pthread_mutex_unlock(&f->mu);
    return n;
}

/* Waits for a wake after the seen-th, until the deadline: false when none came. */
static bool await_wake(fixture *f, unsigned seen, const struct timespec *until)
{
    pthread_mutex_lock(&f->mu);
    int w = 0;
    while (f->wakes == seen && w == 0)
        w = pthread_cond_timedwait(&f->cv, &f->mu, until);
    pthread_mutex_unlock(&f->mu);
    return w == 0;
}

/* The next message, or a terminal status: waits for wakes, bounded at 10 s. */
static int next(fixture *f, cs_replay *r, cs_msg **m, cs_err *err)
{
    struct timespec until = in_10s();
    for (;;) {
        unsigned seen = wakes_seen(f);
        int rc = cs_replay_next(r, m, err);
        if (rc != CS_REPLAY_PENDING)
            return rc;
        if (!await_wake(f, seen, &until))
            fail_msg("replay made no progress in 10 s");
    }
}

static cs_replay_pool *pool_new(fixture *f)
{
    cs_err err = {0};
    cs_replay_pool *p = cs_replay_pool_new(2, f->ring, true, 1, CS, wake, f, &err);
    if (!p)
        fail_msg("pool: %s", err.msg);
    return p;
}

static void expect_begin(fixture *f, cs_replay *r)
{
    cs_msg *m;
    cs_err err = {0};
    assert_int_equal(next(f, r, &m, &err), CS_REPLAY_MSG);
    uint8_t want[CS_WIRE_BEGIN_LEN];
    cs_wire_put_begin(want, 7, 0);
    assert_int_equal(m->len, CS_WIRE_BEGIN_LEN);
    assert_memory_equal(m->data, want, CS_WIRE_BEGIN_LEN);
    cs_msg_release(m);
}

static void stored_chunks_are_sent_as_published(void **state)
{
    fixture *f = *state;
    cs_replay_pool *p = pool_new(f);
    cs_replay *r = cs_replay_start(p, 7, 5, true); /* its wakes say who reads it: 5 */
    expect_begin(f, r);
    cs_err err = {0};
    cs_msg *m;
    for (int k = 0; k < 3; k++) {
        assert_int_equal(next(f, r, &m, &err), CS_REPLAY_MSG);
        assert_int_equal(m->len, f->chunks[k].iov_len);
        assert_memory_equal(m->data, f->msg[k], m->len);
        cs_msg_release(m);
    }
    assert_int_equal(next(f, r, &m, &err), CS_REPLAY_MSG);
    uint8_t end[CS_WIRE_END_LEN];
    cs_wire_put_end(end, 7, 3, LEN, 0, f->rec.xxh64);
    assert_int_equal(m->len, CS_WIRE_END_LEN);
    assert_memory_equal(m->data, end, CS_WIRE_END_LEN);
    cs_msg_release(m);
    assert_int_equal(next(f, r, &m, &err), CS_REPLAY_DONE);
    cs_replay_release(r);
    cs_replay_pool_free(p);
    assert_true(f->wakes > 0);
    assert_int_equal(f->last_arg, 5);
    assert_int_equal(f->other_args, 0);
}

/* A changed byte in chunk 2's stored payload: chunks 0 and 1 go out, chunk 2 never does (its
 * hash in the index differs), no END; the frames are dropped and the next replay re-encodes. */
static void changed_frames_end_without_end_then_reencode(void **state)
{
    fixture *f = *state;
    char path[700];
    uint64_t off, flen;
    cs_ringfiles_seg_path(path, sizeof path, f->ring_dir, 7);
    assert_true(cs_ringfiles_frames(f->ring_dir, 7, &off, &flen));
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t b = 0;
    assert_int_equal(pread(fd, &b, 1, (off_t)off + 310), 1); /* chunk 2's stored payload */
    b ^= 1;
    assert_int_equal(pwrite(fd, &b, 1, (off_t)off + 310), 1);
    close(fd);
    cs_replay_pool *p = pool_new(f);
    cs_replay *r = cs_replay_start(p, 7, 0, true);
    expect_begin(f, r);
    cs_err err = {0};
    cs_msg *m;
    int rc, chunks = 0;
    while ((rc = next(f, r, &m, &err)) == CS_REPLAY_MSG) {
        cs_wire_msg w;
        assert_int_equal(cs_wire_decode(m->data, m->len, &w, NULL), 0);
        assert_int_equal(w.type, CS_WIRE_TYPE_CHUNK); /* never END */
        chunks++;
        cs_msg_release(m);
    }
    assert_int_equal(rc, CS_REPLAY_CORRUPT);
    assert_int_equal(chunks, 2); /* chunk 2, the changed one, is never handed out */
    assert_non_null(strstr(err.msg, "frames-0.seg changed on disk: ledger 7's chunk 2 hashes to "));
    cs_replay_release(r);
    /* The frames are gone (its record names none now; their bytes stay in the segment), the
     * ledger stays. */
    assert_false(cs_ringfiles_frames(f->ring_dir, 7, &off, &flen));
    uint32_t o, l;
    assert_true(cs_ring_bounds(f->ring, &o, &l));
    assert_int_equal(o, 7);

    /* Re-encoded now: real zstd (or raw) chunks whose bytes are the ledger's, and the END. */
    r = cs_replay_start(p, 7, 0, true);
    expect_begin(f, r);
    uint8_t got[LEN];
    size_t at = 0;
    for (int k = 0; k < 3; k++) {
        assert_int_equal(next(f, r, &m, &err), CS_REPLAY_MSG);
        cs_wire_msg w;
        assert_int_equal(cs_wire_decode(m->data, m->len, &w, NULL), 0);
        assert_int_equal(w.chunk_idx, k);
        if (w.codec == 0) {
            memcpy(got + at, w.payload, w.payload_len);
            at += w.payload_len;
        } else {
            size_t n = ZSTD_decompress(got + at, sizeof got - at, w.payload, w.payload_len);
            assert_false(ZSTD_isError(n));
            at += n;
        }
        cs_msg_release(m);
    }
    assert_int_equal(at, LEN);
    assert_memory_equal(got, f->raw, LEN);
    assert_int_equal(next(f, r, &m, &err), CS_REPLAY_MSG);
    cs_wire_msg w;
    assert_int_equal(cs_wire_decode(m->data, m->len, &w, NULL), 0);
    assert_int_equal(w.type, CS_WIRE_TYPE_END);
    assert_true(w.checksum == f->rec.xxh64);
    cs_msg_release(m);
    cs_replay_release(r);
    cs_replay_pool_free(p);
}

/* Puts ledger seq: n chunks of chunk_size bytes, each stored as published with codec `codec`
 * (codec 1: a plen-byte stand-in payload; codec 0: the raw bytes). */
static void put_ledger(fixture *f, uint32_t seq, uint32_t n, size_t chunk_size, int codec, size_t plen)
{
    size_t len = (size_t)n * chunk_size;
    uint8_t *raw = malloc(len);
    uint8_t *msgs = malloc((size_t)n * (CS_WIRE_CHUNK_HEADER_LEN + chunk_size));
    struct iovec *chunks = calloc(n, sizeof *chunks);
    assert_non_null(raw);
    assert_non_null(msgs);
    assert_non_null(chunks);
    for (size_t i = 0; i < len; i++)
        raw[i] = (uint8_t)(i * 7 + i / 4096);
    for (uint32_t k = 0; k < n; k++) {
        uint8_t *m = msgs + (size_t)k * (CS_WIRE_CHUNK_HEADER_LEN + chunk_size);
        size_t l = codec ? plen : chunk_size;
        cs_wire_put_chunk_header(m, seq, k, (uint8_t)codec);
        if (codec)
            memset(m + CS_WIRE_CHUNK_HEADER_LEN, 0x5A + (int)k, l);
        else
            memcpy(m + CS_WIRE_CHUNK_HEADER_LEN, raw + (size_t)k * chunk_size, l);
        chunks[k] = (struct iovec){m, CS_WIRE_CHUNK_HEADER_LEN + l};
    }
    cs_ledger_record rec = {.len = len, .chunks = n, .chunk_size = chunk_size, .xxh64 = XXH64(raw, len, 0)};
    struct iovec part = {raw, len};
    bool reset;
    cs_err err = {0};
    if (cs_ring_put(f->ring, seq, &part, 1, chunks, n, &rec, &reset, &err) != 0)
        fail_msg("put ledger %u: %s", seq, err.msg);
    free(chunks);
    free(msgs);
    free(raw);
}

/* Waits (bounded at 10 s) until the replay holds exactly `want` prepared messages; none of the
 * states seen on the way may exceed the window. */
static void await_ahead(fixture *f, cs_replay *r, size_t want, size_t max_bytes)
{
    struct timespec until = in_10s();
    for (;;) {
        unsigned seen = wakes_seen(f);
        size_t bytes, n = cs_replay_ahead(r, &bytes);
        assert_true(n <= CS_REPLAY_DEPTH);
        assert_true(bytes <= max_bytes);
        if (n == want)
            return;
        if (!await_wake(f, seen, &until))
            fail_msg("the replay holds %zu messages ahead, not %zu, after 10 s", n, want);
    }
}

/* A subscriber that reads nothing costs the window and no more: CS_REPLAY_DEPTH messages of small
 * stored chunks, CS_REPLAY_WINDOW_BYTES of 256 KiB raw ones (BEGIN counts as a message of no
 * bytes). Handing one out lets the workers refill only once half the window is free. */
static void window_bounds_what_is_prepared(void **state)
{
    fixture *f = *state;
    put_ledger(f, 8, 3 * CS_REPLAY_DEPTH, CS, 1, 100);
    enum { BIG = 256 << 10 };
    put_ledger(f, 9, 3 * CS_REPLAY_WINDOW_BYTES / BIG, BIG, 0, 0);
    cs_replay_pool *p = pool_new(f);
    cs_replay *r = cs_replay_start(p, 8, 0, true);
    await_ahead(f, r, CS_REPLAY_DEPTH, CS_REPLAY_DEPTH * 100);
    cs_msg *m;
    cs_err err = {0};
    for (size_t i = 0; i < CS_REPLAY_DEPTH / 2 - 1; i++) {
        assert_int_equal(cs_replay_next(r, &m, &err), CS_REPLAY_MSG);
        cs_msg_release(m);
    }
    size_t bytes;
    assert_int_equal(cs_replay_ahead(r, &bytes), CS_REPLAY_DEPTH / 2 + 1); /* not refilled yet */
    assert_int_equal(cs_replay_next(r, &m, &err), CS_REPLAY_MSG);
    cs_msg_release(m);
    await_ahead(f, r, CS_REPLAY_DEPTH, CS_REPLAY_DEPTH * 100);
    cs_replay_release(r);

    r = cs_replay_start(p, 9, 0, true);
    await_ahead(f, r, 1 + CS_REPLAY_WINDOW_BYTES / BIG, CS_REPLAY_WINDOW_BYTES);
    assert_int_equal(cs_replay_ahead(r, &bytes), 1 + CS_REPLAY_WINDOW_BYTES / BIG);
    assert_int_equal(bytes, CS_REPLAY_WINDOW_BYTES);
    cs_replay_release(r);
    cs_replay_pool_free(p);
}

/* Descriptors open in this process now. */
static int open_fds(void)
{
    int n = cs_dir_count("/proc/self/fd");
    assert_true(n > 0);
    return n;
}

/* Reads r to its end: the status that ended it, and in *items how many messages came first. */
static int drain(fixture *f, cs_replay *r, size_t *items)
{
    cs_msg *m;
    cs_err err = {0};
    int rc;
    *items = 0;
    for (size_t i = 0; i < 100000 && (rc = next(f, r, &m, &err)) == CS_REPLAY_MSG; i++) {
        cs_msg_release(m);
        (*items)++;
    }
    return rc;
}

/* A replay started without hold (a redelivery) pins no descriptor while its reader waits with a
 * full window, for stored frames and for a ledger re-encoded alike, and still sends the ledger
 * whole; a held one (a catch-up) pins the ledger and its frames meanwhile. */
static void only_held_replays_pin_the_ledger_while_waiting(void **state)
{
    fixture *f = *state;
    put_ledger(f, 8, 3 * CS_REPLAY_DEPTH, CS, 1, 100);
    cs_replay_pool *p = cs_replay_pool_new(2, f->ring, false, 1, CS, wake, f, &(cs_err){0});
    assert_non_null(p);
    int idle = open_fds();
    cs_replay *r = cs_replay_start(p, 8, 0, false);
    await_ahead(f, r, CS_REPLAY_DEPTH, CS_REPLAY_DEPTH * 100);
    assert_int_equal(open_fds(), idle);
    size_t items;
    assert_int_equal(drain(f, r, &items), CS_REPLAY_DONE);
    assert_int_equal(items, 3 * CS_REPLAY_DEPTH + 2);
    cs_replay_release(r);

    r = cs_replay_start(p, 8, 0, true);
    await_ahead(f, r, CS_REPLAY_DEPTH, CS_REPLAY_DEPTH * 100);
    assert_int_equal(open_fds(), idle + 2);
    cs_replay_release(r);
    assert_int_equal(open_fds(), idle);
    cs_replay_pool_free(p);

    put_ledger(f, 9, 4 * CS_REPLAY_DEPTH, CS, 0, 0); /* no stored frames used: re-encoded */
    cs_ring_drop_frames(f->ring, 9, 0, "unused");
    p = pool_new(f);
    r = cs_replay_start(p, 9, 0, false);
    await_ahead(f, r, CS_REPLAY_DEPTH, CS_REPLAY_WINDOW_BYTES);
    assert_int_equal(open_fds(), idle);
    assert_int_equal(drain(f, r, &items), CS_REPLAY_DONE);
    assert_int_equal(items, 4 * CS_REPLAY_DEPTH + 2);
    cs_replay_release(r);
    cs_replay_pool_free(p);
}

/* A ledger pruned while its reader waits: the held replay still sends it whole from the file it
 * holds; the per-read one ends CS_REPLAY_NOT_RETAINED at its next read, with no END. */
static void a_ledger_pruned_meanwhile_ends_only_a_per_read_replay(void **state)
{
    fixture *f = *state;
    put_ledger(f, 8, 3 * CS_REPLAY_DEPTH, CS, 1, 100);
    cs_replay_pool *p = pool_new(f);
    cs_replay *held = cs_replay_start(p, 8, 0, true), *per_read = cs_replay_start(p, 8, 1, false);
    await_ahead(f, held, CS_REPLAY_DEPTH, CS_REPLAY_DEPTH * 100);
    await_ahead(f, per_read, CS_REPLAY_DEPTH, CS_REPLAY_DEPTH * 100);
    for (uint32_t seq = 9; seq <= 17; seq++) /* retention 10: [8,17], then 8 pruned by 18 */
        put_ledger(f, seq, 1, CS, 0, 0);
    put_ledger(f, 18, 1, CS, 0, 0);
    size_t items;
    assert_int_equal(drain(f, held, &items), CS_REPLAY_DONE);
    assert_int_equal(items, 3 * CS_REPLAY_DEPTH + 2);
    assert_int_equal(drain(f, per_read, &items), CS_REPLAY_NOT_RETAINED);
    assert_true(items >= CS_REPLAY_DEPTH && items < 3 * CS_REPLAY_DEPTH + 1);
    cs_replay_release(held);
    cs_replay_release(per_read);
    cs_replay_pool_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(stored_chunks_are_sent_as_published, setup, teardown),
        cmocka_unit_test_setup_teardown(changed_frames_end_without_end_then_reencode, setup, teardown),
        cmocka_unit_test_setup_teardown(window_bounds_what_is_prepared, setup, teardown),
        cmocka_unit_test_setup_teardown(only_held_replays_pin_the_ledger_while_waiting, setup, teardown),
        cmocka_unit_test_setup_teardown(a_ledger_pruned_meanwhile_ends_only_a_per_read_replay, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
