/* corestreamd end to end, in process: a real server (on 127.0.0.1, an ephemeral
 * port) fed by a paced synthetic source, and a real WebSocket client. PORTSPEC cases 63-65 and
 * 95-117, plus the close codes and bad-input answers. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/synthetic.h"
#include "corestreamd/sources/pace.h"
#include "corestreamd/server/server.h"
#include "corestreamd/sources/synthetic.h"
#include "support/serverharness.h"
#include "support/wsclient.h"
#include "support/wait.h"


static cs_ws *connect_ws(const harness *h, const char *query)
{
    char path[256], body[512];
    int status = 0;
    snprintf(path, sizeof path, "/stream%s", query);
    cs_ws *ws = cs_ws_connect("127.0.0.1", h->port, path, WAIT_MS, &status, body, sizeof body);
    if (!ws)
        fail_msg("connect %s: status %d: %s", path, status, body);
    return ws;
}

/* Reads ledgers from..to (inclusive) and checks each is the synthetic payload. */
static void expect_ledgers(cs_ws *ws, uint32_t from, uint32_t to, size_t size, bool compressible,
                           int *stamped)
{
    uint8_t *want = malloc(size ? size : 1);
    for (uint64_t seq = from; seq <= to; seq++) {
        cs_ledger l;
        char err[256];
        int r = cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err);
        if (r != 1)
            fail_msg("ledger %llu: read_ledger=%d %s", (unsigned long long)seq, r, err);
        assert_int_equal(l.seq, (uint32_t)seq);
        assert_int_equal(l.len, size);
        memset(want, 0, size);
        cs_synthetic_fill(want, size, (uint32_t)seq, compressible);
        assert_memory_equal(l.data, want, size);
        if (stamped && l.emit_end != 0)
            (*stamped)++;
        cs_ledger_free(&l);
    }
    free(want);
}

static void expect_close(cs_ws *ws, int code, const char *reason)
{
    cs_ledger l;
    char err[256];
    int r = cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err);
    if (r == 1)
        fail_msg("expected close %d, got ledger %u", code, l.seq);
    assert_int_equal(r, 0);
    int got;
    char why[128];
    assert_int_equal(cs_ws_last_close(ws, &got, why, sizeof why), 1);
    assert_int_equal(got, code);
    if (reason)
        assert_string_equal(why, reason);
}

/* 96 */
static void test_bounded_replay_from_retention(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 10, .size = 512};
    harness_start(&h, &o);
    assert_true(cs_server_wait_retained(h.srv, 10, 10 * T_SEC));
    cs_ws *ws = connect_ws(&h, "?start=3&end=7");
    int stamped = 0;
    expect_ledgers(ws, 3, 7, 512, false, &stamped);
    assert_int_equal(stamped, 0); /* replays carry no stamps */
    expect_close(ws, 1000, "");
    cs_ws_close(ws);
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
    cs_ws *ws = connect_ws(&h, "?start=1&end=25");
    expect_ledgers(ws, 1, 25, 2048, false, NULL);
    expect_close(ws, 1000, "");
    cs_ws_close(ws);
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
    cs_ws *ws = connect_ws(&h, "?start=1&end=10");
    expect_close(ws, 4001, "too far behind: oldest=8 latest=10");
    cs_ws_close(ws);
    harness_stop(&h);
}

/* 99 */
static void test_bounded_range_beyond_source_gets_1001(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 5};
    harness_start(&h, &o);
    assert_true(cs_server_wait_retained(h.srv, 5, 10 * T_SEC));
    cs_ws *ws = connect_ws(&h, "?start=1&end=20");
    expect_ledgers(ws, 1, 5, 256, false, NULL);
    expect_close(ws, 1001, "source ended before range complete");
    cs_ws_close(ws);
    harness_stop(&h);
}

/* 101 */
static void test_unbounded_ends_cleanly_when_source_ends(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 5, .interval_ms = 5};
    harness_start(&h, &o);
    cs_ws *ws = connect_ws(&h, "?start=1");
    expect_ledgers(ws, 1, 5, 256, false, NULL);
    expect_close(ws, 1000, "source ended");
    cs_ws_close(ws);
    harness_stop(&h);
}

/* 102: serving 4294967295 leaves the cursor at 2^32 instead of wrapping. */
static void test_replay_terminates_at_the_sequence_ceiling(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.start = 4294967293u, .count = 3};
    harness_start(&h, &o);
    cs_ws *ws = connect_ws(&h, "?start=4294967293");
    expect_ledgers(ws, 4294967293u, 4294967295u, 256, false, NULL);
    expect_close(ws, 1000, "source ended");
    cs_ws_close(ws);
    harness_stop(&h);
}

/* 103 */
static void test_source_loop_rejects_an_oversized_ledger(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 3, .size = 4096, .max_payload = 128};
    harness_start(&h, &o);
    assert_false(cs_server_wait_retained(h.srv, 1, 10 * T_SEC)); /* ends without retaining it */
    char body[512];
    assert_int_equal(cs_http_get("127.0.0.1", h.port, "/healthz", WAIT_MS, body, sizeof body, NULL, 0), 200);
    assert_non_null(strstr(body, "\"oldest\":0,\"latest\":0"));
    /* A subscriber of a failed source learns it failed, distinctly from a clean end. */
    cs_ws *ws = connect_ws(&h, "?start=1");
    expect_close(ws, 1011, "source failed");
    cs_ws_close(ws);
    cs_server_stop(h.srv);
    assert_int_equal(harness_join(&h), -1);
    assert_non_null(strstr(h.run_err.msg, "ledger 1"));
    assert_non_null(strstr(h.run_err.msg, "4096"));
    assert_non_null(strstr(h.run_err.msg, "128"));
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
    cs_ws *ws = connect_ws(&h, "?start=1&end=5");
    expect_ledgers(ws, 1, 2, 256, false, NULL);
    /* Ring v2: a ledger missing inside the bounds is dropped with everything older, and the
     * refusal carries the new bounds. */
    expect_close(ws, 4001, "too far behind: oldest=4 latest=5");
    cs_ws_close(ws);
    harness_stop(&h);
}

/* 105 */
static void test_start_ahead_of_retention_waits_for_live(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.interval_ms = 1};
    harness_start(&h, &o);
    cs_ws *ws = connect_ws(&h, "?start=20&end=24");
    expect_ledgers(ws, 20, 24, 256, false, NULL);
    expect_close(ws, 1000, "");
    cs_ws_close(ws);
    harness_stop(&h);
}

/* 106 */
static void test_tip_subscription_skips_replay(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.interval_ms = 2};
    harness_start(&h, &o);
    assert_true(cs_server_wait_retained(h.srv, 4, 10 * T_SEC));
    cs_ws *ws = connect_ws(&h, "");
    uint32_t first = 0;
    for (int i = 0; i < 3; i++) {
        cs_ledger l;
        assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, NULL, 0), 1);
        if (i == 0)
            first = l.seq;
        assert_int_equal(l.seq, first + (uint32_t)i);
        cs_ledger_free(&l);
    }
    assert_true(first > 4);
    cs_ws_close(ws);
    harness_stop(&h);
}

/* 107: a subscriber that goes away is torn down; the server keeps serving others. */
static void test_disconnect_tears_down(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.interval_ms = 1, .size = 8192, .chunk = 4096};
    harness_start(&h, &o);
    cs_ws *ws = connect_ws(&h, "?start=1");
    expect_ledgers(ws, 1, 3, 8192, false, NULL);
    cs_ws_close(ws); /* mid-stream, no close frame */
    cs_ws *ws2 = connect_ws(&h, "?start=1&end=3");
    expect_ledgers(ws2, 1, 3, 8192, false, NULL);
    expect_close(ws2, 1000, "");
    cs_ws_close(ws2);
    /* Both are gone from the count once their connections closed. */
    char body[512];
    for (int i = 0; i < 200; i++) {
        assert_int_equal(cs_http_get("127.0.0.1", h.port, "/healthz", WAIT_MS, body, sizeof body, NULL, 0), 200);
        if (strstr(body, "\"subscribers\":0"))
            break;
        assert_true(cs_server_wait_retained(h.srv, UINT32_MAX - 1, 10 * T_MS) == false);
    }
    assert_non_null(strstr(body, "\"subscribers\":0"));
    harness_stop(&h);
}

/* A subscriber that does not read until the source has finished, then reads everything. Returns
 * the partial assemblies it discarded and the ledgers that came stampless. */
static void read_after_stall(const harness_opts *o, unsigned *discarded, int *replayed, uint64_t *abandons)
{
    harness h;
    /* Both meet ledger 1 live; the stall lasts until the ring holds the last ledger, which a busy
     * machine's nice-19 ring writer can stretch past the default write timeout. */
    harness_opts ho = *o;
    ho.await_subscribers = 2;
    ho.write_timeout_s = 300;
    harness_start(&h, &ho);
    cs_ws_opts wo = {.rcvbuf = 16 * 1024};
    int status;
    char body[256], query[64];
    snprintf(query, sizeof query, "/stream?start=1&end=%u", o->count);
    cs_ws *stalled = cs_ws_connect_opts("127.0.0.1", h.port, query, &wo, WAIT_MS, &status, body, sizeof body);
    assert_non_null(stalled);
    cs_ws *healthy = connect_ws(&h, query + strlen("/stream"));
    expect_ledgers(healthy, 1, o->count, (size_t)o->size, false, NULL);
    expect_close(healthy, 1000, "");
    cs_ws_close(healthy);
    assert_true(cs_server_wait_retained(h.srv, o->count, 240 * T_SEC));
    *discarded = 0;
    *replayed = 0;
    uint8_t *want = malloc((size_t)o->size);
    for (uint32_t seq = 1; seq <= o->count; seq++) {
        cs_ledger l;
        char err[256];
        if (cs_ws_read_ledger(stalled, &l, WAIT_MS, err, sizeof err) != 1)
            fail_msg("stalled ledger %u: %s", seq, err);
        assert_int_equal(l.seq, seq);
        memset(want, 0, (size_t)o->size);
        cs_synthetic_fill(want, (size_t)o->size, seq, false);
        assert_memory_equal(l.data, want, (size_t)o->size);
        *discarded += l.discarded;
        if (l.emit_end == 0)
            (*replayed)++;
        if (l.discarded)
            assert_int_equal(l.emit_end, 0); /* a redelivery replacing a partial is stampless */
        cs_ledger_free(&l);
    }
    free(want);
    *abandons = cs_server_live_abandons(h.srv);
    expect_close(stalled, 1000, "");
    cs_ws_close(stalled);
    harness_stop(&h);
}

/* 108: a stalled subscriber catches up from the ring without hurting others. */
static void test_stalled_subscriber_catches_up(void **state)
{
    (void)state;
    harness_opts o = {.count = 80, .interval_ms = 1, .size = 256 * 1024, .chunk = 64 * 1024, .retention = 200};
    unsigned discarded;
    int replayed;
    uint64_t abandons;
    read_after_stall(&o, &discarded, &replayed, &abandons);
    assert_true(replayed > 0);
}

/* 116: a subscriber still inside a live flow when the next BEGIN comes is abandoned, and gets that
 * ledger again complete and stampless from the ring. 8 MiB ledgers cannot fit in socket buffers,
 * so the stall is always mid-ledger. */
static void test_slow_subscriber_is_abandoned_and_recovers_from_the_ring(void **state)
{
    (void)state;
    harness_opts o = {.count = 5, .window_ms = 50, .size = 8 << 20, .retention = 100};
    unsigned discarded;
    int replayed;
    uint64_t abandons;
    read_after_stall(&o, &discarded, &replayed, &abandons);
    assert_true(discarded > 0);
    assert_true(abandons > 0);
    assert_true(replayed > 0);
}

/* 109 */
static void test_stalled_subscriber_falling_out_of_retention(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 100, .interval_ms = 1, .size = 256 * 1024, .chunk = 64 * 1024, .retention = 20,
                      .await_subscribers = 1, .write_timeout_s = 300}; /* as read_after_stall */
    harness_start(&h, &o);
    cs_ws_opts wo = {.rcvbuf = 16 * 1024};
    int status;
    char body[256];
    cs_ws *ws = cs_ws_connect_opts("127.0.0.1", h.port, "/stream?start=1", &wo, WAIT_MS, &status, body,
                                   sizeof body);
    assert_non_null(ws);
    assert_true(cs_server_wait_retained(h.srv, 100, 240 * T_SEC));
    uint32_t next = 1;
    for (;;) {
        cs_ledger l;
        int r = cs_ws_read_ledger(ws, &l, WAIT_MS, NULL, 0);
        if (r != 1)
            break;
        assert_int_equal(l.seq, next);
        next++;
        cs_ledger_free(&l);
    }
    int code;
    char why[128];
    assert_int_equal(cs_ws_last_close(ws, &code, why, sizeof why), 1);
    assert_int_equal(code, 4001);
    unsigned oldest, latest;
    assert_int_equal(sscanf(why, "too far behind: oldest=%u latest=%u", &oldest, &latest), 2);
    /* The bounds as of the refusal: a full retention window that has moved past ledger 1. */
    assert_int_equal(latest - oldest + 1, 20);
    assert_true(oldest > 1);
    assert_true(next < 100);
    cs_ws_close(ws);
    harness_stop(&h);
}

typedef struct sub_arg {
    const harness *h;
    int stamped;
} sub_arg;

static void *many_sub(void *arg)
{
    sub_arg *a = arg;
    cs_ws *ws = connect_ws(a->h, "?start=1&end=50");
    expect_ledgers(ws, 1, 50, 4096, false, &a->stamped);
    cs_ws_close(ws);
    return NULL;
}

/* 110 */
static void test_many_subscribers_share_the_stream(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 50, .interval_ms = 1, .window_ms = 2, .size = 4096, .chunk = 4096};
    harness_start(&h, &o);
    pthread_t th[8];
    sub_arg args[8];
    for (int i = 0; i < 8; i++) {
        args[i] = (sub_arg){.h = &h};
        assert_int_equal(pthread_create(&th[i], NULL, many_sub, &args[i]), 0);
    }
    int stamped = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        stamped += args[i].stamped;
    }
    assert_true(stamped > 0);
    harness_stop(&h);
}

/* 111 */
static void test_large_ledger_round_trips(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 2, .size = 12 << 20};
    harness_start(&h, &o);
    cs_ws *ws = connect_ws(&h, "?start=1&end=2");
    expect_ledgers(ws, 1, 2, 12 << 20, false, NULL);
    cs_ws_close(ws);
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
    cs_ws *ws = connect_ws(&h, "?start=5&end=5");
    cs_ledger l;
    assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, NULL, 0), 1);
    assert_int_equal(l.seq, 5);
    assert_int_equal(l.emit_end, 0);
    assert_int_equal(l.emit_start, 0);
    cs_ledger_free(&l);
    cs_ws_close(ws);
    harness_stop(&h);
}

/* 113 */
static void test_healthz(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 5};
    harness_start(&h, &o);
    assert_true(cs_server_wait_retained(h.srv, 5, 10 * T_SEC));
    char body[512], ctype[128];
    assert_int_equal(cs_http_get("127.0.0.1", h.port, "/healthz", WAIT_MS, body, sizeof body, ctype,
                                 sizeof ctype), 200);
    assert_string_equal(ctype, "application/json");
    assert_string_equal(body, "{\"oldest\":1,\"latest\":5,\"subscribers\":0,\"live_abandons\":0,\"raw_fallbacks\":0,"
                              "\"version\":\"" PROJECT_VERSION "\",\"ring_write_failures\":0,"
                              "\"ring_degraded\":false,\"ring_dropped\":0}\n");
    harness_stop(&h);
}

/* 114 and the rest of the HTTP surface. */
static void test_stream_rejects_bad_queries(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 1};
    harness_start(&h, &o);
    static const struct {
        const char *q, *body;
    } cases[] = {
        {"?start=abc", "invalid start parameter \"abc\"\n"},
        {"?end=xyz", "invalid end parameter \"xyz\"\n"},
        {"?start=9&end=4", "end 4 is before start 9\n"},
        {"?end=0", "invalid end parameter: 0\n"},
        {"?start=4294967295", "ledger 4294967295 is the last representable sequence and is not streamable\n"},
        {"?end=4294967295", "ledger 4294967295 is the last representable sequence and is not streamable\n"},
        {"?start=4294967295&end=4294967295",
         "ledger 4294967295 is the last representable sequence and is not streamable\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[128], body[512], ctype[128];
        snprintf(path, sizeof path, "/stream%s", cases[i].q);
        /* A plain GET, no upgrade. */
        assert_int_equal(cs_http_get("127.0.0.1", h.port, path, WAIT_MS, body, sizeof body, ctype, sizeof ctype), 400);
        assert_string_equal(body, cases[i].body);
        assert_string_equal(ctype, "text/plain; charset=utf-8");
        /* And the same answer before an upgrade. */
        int status = 0;
        cs_ws *ws = cs_ws_connect("127.0.0.1", h.port, path, WAIT_MS, &status, body, sizeof body);
        assert_null(ws);
        assert_int_equal(status, 400);
        assert_string_equal(body, cases[i].body);
    }
    /* Regression: a value quoting to over 1 KiB used to come back cut, mid-escape. */
    {
        enum { N = 1000 };
        static char path[16 + 3 * N], want[32 + 4 * N], got[32 + 4 * N];
        int k = snprintf(path, sizeof path, "/stream?start=");
        int w = snprintf(want, sizeof want, "invalid start parameter \"");
        for (int i = 0; i < N; i++) {
            k += snprintf(path + k, sizeof path - (size_t)k, "%%01");
            w += snprintf(want + w, sizeof want - (size_t)w, "\\x01");
        }
        snprintf(want + w, sizeof want - (size_t)w, "\"\n");
        assert_int_equal(cs_http_get("127.0.0.1", h.port, path, WAIT_MS, got, sizeof got, NULL, 0), 400);
        assert_string_equal(got, want);
    }
    char body[512];
    assert_int_equal(cs_http_get("127.0.0.1", h.port, "/nope", WAIT_MS, body, sizeof body, NULL, 0), 404);
    assert_string_equal(body, "404 page not found\n");
    assert_int_equal(cs_http_get("127.0.0.1", h.port, "/stream", WAIT_MS, body, sizeof body, NULL, 0), 426);
    int status = 0;
    assert_null(cs_ws_connect("127.0.0.1", h.port, "/elsewhere", WAIT_MS, &status, body, sizeof body));
    assert_int_equal(status, 404);
    cs_ws_opts wo = {.extra_headers = "Origin: http://evil.example\r\n"};
    assert_null(cs_ws_connect_opts("127.0.0.1", h.port, "/stream", &wo, WAIT_MS, &status, body, sizeof body));
    assert_int_equal(status, 403);
    /* Regression: an Origin too long for a fixed copy buffer used to pass as no Origin at all. */
    char longorigin[600];
    snprintf(longorigin, sizeof longorigin, "Origin: http://evil.example/%0500d\r\n", 0);
    wo.extra_headers = longorigin;
    assert_null(cs_ws_connect_opts("127.0.0.1", h.port, "/stream", &wo, WAIT_MS, &status, body, sizeof body));
    assert_int_equal(status, 403);
    harness_stop(&h);
}

/* 115 */
static void test_live_delivery_carries_flow_stamps(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.interval_ms = 100, .window_ms = 30, .size = 64 * 1024, .chunk = 4096};
    harness_start(&h, &o);
    cs_ws *ws = connect_ws(&h, "");
    for (int i = 0; i < 3; i++) {
        cs_ledger l;
        assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, NULL, 0), 1);
        assert_int_equal(l.len, 64 * 1024);
        assert_int_equal(l.chunks, 16);
        if (l.emit_end != 0) {
            int64_t t_emit = l.emit_end - l.emit_start;
            assert_true(t_emit >= 15 * T_MS && t_emit <= 300 * T_MS);
            assert_true(l.received_unix_nano - l.emit_start >= t_emit);
        } else {
            assert_int_equal(i, 0); /* only a flow already complete at connect time is stampless */
        }
        cs_ledger_free(&l);
    }
    cs_ws_close(ws);
    harness_stop(&h);
}

/* 63 and 65: compressed live delivery and compressed ring replays, byte-exact. */
static void test_compressed_flow_round_trips(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 6, .size = 24000, .chunk = 4096, .compress = true, .compressible = true,
                      .interval_ms = 2};
    harness_start(&h, &o);
    cs_ws *ws = connect_ws(&h, "?start=1&end=6");
    expect_ledgers(ws, 1, 6, 24000, true, NULL);
    cs_ws_close(ws);
    assert_true(cs_server_wait_retained(h.srv, 6, 10 * T_SEC));
    ws = connect_ws(&h, "?start=1&end=3");
    for (uint32_t seq = 1; seq <= 3; seq++) {
        cs_ledger l;
        assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, NULL, 0), 1);
        assert_int_equal(l.seq, seq);
        assert_int_equal(l.emit_end, 0);
        assert_int_equal(l.n_zstd_chunks, (int)l.chunks); /* ring replays are compressed too */
        cs_ledger_free(&l);
    }
    cs_ws_close(ws);
    harness_stop(&h);
}

/* A subscriber only sends control frames: a data message is a policy violation. */
static void test_data_message_from_subscriber_closes_1008(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.interval_ms = 1000};
    harness_start(&h, &o);
    cs_ws *ws = connect_ws(&h, "?start=1");
    assert_int_equal(cs_ws_send(ws, 1, "hello", 5), 0);
    cs_ws_msg m;
    for (int i = 0; i < 10; i++)
        if (cs_ws_read(ws, &m, WAIT_MS) != CS_WS_BINARY)
            break;
    assert_int_equal(m.kind, CS_WS_CLOSE);
    assert_int_equal(m.close_code, 1008);
    assert_string_equal(m.reason, "unexpected data message");
    cs_ws_close(ws);
    harness_stop(&h);
}

/* Shutdown sends every subscriber 1001 `server shutting down`. */
static void test_stop_closes_subscribers_with_1001(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.interval_ms = 1000};
    harness_start(&h, &o);
    cs_ws *ws = connect_ws(&h, "?start=1");
    cs_ledger l;
    assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, NULL, 0), 1);
    cs_ledger_free(&l);
    cs_server_stop(h.srv);
    expect_close(ws, 1001, "server shutting down");
    assert_int_equal(harness_join(&h), 0);
    cs_ws_close(ws);
    harness_stop(&h);
}

/* A subscriber whose socket takes nothing for 10 s while a message waits is dropped (no close
 * frame can reach it); the others are not affected. */
static void test_frozen_subscriber_is_dropped_after_the_write_timeout(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.interval_ms = 20, .size = 1 << 20, .retention = 2000};
    harness_start(&h, &o);
    cs_ws_opts wo = {.rcvbuf = 4096};
    int status;
    char body[256];
    cs_ws *frozen = cs_ws_connect_opts("127.0.0.1", h.port, "/stream", &wo, WAIT_MS, &status, body, sizeof body);
    assert_non_null(frozen);
    cs_ws *healthy = connect_ws(&h, "");
    /* The stall is the stimulus: 12 s without reading, while the healthy one keeps up. */
    int64_t until = cs_mono_ns() + 12 * T_SEC;
    int got = 0;
    while (cs_mono_ns() < until) {
        cs_ledger l;
        assert_int_equal(cs_ws_read_ledger(healthy, &l, WAIT_MS, NULL, 0), 1);
        cs_ledger_free(&l);
        got++;
    }
    assert_true(got > 25); /* it kept streaming (under sanitizers and load it is slower than 50/s) */
    cs_ws_msg m;
    int kind;
    for (int i = 0; i < 100000 && (kind = cs_ws_read(frozen, &m, WAIT_MS)) == CS_WS_BINARY; i++)
        ;
    assert_int_equal(kind, CS_WS_EOF);
    cs_ws_close(frozen);
    cs_ws_close(healthy);
    harness_stop(&h);
}

/* 10: a bounded source ends the run (without linger) after the close frames went out. */
static void test_run_stops_when_the_source_ends(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 3, .interval_ms = 20, .no_linger = true};
    harness_start(&h, &o);
    cs_ws *ws = connect_ws(&h, "?start=1");
    expect_ledgers(ws, 1, 3, 256, false, NULL);
    expect_close(ws, 1000, "source ended");
    assert_int_equal(harness_join(&h), 0);
    cs_ws_close(ws);
    /* The listener is gone. */
    char body[128];
    assert_true(cs_http_get("127.0.0.1", h.port, "/healthz", 2000, body, sizeof body, NULL, 0) <= 0);
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
        cmocka_unit_test(test_bounded_range_beyond_source_gets_1001),
        cmocka_unit_test(test_unbounded_ends_cleanly_when_source_ends),
        cmocka_unit_test(test_replay_terminates_at_the_sequence_ceiling),
        cmocka_unit_test(test_source_loop_rejects_an_oversized_ledger),
        cmocka_unit_test(test_losing_a_ledger_to_pruning_is_too_far_behind),
        cmocka_unit_test(test_start_ahead_of_retention_waits_for_live),
        cmocka_unit_test(test_tip_subscription_skips_replay),
        cmocka_unit_test(test_disconnect_tears_down),
        cmocka_unit_test(test_stalled_subscriber_catches_up),
        cmocka_unit_test(test_slow_subscriber_is_abandoned_and_recovers_from_the_ring),
        cmocka_unit_test(test_stalled_subscriber_falling_out_of_retention),
        cmocka_unit_test(test_many_subscribers_share_the_stream),
        cmocka_unit_test(test_large_ledger_round_trips),
        cmocka_unit_test(test_completed_flow_served_to_late_arrival_is_stampless),
        cmocka_unit_test(test_healthz),
        cmocka_unit_test(test_stream_rejects_bad_queries),
        cmocka_unit_test(test_live_delivery_carries_flow_stamps),
        cmocka_unit_test(test_compressed_flow_round_trips),
        cmocka_unit_test(test_data_message_from_subscriber_closes_1008),
        cmocka_unit_test(test_stop_closes_subscribers_with_1001),
        cmocka_unit_test(test_run_stops_when_the_source_ends),
        cmocka_unit_test(test_frozen_subscriber_is_dropped_after_the_write_timeout),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fclose(null);
    return rc;
}
