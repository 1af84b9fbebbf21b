/* SPDX-License-Identifier: Apache-2.0 */
/* The metrics module's arithmetic (histogram buckets, close codes, the exposition's shape) and
 * the readiness verdicts, without a server. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "corestreamd/stream/metrics.h"
#include "corestreamd/stream/readiness.h"

static void test_readiness_verdicts(void **state)
{
    (void)state;
    static const struct {
        cs_source_state st;
        bool stopping;
        unsigned code;
        const char *body;
    } cases[] = {
        {CS_SRC_STARTING, false, 503, "{\"ready\":false,\"state\":\"starting\",\"reason\":\"starting\",\"latest\":7}\n"},
        {CS_SRC_CATCHING_UP, false, 503,
         "{\"ready\":false,\"state\":\"catching_up\",\"reason\":\"catching up\",\"latest\":7}\n"},
        {CS_SRC_STREAMING, false, 200, "{\"ready\":true,\"state\":\"streaming\",\"latest\":7}\n"},
        {CS_SRC_STREAMING, true, 503,
         "{\"ready\":false,\"state\":\"streaming\",\"reason\":\"shutting down\",\"latest\":7}\n"},
        {CS_SRC_ENDED, false, 503, "{\"ready\":false,\"state\":\"ended\",\"reason\":\"source ended\",\"latest\":7}\n"},
        {CS_SRC_STOPPED, false, 503, "{\"ready\":false,\"state\":\"stopped\",\"reason\":\"shutting down\",\"latest\":7}\n"},
        {CS_SRC_FAILED, true, 503, "{\"ready\":false,\"state\":\"failed\",\"reason\":\"source failed\",\"latest\":7}\n"},
        {CS_SRC_RING_FAILED, true, 503,
         "{\"ready\":false,\"state\":\"ring_failed\",\"reason\":\"ring failing\",\"latest\":7}\n"},
        {CS_SRC_WAITING, false, 503,
         "{\"ready\":false,\"state\":\"waiting\",\"reason\":\"waiting for ledger 8 past a skipped message\","
         "\"latest\":7,\"waiting_for\":8}\n"},
        {CS_SRC_WAITING, true, 503,
         "{\"ready\":false,\"state\":\"waiting\",\"reason\":\"shutting down\",\"latest\":7}\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[256];
        assert_int_equal(cs_readiness(cases[i].st, cases[i].stopping, 7, 8, body, sizeof body), cases[i].code);
        assert_string_equal(body, cases[i].body);
    }
}

static const char *line_of(const char *text, const char *prefix)
{
    const char *l = strstr(text, prefix);
    assert_non_null(l);
    return l;
}

/* Buckets are upper-inclusive and cumulative in the exposition; +Inf equals _count. */
static void test_histogram_and_closes_render(void **state)
{
    (void)state;
    cs_metrics *m = cs_metrics_new();
    assert_non_null(m);
    cs_m_observe_ns(&m->t_emit, 7500000);   /* exactly 7.5 ms: the 0.0075 bucket */
    cs_m_observe_ns(&m->t_emit, 7500001);   /* just above: 0.01 */
    cs_m_observe_ns(&m->t_emit, 5000000000); /* 5 s: +Inf only */
    cs_m_observe_ns(&m->t_emit, -3);         /* a clock step backwards counts as 0 */
    cs_m_count_close(m, 1000);
    cs_m_count_close(m, 1000);
    cs_m_count_close(m, 4001);
    cs_m_count_close(m, 3000);
    cs_m_set_state(m, CS_SRC_STREAMING);
    cs_metrics_view v = {.version = "9.9.9", .commit = "abc123", .compress = true, .compress_level = 1,
                         .compress_level_now = 1, .compress_workers = 4, .ring_oldest = 3, .ring_latest = 9,
                         .subscribers = 2};
    cs_strbuf b = CS_STRBUF_INIT;
    cs_metrics_render(&b, m, &v);
    char *t = cs_strbuf_take(&b, NULL);
    assert_non_null(t);
    assert_non_null(strstr(t, "# HELP corestreamd_emit_duration_seconds "));
    assert_non_null(strstr(t, "# TYPE corestreamd_emit_duration_seconds histogram\n"));
    assert_non_null(strstr(t, "\ncorestreamd_emit_duration_seconds_bucket{le=\"0.0001\"} 1\n"));
    assert_non_null(strstr(t, "\ncorestreamd_emit_duration_seconds_bucket{le=\"0.005\"} 1\n"));
    assert_non_null(strstr(t, "\ncorestreamd_emit_duration_seconds_bucket{le=\"0.0075\"} 2\n"));
    assert_non_null(strstr(t, "\ncorestreamd_emit_duration_seconds_bucket{le=\"0.01\"} 3\n"));
    assert_non_null(strstr(t, "\ncorestreamd_emit_duration_seconds_bucket{le=\"1\"} 3\n"));
    assert_non_null(strstr(t, "\ncorestreamd_emit_duration_seconds_bucket{le=\"+Inf\"} 4\n"));
    assert_non_null(strstr(t, "\ncorestreamd_emit_duration_seconds_sum 5.015000001\n"));
    assert_non_null(strstr(t, "\ncorestreamd_emit_duration_seconds_count 4\n"));
    assert_non_null(strstr(t, "\ncorestreamd_closes_sent_total{code=\"1000\"} 2\n"));
    assert_non_null(strstr(t, "\ncorestreamd_closes_sent_total{code=\"4001\"} 1\n"));
    assert_non_null(strstr(t, "\ncorestreamd_closes_sent_total{code=\"other\"} 1\n"));
    assert_non_null(strstr(t, "\ncorestreamd_source_state{state=\"streaming\"} 1\n"));
    assert_non_null(strstr(t, "\ncorestreamd_source_state{state=\"starting\"} 0\n"));
    assert_non_null(strstr(t, "\ncorestreamd_ring_oldest_ledger 3\n"));
    assert_non_null(strstr(t, "\ncorestreamd_subscribers 2\n"));
    const char *info = line_of(t, "corestreamd_build_info{");
    static const char want[] = "corestreamd_build_info{version=\"9.9.9\",commit=\"abc123\",compress=\"true\","
                               "compress_level=\"1\",compress_workers=\"4\",zstd_version=\"";
    assert_true(strncmp(info, want, sizeof want - 1) == 0);
    assert_non_null(strstr(t, "\n# TYPE corestreamd_compress_level gauge\ncorestreamd_compress_level 1\n"));
    /* Every family is announced before its samples. */
    for (const char *l = t; *l; l = strchr(l, '\n') + 1) {
        if (*l != '#') {
            char name[128];
            size_t n = strcspn(l, "{ ");
            assert_true(n < sizeof name);
            memcpy(name, l, n);
            name[n] = '\0';
            char *suffix = strstr(name, "_bucket");
            if (!suffix)
                suffix = strstr(name, "_count");
            if (!suffix && strstr(name, "_seconds_sum"))
                suffix = strstr(name, "_sum");
            if (suffix)
                *suffix = '\0';
            char type[160];
            snprintf(type, sizeof type, "# TYPE %s ", name);
            const char *decl = strstr(t, type);
            assert_non_null(decl);
            assert_true(decl < l);
        }
    }
    free(t);
    cs_metrics_free(m);
}

/* --compress-level auto: build_info names the setting, the gauge the level in use now. */
static void test_compress_level_render(void **state)
{
    (void)state;
    cs_metrics *m = cs_metrics_new();
    assert_non_null(m);
    struct {
        cs_metrics_view v;
        const char *label, *gauge;
    } cases[] = {
        {{.compress = true, .compress_auto = true, .compress_level_now = -3}, "compress_level=\"auto\"",
         "\ncorestreamd_compress_level -3\n"},
        {{.compress = true, .compress_level = 3, .compress_level_now = 3}, "compress_level=\"3\"",
         "\ncorestreamd_compress_level 3\n"},
        {{.compress = false, .compress_auto = true, .compress_level_now = 1}, "compress_level=\"auto\"",
         "\ncorestreamd_compress_level 0\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cs_strbuf b = CS_STRBUF_INIT;
        cs_metrics_render(&b, m, &cases[i].v);
        char *t = cs_strbuf_take(&b, NULL);
        assert_non_null(t);
        const char *info = line_of(t, "corestreamd_build_info{");
        assert_non_null(strstr(info, cases[i].label));
        assert_non_null(strstr(t, cases[i].gauge));
        free(t);
    }
    cs_metrics_free(m);
}

/* The exposition of fresh counters with the publisher's (js) and the lake exporter's (lake)
 * counters, either NULL. */
static char *render_with_parts(const cs_metrics_jetstream *js, const cs_metrics_lake_export *lake)
{
    cs_metrics *m = cs_metrics_new();
    assert_non_null(m);
    cs_metrics_view v = {.version = "9.9.9", .commit = "abc123", .jetstream = js, .lake_export = lake};
    cs_strbuf b = CS_STRBUF_INIT;
    cs_metrics_render(&b, m, &v);
    cs_metrics_free(m);
    char *t = cs_strbuf_take(&b, NULL);
    assert_non_null(t);
    return t;
}

static char *render_with(const cs_metrics_jetstream *js)
{
    return render_with_parts(js, NULL);
}

/* Every wanted piece is in the exposition t, and promtool lints it clean (it prints each finding
 * and exits 1 on any; a clean exposition prints nothing). */
static void expect_lines_and_lint(const char *t, const char *const *want, size_t n_want)
{
    for (size_t i = 0; i < n_want; i++)
        if (!strstr(t, want[i]))
            fail_msg("no\n%s\nin:\n%s", want[i], t);
    char file[] = "/tmp/metrics-js-XXXXXX";
    int fd = mkstemp(file);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(t, f);
    fclose(f);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "/usr/bin/promtool check metrics < %s 2>&1", file);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char out[4096];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int rc = pclose(p);
    unlink(file);
    if (rc != 0 || n != 0)
        fail_msg("promtool status %d:\n%s", rc, out);
}

/* The publisher's counters as corestreamd_jetstream_* families, only when there is a publisher,
 * and an exposition promtool accepts. */
static void test_jetstream_families(void **state)
{
    (void)state;
    char *t = render_with(NULL);
    assert_null(strstr(t, "corestreamd_jetstream_"));
    free(t);

    cs_metrics_jetstream js = {.published = 70, .acked = 68, .duplicates = 3, .ack_failures = 2, .stalls = 4,
                               .ledgers = 10, .ring_ledgers = 6, .gaps = 1, .behind_episodes = 2, .resyncs = 5,
                               .behind = true, .connected = false};
    t = render_with(&js);
    static const char *const want[] = {
        "# TYPE corestreamd_jetstream_published_total counter\ncorestreamd_jetstream_published_total 70\n",
        "# TYPE corestreamd_jetstream_acked_total counter\ncorestreamd_jetstream_acked_total 68\n",
        "# TYPE corestreamd_jetstream_duplicates_total counter\ncorestreamd_jetstream_duplicates_total 3\n",
        "# TYPE corestreamd_jetstream_ack_failures_total counter\ncorestreamd_jetstream_ack_failures_total 2\n",
        "# TYPE corestreamd_jetstream_stalls_total counter\ncorestreamd_jetstream_stalls_total 4\n",
        "# TYPE corestreamd_jetstream_ledgers_total counter\ncorestreamd_jetstream_ledgers_total 10\n",
        "# TYPE corestreamd_jetstream_ring_ledgers_total counter\ncorestreamd_jetstream_ring_ledgers_total 6\n",
        "# TYPE corestreamd_jetstream_gaps_total counter\ncorestreamd_jetstream_gaps_total 1\n",
        "# TYPE corestreamd_jetstream_behind_episodes_total counter\ncorestreamd_jetstream_behind_episodes_total 2\n",
        "# TYPE corestreamd_jetstream_resyncs_total counter\ncorestreamd_jetstream_resyncs_total 5\n",
        "# TYPE corestreamd_jetstream_behind gauge\ncorestreamd_jetstream_behind 1\n",
        "# TYPE corestreamd_jetstream_connected gauge\ncorestreamd_jetstream_connected 0\n",
    };
    expect_lines_and_lint(t, want, sizeof want / sizeof want[0]);
    free(t);
}

/* The lake exporter's counters as corestreamd_lake_export_* families, only with --lake-dir. */
static void test_lake_export_families(void **state)
{
    (void)state;
    char *t = render_with_parts(NULL, NULL);
    assert_null(strstr(t, "corestreamd_lake_export_"));
    free(t);
    cs_metrics_lake_export lake = {
        .objects = 12, .signatures = 11, .bytes = 3456, .io_errors = 3, .conflicts = 1, .lost = 7, .lag = 2};
    t = render_with_parts(NULL, &lake);
    static const char *const want[] = {
        "# TYPE corestreamd_lake_export_objects_total counter\ncorestreamd_lake_export_objects_total 12\n",
        "# TYPE corestreamd_lake_export_signatures_total counter\ncorestreamd_lake_export_signatures_total 11\n",
        "# TYPE corestreamd_lake_export_bytes_total counter\ncorestreamd_lake_export_bytes_total 3456\n",
        "# TYPE corestreamd_lake_export_lag_ledgers gauge\ncorestreamd_lake_export_lag_ledgers 2\n",
        "# TYPE corestreamd_lake_export_errors_total counter\ncorestreamd_lake_export_errors_total{kind=\"io\"} 3\n"
        "corestreamd_lake_export_errors_total{kind=\"conflict\"} 1\n",
        "# TYPE corestreamd_lake_export_lost_total counter\ncorestreamd_lake_export_lost_total 7\n",
    };
    expect_lines_and_lint(t, want, sizeof want / sizeof want[0]);
    free(t);
}

/* What the shipped alert rules read: readiness, the ring's health, the certificate's notAfter
 * (left out without TLS). */
static void test_alert_inputs_render(void **state)
{
    (void)state;
    cs_metrics *m = cs_metrics_new();
    assert_non_null(m);
    cs_metrics_view v = {.version = "9.9.9", .commit = "abc123"};
    cs_strbuf b = CS_STRBUF_INIT;
    cs_metrics_render(&b, m, &v);
    char *t = cs_strbuf_take(&b, NULL);
    assert_non_null(strstr(t, "# TYPE corestreamd_ready gauge\ncorestreamd_ready 0\n"));
    assert_non_null(strstr(t, "# TYPE corestreamd_latest_ledger_timestamp_seconds gauge\n"
                              "corestreamd_latest_ledger_timestamp_seconds 0.000\n"));
    assert_non_null(strstr(t, "# TYPE corestreamd_ring_degraded gauge\ncorestreamd_ring_degraded 0\n"));
    assert_null(strstr(t, "corestreamd_tls_certificate_not_after_timestamp_seconds"));
    free(t);
    atomic_store(&m->latest_emitted_at, 1893456000123000000ULL);
    v.ready = true;
    v.ring_degraded = true;
    v.tls_not_after = 1893456000;
    cs_metrics_render(&b, m, &v);
    t = cs_strbuf_take(&b, NULL);
    assert_non_null(strstr(t, "corestreamd_ready 1\n"));
    assert_non_null(strstr(t, "corestreamd_latest_ledger_timestamp_seconds 1893456000.123\n"));
    assert_non_null(strstr(t, "corestreamd_ring_degraded 1\n"));
    assert_non_null(strstr(t, "# TYPE corestreamd_tls_certificate_not_after_timestamp_seconds gauge\n"
                              "corestreamd_tls_certificate_not_after_timestamp_seconds 1893456000\n"));
    free(t);
    cs_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readiness_verdicts),
        cmocka_unit_test(test_histogram_and_closes_render),
        cmocka_unit_test(test_compress_level_render),
        cmocka_unit_test(test_jetstream_families),
        cmocka_unit_test(test_lake_export_families),
        cmocka_unit_test(test_alert_inputs_render),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
