/* SPDX-License-Identifier: Apache-2.0 */
/* The JetStream publisher end to end: the real corestreamd binary and a real Debian nats-server
 * (support/natsserver) on 127.0.0.1 with ephemeral ports and scratch stores, the stream read back
 * with nats.c (support/jsreader) and checked as an edge would, beside a WebSocket subscriber.
 * Cases: byte-exact publishing (zstd and raw chunks, the very messages the WebSocket carries);
 * the core killed and restarted mid-stream (no duplicate, no gap); NATS killed and restarted while
 * the core streams (the stream catches up, the WebSocket subscriber never notices); a ring too
 * short to cover the outage (ERROR naming the gap); refusals at start (max_payload, limits). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/synthetic.h"
#include "support/jsreader.h"
#include "support/natsserver.h"
#include "support/procharness.h"
#include "support/tmpdir.h"
#include "support/wsclient.h"
#include "support/wait.h"
#include "wire/wire.h"

#ifndef CORESTREAMD_BIN
#error "CORESTREAMD_BIN must name the binary under test"
#endif
#define STREAM "CORESTREAM"

static cs_tmpdir g_tmp;
static cs_nats_server g_nats;
static cs_proc g_core;
static bool g_core_live;

static int setup(void **state)
{
    (void)state;
    if (cs_tmpdir_make(&g_tmp, "jse2e") != 0)
        return -1;
    if (cs_nats_start(&g_nats, 0, WAIT_MS) != 0) {
        fprintf(stderr, "nats-server did not start:\n%s\n", g_nats.proc.log ? g_nats.proc.log : "");
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (g_core_live)
        cs_proc_free(&g_core);
    g_core_live = false;
    cs_nats_free(&g_nats);
    cs_tmpdir_remove(&g_tmp);
    return 0;
}

/* Starts corestreamd on the test's data dir against the test's NATS, with args after the common
 * ones, and waits until it listens. run gets the run token from `jetstream publisher ready`. */
static void start_core(const char *const *args, char *run, size_t runlen)
{
    char datadir[PATH_MAX + 32], url[96];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/data", g_tmp.path);
    snprintf(url, sizeof url, "--jetstream-url=%s", g_nats.url);
    char *argv[48];
    int n = 0;
    argv[n++] = CORESTREAMD_BIN;
    argv[n++] = datadir;
    argv[n++] = "--listen=127.0.0.1:0";
    argv[n++] = url;
    argv[n++] = "--jetstream-max-bytes=268435456";
    for (; *args && n < 46; args++)
        argv[n++] = (char *)*args;
    argv[n] = NULL;
    assert_int_equal(cs_proc_start(&g_core, argv), 0);
    g_core_live = true;
    if (cs_proc_wait_line(&g_core, "jetstream publisher ready", WAIT_MS) != 0)
        fail_msg("no `jetstream publisher ready` in:\n%s", g_core.log);
    char line[2048];
    cs_proc_line(&g_core, line, sizeof line);
    const char *r = strstr(line, " run=");
    assert_non_null(r);
    r += 5;
    size_t k = strcspn(r, " ");
    assert_true(k > 0 && k < runlen);
    memcpy(run, r, k);
    run[k] = '\0';
    if (cs_proc_wait_listening(&g_core, WAIT_MS) != 0)
        fail_msg("not listening:\n%s", g_core.log);
}

static void stop_core(int sig, int want_status)
{
    int st = cs_proc_stop(&g_core, sig, WAIT_MS);
    if (want_status >= 0 && st != want_status)
        fail_msg("corestreamd exit status %d, want %d:\n%s", st, want_status, g_core.log);
}

static void free_core(void)
{
    cs_proc_free(&g_core);
    g_core_live = false;
}

static void wait_core_line(const char *needle)
{
    if (cs_proc_wait_line(&g_core, needle, WAIT_MS) != 0)
        fail_msg("no `%s` in:\n%s", needle, g_core.log);
}

/* Waits until the stream holds ledger seq of the run; on a timeout, prints the core's log. */
static void wait_stream_ledger(const char *run, uint32_t seq)
{
    if (cs_jsr_wait_ledger(g_nats.url, STREAM, run, seq, WAIT_MS) == 0)
        return;
    cs_proc_drain(&g_core);
    fprintf(stderr, "core:\n%s\n", g_core.log ? g_core.log : "");
    fail_msg("ledger %u never reached the stream; the core's log is above", seq);
}

static void read_stream(const char *run, cs_jsr *r)
{
    char err[256];
    if (cs_jsr_read(g_nats.url, STREAM, run, r, err, sizeof err) != 0)
        fail_msg("reading the stream: %s", err);
}

/* Every ledger of the run in the stream is the synthetic payload, and they run from first
 * without a hole to at least last. */
static void expect_contiguous(const cs_jsr *r, uint32_t first, uint32_t last, size_t size, bool compressible)
{
    if (r->violation[0])
        fail_msg("stream violation: %s", r->violation);
    assert_true(r->nledgers > 0);
    assert_int_equal(r->ledgers[0].seq, first);
    assert_true(r->ledgers[r->nledgers - 1].seq >= last);
    uint8_t *want = malloc(size);
    for (size_t i = 0; i < r->nledgers; i++) {
        const cs_jsr_ledger *l = &r->ledgers[i];
        assert_int_equal(l->seq, first + i);
        assert_int_equal(l->len, size);
        cs_synthetic_fill(want, size, l->seq, compressible);
        if (memcmp(want, l->data, size) != 0)
            fail_msg("ledger %u in the stream differs from its source bytes", l->seq);
    }
    free(want);
}

static uint32_t item_of(const uint8_t *data, size_t len, uint32_t *seq, int64_t *stamp)
{
    cs_wire_msg w;
    assert_int_equal(cs_wire_decode(data, len, &w, NULL), 0);
    *seq = w.seq;
    *stamp = w.stamp;
    return w.type == CS_WIRE_TYPE_BEGIN ? 0 : w.type == CS_WIRE_TYPE_CHUNK ? w.chunk_idx + 1 : w.chunk_count + 1;
}

/* ---- publish and consume byte-exact ---------------------------------------------------------- */

static void publish_one_run(bool compressible)
{
    const char *args[] = {"--synthetic-count=10", "--synthetic-interval=150ms", "--emit-window=20ms",
                          "--synthetic-size=300000", "--chunk-size=65536",
                          compressible ? "--synthetic-compressible" : "--synthetic-compressible=false", NULL};
    char run[128];
    start_core(args, run, sizeof run);
    int status = 0;
    cs_ws *ws = cs_ws_connect("127.0.0.1", g_core.port, "/stream", WAIT_MS, &status, NULL, 0);
    assert_non_null(ws);

    /* Every message the WebSocket subscriber gets, as received. */
    size_t n = 0, cap = 256;
    struct {
        uint8_t *data;
        size_t len;
    } *got = calloc(cap, sizeof *got);
    for (;;) {
        cs_ws_msg m;
        int k = cs_ws_read(ws, &m, WAIT_MS);
        if (k == CS_WS_CLOSE)
            break;
        assert_int_equal(k, CS_WS_BINARY);
        if (n == cap)
            got = realloc(got, (cap *= 2) * sizeof *got);
        got[n].data = malloc(m.len);
        memcpy(got[n].data, m.data, m.len);
        got[n++].len = m.len;
    }
    cs_ws_close(ws);
    assert_int_equal(cs_proc_wait_exit(&g_core, WAIT_MS), 0);
    wait_core_line("jetstream publisher stopped");
    assert_int_equal(cs_proc_log_count(&g_core, "jetstream publisher stopped behind"), 0);

    cs_jsr r;
    read_stream(run, &r);
    expect_contiguous(&r, 1, 10, 300000, compressible);
    assert_int_equal(r.nledgers, 10);
    for (size_t i = 0; i < r.nledgers; i++) {
        assert_true(r.ledgers[i].emit_start != 0); /* published live, not from the ring */
        if (compressible)
            assert_int_equal(r.ledgers[i].zstd_chunks, r.ledgers[i].chunks);
        else
            assert_int_equal(r.ledgers[i].zstd_chunks, 0);
    }
    /* The stream's messages are the WebSocket's, byte for byte, for every ledger the subscriber
     * followed live from its BEGIN. */
    size_t compared = 0;
    uint32_t live_seq = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t seq;
        int64_t stamp;
        uint32_t item = item_of(got[i].data, got[i].len, &seq, &stamp);
        if (item == 0)
            live_seq = stamp != 0 ? seq : 0;
        if (seq != live_seq)
            continue;
        const cs_jsr_msg *jm = cs_jsr_find(&r, seq, item);
        if (!jm)
            fail_msg("ledger %u item %u reached the WebSocket but not the stream", seq, item);
        assert_int_equal(jm->len, got[i].len);
        assert_memory_equal(jm->data, got[i].data, got[i].len);
        compared++;
    }
    assert_true(compared >= 5 * 7); /* at least five whole ledgers (BEGIN, 5 chunks, END) */
    for (size_t i = 0; i < n; i++)
        free(got[i].data);
    free(got);
    cs_jsr_free(&r);
    free_core();
}

static void test_publish_byte_exact_zstd_and_raw(void **state)
{
    (void)state;
    publish_one_run(true);
    /* Another run identity on the same stream: its own subjects, starting at its own first. */
    publish_one_run(false);
}

/* ---- the core killed and restarted mid-stream ------------------------------------------------ */

static void test_core_restart_no_duplicate_no_gap(void **state)
{
    (void)state;
    const char *args[] = {"--synthetic-interval=60ms", "--emit-window=40ms", "--synthetic-size=400000",
                          "--chunk-size=32768", "--synthetic-compressible", NULL};
    char run[128];
    start_core(args, run, sizeof run);
    assert_int_equal(cs_jsr_wait_ledger(g_nats.url, STREAM, run, 8, WAIT_MS), 0);
    stop_core(SIGKILL, -1);
    free_core();

    char run2[128];
    start_core(args, run2, sizeof run2);
    assert_string_equal(run, run2);
    /* The ready line says where it resumes: after what the stream holds, not from scratch. */
    assert_non_null(strstr(g_core.log, "resume_ledger="));
    assert_null(strstr(g_core.log, "resume_ledger=0 "));
    assert_int_equal(cs_jsr_wait_ledger(g_nats.url, STREAM, run, 25, WAIT_MS), 0);
    stop_core(SIGTERM, 0);
    assert_int_equal(cs_proc_log_count(&g_core, "jetstream stream gap"), 0);

    cs_jsr r;
    read_stream(run, &r);
    expect_contiguous(&r, 1, 25, 400000, true);
    cs_jsr_free(&r);
    free_core();
}

/* ---- NATS killed and restarted while the core streams ---------------------------------------- */

typedef struct ws_reader {
    pthread_t thread;
    cs_ws *ws;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t first, last; /* ledgers received, contiguous from first */
    size_t count;
    char error[256];
    bool done;
} ws_reader;

static void *ws_reader_main(void *arg)
{
    ws_reader *w = arg;
    uint8_t *want = malloc(300000);
    for (;;) {
        cs_ledger l;
        char err[256] = "";
        int k = cs_ws_read_ledger(w->ws, &l, WAIT_MS, err, sizeof err);
        pthread_mutex_lock(&w->mu);
        if (k != 1) {
            if (k < 0)
                snprintf(w->error, sizeof w->error, "%s", err);
            w->done = true;
            pthread_cond_broadcast(&w->cv);
            pthread_mutex_unlock(&w->mu);
            break;
        }
        cs_synthetic_fill(want, 300000, l.seq, true);
        if (l.len != 300000 || memcmp(want, l.data, l.len) != 0)
            snprintf(w->error, sizeof w->error, "ledger %u differs", l.seq);
        else if (w->count && l.seq != w->last + 1)
            snprintf(w->error, sizeof w->error, "ledger %u after %u", l.seq, w->last);
        if (!w->count)
            w->first = l.seq;
        w->last = l.seq;
        w->count++;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        cs_ledger_free(&l);
    }
    free(want);
    return NULL;
}

/* Waits until the reader has received ledger seq; returns its last. */
static uint32_t ws_reader_wait(ws_reader *w, uint32_t seq)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += WAIT_MS / 1000;
    pthread_mutex_lock(&w->mu);
    while (!w->done && (!w->count || w->last < seq))
        if (pthread_cond_timedwait(&w->cv, &w->mu, &ts) != 0)
            break;
    uint32_t last = w->last;
    bool ok = w->count && w->last >= seq;
    pthread_mutex_unlock(&w->mu);
    if (!ok)
        fail_msg("the WebSocket subscriber did not reach ledger %u (last %u): %s", seq, last, w->error);
    return last;
}

static void test_nats_restart_catches_up_websocket_unaffected(void **state)
{
    (void)state;
    const char *args[] = {"--synthetic-interval=100ms", "--emit-window=20ms", "--synthetic-size=300000",
                          "--chunk-size=65536", "--synthetic-compressible", NULL};
    char run[128];
    start_core(args, run, sizeof run);
    ws_reader w = {0};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    int status = 0;
    w.ws = cs_ws_connect("127.0.0.1", g_core.port, "/stream", WAIT_MS, &status, NULL, 0);
    assert_non_null(w.ws);
    assert_int_equal(pthread_create(&w.thread, NULL, ws_reader_main, &w), 0);

    assert_int_equal(cs_jsr_wait_ledger(g_nats.url, STREAM, run, 4, WAIT_MS), 0);
    assert_int_equal(cs_nats_stop(&g_nats, SIGKILL, WAIT_MS), 0);
    wait_core_line("jetstream publisher behind");
    uint32_t at = ws_reader_wait(&w, 0);
    /* The outage spans several ledgers, and the subscriber receives them while NATS is down: the
     * publisher never holds up the live flow (an order of events, not a gap in milliseconds). */
    ws_reader_wait(&w, at + 8);
    assert_int_equal(cs_nats_restart(&g_nats, WAIT_MS), 0);
    wait_core_line("jetstream publisher caught up");
    uint32_t now = ws_reader_wait(&w, 0);
    assert_int_equal(cs_jsr_wait_ledger(g_nats.url, STREAM, run, now + 2, WAIT_MS), 0);
    stop_core(SIGTERM, 0);
    pthread_join(w.thread, NULL);
    cs_ws_close(w.ws);

    /* The subscriber never noticed: every ledger, in order, byte-exact, the outage's included. */
    if (w.error[0])
        fail_msg("WebSocket subscriber: %s", w.error);
    assert_true(w.count >= 10);
    assert_int_equal(cs_proc_log_count(&g_core, "jetstream stream gap"), 0);
    assert_true(cs_proc_log_count(&g_core, "jetstream publisher behind") >= 1);

    cs_jsr r;
    read_stream(run, &r);
    expect_contiguous(&r, 1, now + 2, 300000, true);
    /* What the outage missed came back from the ring (stampless), nothing skipped. */
    size_t from_ring = 0;
    for (size_t i = 0; i < r.nledgers; i++)
        from_ring += r.ledgers[i].emit_start == 0;
    assert_true(from_ring >= 1);
    cs_jsr_free(&r);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    free_core();
}

/* NATS killed again and again while the publisher is mid-ledger at a thousand messages a second:
 * whatever nats.c held when the connection went must not land after a hole. The stream holds
 * every ledger whole and in order. */
static void test_nats_kills_mid_publish_leave_a_clean_flow(void **state)
{
    (void)state;
    const char *args[] = {"--synthetic-interval=20ms", "--emit-window=5ms", "--synthetic-size=300000",
                          "--chunk-size=16384", "--synthetic-compressible=false", NULL};
    char run[128];
    start_core(args, run, sizeof run);
    uint32_t at = 3;
    for (int i = 0; i < 8; i++) {
        wait_stream_ledger(run, at);
        assert_int_equal(cs_nats_stop(&g_nats, SIGKILL, WAIT_MS), 0);
        wait_core_line("jetstream publisher behind");
        assert_int_equal(cs_nats_restart(&g_nats, WAIT_MS), 0);
        wait_core_line("jetstream publisher caught up");
        at += 3;
    }
    wait_stream_ledger(run, at);
    stop_core(SIGTERM, 0);
    assert_int_equal(cs_proc_log_count(&g_core, "jetstream stream gap"), 0);
    cs_jsr r;
    read_stream(run, &r);
    expect_contiguous(&r, 1, at, 300000, false);
    cs_jsr_free(&r);
    free_core();
}

/* ---- an outage longer than the ring ---------------------------------------------------------- */

static void test_outage_past_the_ring_logs_the_gap(void **state)
{
    (void)state;
    const char *args[] = {"--synthetic-interval=80ms", "--emit-window=10ms", "--synthetic-size=100000",
                          "--retention=3", NULL};
    char run[128];
    start_core(args, run, sizeof run);
    int status = 0;
    cs_ws *ws = cs_ws_connect("127.0.0.1", g_core.port, "/stream", WAIT_MS, &status, NULL, 0);
    assert_non_null(ws);
    assert_int_equal(cs_jsr_wait_ledger(g_nats.url, STREAM, run, 3, WAIT_MS), 0);
    assert_int_equal(cs_nats_stop(&g_nats, SIGKILL, WAIT_MS), 0);
    wait_core_line("jetstream publisher behind");
    /* Ten ledgers go by: the ring (3) no longer holds the first the stream lacks. */
    uint32_t first = 0;
    for (int i = 0; i < 10; i++) {
        cs_ledger l;
        char err[256];
        assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err), 1);
        if (!first)
            first = l.seq;
        cs_ledger_free(&l);
    }
    assert_int_equal(cs_nats_restart(&g_nats, WAIT_MS), 0);
    wait_core_line("jetstream stream gap");
    char line[1024];
    cs_proc_line(&g_core, line, sizeof line);
    assert_non_null(strstr(line, "level=ERROR"));
    assert_non_null(strstr(line, " from="));
    assert_non_null(strstr(line, " to="));
    /* NATS may have died mid-ledger: that ledger then stays partial in the stream, and the log
     * says so. */
    bool partial = strstr(line, "the first is partial in the stream") != NULL;
    wait_core_line("jetstream publisher caught up");
    cs_ws_close(ws);
    stop_core(SIGTERM, 0);

    /* The stream shows the hole the log named: a later BEGIN over the partial ledger, or the
     * next whole ledger after the last. */
    cs_jsr r;
    read_stream(run, &r);
    char violation[sizeof r.violation];
    memcpy(violation, r.violation, sizeof violation);
    cs_jsr_free(&r);
    if (!strstr(violation, partial ? " is open (after " : "(gap)"))
        fail_msg("the log said %s, the stream shows: \"%s\"", partial ? "partial" : "gap", violation);
    free_core();
}

/* ---- refusals at start ----------------------------------------------------------------------- */

static void test_chunk_over_max_payload_is_refused(void **state)
{
    (void)state;
    char datadir[PATH_MAX + 32], url[96];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/data", g_tmp.path);
    snprintf(url, sizeof url, "--jetstream-url=%s", g_nats.url);
    char *argv[] = {CORESTREAMD_BIN, datadir, "--listen=127.0.0.1:0", url, "--chunk-size=1048576", NULL};
    assert_int_equal(cs_proc_start(&g_core, argv), 0);
    g_core_live = true;
    assert_int_equal(cs_proc_wait_exit(&g_core, WAIT_MS), 1);
    const char *want[] = {"--chunk-size 1048576 makes JetStream messages of up to 1048715 bytes",
                          "over the max_payload of 1048576 bytes", "use --chunk-size 1048437 or less",
                          "corestreamd failed"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(g_core.log, want[i]))
            fail_msg("missing `%s` in:\n%s", want[i], g_core.log);
    assert_null(strstr(g_core.log, "corestreamd listening"));
    free_core();
}

static void test_stream_limits_are_checked(void **state)
{
    (void)state;
    char run[128];
    const char *first[] = {"--synthetic-count=1", "--jetstream-max-age=1h", NULL};
    start_core(first, run, sizeof run);
    assert_int_equal(cs_proc_wait_exit(&g_core, WAIT_MS), 0);
    free_core();

    char datadir[PATH_MAX + 32], url[96];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/data", g_tmp.path);
    snprintf(url, sizeof url, "--jetstream-url=%s", g_nats.url);
    char *argv[] = {CORESTREAMD_BIN, datadir, "--listen=127.0.0.1:0", url, "--jetstream-max-bytes=268435456",
                    "--jetstream-max-age=2h", NULL};
    assert_int_equal(cs_proc_start(&g_core, argv), 0);
    g_core_live = true;
    assert_int_equal(cs_proc_wait_exit(&g_core, WAIT_MS), 1);
    const char *want = "stream CORESTREAM has max_age 1h0m0s but --jetstream-max-age is 2h0m0s";
    if (!strstr(g_core.log, want))
        fail_msg("missing `%s` in:\n%s", want, g_core.log);
    free_core();
}

static void test_unreachable_nats_is_refused_at_start(void **state)
{
    (void)state;
    int port = g_nats.port;
    assert_int_equal(cs_nats_stop(&g_nats, SIGTERM, WAIT_MS), 0);
    char datadir[PATH_MAX + 32], url[96];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/data", g_tmp.path);
    snprintf(url, sizeof url, "--jetstream-url=nats://127.0.0.1:%d", port);
    char *argv[] = {CORESTREAMD_BIN, datadir, "--listen=127.0.0.1:0", url, NULL};
    assert_int_equal(cs_proc_start(&g_core, argv), 0);
    g_core_live = true;
    assert_int_equal(cs_proc_wait_exit(&g_core, WAIT_MS), 1);
    char want[128];
    snprintf(want, sizeof want, "jetstream: connect to nats://127.0.0.1:%d", port);
    if (!strstr(g_core.log, want))
        fail_msg("missing `%s` in:\n%s", want, g_core.log);
    free_core();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_publish_byte_exact_zstd_and_raw, setup, teardown),
        cmocka_unit_test_setup_teardown(test_core_restart_no_duplicate_no_gap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nats_restart_catches_up_websocket_unaffected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nats_kills_mid_publish_leave_a_clean_flow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_outage_past_the_ring_logs_the_gap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chunk_over_max_payload_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_limits_are_checked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unreachable_nats_is_refused_at_start, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
