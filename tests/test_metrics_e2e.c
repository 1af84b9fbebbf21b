/* SPDX-License-Identifier: Apache-2.0 */
/* Issue 14, the operator's surface: /readyz through the source's life, the methods the probe and
 * scrape paths accept, /metrics values moving as ledgers stream, `promtool check metrics` on the
 * exposition, and Debian's real Prometheus server scraping the corestreamd binary on its
 * --admin-listen port and answering a query about it. Everything runs on 127.0.0.1 with
 * ephemeral ports; every wait is bounded. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/synthetic.h"
#include "corestreamd/sources/pace.h"
#include "corestreamd/sources/synthetic.h"
#include "support/procharness.h"
#include "support/serverharness.h"
#include "support/tmpdir.h"
#include "support/wsclient.h"
#include "support/wait.h"
#include "wire/wire.h"

#ifndef CORESTREAMD_BIN
#error "CORESTREAMD_BIN must name the binary under test"
#endif
#define PROMTOOL "/usr/bin/promtool"
#define PROMETHEUS "/usr/bin/prometheus"

/* ---- a source that waits for the test: catching up until the gate opens ---- */

/* Each ledger is emitted when the test opens the gate for it, so a test that reads ledger N
 * before it opens the gate for N+1 meets every ledger in the live flow, however slowly the
 * machine runs its subscriber: the flow stays the current one until the test moves on. */
typedef struct gated {
    cs_source base;
    cs_cancel *cancel;
    int gate[2];    /* the test writes a byte per ledger; closing it ends the source */
    int entered[2]; /* a byte each time the source loop asks for the next ledger */
    uint32_t seq;
    size_t size;      /* each ledger's length */
    uint8_t *payload; /* the ledger's bytes (the synthetic source's), or NULL: 'x' throughout */
    size_t left;
} gated;

static int gated_next(cs_source *src, cs_emission *em, cs_err *err)
{
    gated *g = (gated *)src;
    em->seq = g->seq + 1;
    if (write(g->entered[1], "e", 1) != 1)
        return cs_err_set(err, 0, "gated source: signal failed");
    if (cs_cancel_wait_readable(g->cancel, g->gate[0]) != 0)
        return cs_err_set(err, CS_ERR_CANCELLED, "cancelled");
    char b;
    if (read(g->gate[0], &b, 1) != 1)
        return 0; /* the gate closed: exhausted */
    g->seq++;
    if (g->payload)
        cs_synthetic_fill(g->payload, g->size, g->seq, true);
    g->left = g->size;
    em->declared_size = g->size;
    return 1;
}

static ssize_t gated_read(cs_source *src, uint8_t *buf, size_t len, cs_err *err)
{
    (void)err;
    gated *g = (gated *)src;
    size_t n = len < g->left ? len : g->left;
    if (g->payload)
        memcpy(buf, g->payload + (g->size - g->left), n);
    else
        memset(buf, 'x', n);
    g->left -= n;
    return (ssize_t)n;
}

static void gated_destroy(cs_source *src)
{
    gated *g = (gated *)src;
    close(g->gate[0]);
    close(g->entered[0]);
    close(g->entered[1]);
    if (g->gate[1] >= 0)
        close(g->gate[1]);
    free(g->payload);
    free(g);
}

static const cs_source_ops gated_ops = {.next = gated_next, .read = gated_read, .destroy = gated_destroy};

/* A gated source of ledgers of size bytes: the synthetic source's compressible payload, or with
 * compressible false 'x' throughout. */
static gated *gated_new(harness *h, size_t size, bool compressible)
{
    gated *g = calloc(1, sizeof *g);
    assert_non_null(g);
    g->base.ops = &gated_ops;
    g->cancel = &h->cancel;
    g->size = size;
    if (compressible) {
        g->payload = malloc(size);
        assert_non_null(g->payload);
    }
    assert_int_equal(pipe(g->gate), 0);
    assert_int_equal(pipe(g->entered), 0);
    return g;
}

/* Opens the gate for one more ledger. */
static void gated_open(gated *g)
{
    assert_int_equal(write(g->gate[1], "1", 1), 1);
}

/* ---- HTTP helpers ---- */

static int get(int port, const char *path, char *body, size_t len)
{
    return cs_http_get("127.0.0.1", port, path, WAIT_MS, body, len, NULL, 0);
}

/* A raw request's whole answer, for methods other than GET. */
static int raw(int port, const char *method, const char *path, char *resp, size_t len)
{
    char req[256];
    snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
             method, path);
    return cs_http_raw("127.0.0.1", port, req, WAIT_MS, resp, len);
}

/* The value of the sample named exactly `series` (name plus labels) in an exposition. */
static double sample(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        if (strncmp(l, series, n) == 0 && l[n] == ' ')
            return strtod(l + n + 1, NULL);
    fail_msg("no sample %s in:\n%s", series, text);
    return -1;
}

static char *scrape(int port)
{
    enum { CAP = 1 << 16 };
    char *body = malloc(CAP), ctype[128];
    assert_non_null(body);
    assert_int_equal(cs_http_get("127.0.0.1", port, "/metrics", WAIT_MS, body, CAP, ctype, sizeof ctype), 200);
    assert_string_equal(ctype, "text/plain; version=0.0.4; charset=utf-8");
    return body;
}

/* ---- /readyz and the methods ---- */

static void test_readyz_follows_the_source(void **state)
{
    (void)state;
    harness h;
    harness_begin(&h);
    gated *g = gated_new(&h, 1000, false);
    int gate = g->gate[1], entered = g->entered[0];
    harness_opts o = {0};
    harness_launch(&h, &o, &g->base, cs_counted_range(1, 0));

    char body[512], resp[2048];
    /* The source loop runs and waits for its first ledger. */
    struct pollfd pfd = {.fd = entered, .events = POLLIN};
    assert_int_equal(poll(&pfd, 1, WAIT_MS), 1);
    char e;
    assert_int_equal(read(entered, &e, 1), 1);
    /* Listening, no ledger yet: what a captive core catching up looks like. */
    assert_int_equal(get(h.port, "/readyz", body, sizeof body), 503);
    assert_string_equal(body, "{\"ready\":false,\"state\":\"catching_up\",\"reason\":\"catching up\",\"latest\":0}\n");
    /* Liveness does not care. */
    assert_int_equal(get(h.port, "/healthz", body, sizeof body), 200);
    assert_string_equal(body, "{\"oldest\":0,\"latest\":0,\"subscribers\":0,\"live_abandons\":0,\"raw_fallbacks\":0,"
                                     "\"version\":\"" PROJECT_VERSION "\",\"ring_write_failures\":0,\"ring_degraded\":false,"
                                     "\"ring_dropped\":0,\"ring_holes\":0,\"ring_io_errors\":0}\n");
    /* HEAD: the GET answer without its body (RFC 9110 9.3.2), Content-Length included. */
    assert_int_equal(raw(h.port, "HEAD", "/readyz", resp, sizeof resp), 503);
    assert_non_null(strstr(resp, "content-length: 72\r\n"));
    assert_non_null(strstr(resp, "\r\n\r\n"));
    assert_string_equal(strstr(resp, "\r\n\r\n"), "\r\n\r\n");

    assert_int_equal(write(gate, "1", 1), 1);
    /* The source loop asks for ledger 2 only once ledger 1 is in the ring (sourceloop.c), so
     * that ask is the event to wait for; cs_server_wait_retained would sleep to its bound, as
     * nothing is broadcast while the source waits for its next ledger. */
    assert_int_equal(poll(&pfd, 1, WAIT_MS), 1);
    assert_int_equal(read(entered, &e, 1), 1);
    assert_int_equal(get(h.port, "/readyz", body, sizeof body), 200);
    assert_string_equal(body, "{\"ready\":true,\"state\":\"streaming\",\"latest\":1}\n");

    /* The source ends (a bounded run): no longer ready, still alive. */
    close(gate);
    g->gate[1] = -1;
    assert_false(cs_server_wait_retained(h.srv, 2, WAIT_MS * T_MS));
    assert_int_equal(get(h.port, "/readyz", body, sizeof body), 503);
    assert_string_equal(body, "{\"ready\":false,\"state\":\"ended\",\"reason\":\"source ended\",\"latest\":1}\n");
    assert_int_equal(get(h.port, "/healthz", body, sizeof body), 200);
    harness_stop(&h);
}

static void test_readyz_reports_a_failed_source(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 3, .size = 4096, .max_payload = 128};
    harness_start(&h, &o);
    assert_false(cs_server_wait_retained(h.srv, 1, WAIT_MS * T_MS));
    char body[512];
    assert_int_equal(get(h.port, "/readyz", body, sizeof body), 503);
    assert_string_equal(body, "{\"ready\":false,\"state\":\"failed\",\"reason\":\"source failed\",\"latest\":0}\n");
    char *m = scrape(h.port);
    assert_true(sample(m, "corestreamd_source_state{state=\"failed\"}") == 1);
    assert_true(sample(m, "corestreamd_source_state{state=\"streaming\"}") == 0);
    free(m);
    cs_server_stop(h.srv);
    assert_int_equal(harness_join(&h), -1);
    harness_stop(&h);
}

/* Every method but GET and HEAD gets 405 with Allow on the three paths; /stream keeps its own
 * rules and other paths their 404. */
static void test_wrong_methods_get_405(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.interval_ms = 50};
    harness_start(&h, &o);
    assert_true(cs_server_wait_retained(h.srv, 1, WAIT_MS * T_MS));
    static const char *const paths[] = {"/healthz", "/readyz", "/metrics"};
    static const char *const methods[] = {"POST", "PUT", "DELETE", "PATCH", "OPTIONS"};
    char resp[4096];
    for (size_t i = 0; i < 3; i++) {
        for (size_t k = 0; k < 5; k++) {
            assert_int_equal(raw(h.port, methods[k], paths[i], resp, sizeof resp), 405);
            assert_true(strncmp(resp, "HTTP/1.1 405 Method Not Allowed\r\n", 33) == 0);
            assert_non_null(strstr(resp, "allow: GET, HEAD\r\n"));
            assert_string_equal(strstr(resp, "\r\n\r\n"), "\r\n\r\nMethod Not Allowed\n");
        }
        assert_int_equal(raw(h.port, "HEAD", paths[i], resp, sizeof resp), 200);
        assert_string_equal(strstr(resp, "\r\n\r\n"), "\r\n\r\n");
    }
    assert_int_equal(raw(h.port, "POST", "/nowhere", resp, sizeof resp), 404);
    harness_stop(&h);
}

/* ---- /metrics ---- */

static void test_metrics_move_as_ledgers_stream(void **state)
{
    (void)state;
    harness h;
    enum { SIZE = 300000, COUNT = 6 };
    /* Each ledger is emitted once the subscriber has the one before (gated): ledgers it meets in
     * the live flow are the ones publish_to_write times, and with a paced source a subscriber the
     * machine runs late meets only ring replays, which it does not time. */
    harness_begin(&h);
    gated *g = gated_new(&h, SIZE, true);
    harness_opts o = {.compress = true};
    harness_launch(&h, &o, &g->base, cs_counted_range(1, 0));
    char path[64];
    snprintf(path, sizeof path, "/stream?start=1&end=%d", COUNT + 10); /* beyond the end: 1001 */
    cs_ws *ws = cs_ws_connect("127.0.0.1", h.port, path, WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    cs_ledger l;
    for (int i = 0; i < 2; i++) {
        gated_open(g);
        assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, NULL, 0), 1);
        assert_int_equal(l.seq, (uint32_t)i + 1);
        cs_ledger_free(&l);
    }
    char *m = scrape(h.port);
    double first = sample(m, "corestreamd_ledgers_emitted_total");
    assert_true(first >= 2 && first <= COUNT);
    assert_true(sample(m, "corestreamd_latest_ledger") >= 2);
    assert_true(sample(m, "corestreamd_subscribers") == 1);
    assert_true(sample(m, "corestreamd_publish_to_write_seconds_count") > 0);
    assert_true(sample(m, "corestreamd_connections_accepted_total{listener=\"data\"}") >= 1);
    /* --compress-level auto, the default: the level in use is within auto's range. */
    assert_non_null(strstr(m, ",compress_level=\"auto\","));
    double level = sample(m, "corestreamd_compress_level");
    assert_true(level >= -7 && level <= 3 && level != 0);
    free(m);
    for (int i = 2; i < COUNT; i++) {
        gated_open(g);
        assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, NULL, 0), 1);
        assert_int_equal(l.seq, (uint32_t)i + 1);
        cs_ledger_free(&l);
    }
    close(g->gate[1]); /* the source ends after ledger COUNT */
    g->gate[1] = -1;
    assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, NULL, 0), 0);
    int code;
    char why[128];
    assert_int_equal(cs_ws_last_close(ws, &code, why, sizeof why), 1);
    assert_int_equal(code, 1001);
    cs_ws_close(ws);
    assert_false(cs_server_wait_retained(h.srv, COUNT + 1, WAIT_MS * T_MS)); /* the source has ended */

    m = scrape(h.port);
    assert_true(sample(m, "corestreamd_ledgers_emitted_total") == COUNT);
    assert_true(sample(m, "corestreamd_latest_ledger") == COUNT);
    assert_true(sample(m, "corestreamd_emitted_bytes_total{form=\"raw\"}") == (double)COUNT * SIZE);
    double wire = sample(m, "corestreamd_emitted_bytes_total{form=\"wire\"}");
    assert_true(wire > 0 && wire < (double)COUNT * SIZE / 2); /* meta-shaped: about 7x */
    assert_true(sample(m, "corestreamd_chunks_total{codec=\"zstd\"}") >= COUNT * 2);
    assert_true(sample(m, "corestreamd_emit_duration_seconds_count") == COUNT);
    assert_true(sample(m, "corestreamd_emit_duration_seconds_bucket{le=\"+Inf\"}") == COUNT);
    assert_true(sample(m, "corestreamd_ring_oldest_ledger") == 1);
    assert_true(sample(m, "corestreamd_ring_latest_ledger") == COUNT);
    assert_true(sample(m, "corestreamd_ring_size_bytes") == (double)COUNT * SIZE);
    /* Every ledger's published chunks are stored beside it, compressed. */
    double frames = sample(m, "corestreamd_ring_frames_size_bytes");
    assert_true(frames > 0 && frames < (double)COUNT * SIZE / 2);
    assert_true(sample(m, "corestreamd_sent_bytes_total{flow=\"live\"}") + sample(m, "corestreamd_sent_bytes_total{flow=\"replay\"}") >= wire);
    assert_true(sample(m, "corestreamd_closes_sent_total{code=\"1001\"}") == 1);
    assert_true(sample(m, "corestreamd_source_state{state=\"ended\"}") == 1);
    assert_true(sample(m, "corestreamd_ring_write_failures_total") == 0);
    assert_true(sample(m, "process_resident_memory_bytes") > 0);
    assert_true(sample(m, "process_open_fds") > 0);
    /* A catch-up from the ring (the server lingers after its source ended) is sent from the stored
     * frames: every replay byte but BEGIN and END is a stored CHUNK, none re-encoded. */
    double replay0 = sample(m, "corestreamd_sent_bytes_total{flow=\"replay\"}");
    double stored0 = sample(m, "corestreamd_replay_chunk_bytes_total{source=\"stored\"}");
    free(m);
    snprintf(path, sizeof path, "/stream?start=1&end=%d", COUNT);
    ws = cs_ws_connect("127.0.0.1", h.port, path, WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    for (int i = 0; i < COUNT; i++) {
        assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, NULL, 0), 1);
        cs_ledger_free(&l);
    }
    assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, NULL, 0), 0);
    cs_ws_close(ws);
    m = scrape(h.port);
    double replay = sample(m, "corestreamd_sent_bytes_total{flow=\"replay\"}") - replay0;
    double stored = sample(m, "corestreamd_replay_chunk_bytes_total{source=\"stored\"}") - stored0;
    assert_true(stored > 0);
    assert_true(replay == stored + COUNT * (double)(CS_WIRE_BEGIN_LEN + CS_WIRE_END_LEN));
    assert_true(sample(m, "corestreamd_replay_chunk_bytes_total{source=\"encoded\"}") == 0);
    free(m);
    harness_stop(&h);
}

/* A fixed level is the level in use, and build_info says so. */
static void test_fixed_compress_level_is_reported(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 3, .size = 300000, .compress = true, .compress_level = 3, .compressible = true,
                      .interval_ms = 30};
    harness_start(&h, &o);
    assert_true(cs_server_wait_retained(h.srv, 3, WAIT_MS * T_MS));
    char *m = scrape(h.port);
    assert_non_null(strstr(m, ",compress_level=\"3\","));
    assert_true(sample(m, "corestreamd_compress_level") == 3);
    assert_true(sample(m, "corestreamd_chunks_total{codec=\"zstd\"}") >= 3);
    free(m);
    harness_stop(&h);
}

/* Runs `sh -c cmd` to its end; its exit status, with everything it printed in *out. */
static int shell(const char *cmd, cs_proc *p)
{
    char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
    assert_int_equal(cs_proc_start(p, argv), 0);
    return cs_proc_wait_exit(p, WAIT_MS);
}

static void test_promtool_accepts_the_exposition(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.count = 2};
    harness_start(&h, &o);
    assert_true(cs_server_wait_retained(h.srv, 2, WAIT_MS * T_MS));
    char *m = scrape(h.port);
    char file[PATH_MAX + 16], cmd[2 * PATH_MAX];
    snprintf(file, sizeof file, "%s/metrics.txt", h.dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs(m, f);
    fclose(f);
    free(m);
    /* promtool prints each lint finding and exits 1 on any; a clean exposition prints nothing. */
    snprintf(cmd, sizeof cmd, "%s check metrics < '%s' 2>&1", PROMTOOL, file);
    cs_proc p;
    int rc = shell(cmd, &p);
    if (rc != 0 || p.loglen != 0)
        fail_msg("promtool exit %d:\n%s", rc, p.log);
    cs_proc_free(&p);
    harness_stop(&h);
}

/* ---- Debian's Prometheus against the corestreamd binary ---- */

/* The port Prometheus listens on, started with --web.listen-address=127.0.0.1:0: its
 * `msg="Listening on" address=127.0.0.1:PORT` line names the one the kernel gave it. Picking a free
 * port beforehand and handing it over would race with every other process until Prometheus
 * binds. -1 when the line does not come. */
static int prometheus_port(cs_proc *prom)
{
    if (cs_proc_wait_line(prom, "msg=\"Listening on\"", WAIT_MS) != 0)
        return -1;
    char line[512];
    cs_proc_line(prom, line, sizeof line);
    const char *a = strstr(line, " address=127.0.0.1:");
    int port = a ? atoi(a + strlen(" address=127.0.0.1:")) : 0;
    return port > 0 ? port : -1;
}

/* The value of the first series a Prometheus instant query returns, or -1 while it has none. */
static double query(int port, const char *expr)
{
    char path[256], body[8192];
    snprintf(path, sizeof path, "/api/v1/query?query=%s", expr);
    if (cs_http_get("127.0.0.1", port, path, WAIT_MS, body, sizeof body, NULL, 0) != 200)
        return -1;
    const char *v = strstr(body, "\"value\":[");
    if (!v || !(v = strstr(v, ",\"")))
        return -1;
    return strtod(v + 2, NULL);
}

typedef struct prom_ask {
    int port;
    const char *expr;
    double seen;
} prom_ask;

static bool reports_ledgers(void *arg)
{
    prom_ask *a = arg;
    a->seen = query(a->port, a->expr);
    return a->seen >= 2;
}

static void test_prometheus_scrapes_corestreamd(void **state)
{
    (void)state;
    cs_tmpdir tmp;
    assert_int_equal(cs_tmpdir_make(&tmp, "prom"), 0);
    char datadir[PATH_MAX + 32];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/data", tmp.path);
    char *cs_argv[] = {CORESTREAMD_BIN, datadir, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
                       "--synthetic-interval", "100ms", NULL};
    cs_proc cs;
    assert_int_equal(cs_proc_start(&cs, cs_argv), 0);
    assert_int_equal(cs_proc_wait_listening(&cs, WAIT_MS), 0);
    int target = cs_proc_wait_admin_port(&cs, WAIT_MS);
    assert_true(target > 0);
    /* The admin port serves the probes and the scrape, never a stream. */
    char body[512];
    assert_int_equal(cs_http_get("127.0.0.1", target, "/healthz", WAIT_MS, body, sizeof body, NULL, 0), 200);
    assert_int_equal(cs_http_get("127.0.0.1", target, "/stream", WAIT_MS, body, sizeof body, NULL, 0), 404);

    char cfg[PATH_MAX + 32], tsdb[PATH_MAX + 32];
    snprintf(cfg, sizeof cfg, "%s/prometheus.yml", tmp.path);
    snprintf(tsdb, sizeof tsdb, "%s/tsdb", tmp.path);
    FILE *f = fopen(cfg, "w");
    assert_non_null(f);
    /* A scrape of a sanitizer build on a busy machine can outlast any short timeout; a failed
     * scrape only delays what the queries below wait for (up is 0 for it, and the series it would
     * have sampled are stale until the next success). */
    fprintf(f,
            "global:\n  scrape_interval: 5s\n  scrape_timeout: 5s\n"
            "scrape_configs:\n  - job_name: corestreamd\n    static_configs:\n"
            "      - targets: ['127.0.0.1:%d']\n",
            target);
    fclose(f);
    char a_cfg[PATH_MAX + 64], a_tsdb[PATH_MAX + 64];
    snprintf(a_cfg, sizeof a_cfg, "--config.file=%s", cfg);
    snprintf(a_tsdb, sizeof a_tsdb, "--storage.tsdb.path=%s", tsdb);
    char *prom_argv[] = {PROMETHEUS, a_cfg, a_tsdb, "--web.listen-address=127.0.0.1:0", NULL};
    cs_proc prom;
    assert_int_equal(cs_proc_start(&prom, prom_argv), 0);
    int port = prometheus_port(&prom); /* it answers 503 until ready: the asking below waits */
    if (port < 0)
        fail_msg("prometheus did not start:\n%s", prom.log);

    /* No event says a scrape has landed: ask (cs_wait_until) until the series has a value that has
     * moved. The queries then ask over the last minutes, so a later scrape that failed (a busy
     * machine) does not hide what the earlier ones stored: some scrape found the target up, and
     * build_info was 1. */
    prom_ask ask = {.port = port, .expr = "max_over_time(corestreamd_ledgers_emitted_total%7Bjob%3D%22corestreamd%22%7D%5B5m%5D)"};
    if (cs_wait_until(reports_ledgers, &ask, WAIT_MS) != 0)
        fail_msg("prometheus never reported ledgers (last %f):\n%s", ask.seen, prom.log);
    assert_true(query(port, "max_over_time(up%7Bjob%3D%22corestreamd%22%7D%5B5m%5D)") == 1);
    assert_true(query(port, "max_over_time(corestreamd_build_info%5B5m%5D)") == 1);

    assert_int_equal(cs_proc_stop(&prom, SIGTERM, WAIT_MS), 0);
    assert_int_equal(cs_proc_stop(&cs, SIGTERM, WAIT_MS), 0);
    cs_proc_free(&prom);
    cs_proc_free(&cs);
    cs_tmpdir_remove(&tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readyz_follows_the_source),
        cmocka_unit_test(test_readyz_reports_a_failed_source),
        cmocka_unit_test(test_wrong_methods_get_405),
        cmocka_unit_test(test_metrics_move_as_ledgers_stream),
        cmocka_unit_test(test_fixed_compress_level_is_reported),
        cmocka_unit_test(test_promtool_accepts_the_exposition),
        cmocka_unit_test(test_prometheus_scrapes_corestreamd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
