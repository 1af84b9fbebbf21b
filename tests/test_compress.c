/* SPDX-License-Identifier: Apache-2.0 */
/* Chunk compression and the ordered encoder pool: PORTSPEC 2.3 and test cases 60, 61, 62
 * (adapted: no leaked threads, nothing published after destroy), 66 and 67, plus the raw
 * fallback and the 1024-chunk back-pressure, and the auto level's wiring (the controller itself:
 * test_levelctl.c). Also runs under ThreadSanitizer. */
/* For ZSTD_CCtx_getParameter and ZSTD_getFrameHeader, used only to inspect what was configured. */
#define ZSTD_STATIC_LINKING_ONLY
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#include "common/synthetic.h"
#include "corestreamd/stream/compress.h"
#include "wire/wire.h"

#define HDR CS_WIRE_CHUNK_HEADER_LEN
#define WAIT_SECONDS 10 /* bound on every wait; generous for sanitizer builds */

/* ---- helpers ---- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fill_random(uint8_t *buf, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)splitmix(&seed);
}

/* Compressible but distinct per index, so a misordered chunk cannot pass for its neighbour. */
static void fill_pattern(uint8_t *buf, size_t n, uint32_t idx)
{
    char word[32];
    int w = snprintf(word, sizeof word, "ledger-close-meta-%u-", idx);
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)word[i % (size_t)w];
}

/* A message laid out the way the source loop hands it over: 11 reserved header bytes (poisoned
 * here, so a missing header write shows) and the payload after them. */
static cs_msg *make_raw(const uint8_t *payload, size_t n)
{
    cs_msg *m = cs_msg_new(HDR + n);
    assert_non_null(m);
    memset(m->data, 0xEE, HDR);
    if (n)
        memcpy(m->data + HDR, payload, n);
    m->len = HDR + n;
    return m;
}

/* Decodes a CHUNK message, checks its framing and that it expands to want; returns its codec. */
static uint8_t check_chunk(const cs_msg *m, uint32_t seq, uint32_t idx, const uint8_t *want,
                           size_t n)
{
    cs_wire_msg w;
    cs_err err = {0};
    assert_int_equal(cs_wire_decode(m->data, m->len, &w, &err), 0);
    assert_int_equal(w.type, CS_WIRE_TYPE_CHUNK);
    assert_int_equal(w.seq, seq);
    assert_int_equal(w.chunk_idx, idx);
    if (w.codec == CS_CODEC_RAW) {
        assert_int_equal(w.payload_len, n);
        if (n)
            assert_memory_equal(w.payload, want, n);
        return w.codec;
    }
    assert_int_equal(w.codec, CS_CODEC_ZSTD);
    assert_true(w.payload_len < n); /* only a strictly smaller frame ships compressed */
    assert_int_equal(ZSTD_getFrameContentSize(w.payload, w.payload_len), n);
    uint8_t *out = malloc(n);
    assert_non_null(out);
    size_t got = ZSTD_decompress(out, n, w.payload, w.payload_len);
    assert_false(ZSTD_isError(got));
    assert_int_equal(got, n);
    assert_memory_equal(out, want, n);
    free(out);
    return w.codec;
}

static int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The thread count once it settles at want, or what it is after about 2 s: a joined thread's task
 * can stay listed in /proc for a moment after pthread_join returns (the kernel clears the tid
 * before it reaps the task), so a loaded machine may still show it. */
static int thread_count_settled(int want)
{
    int n = thread_count();
    for (int i = 0; i < 2000 && n != want; i++) {
        nanosleep(&(struct timespec){0, 1000000}, NULL);
        n = thread_count();
    }
    return n;
}

static struct timespec deadline(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += WAIT_SECONDS;
    return ts;
}

/* Polls cond(arg) until it holds (true) or WAIT_SECONDS pass (false), napping 1 ms between looks:
 * for state the code exposes only through a getter, with no event to block on. */
static bool wait_until(bool (*cond)(void *), void *arg)
{
    const struct timespec nap = {0, 1000000L};
    for (int i = 0; i < WAIT_SECONDS * 1000; i++) {
        if (cond(arg))
            return true;
        nanosleep(&nap, NULL);
    }
    return cond(arg);
}

/* ---- the publish side: records every message and can hold one publish() call at a gate ---- */

typedef struct recorder {
    cs_msg **msgs;
    size_t cap;
    atomic_size_t count;
    atomic_bool in_publish;
    atomic_int overlaps; /* publish() entered while another call was running */
    atomic_int overflow;
    bool yield; /* give up the CPU inside publish(), widening the window for overlaps */

    size_t gate_at; /* the publish() call for this position waits for the gate; SIZE_MAX: none */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool gate_reached;
    bool gate_open;
} recorder;

static void rec_init(recorder *r, size_t cap)
{
    memset(r, 0, sizeof *r);
    r->msgs = calloc(cap, sizeof *r->msgs);
    assert_non_null(r->msgs);
    r->cap = cap;
    r->gate_at = SIZE_MAX;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
}

static void rec_free(recorder *r)
{
    size_t n = atomic_load(&r->count);
    for (size_t i = 0; i < n && i < r->cap; i++)
        cs_msg_release(r->msgs[i]);
    free(r->msgs);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
}

/* Runs on a worker or the submitting thread; asserts stay on the main thread, so problems are
 * counted here and checked there. */
static void rec_publish(void *ctx, cs_msg *m)
{
    recorder *r = ctx;
    if (atomic_exchange(&r->in_publish, true))
        atomic_fetch_add(&r->overlaps, 1);
    size_t i = atomic_load(&r->count);
    if (i < r->cap) {
        r->msgs[i] = m;
    } else {
        atomic_fetch_add(&r->overflow, 1);
        cs_msg_release(m);
    }
    if (r->yield)
        sched_yield();
    if (i == r->gate_at) {
        struct timespec until = deadline();
        pthread_mutex_lock(&r->mu);
        r->gate_reached = true;
        pthread_cond_broadcast(&r->cv);
        while (!r->gate_open && pthread_cond_timedwait(&r->cv, &r->mu, &until) == 0)
            ;
        pthread_mutex_unlock(&r->mu);
    }
    atomic_store(&r->in_publish, false);
    atomic_store(&r->count, i + 1);
}

static bool rec_wait_gate(recorder *r)
{
    struct timespec until = deadline();
    pthread_mutex_lock(&r->mu);
    while (!r->gate_reached && pthread_cond_timedwait(&r->cv, &r->mu, &until) == 0)
        ;
    bool reached = r->gate_reached;
    pthread_mutex_unlock(&r->mu);
    return reached;
}

static void rec_open_gate(recorder *r)
{
    pthread_mutex_lock(&r->mu);
    r->gate_open = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Everything published exactly once, in submission order, never concurrently. */
static void rec_check_clean(recorder *r, size_t want)
{
    assert_int_equal(atomic_load(&r->count), want);
    assert_int_equal(atomic_load(&r->overflow), 0);
    assert_int_equal(atomic_load(&r->overlaps), 0);
}

/* ---- 66 ---- */

static void test_workers_resolve(void **state)
{
    (void)state;
    const struct {
        int64_t in;
        int want;
    } ok[] = {{0, 4}, {1, 1}, {64, 64}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int got = -7;
        assert_int_equal(cs_compress_workers_resolve(ok[i].in, &got, NULL), 0);
        assert_int_equal(got, ok[i].want);
    }
    cs_err err = {0};
    int got = -7;
    assert_int_equal(cs_compress_workers_resolve(-1, &got, &err), -1);
    assert_string_equal(err.msg, "server: compress workers -1 is outside [1,64]");
    assert_int_equal(cs_compress_workers_resolve(65, &got, &err), -1);
    assert_string_equal(err.msg, "server: compress workers 65 is outside [1,64]");
    assert_int_equal(got, -7); /* untouched on error */
}

/* ---- the context ---- */

static int cctx_param(ZSTD_CCtx *c, ZSTD_cParameter param)
{
    int v = -1;
    assert_false(ZSTD_isError(ZSTD_CCtx_getParameter(c, param, &v)));
    return v;
}

static void test_cctx_config(void **state)
{
    (void)state;
    const struct {
        size_t chunk;
        int log;
    } cases[] = {{1, 10}, {1024, 10}, {4096, 12}, {262144, 18}, {262145, 19}, {8388608, 23}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ZSTD_CCtx *c = cs_chunk_cctx_new(cases[i].chunk, CS_DEFAULT_COMPRESS_LEVEL);
        assert_non_null(c);
        assert_int_equal(cctx_param(c, ZSTD_c_windowLog), cases[i].log);
        assert_int_equal(cctx_param(c, ZSTD_c_compressionLevel), 1);
        assert_int_equal(cctx_param(c, ZSTD_c_checksumFlag), 0);
        assert_int_equal(cctx_param(c, ZSTD_c_contentSizeFlag), 1);
        ZSTD_freeCCtx(c);
    }
}

/* ---- 60 ---- */

static void test_encode_chunk_round_trips(void **state)
{
    (void)state;
    static const char word[] = "ledger-close-meta-";
    size_t comp_n = (sizeof word - 1) * 4096;
    uint8_t *comp = malloc(comp_n);
    assert_non_null(comp);
    for (size_t i = 0; i < comp_n; i++)
        comp[i] = (uint8_t)word[i % (sizeof word - 1)];
    size_t rand_n = 64 << 10;
    uint8_t *rnd = malloc(rand_n);
    assert_non_null(rnd);
    fill_random(rnd, rand_n, 7);

    ZSTD_CCtx *c = cs_chunk_cctx_new(CS_DEFAULT_CHUNK_SIZE, CS_DEFAULT_COMPRESS_LEVEL);
    assert_non_null(c);
    const struct {
        const uint8_t *raw;
        size_t n;
        uint8_t codec;
    } cases[] = {{comp, comp_n, CS_CODEC_ZSTD}, {rnd, rand_n, CS_CODEC_RAW}, {NULL, 0, CS_CODEC_RAW}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cs_msg *m = cs_encode_chunk(c, 42, 3, cases[i].raw, cases[i].n);
        assert_non_null(m);
        assert_int_equal(check_chunk(m, 42, 3, cases[i].raw, cases[i].n), cases[i].codec);
        if (cases[i].codec == CS_CODEC_ZSTD) {
            /* One independent frame, no checksum: the END's XXH64 is the integrity check. */
            ZSTD_frameHeader fh;
            assert_int_equal(ZSTD_getFrameHeader(&fh, m->data + HDR, m->len - HDR), 0);
            assert_int_equal(fh.checksumFlag, 0);
            assert_int_equal(ZSTD_findFrameCompressedSize(m->data + HDR, m->len - HDR), m->len - HDR);
        }
        cs_msg_release(m);
    }
    ZSTD_freeCCtx(c);

    /* No context is how an uncompressed flow is framed. */
    cs_msg *m = cs_encode_chunk(NULL, 42, 3, comp, comp_n);
    assert_non_null(m);
    assert_int_equal(check_chunk(m, 42, 3, comp, comp_n), CS_CODEC_RAW);
    cs_msg_release(m);
    free(rnd);
    free(comp);
}

/* ---- 67 ---- */

static size_t frame_len(ZSTD_CCtx *c, const uint8_t *src, size_t n)
{
    size_t cap = ZSTD_compressBound(n);
    uint8_t *dst = malloc(cap);
    assert_non_null(dst);
    size_t r = ZSTD_compress2(c, dst, cap, src, n);
    assert_false(ZSTD_isError(r));
    free(dst);
    return r;
}

static void test_compressible_ratio_is_chunk_invariant(void **state)
{
    (void)state;
    size_t len = 4 << 20;
    uint8_t *buf = malloc(len);
    assert_non_null(buf);
    cs_synthetic_fill(buf, len, 42, true);
    const size_t chunks[] = {CS_MIN_CHUNK_SIZE, 64 << 10, CS_DEFAULT_CHUNK_SIZE, 1 << 20};
    for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
        ZSTD_CCtx *c = cs_chunk_cctx_new(chunks[k], CS_DEFAULT_COMPRESS_LEVEL);
        assert_non_null(c);
        size_t total = 0;
        for (size_t off = 0; off < len; off += chunks[k])
            total += frame_len(c, buf + off, len - off < chunks[k] ? len - off : chunks[k]);
        ZSTD_freeCCtx(c);
        double ratio = (double)len / (double)total;
        print_message("chunk %zu: ratio %.2fx\n", chunks[k], ratio);
        assert_true(ratio >= 4.0 && ratio <= 12.0);
    }

    /* The incompressible payload is the negative control and must stay one. */
    cs_synthetic_fill(buf, len, 42, false);
    ZSTD_CCtx *c = cs_chunk_cctx_new(CS_DEFAULT_CHUNK_SIZE, CS_DEFAULT_COMPRESS_LEVEL);
    assert_non_null(c);
    double ratio = (double)CS_DEFAULT_CHUNK_SIZE / (double)frame_len(c, buf, CS_DEFAULT_CHUNK_SIZE);
    assert_true(ratio <= 1.1);
    ZSTD_freeCCtx(c);
    free(buf);
}

/* ---- 61 ---- */

static void test_pipeline_publishes_in_order(void **state)
{
    (void)state;
    enum { N = 64, LEN = 32 << 10 };
    static uint8_t raws[N][LEN];
    recorder r;
    rec_init(&r, N);
    cs_chunk_pipeline *p;
    cs_err err = {0};
    assert_int_equal(cs_pipeline_new(&p, 4, true, CS_DEFAULT_COMPRESS_LEVEL, CS_DEFAULT_CHUNK_SIZE, rec_publish, &r, &err), 0);

    /* Alternating compressibility makes workers finish out of order. */
    cs_msg *mine[N];
    for (uint32_t i = 0; i < N; i++) {
        if (i % 2 == 0)
            memset(raws[i], (int)i, LEN);
        else
            fill_random(raws[i], LEN, 11 + i);
        /* Like the source loop, keep an own reference (for the ring write) across submit. */
        mine[i] = cs_msg_retain(make_raw(raws[i], LEN));
        cs_pipeline_submit(p, mine[i], 9, i);
    }
    /* flush alone must publish everything: destroy drains too and would hide a no-op flush. */
    cs_pipeline_flush(p);
    rec_check_clean(&r, N);
    cs_pipeline_destroy(p);
    cs_pipeline_destroy(NULL);

    for (uint32_t i = 0; i < N; i++) {
        uint8_t codec = check_chunk(r.msgs[i], 9, i, raws[i], LEN);
        /* Random payloads never shrink. A compressible one may still ship raw when every worker
         * was busy, except chunk 0, which always finds the work queue empty. */
        if (i % 2 == 1 || i == 0)
            assert_int_equal(codec, i == 0 ? CS_CODEC_ZSTD : CS_CODEC_RAW);
        /* The payload the caller still holds is untouched. */
        assert_memory_equal(mine[i]->data + HDR, raws[i], LEN);
        cs_msg_release(mine[i]);
    }
    rec_free(&r);
}

/* Issue 12: a worker compresses straight into a pooled message sized for the worst-case frame, so
 * the next chunk after a release reuses that memory; a frame that does not shrink gives its message
 * back and the raw message itself ships. */
static void test_frames_are_built_in_reused_messages(void **state)
{
    (void)state;
    enum { LEN = CS_DEFAULT_CHUNK_SIZE };
    static uint8_t text[LEN], noise[LEN];
    fill_pattern(text, LEN, 3);
    fill_random(noise, LEN, 5);
    recorder r;
    rec_init(&r, 3);
    cs_chunk_pipeline *p;
    cs_err err = {0};
    assert_int_equal(cs_pipeline_new(&p, 1, true, CS_DEFAULT_COMPRESS_LEVEL, CS_DEFAULT_CHUNK_SIZE, rec_publish, &r, &err), 0);

    cs_pipeline_submit(p, make_raw(text, LEN), 4, 0);
    cs_pipeline_flush(p);
    assert_int_equal(check_chunk(r.msgs[0], 4, 0, text, LEN), CS_CODEC_ZSTD);
    cs_msg *first = r.msgs[0];
    assert_non_null(first->pool);
    assert_true(first->cap >= HDR + ZSTD_compressBound(LEN));
    cs_msg_release(first); /* the subscribers and the ring are done with it */
    r.msgs[0] = NULL;

    cs_msg *raw = make_raw(noise, LEN);
    cs_pipeline_submit(p, raw, 4, 1);
    cs_pipeline_flush(p);
    assert_ptr_equal(r.msgs[1], raw); /* did not shrink: framed in place */
    assert_int_equal(check_chunk(r.msgs[1], 4, 1, noise, LEN), CS_CODEC_RAW);

    cs_pipeline_submit(p, make_raw(text, LEN), 4, 2);
    cs_pipeline_flush(p);
    assert_int_equal(check_chunk(r.msgs[2], 4, 2, text, LEN), CS_CODEC_ZSTD);
    assert_ptr_equal(r.msgs[2], first); /* the same memory, twice given back */
    cs_pipeline_destroy(p);
    r.msgs[0] = cs_msg_new(0);
    rec_free(&r); /* the pool outlived the pipeline until this last release */
}

/* Many small chunks through many workers, with publish() yielding: the chunks complete in every
 * order, yet publication stays serial and in submission order. */
static void test_publish_is_serial_and_ordered_under_load(void **state)
{
    (void)state;
    enum { N = 4000, LEN = 2048 };
    recorder r;
    rec_init(&r, N);
    r.yield = true;
    cs_chunk_pipeline *p;
    cs_err err = {0};
    assert_int_equal(cs_pipeline_new(&p, 8, true, CS_DEFAULT_COMPRESS_LEVEL, CS_MIN_CHUNK_SIZE, rec_publish, &r, &err), 0);
    uint8_t payload[LEN];
    for (uint32_t i = 0; i < N; i++) {
        if (i % 5 == 0)
            fill_random(payload, LEN, i);
        else
            fill_pattern(payload, LEN, i);
        cs_pipeline_submit(p, make_raw(payload, LEN), 4, i);
    }
    cs_pipeline_flush(p);
    rec_check_clean(&r, N);
    cs_pipeline_destroy(p);
    for (uint32_t i = 0; i < N; i++) {
        if (i % 5 == 0)
            fill_random(payload, LEN, i);
        else
            fill_pattern(payload, LEN, i);
        check_chunk(r.msgs[i], 4, i, payload, LEN);
    }
    rec_free(&r);
}

/* ---- raw fallback ---- */

static void test_raw_fallback_when_workers_busy(void **state)
{
    (void)state;
    enum { N = 200, LEN = 8 << 10 };
    static uint8_t raws[N][LEN];
    recorder r;
    rec_init(&r, N);
    r.gate_at = 0; /* the only worker publishes chunk 0 and then sits at the gate */
    cs_chunk_pipeline *p;
    cs_err err = {0};
    assert_int_equal(cs_pipeline_new(&p, 1, true, CS_DEFAULT_COMPRESS_LEVEL, CS_DEFAULT_CHUNK_SIZE, rec_publish, &r, &err), 0);

    cs_msg *sent[N];
    for (uint32_t i = 0; i < N; i++) {
        fill_pattern(raws[i], LEN, i);
        sent[i] = make_raw(raws[i], LEN);
    }
    cs_pipeline_submit(p, sent[0], 5, 0);
    assert_true(rec_wait_gate(&r));
    /* The worker is busy: 16 chunks fill the work queue, the rest ship raw on this thread. */
    for (uint32_t i = 1; i < N; i++)
        cs_pipeline_submit(p, sent[i], 5, i);
    assert_int_equal(cs_pipeline_raw_fallbacks(p), N - 1 - 16);
    assert_int_equal(atomic_load(&r.count), 0); /* nothing overtakes the held chunk 0 */
    rec_open_gate(&r);
    cs_pipeline_flush(p);
    rec_check_clean(&r, N);
    assert_int_equal(cs_pipeline_raw_fallbacks(p), N - 1 - 16);
    cs_pipeline_destroy(p);

    for (uint32_t i = 0; i < N; i++) {
        uint8_t codec = check_chunk(r.msgs[i], 5, i, raws[i], LEN);
        if (i <= 16) {
            assert_int_equal(codec, CS_CODEC_ZSTD);
        } else {
            assert_int_equal(codec, CS_CODEC_RAW);
            assert_ptr_equal(r.msgs[i], sent[i]); /* framed in place, not copied */
        }
    }
    rec_free(&r);
}

/* ---- back-pressure at 1024 pending ---- */

typedef struct submitter {
    cs_chunk_pipeline *p;
    cs_msg **msgs;
    uint32_t n;
    atomic_uint returned;
} submitter;

/* Submits chunks 1..n-1 (chunk 0 was submitted before this thread started). */
static void *submit_all(void *arg)
{
    submitter *s = arg;
    cs_pipeline_take_submitter(s->p); /* started after the test thread's one submit */
    for (uint32_t i = 1; i < s->n; i++) {
        cs_pipeline_submit(s->p, s->msgs[i], 6, i);
        atomic_store(&s->returned, i + 1);
    }
    return NULL;
}

/* 1025 submits have returned and one is blocked: read in this order, the blocked one is the
 * 1026th (the submitter is a single thread), not an earlier one about to be let through. */
static bool submit_1026_blocked(void *arg)
{
    submitter *s = arg;
    return atomic_load(&s->returned) == 1025 && cs_pipeline_blocked_submits(s->p) == 1;
}

static void test_submit_blocks_at_1024_pending(void **state)
{
    (void)state;
    enum { N = 1500, LEN = 256 };
    recorder r;
    rec_init(&r, N);
    r.gate_at = 0;
    cs_chunk_pipeline *p;
    cs_err err = {0};
    assert_int_equal(cs_pipeline_new(&p, 1, true, CS_DEFAULT_COMPRESS_LEVEL, CS_MIN_CHUNK_SIZE, rec_publish, &r, &err), 0);
    uint8_t payload[LEN];
    cs_msg **msgs = malloc(N * sizeof *msgs);
    assert_non_null(msgs);
    for (uint32_t i = 0; i < N; i++) {
        fill_pattern(payload, LEN, i);
        msgs[i] = make_raw(payload, LEN);
    }

    /* Chunk 0 first, and held in publish() by its worker before anything else is submitted: a raw
     * chunk's submit may publish on the submitting thread, and it must not be the one held. */
    submitter s = {.p = p, .msgs = msgs, .n = N};
    cs_pipeline_submit(p, msgs[0], 6, 0);
    assert_true(rec_wait_gate(&r));
    atomic_store(&s.returned, 1);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, submit_all, &s), 0);
    /* Chunk 0 has left the ring but is held in publish(), so 1024 more fit and the next blocks:
     * wait until that submit is parked waiting for a slot. */
    assert_true(wait_until(submit_1026_blocked, &s));
    /* It cannot return before the gate opens, so the count is final, not a snapshot. */
    assert_int_equal(atomic_load(&s.returned), 1025);
    rec_open_gate(&r);
    struct timespec until = deadline();
    assert_int_equal(pthread_timedjoin_np(t, NULL, &until), 0);
    cs_pipeline_take_submitter(p); /* joined: the submitter's role comes back here */
    cs_pipeline_flush(p);
    rec_check_clean(&r, N);
    cs_pipeline_destroy(p);

    for (uint32_t i = 0; i < N; i++) {
        fill_pattern(payload, LEN, i);
        check_chunk(r.msgs[i], 6, i, payload, LEN);
    }
    free(msgs);
    rec_free(&r);
}

/* ---- 62, adapted: destroy drains, joins and publishes nothing afterwards ---- */

static void test_destroy_publishes_pending_then_nothing(void **state)
{
    (void)state;
    enum { N = 100, LEN = 16 << 10 };
    static uint8_t raws[N][LEN];
    recorder r;
    rec_init(&r, N);
    int threads_before = thread_count_settled(1); /* the main thread, once earlier tests' are gone */
    cs_chunk_pipeline *p;
    cs_err err = {0};
    assert_int_equal(cs_pipeline_new(&p, 4, true, CS_DEFAULT_COMPRESS_LEVEL, CS_DEFAULT_CHUNK_SIZE, rec_publish, &r, &err), 0);
    assert_int_equal(thread_count(), threads_before + 4);
    for (uint32_t i = 0; i < N; i++) {
        if (i % 3 == 0)
            fill_random(raws[i], LEN, i);
        else
            fill_pattern(raws[i], LEN, i);
        cs_pipeline_submit(p, make_raw(raws[i], LEN), 8, i);
    }
    cs_pipeline_destroy(p); /* no flush first */
    rec_check_clean(&r, N);
    /* The workers are joined: no thread is left that could publish, so the count is final. */
    assert_int_equal(thread_count_settled(threads_before), threads_before);
    for (uint32_t i = 0; i < N; i++)
        check_chunk(r.msgs[i], 8, i, raws[i], LEN);
    rec_free(&r);
}

/* ---- compression off ---- */

static void test_compress_off_publishes_inline(void **state)
{
    (void)state;
    enum { N = 8, LEN = 4096 };
    uint8_t payload[LEN];
    recorder r;
    rec_init(&r, N);
    int threads_before = thread_count_settled(1); /* the main thread, once earlier tests' are gone */
    cs_chunk_pipeline *p;
    cs_err err = {0};
    /* workers is ignored when compression is off. */
    assert_int_equal(cs_pipeline_new(&p, 0, false, CS_DEFAULT_COMPRESS_LEVEL, CS_DEFAULT_CHUNK_SIZE, rec_publish, &r, &err), 0);
    assert_int_equal(thread_count(), threads_before);
    for (uint32_t i = 0; i < N; i++) {
        fill_pattern(payload, LEN, i);
        cs_msg *m = make_raw(payload, LEN);
        cs_pipeline_submit(p, m, 3, i);
        assert_int_equal(atomic_load(&r.count), i + 1); /* already published on return */
        assert_ptr_equal(r.msgs[i], m);
        assert_int_equal(check_chunk(m, 3, i, payload, LEN), CS_CODEC_RAW);
    }
    cs_pipeline_flush(p);
    assert_int_equal(cs_pipeline_raw_fallbacks(p), 0);
    cs_pipeline_destroy(p);
    rec_check_clean(&r, N);
    rec_free(&r);
}

static void test_new_rejects_bad_worker_count(void **state)
{
    (void)state;
    recorder r;
    rec_init(&r, 1);
    cs_chunk_pipeline *p = (cs_chunk_pipeline *)&r;
    cs_err err = {0};
    assert_int_equal(cs_pipeline_new(&p, 65, true, CS_DEFAULT_COMPRESS_LEVEL, CS_DEFAULT_CHUNK_SIZE, rec_publish, &r, &err), -1);
    assert_null(p);
    assert_string_equal(err.msg, "server: compress workers 65 is outside [1,64]");
    rec_free(&r);
}

/* ---- --compress-level auto ---- */

/* Ledger after ledger through the auto level: every chunk is published once, in order, and
 * expands to its payload whatever level each was given; the level reported stays in range. */
static void test_auto_level_round_trips_across_ledgers(void **state)
{
    (void)state;
    enum { LEDGERS = 6, CHUNKS = 40, LEN = 32 << 10 };
    recorder r;
    rec_init(&r, LEDGERS * CHUNKS);
    cs_chunk_pipeline *p;
    cs_err err = {0};
    assert_int_equal(cs_pipeline_new(&p, 4, true, CS_COMPRESS_LEVEL_AUTO, CS_DEFAULT_CHUNK_SIZE, rec_publish, &r, &err), 0);
    assert_true(cs_pipeline_auto(p));
    assert_int_equal(cs_pipeline_level(p), CS_AUTO_LEVEL_START);
    uint8_t *payload = malloc(LEN);
    assert_non_null(payload);
    for (uint32_t l = 0; l < LEDGERS; l++) {
        for (uint32_t i = 0; i < CHUNKS; i++) {
            fill_pattern(payload, LEN, l * CHUNKS + i);
            cs_pipeline_submit(p, make_raw(payload, LEN), 100 + l, i);
            int lv = cs_pipeline_level(p);
            assert_true(lv >= CS_AUTO_LEVEL_MIN && lv <= CS_AUTO_LEVEL_MAX && lv != 0);
        }
        cs_pipeline_flush(p);
        assert_int_equal(atomic_load(&r.count), (l + 1) * CHUNKS);
    }
    rec_check_clean(&r, LEDGERS * CHUNKS);
    cs_pipeline_destroy(p);
    for (uint32_t n = 0; n < LEDGERS * CHUNKS; n++) {
        fill_pattern(payload, LEN, n);
        check_chunk(r.msgs[n], 100 + n / CHUNKS, n % CHUNKS, payload, LEN);
    }
    free(payload);
    rec_free(&r);
}

/* The only encoder is held: the queue fills, chunks ship raw, and auto steps the level down to
 * its floor, one step per chunk (one worker); once the encoder is free again the chunks given
 * the lowest level still expand to their payloads. */
static void test_auto_level_steps_down_while_chunks_ship_raw(void **state)
{
    (void)state;
    enum { N = 60, LEN = 8 << 10 };
    static uint8_t raws[N][LEN];
    recorder r;
    rec_init(&r, N);
    r.gate_at = 0;
    cs_chunk_pipeline *p;
    cs_err err = {0};
    assert_int_equal(cs_pipeline_new(&p, 1, true, CS_COMPRESS_LEVEL_AUTO, CS_DEFAULT_CHUNK_SIZE, rec_publish, &r, &err), 0);
    for (uint32_t i = 0; i < N; i++)
        fill_pattern(raws[i], LEN, i);
    cs_pipeline_submit(p, make_raw(raws[0], LEN), 5, 0);
    assert_true(rec_wait_gate(&r));
    for (uint32_t i = 1; i < N; i++)
        cs_pipeline_submit(p, make_raw(raws[i], LEN), 5, i);
    assert_int_equal(cs_pipeline_raw_fallbacks(p), N - 1 - 16);
    assert_int_equal(cs_pipeline_level(p), CS_AUTO_LEVEL_MIN);
    rec_open_gate(&r);
    cs_pipeline_flush(p);
    rec_check_clean(&r, N);
    cs_pipeline_destroy(p);
    for (uint32_t i = 0; i < N; i++)
        assert_int_equal(check_chunk(r.msgs[i], 5, i, raws[i], LEN), i <= 16 ? CS_CODEC_ZSTD : CS_CODEC_RAW);
    rec_free(&r);
}

/* A fixed level is what every chunk gets, and what the pool reports. */
static void test_fixed_level_is_reported(void **state)
{
    (void)state;
    enum { N = 20, LEN = 16 << 10 };
    recorder r;
    rec_init(&r, N);
    cs_chunk_pipeline *p;
    cs_err err = {0};
    assert_int_equal(cs_pipeline_new(&p, 2, true, 3, CS_DEFAULT_CHUNK_SIZE, rec_publish, &r, &err), 0);
    assert_false(cs_pipeline_auto(p));
    uint8_t payload[LEN];
    for (uint32_t i = 0; i < N; i++) {
        fill_pattern(payload, LEN, i);
        cs_pipeline_submit(p, make_raw(payload, LEN), 2, i);
        assert_int_equal(cs_pipeline_level(p), 3);
    }
    cs_pipeline_flush(p);
    rec_check_clean(&r, N);
    cs_pipeline_destroy(p);
    for (uint32_t i = 0; i < N; i++) {
        fill_pattern(payload, LEN, i);
        check_chunk(r.msgs[i], 2, i, payload, LEN);
    }
    rec_free(&r);

    /* Compression off: no level at all. */
    assert_int_equal(cs_pipeline_new(&p, 0, false, CS_COMPRESS_LEVEL_AUTO, CS_DEFAULT_CHUNK_SIZE, rec_publish, &r, &err), 0);
    assert_false(cs_pipeline_auto(p));
    assert_int_equal(cs_pipeline_level(p), 0);
    cs_pipeline_destroy(p);
}

static void test_new_rejects_bad_level(void **state)
{
    (void)state;
    recorder r;
    rec_init(&r, 1);
    cs_chunk_pipeline *p = (cs_chunk_pipeline *)&r;
    cs_err err = {0};
    assert_int_equal(cs_pipeline_new(&p, 4, true, 99, CS_DEFAULT_CHUNK_SIZE, rec_publish, &r, &err), -1);
    assert_null(p);
    assert_string_equal(err.msg, "server: compress level 99 is outside [-131072,22]");
    rec_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_workers_resolve),
        cmocka_unit_test(test_cctx_config),
        cmocka_unit_test(test_encode_chunk_round_trips),
        cmocka_unit_test(test_compressible_ratio_is_chunk_invariant),
        cmocka_unit_test(test_pipeline_publishes_in_order),
        cmocka_unit_test(test_publish_is_serial_and_ordered_under_load),
        cmocka_unit_test(test_frames_are_built_in_reused_messages),
        cmocka_unit_test(test_raw_fallback_when_workers_busy),
        cmocka_unit_test(test_submit_blocks_at_1024_pending),
        cmocka_unit_test(test_destroy_publishes_pending_then_nothing),
        cmocka_unit_test(test_compress_off_publishes_inline),
        cmocka_unit_test(test_new_rejects_bad_worker_count),
        cmocka_unit_test(test_auto_level_round_trips_across_ledgers),
        cmocka_unit_test(test_auto_level_steps_down_while_chunks_ship_raw),
        cmocka_unit_test(test_fixed_level_is_reported),
        cmocka_unit_test(test_new_rejects_bad_level),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
