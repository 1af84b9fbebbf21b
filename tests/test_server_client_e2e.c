/* corestreamd end to end through the real client library: an in-process server (on
 * 127.0.0.1, an ephemeral port) fed by a paced synthetic source, and libremoteledger's
 * rl_stream_raw_ledgers as the subscriber, as the prototype's internal/server/server_test.go drives
 * it with its remoteledger client. PORTSPEC cases 63 and 96-116 seen from the public API: result
 * codes, messages, too-far-behind bounds, rl_ledger_info stamps and byte-exact payloads. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/synthetic.h"
#include "corestream/remoteledger.h"
#include "corestreamd/sources/pace.h"
#include "corestreamd/server/server.h"
#include "corestreamd/sources/synthetic.h"
#include "support/event.h"
#include "support/serverharness.h"

#define GATE_WAIT (30 * T_SEC) /* bound on any callback that blocks */

/* ---- a subscriber's record of what the library handed it ---- */

typedef struct coll {
    /* set up by the test */
    size_t size;       /* expected length of every ledger */
    bool compressible; /* synthetic flavour to verify against */
    uint32_t stop_after;  /* return non-zero once this many arrived (0: never) */
    uint32_t block_on;    /* block inside the callback of this sequence ... */
    event *release;       /* ... until this is set (bounded by GATE_WAIT) */
    event *blocked;       /* set when the callback starts blocking (may be NULL) */
    uint32_t signal_after; /* set `reached` once this many arrived (0: never) */
    event reached;
    /* recorded by the callback (read after the stream's call returned) */
    uint32_t n, cap;
    uint32_t *seq;
    size_t *len;
    rl_ledger_info *info;
    uint8_t *want;
    uint32_t bad;        /* ledgers whose length or bytes differed */
    uint32_t first_bad;  /* sequence of the first such ledger */
    bool gate_timed_out;
} coll;

static void coll_init(coll *c, size_t size, bool compressible)
{
    memset(c, 0, sizeof *c);
    c->size = size;
    c->compressible = compressible;
    c->want = malloc(size ? size : 1);
    assert_non_null(c->want);
    event_init(&c->reached);
}

static void coll_free(coll *c)
{
    free(c->seq);
    free(c->len);
    free(c->info);
    free(c->want);
    event_destroy(&c->reached);
}

static int on_ledger(const uint8_t *ledger, size_t len, const rl_ledger_info *info, void *ctx)
{
    coll *c = ctx;
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 64;
        c->seq = realloc(c->seq, c->cap * sizeof *c->seq);
        c->len = realloc(c->len, c->cap * sizeof *c->len);
        c->info = realloc(c->info, c->cap * sizeof *c->info);
        if (!c->seq || !c->len || !c->info)
            abort();
    }
    c->seq[c->n] = info->sequence;
    c->len[c->n] = len;
    c->info[c->n] = *info;
    bool ok = len == c->size && info->size == len;
    if (ok) {
        memset(c->want, 0, c->size);
        cs_synthetic_fill(c->want, c->size, info->sequence, c->compressible);
        ok = memcmp(ledger, c->want, len) == 0;
    }
    if (!ok && c->bad++ == 0)
        c->first_bad = info->sequence;
    c->n++;
    if (c->release && info->sequence == c->block_on) {
        if (c->blocked)
            event_set(c->blocked);
        if (!event_wait(c->release, GATE_WAIT))
            c->gate_timed_out = true;
    }
    if (c->signal_after && c->n == c->signal_after)
        event_set(&c->reached);
    if (c->stop_after && c->n >= c->stop_after)
        return 1;
    return 0;
}

/* Every ledger arrived byte-exact, in order, exactly from..to. */
static void expect_seqs(const coll *c, uint32_t from, uint32_t to)
{
    if (c->bad)
        fail_msg("%u ledgers differ from the synthetic payload, first %u", c->bad, c->first_bad);
    assert_false(c->gate_timed_out);
    assert_int_equal(c->n, (uint64_t)to - from + 1);
    for (uint32_t i = 0; i < c->n; i++)
        assert_int_equal(c->seq[i], (uint64_t)from + i);
}

static rl_stream *new_stream(const harness *h)
{
    char url[64];
    snprintf(url, sizeof url, "ws://127.0.0.1:%d", h->port);
    rl_stream *s = NULL;
    assert_int_equal(rl_stream_new(&s, url, NULL), RL_OK);
    assert_non_null(s);
    return s;
}

static void expect_result(const rl_stream *s, rl_result got, rl_result want)
{
    if (got != want)
        fail_msg("got %s (%s), want %s", rl_result_name(got), rl_stream_error(s), rl_result_name(want));
}

/* One call of rl_stream_raw_ledgers on a fresh stream. */
static rl_result stream_once(const harness *h, rl_range r, coll *c, rl_stream **keep)
{
    rl_stream *s = new_stream(h);
    rl_result res = rl_stream_raw_ledgers(s, r, on_ledger, c);
    if (keep)
        *keep = s;
    else
        rl_stream_free(s);
    return res;
}

/* A call running on its own thread. */
typedef struct runner {
    rl_stream *s;
    rl_range range;
    coll *c;
    rl_result res;
    pthread_t th;
} runner;

static void *runner_main(void *arg)
{
    runner *r = arg;
    r->res = rl_stream_raw_ledgers(r->s, r->range, on_ledger, r->c);
    return NULL;
}

static void runner_start(runner *r, const harness *h, rl_range range, coll *c)
{
    r->s = new_stream(h);
    r->range = range;
    r->c = c;
    r->res = RL_ERR_INVALID;
    assert_int_equal(pthread_create(&r->th, NULL, runner_main, r), 0);
}

static rl_result runner_join(runner *r)
{
    pthread_join(r->th, NULL);
    return r->res;
}

static uint32_t count_stampless(const coll *c)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < c->n; i++)
        if (c->info[i].emit_end_unix_nano == 0)
            k++;
    return k;
}

/* ---- cases ---- */

/* 96 */
static void test_bounded_replay_from_retention(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 10, .size = 512};
    harness_start(&h, &o);
    assert_true(cs_server_wait_retained(h.srv, 10, 10 * T_SEC));
    coll c;
    coll_init(&c, 512, false);
    rl_stream *s;
    rl_result r = stream_once(&h, rl_bounded_range(3, 7), &c, &s);
    expect_result(s, r, RL_OK);
    assert_string_equal(rl_stream_error(s), "");
    expect_seqs(&c, 3, 7);
    assert_int_equal(count_stampless(&c), 5); /* replays carry no stamps */
    for (uint32_t i = 0; i < c.n; i++) {
        int64_t ns;
        assert_false(rl_info_delivery(&c.info[i], &ns));
        assert_true(c.info[i].received_unix_nano > 0);
        assert_int_equal(c.info[i].size, 512);
    }
    rl_stream_free(s);
    coll_free(&c);
    harness_stop(&h);
}

/* 97 */
static void test_replay_to_live_handoff(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.interval_ms = 2, .size = 2048, .chunk = 4096};
    harness_start(&h, &o);
    assert_true(cs_server_wait_retained(h.srv, 5, 10 * T_SEC));
    coll c;
    coll_init(&c, 2048, false);
    rl_stream *s;
    rl_result r = stream_once(&h, rl_bounded_range(1, 25), &c, &s);
    expect_result(s, r, RL_OK);
    expect_seqs(&c, 1, 25);
    rl_stream_free(s);
    coll_free(&c);
    harness_stop(&h);
}

/* 98 */
static void test_too_far_behind(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 10, .retention = 3};
    harness_start(&h, &o);
    assert_true(cs_server_wait_retained(h.srv, 10, 10 * T_SEC));
    coll c;
    coll_init(&c, 256, false);
    rl_stream *s;
    rl_result r = stream_once(&h, rl_bounded_range(1, 10), &c, &s);
    expect_result(s, r, RL_ERR_TOO_FAR_BEHIND);
    uint32_t req = 0, oldest = 0, latest = 0;
    assert_true(rl_stream_too_far_behind(s, &req, &oldest, &latest));
    assert_int_equal(req, 1);
    assert_int_equal(oldest, 8);
    assert_int_equal(latest, 10);
    assert_int_equal(c.n, 0);
    rl_stream_free(s);
    coll_free(&c);
    harness_stop(&h);
}

/* 99: the source ended (1001) before the bounded range was complete. */
static void test_bounded_range_beyond_source_is_truncated(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 5};
    harness_start(&h, &o);
    assert_true(cs_server_wait_retained(h.srv, 5, 10 * T_SEC));
    coll c;
    coll_init(&c, 256, false);
    rl_stream *s;
    rl_result r = stream_once(&h, rl_bounded_range(1, 20), &c, &s);
    expect_result(s, r, RL_ERR_TRUNCATED);
    expect_seqs(&c, 1, 5);
    const char *msg = rl_stream_error(s);
    if (!strstr(msg, "got through ledger 5") || !strstr(msg, "requested through 20"))
        fail_msg("message: %s", msg);
    uint32_t req, oldest, latest;
    assert_false(rl_stream_too_far_behind(s, &req, &oldest, &latest));
    rl_stream_free(s);
    coll_free(&c);
    harness_stop(&h);
}

/* 100: a subscriber stranded mid-stream when a paced source ends short of its range. */
static void test_stranded_mid_stream_is_truncated(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 6, .interval_ms = 5};
    harness_start(&h, &o);
    coll c;
    coll_init(&c, 256, false);
    rl_stream *s;
    rl_result r = stream_once(&h, rl_bounded_range(1, 30), &c, &s);
    expect_result(s, r, RL_ERR_TRUNCATED);
    expect_seqs(&c, 1, 6);
    const char *msg = rl_stream_error(s);
    if (!strstr(msg, "got through ledger 6") || !strstr(msg, "requested through 30"))
        fail_msg("message: %s", msg);
    rl_stream_free(s);
    coll_free(&c);
    harness_stop(&h);
}

/* 101 */
static void test_unbounded_ends_cleanly_when_source_ends(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 5, .interval_ms = 5};
    harness_start(&h, &o);
    coll c;
    coll_init(&c, 256, false);
    rl_stream *s;
    rl_result r = stream_once(&h, rl_unbounded_range(1), &c, &s);
    expect_result(s, r, RL_OK);
    expect_seqs(&c, 1, 5);
    rl_stream_free(s);
    coll_free(&c);
    harness_stop(&h);
}

/* 102: serving 4294967295 ends the stream instead of wrapping. */
static void test_replay_terminates_at_the_sequence_ceiling(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.start = 4294967293u, .count = 3};
    harness_start(&h, &o);
    coll c;
    coll_init(&c, 256, false);
    rl_stream *s;
    rl_result r = stream_once(&h, rl_unbounded_range(4294967293u), &c, &s);
    expect_result(s, r, RL_OK);
    expect_seqs(&c, 4294967293u, 4294967295u);
    rl_stream_free(s);
    coll_free(&c);
    harness_stop(&h);
}

/* 104 */
static void test_losing_a_ledger_to_pruning_is_too_far_behind(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 5};
    harness_start(&h, &o);
    assert_true(cs_server_wait_retained(h.srv, 5, 10 * T_SEC));
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/ledgers/ledger-3.xdr", h.dir);
    assert_int_equal(unlink(path), 0);
    coll c;
    coll_init(&c, 256, false);
    rl_stream *s;
    rl_result r = stream_once(&h, rl_bounded_range(1, 5), &c, &s);
    expect_result(s, r, RL_ERR_TOO_FAR_BEHIND);
    expect_seqs(&c, 1, 2);
    uint32_t req = 0, oldest = 0, latest = 0;
    assert_true(rl_stream_too_far_behind(s, &req, &oldest, &latest));
    assert_int_equal(req, 3);
    assert_int_equal(oldest, 4); /* ring v2: the missing ledger and everything older are dropped */
    assert_int_equal(latest, 5);
    rl_stream_free(s);
    coll_free(&c);
    harness_stop(&h);
}

/* 105 */
static void test_start_ahead_of_retention_waits_for_live(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.interval_ms = 1};
    harness_start(&h, &o);
    coll c;
    coll_init(&c, 256, false);
    rl_stream *s;
    rl_result r = stream_once(&h, rl_bounded_range(20, 24), &c, &s);
    expect_result(s, r, RL_OK);
    expect_seqs(&c, 20, 24);
    rl_stream_free(s);
    coll_free(&c);
    harness_stop(&h);
}

/* 106: from the tip; the consumer stops after three. */
static void test_tip_subscription_skips_replay(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.interval_ms = 2};
    harness_start(&h, &o);
    assert_true(cs_server_wait_retained(h.srv, 4, 10 * T_SEC));
    coll c;
    coll_init(&c, 256, false);
    c.stop_after = 3;
    rl_stream *s;
    rl_result r = stream_once(&h, rl_unbounded_range(0), &c, &s);
    expect_result(s, r, RL_OK);
    assert_int_equal(c.n, 3);
    assert_true(c.seq[0] > 4);
    expect_seqs(&c, c.seq[0], c.seq[0] + 2);
    rl_stream_free(s);
    coll_free(&c);
    harness_stop(&h);
}

/* 107: cancelled from another thread mid-stream. */
static void test_cancel_from_another_thread(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.interval_ms = 1, .size = 8192, .chunk = 4096};
    harness_start(&h, &o);
    coll c;
    coll_init(&c, 8192, false);
    c.signal_after = 3;
    runner ru;
    runner_start(&ru, &h, rl_unbounded_range(1), &c);
    bool reached = event_wait(&c.reached, 20 * T_SEC);
    rl_stream_cancel(ru.s); /* also unblocks a stuck call, so the join below is bounded */
    rl_result r = runner_join(&ru);
    assert_true(reached);
    expect_result(ru.s, r, RL_ERR_CANCELLED);
    assert_string_equal(rl_stream_error(ru.s), "context canceled");
    assert_true(c.n >= 3);
    expect_seqs(&c, 1, c.n);
    /* Cancellation is sticky. */
    expect_result(ru.s, rl_stream_raw_ledgers(ru.s, rl_bounded_range(1, 2), on_ledger, &c), RL_ERR_CANCELLED);
    rl_stream_free(ru.s);
    coll_free(&c);
    harness_stop(&h);
}

/* 108: a stalled subscriber catches up from the ring without hurting a healthy one. */
static void test_stalled_subscriber_catches_up(void **state)
{
    (void)state;
    harness h;
    /* Both meet ledger 1 live; the stall lasts until the ring holds 80, which a busy machine's
     * nice-19 ring writer can stretch past the default write timeout. */
    harness_opts o = {.count = 80, .interval_ms = 1, .size = 256 * 1024, .chunk = 64 * 1024, .retention = 200,
                      .await_subscribers = 2, .write_timeout_s = 300};
    harness_start(&h, &o);
    event release;
    event_init(&release);
    coll stalled, healthy;
    coll_init(&stalled, 256 * 1024, false);
    coll_init(&healthy, 256 * 1024, false);
    stalled.block_on = 1;
    stalled.release = &release;
    runner rs, rh;
    runner_start(&rs, &h, rl_bounded_range(1, 80), &stalled);
    runner_start(&rh, &h, rl_bounded_range(1, 80), &healthy);
    bool all = cs_server_wait_retained(h.srv, 80, 240 * T_SEC);
    event_set(&release);
    rl_result r_h = runner_join(&rh);
    rl_result r_s = runner_join(&rs);
    assert_true(all);
    expect_result(rh.s, r_h, RL_OK);
    expect_seqs(&healthy, 1, 80);
    expect_result(rs.s, r_s, RL_OK);
    expect_seqs(&stalled, 1, 80);
    assert_true(count_stampless(&stalled) > 0);
    rl_stream_free(rs.s);
    rl_stream_free(rh.s);
    coll_free(&stalled);
    coll_free(&healthy);
    event_destroy(&release);
    harness_stop(&h);
}

/* 110 */
static void test_many_subscribers_share_the_stream(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 50, .interval_ms = 1, .window_ms = 2, .size = 4096, .chunk = 4096};
    harness_start(&h, &o);
    enum { N = 8 };
    coll c[N];
    runner ru[N];
    for (int i = 0; i < N; i++) {
        coll_init(&c[i], 4096, false);
        runner_start(&ru[i], &h, rl_bounded_range(1, 50), &c[i]);
    }
    rl_result res[N];
    for (int i = 0; i < N; i++)
        res[i] = runner_join(&ru[i]);
    int with_delivery = 0;
    for (int i = 0; i < N; i++) {
        expect_result(ru[i].s, res[i], RL_OK);
        expect_seqs(&c[i], 1, 50);
        for (uint32_t k = 0; k < c[i].n; k++) {
            int64_t ns;
            if (rl_info_delivery(&c[i].info[k], &ns)) {
                with_delivery++;
                break;
            }
        }
        rl_stream_free(ru[i].s);
        coll_free(&c[i]);
    }
    assert_true(with_delivery > 0);
    harness_stop(&h);
}

/* 111 */
static void test_large_ledger_round_trips(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 2, .size = 12 << 20};
    harness_start(&h, &o);
    coll c;
    coll_init(&c, 12 << 20, false);
    rl_stream *s;
    rl_result r = stream_once(&h, rl_bounded_range(1, 2), &c, &s);
    expect_result(s, r, RL_OK);
    expect_seqs(&c, 1, 2);
    rl_stream_free(s);
    coll_free(&c);
    harness_stop(&h);
}

/* 112 */
static void test_completed_flow_served_to_late_arrival_is_stampless(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 5};
    harness_start(&h, &o);
    assert_true(cs_server_wait_retained(h.srv, 5, 10 * T_SEC));
    coll c;
    coll_init(&c, 256, false);
    rl_stream *s;
    rl_result r = stream_once(&h, rl_single_ledger_range(5), &c, &s);
    expect_result(s, r, RL_OK);
    expect_seqs(&c, 5, 5);
    assert_int_equal(c.info[0].emit_start_unix_nano, 0);
    assert_int_equal(c.info[0].emit_end_unix_nano, 0);
    int64_t ns = 12345;
    assert_false(rl_info_delivery(&c.info[0], &ns));
    assert_false(rl_info_pipeline(&c.info[0], &ns));
    assert_false(rl_info_emit_window(&c.info[0], &ns));
    assert_int_equal(ns, 12345);
    rl_stream_free(s);
    coll_free(&c);
    harness_stop(&h);
}

/* 115 */
static void test_live_delivery_carries_flow_stamps(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.interval_ms = 100, .window_ms = 30, .size = 64 * 1024, .chunk = 4096};
    harness_start(&h, &o);
    coll c;
    coll_init(&c, 64 * 1024, false);
    c.stop_after = 3;
    rl_stream *s;
    rl_result r = stream_once(&h, rl_unbounded_range(0), &c, &s);
    expect_result(s, r, RL_OK);
    assert_int_equal(c.n, 3);
    expect_seqs(&c, c.seq[0], c.seq[0] + 2);
    for (uint32_t i = 0; i < c.n; i++) {
        const rl_ledger_info *in = &c.info[i];
        assert_int_equal(in->size, 64 * 1024);
        assert_int_equal(in->chunks, 16);
        int64_t delivery, pipeline, t_emit;
        if (in->emit_end_unix_nano == 0) {
            assert_int_equal(i, 0); /* only a flow already complete at connect time is stampless */
            assert_false(rl_info_delivery(in, &delivery));
            continue;
        }
        assert_true(rl_info_delivery(in, &delivery));
        assert_true(rl_info_pipeline(in, &pipeline));
        assert_true(rl_info_emit_window(in, &t_emit));
        if (t_emit < 15 * T_MS || t_emit > 300 * T_MS)
            fail_msg("ledger %u: emit window %lld ns", in->sequence, (long long)t_emit);
        assert_true(pipeline >= t_emit);
        assert_int_equal(pipeline - delivery, t_emit);
    }
    rl_stream_free(s);
    coll_free(&c);
    harness_stop(&h);
}

/* 116: a subscriber still inside a live flow when the next BEGIN comes is abandoned, and gets that
 * ledger again complete and stampless from the ring, dropping its partial assembly. */
static void test_slow_subscriber_is_abandoned_and_recovers_from_the_ring(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 5, .window_ms = 50, .size = 8 << 20, .retention = 100, .await_subscribers = 1,
                      .write_timeout_s = 300};
    harness_start(&h, &o);
    event release;
    event_init(&release);
    coll c;
    coll_init(&c, 8 << 20, false);
    c.block_on = 1;
    c.release = &release;
    runner ru;
    runner_start(&ru, &h, rl_bounded_range(1, 5), &c);
    bool done = cs_server_wait_retained(h.srv, 5, 240 * T_SEC);
    event_set(&release);
    rl_result r = runner_join(&ru);
    assert_true(done);
    expect_result(ru.s, r, RL_OK);
    expect_seqs(&c, 1, 5);
    uint64_t discarded = 0;
    for (uint32_t i = 0; i < c.n; i++) {
        discarded += c.info[i].discarded_partials;
        if (c.info[i].discarded_partials > 0)
            assert_int_equal(c.info[i].emit_end_unix_nano, 0); /* a redelivery is stampless */
    }
    assert_true(discarded > 0);
    assert_true(cs_server_live_abandons(h.srv) > 0);
    rl_stream_free(ru.s);
    coll_free(&c);
    event_destroy(&release);
    harness_stop(&h);
}

/* 63 (and 65): compressed live delivery and compressed ring replays, byte-exact. */
static void test_compressed_flow_round_trips(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 6, .size = 24000, .chunk = 4096, .compress = true, .compressible = true,
                      .interval_ms = 2};
    harness_start(&h, &o);
    coll c;
    coll_init(&c, 24000, true);
    rl_stream *s;
    rl_result r = stream_once(&h, rl_bounded_range(1, 6), &c, &s);
    expect_result(s, r, RL_OK);
    expect_seqs(&c, 1, 6);
    for (uint32_t i = 0; i < c.n; i++)
        assert_int_equal(c.info[i].chunks, 6); /* ceil(24000 / 4096) */
    rl_stream_free(s);
    coll_free(&c);
    assert_true(cs_server_wait_retained(h.srv, 6, 10 * T_SEC));
    coll_init(&c, 24000, true);
    r = stream_once(&h, rl_bounded_range(1, 3), &c, &s);
    expect_result(s, r, RL_OK);
    expect_seqs(&c, 1, 3);
    assert_int_equal(count_stampless(&c), 3);
    rl_stream_free(s);
    coll_free(&c);
    harness_stop(&h);
}

int main(void)
{
    FILE *null = fopen("/dev/null", "w");
    cs_log_init(null, CS_LOG_ERROR + 4);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounded_replay_from_retention),
        cmocka_unit_test(test_replay_to_live_handoff),
        cmocka_unit_test(test_too_far_behind),
        cmocka_unit_test(test_bounded_range_beyond_source_is_truncated),
        cmocka_unit_test(test_stranded_mid_stream_is_truncated),
        cmocka_unit_test(test_unbounded_ends_cleanly_when_source_ends),
        cmocka_unit_test(test_replay_terminates_at_the_sequence_ceiling),
        cmocka_unit_test(test_losing_a_ledger_to_pruning_is_too_far_behind),
        cmocka_unit_test(test_start_ahead_of_retention_waits_for_live),
        cmocka_unit_test(test_tip_subscription_skips_replay),
        cmocka_unit_test(test_cancel_from_another_thread),
        cmocka_unit_test(test_stalled_subscriber_catches_up),
        cmocka_unit_test(test_many_subscribers_share_the_stream),
        cmocka_unit_test(test_large_ledger_round_trips),
        cmocka_unit_test(test_completed_flow_served_to_late_arrival_is_stampless),
        cmocka_unit_test(test_live_delivery_carries_flow_stamps),
        cmocka_unit_test(test_slow_subscriber_is_abandoned_and_recovers_from_the_ring),
        cmocka_unit_test(test_compressed_flow_round_trips),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fclose(null);
    return rc;
}
