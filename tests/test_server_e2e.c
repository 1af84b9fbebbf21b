/* SPDX-License-Identifier: Apache-2.0 */
/* corestreamd end to end, in process, through the raw WebSocket test client (support/wsclient.h):
 * a real server (on 127.0.0.1, an ephemeral port) fed by a paced synthetic source. The shared
 * server scenarios (server_scenarios.c) run here as "<name>/ws", asserting the exact close codes
 * and reasons the client receives; below them, the cases only this client can make: the HTTP
 * surface, a dropped connection, a frozen socket, a data message from the subscriber. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "corestreamd/server/server.h"
#include "server_scenarios.h"
#include "support/serverharness.h"
#include "support/wait.h"
#include "support/wsclient.h"

/* ---- the driver: one subscriber of a scenario, through the test client ---- */

typedef struct ws_sub {
    seen seen; /* first: the shared checks read it */
    cs_ws *ws;
    harness *h;
    int end;             /* cs_ws_read_ledger's last answer: 1 the client stopped, 0 a close, -1 an error */
    char err[256];       /* its message */
    uint32_t raw_chunks; /* ledgers with a chunk that came uncompressed */
    pthread_t th;
} ws_sub;

static cs_ws *connect_ws(const harness *h, const char *query, const cs_ws_opts *wo)
{
    char path[256], body[512];
    int status = 0;
    snprintf(path, sizeof path, "/stream%s", query);
    cs_ws *ws = cs_ws_connect_opts("127.0.0.1", h->port, path, wo, WAIT_MS, &status, body, sizeof body);
    if (!ws)
        fail_msg("connect %s: status %d: %s", path, status, body);
    return ws;
}

static void ws_sub_open(ws_sub *s, harness *h, const scenario *sc, const cs_ws_opts *wo)
{
    memset(s, 0, sizeof *s);
    seen_init(&s->seen, sc);
    s->h = h;
    char query[64] = "";
    if (sc->to)
        snprintf(query, sizeof query, "?start=%u&end=%u", sc->from, sc->to);
    else if (!sc->tip)
        snprintf(query, sizeof query, "?start=%u", sc->from);
    s->ws = connect_ws(h, query, wo);
}

/* Reads until the server ends the stream or the client has what it takes. Asserts nothing: it runs
 * on reader threads too. */
static void ws_sub_read(ws_sub *s)
{
    const scenario *sc = s->seen.sc;
    while (!seen_done(&s->seen)) {
        cs_ledger l;
        s->end = cs_ws_read_ledger(s->ws, &l, WAIT_MS, s->err, sizeof s->err);
        if (s->end != 1)
            return;
        if (l.n_zstd_chunks != (int)l.chunks)
            s->raw_chunks++;
        seen_add(&s->seen, l.data,
                 (seen_ledger){.seq = l.seq, .len = l.len, .emit_start = l.emit_start, .emit_end = l.emit_end,
                               .received = l.received_unix_nano, .chunks = l.chunks, .discarded = l.discarded});
        cs_ledger_free(&l);
        if (sc->act && s->seen.n == sc->act_after)
            sc->act(s->h);
    }
}

static void *ws_sub_main(void *arg)
{
    ws_sub_read(arg);
    return NULL;
}

/* All subscribe; a stalled one (subs[0], with a small receive window) reads only once the healthy
 * one is done and the ring holds everything; several read on threads of their own. */
static void ws_run(harness *h, const scenario *sc, void *v, int n)
{
    static const cs_ws_opts stalled = {.rcvbuf = 16 * 1024};
    ws_sub *subs = v;
    for (int i = 0; i < n; i++)
        ws_sub_open(&subs[i], h, sc, sc->stall && i == 0 ? &stalled : NULL);
    if (sc->stall) {
        ws_sub_read(&subs[1]);
        assert_true(scenario_await_stall_end(h, sc));
        ws_sub_read(&subs[0]);
    } else if (n == 1) {
        ws_sub_read(&subs[0]);
    } else {
        for (int i = 0; i < n; i++)
            assert_int_equal(pthread_create(&subs[i].th, NULL, ws_sub_main, &subs[i]), 0);
        for (int i = 0; i < n; i++)
            pthread_join(subs[i].th, NULL);
    }
}

/* The close frame the server ended with, between ledgers; every chunk compressed when due. */
static void ws_expect_end(const void *v)
{
    const ws_sub *s = v;
    const scenario *sc = s->seen.sc;
    if (sc->zstd)
        assert_int_equal(s->raw_chunks, 0);
    if (!sc->close_code)
        return; /* the client left first */
    if (s->end == 1)
        fail_msg("expected close %d, got ledger %u", sc->close_code, s->seen.l[s->seen.n - 1].seq);
    if (s->end != 0)
        fail_msg("expected close %d: %s", sc->close_code, s->err);
    assert_string_equal(s->err, ""); /* not mid-assembly */
    int code;
    char why[128];
    assert_int_equal(cs_ws_last_close(s->ws, &code, why, sizeof why), 1);
    assert_int_equal(code, sc->close_code);
    assert_string_equal(why, sc->close_reason);
}

static void ws_release(void *v)
{
    cs_ws_close(((ws_sub *)v)->ws);
}

static const scenario_client ws_client = {
    .name = "ws", .sub_size = sizeof(ws_sub), .run = ws_run, .expect_end = ws_expect_end, .release = ws_release};

static void run_ws(void **state)
{
    scenario_run(*state, &ws_client);
}

/* ---- this client's own cases ---- */

static bool no_subscribers(void *arg)
{
    const harness *h = arg;
    char body[512];
    return cs_http_get("127.0.0.1", h->port, "/healthz", WAIT_MS, body, sizeof body, NULL, 0) == 200 &&
           strstr(body, "\"subscribers\":0") != NULL;
}

/* 107: a subscriber that goes away is torn down; the server keeps serving others. */
static void test_disconnect_tears_down(void **state)
{
    (void)state;
    static const scenario leave = {.name = "leave", .opts = {.interval_ms = 1, .size = 8192, .chunk = 4096},
                                   .from = 1, .take = 3, .first = 1};
    static const scenario stay = {.name = "stay", .opts = {.interval_ms = 1, .size = 8192, .chunk = 4096},
                                  .from = 1, .to = 3, .first = 1, .last = 3, .close_code = 1000,
                                  .close_reason = ""};
    harness h;
    scenario_begin(&h, &leave);
    ws_sub a, b;
    ws_sub_open(&a, &h, &leave, NULL);
    ws_sub_read(&a);
    ws_release(&a); /* mid-stream, no close frame */
    ws_sub_open(&b, &h, &stay, NULL);
    ws_sub_read(&b);
    ws_expect_end(&b);
    ws_release(&b);
    scenario_check(&h, &leave, &a.seen, 1, sizeof a);
    scenario_check(&h, &stay, &b.seen, 1, sizeof b);
    seen_free(&a.seen);
    seen_free(&b.seen);
    /* Both are gone from the count once their connections closed. */
    assert_int_equal(cs_wait_until(no_subscribers, &h, WAIT_MS), 0);
    harness_stop(&h);
}

/* 109 */
static void test_stalled_subscriber_falling_out_of_retention(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 100, .interval_ms = 1, .size = 256 * 1024, .chunk = 64 * 1024, .retention = 20,
                      .await_subscribers = 1, .write_timeout_s = 300}; /* as a scenario's stall */
    harness_start(&h, &o);
    cs_ws_opts wo = {.rcvbuf = 16 * 1024};
    cs_ws *ws = connect_ws(&h, "?start=1", &wo);
    assert_true(cs_server_wait_retained(h.srv, 100, SCENARIO_STALL_NS));
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

/* 113 */
static void test_healthz(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 5, .run = "synthetic-0123456789abcdef"};
    harness_start(&h, &o);
    assert_true(cs_server_wait_retained(h.srv, 5, 10 * T_SEC));
    char body[512], ctype[128];
    assert_int_equal(cs_http_get("127.0.0.1", h.port, "/healthz", WAIT_MS, body, sizeof body, ctype,
                                 sizeof ctype), 200);
    assert_string_equal(ctype, "application/json");
    assert_string_equal(body, "{\"oldest\":1,\"latest\":5,\"subscribers\":0,\"live_abandons\":0,\"raw_fallbacks\":0,"
                              "\"version\":\"" PROJECT_VERSION "\",\"ring_write_failures\":0,"
                              "\"ring_degraded\":false,\"ring_dropped\":0,\"ring_holes\":0,\"ring_io_errors\":0,\"run\":\"synthetic-0123456789abcdef\"}\n");
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
            k += snprintf(path + k, sizeof path - (size_t)k, "%%C3"); /* a byte that is no UTF-8 alone */
            w += snprintf(want + w, sizeof want - (size_t)w, "\\xc3");
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

/* A subscriber only sends control frames: a data message is a policy violation. */
static void test_data_message_from_subscriber_closes_1008(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.interval_ms = 1000};
    harness_start(&h, &o);
    cs_ws *ws = connect_ws(&h, "?start=1", NULL);
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
    cs_ws *healthy = connect_ws(&h, "", NULL);
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

int main(void)
{
    static const struct CMUnitTest own[] = {
        cmocka_unit_test(test_disconnect_tears_down),
        cmocka_unit_test(test_stalled_subscriber_falling_out_of_retention),
        cmocka_unit_test(test_healthz),
        cmocka_unit_test(test_stream_rejects_bad_queries),
        cmocka_unit_test(test_data_message_from_subscriber_closes_1008),
        cmocka_unit_test(test_frozen_subscriber_is_dropped_after_the_write_timeout),
    };
    return scenario_run_group("test_server_e2e", &ws_client, run_ws, own, sizeof own / sizeof own[0]);
}
