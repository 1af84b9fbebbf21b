/* The edge (corestreamd --source jetstream) end to end: a core publishing to real Debian
 * nats-server processes (support/natsserver), an edge consuming the stream, and a subscriber of
 * the edge that verifies every ledger with libremoteledger and checks its bytes against the
 * synthetic source. Cases: byte-exact delivery of zstd and raw chunk streams; an edge restarted
 * resumes where its ring ends; the core killed and restarted mid-stream; a 3-node JetStream
 * cluster with an R3 stream losing a node mid-stream; the NATS server killed and restarted; a gap and a corrupt ledger in the stream
 * fail the edge loudly. Every ledger must arrive exactly once, in order. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <nats/nats.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "common/synthetic.h"
#include "corestream/remoteledger.h"
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
#define SIZE 300000
#define MAX_SEQ 128

static cs_tmpdir g_tmp;
static cs_nats_server g_nats;
static cs_nats_cluster g_cluster;
static bool g_clustered;
static cs_proc g_core, g_edge;
static bool g_core_live, g_edge_live;

static const char *nats_urls(void) { return g_clustered ? g_cluster.urls : g_nats.url; }

static int setup(void **state)
{
    (void)state;
    g_clustered = false;
    if (cs_tmpdir_make(&g_tmp, "edgee2e") != 0)
        return -1;
    if (cs_nats_start(&g_nats, 0, WAIT_MS) != 0) {
        fprintf(stderr, "nats-server did not start:\n%s\n", g_nats.proc.log ? g_nats.proc.log : "");
        /* cmocka runs no teardown after a failed setup. */
        cs_nats_free(&g_nats);
        cs_tmpdir_remove(&g_tmp);
        return -1;
    }
    return 0;
}

static int setup_cluster(void **state)
{
    (void)state;
    g_clustered = true;
    if (cs_tmpdir_make(&g_tmp, "edgee2e") != 0)
        return -1;
    if (cs_nats_cluster_start(&g_cluster, 3, 60000) != 0) {
        for (int i = 0; i < g_cluster.n; i++)
            fprintf(stderr, "node %d:\n%s\n", i, g_cluster.node[i].proc.log ? g_cluster.node[i].proc.log : "");
        /* cmocka runs no teardown after a failed setup. */
        cs_nats_cluster_free(&g_cluster);
        cs_tmpdir_remove(&g_tmp);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (g_edge_live)
        cs_proc_free(&g_edge);
    if (g_core_live)
        cs_proc_free(&g_core);
    g_edge_live = g_core_live = false;
    if (g_clustered)
        cs_nats_cluster_free(&g_cluster);
    else
        cs_nats_free(&g_nats);
    cs_tmpdir_remove(&g_tmp);
    return 0;
}

/* argv: the binary, the common flags, then extra (NULL-terminated). */
static void start(cs_proc *p, bool *live, const char *const *common, size_t ncommon, const char *const *extra)
{
    char *argv[48];
    size_t n = 0;
    argv[n++] = CORESTREAMD_BIN;
    for (size_t i = 0; i < ncommon; i++)
        argv[n++] = (char *)common[i];
    for (; extra && *extra && n < 46; extra++)
        argv[n++] = (char *)*extra;
    argv[n] = NULL;
    assert_int_equal(cs_proc_start(p, argv), 0);
    *live = true;
}

/* The core: synthetic ledgers of SIZE bytes in 64 KiB chunks every 100 ms, published to the
 * test's NATS; run gets the run token. */
static void start_core(const char *const *extra, char *run, size_t runlen)
{
    char datadir[PATH_MAX + 32], url[512];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/core", g_tmp.path);
    snprintf(url, sizeof url, "--jetstream-url=%s", nats_urls());
    const char *common[] = {datadir,
                            "--listen=127.0.0.1:0",
                            url,
                            "--jetstream-max-bytes=268435456",
                            g_clustered ? "--jetstream-replicas=3" : "--jetstream-replicas=1",
                            "--synthetic-size=300000",
                            "--chunk-size=65536",
                            "--synthetic-interval=100ms",
                            "--emit-window=20ms"};
    start(&g_core, &g_core_live, common, sizeof common / sizeof common[0], extra);
    if (cs_proc_wait_line(&g_core, "jetstream publisher ready", WAIT_MS) != 0) {
        for (int i = 0; g_clustered && i < g_cluster.n; i++) {
            cs_proc_drain(&g_cluster.node[i].proc);
            fprintf(stderr, "node %d:\n%s\n", i, g_cluster.node[i].proc.log);
        }
        fail_msg("no `jetstream publisher ready` in:\n%s", g_core.log);
    }
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
        fail_msg("core not listening:\n%s", g_core.log);
}

/* The edge on its own data dir; returns once it follows the stream and listens. following gets
 * the `jetstream source following` line. */
static void start_edge(const char *const *extra, char *following, size_t flen)
{
    char datadir[PATH_MAX + 32], url[512];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/edge", g_tmp.path);
    snprintf(url, sizeof url, "--jetstream-source-url=%s", nats_urls());
    const char *common[] = {datadir, "--listen=127.0.0.1:0", "--source=jetstream", url, "--retention=1000"};
    start(&g_edge, &g_edge_live, common, sizeof common / sizeof common[0], extra);
    if (cs_proc_wait_listening(&g_edge, WAIT_MS) != 0)
        fail_msg("edge not listening:\n%s", g_edge.log);
    if (cs_proc_wait_line(&g_edge, "jetstream source following", WAIT_MS) != 0)
        fail_msg("no `jetstream source following` in:\n%s", g_edge.log);
    if (following)
        cs_proc_line(&g_edge, following, flen);
}

static void wait_stream_ledger(const char *run, uint32_t seq)
{
    /* A node that stays up in the cluster case. */
    const char *url = g_clustered ? g_cluster.node[1].url : g_nats.url;
    if (cs_jsr_wait_ledger(url, STREAM, run, seq, WAIT_MS) != 0)
        fail_msg("ledger %u never reached the stream; core:\n%s", seq, g_core.log);
}

/* ---- a verified subscriber of the edge, on its own thread ------------------------------------- */

typedef struct subscriber {
    pthread_t thread;
    int port;
    uint32_t from, to;
    bool compressible;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned counts[MAX_SEQ + 1]; /* deliveries per ledger */
    uint32_t last;
    size_t received;
    char error[512];
    bool done;
} subscriber;

static void *subscriber_main(void *arg)
{
    subscriber *s = arg;
    char url[64];
    snprintf(url, sizeof url, "ws://127.0.0.1:%d", s->port);
    rl_stream *st = NULL;
    rl_options o;
    rl_options_init(&o);
    uint8_t *want = malloc(SIZE);
    char error[512] = "";
    if (rl_stream_new(&st, url, &o) != RL_OK || rl_stream_open(st, rl_bounded_range(s->from, s->to)) != RL_OK)
        snprintf(error, sizeof error, "open: %s", st ? rl_stream_error(st) : "rl_stream_new failed");
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!error[0]) {
        const uint8_t *p;
        size_t len;
        rl_ledger_info info;
        rl_result r = rl_stream_next(st, 1000000000LL, &p, &len, &info);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (r == RL_END)
            break;
        if (r == RL_AGAIN) {
            if (now.tv_sec - t0.tv_sec > 120)
                snprintf(error, sizeof error, "no end after 120 s (last ledger %u)", s->last);
            continue;
        }
        if (r != RL_OK) {
            snprintf(error, sizeof error, "%s: %s", rl_result_name(r), rl_stream_error(st));
            break;
        }
        cs_synthetic_fill(want, SIZE, info.sequence, s->compressible);
        pthread_mutex_lock(&s->mu);
        if (info.sequence <= MAX_SEQ)
            s->counts[info.sequence]++;
        if (len != SIZE || memcmp(want, p, len) != 0)
            snprintf(error, sizeof error, "ledger %u differs from its source bytes (%zu bytes)", info.sequence, len);
        else if (s->received && info.sequence != s->last + 1)
            snprintf(error, sizeof error, "ledger %u after %u", info.sequence, s->last);
        else if (!s->received && info.sequence != s->from)
            snprintf(error, sizeof error, "first ledger %u, want %u", info.sequence, s->from);
        s->last = info.sequence;
        s->received++;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
    }
    if (st) {
        rl_stream_close(st);
        rl_stream_free(st);
    }
    free(want);
    pthread_mutex_lock(&s->mu);
    snprintf(s->error, sizeof s->error, "%s", error);
    s->done = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void subscriber_start(subscriber *s, int port, uint32_t from, uint32_t to, bool compressible)
{
    memset(s, 0, sizeof *s);
    s->port = port;
    s->from = from;
    s->to = to;
    s->compressible = compressible;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    assert_int_equal(pthread_create(&s->thread, NULL, subscriber_main, s), 0);
}

/* Before a failure: stops the edge so that its log is read to its end (a failure's cause is often
 * the last line written) and prints it whole, with what the core has written so far, straight to
 * stderr (cmocka cuts a message past its own buffer). */
static void edge_log_whole(void)
{
    (void)cs_proc_stop(&g_edge, SIGTERM, WAIT_MS);
    fprintf(stderr, "edge:\n%s\n", g_edge.log ? g_edge.log : "");
    if (g_core_live) {
        cs_proc_drain(&g_core);
        fprintf(stderr, "core:\n%s\n", g_core.log ? g_core.log : "");
    }
}

/* Waits (bounded) until the subscriber has ledger seq, or is done. */
static void subscriber_wait(subscriber *s, uint32_t seq)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 60;
    pthread_mutex_lock(&s->mu);
    while (!s->done && (!s->received || s->last < seq))
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) != 0)
            break;
    bool ok = s->received && s->last >= seq;
    pthread_mutex_unlock(&s->mu);
    if (!ok) {
        edge_log_whole();
        fail_msg("the edge's subscriber never got ledger %u (%s); logs above", seq, s->error);
    }
}

/* Joins the subscriber (it ends at the range's end) and checks that every ledger of the range
 * came exactly once. */
static void subscriber_finish(subscriber *s)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 150;
    pthread_mutex_lock(&s->mu);
    while (!s->done)
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) != 0)
            break;
    bool done = s->done;
    pthread_mutex_unlock(&s->mu);
    if (!done) {
        edge_log_whole();
        fail_msg("the edge's subscriber did not finish; logs above");
    }
    pthread_join(s->thread, NULL);
    if (s->error[0]) {
        edge_log_whole();
        fail_msg("edge subscriber: %s; logs above", s->error);
    }
    for (uint32_t q = s->from; q <= s->to; q++)
        if (s->counts[q] != 1)
            fail_msg("ledger %u arrived %u times", q, s->counts[q]);
    assert_int_equal(s->received, s->to - s->from + 1);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
}

static void expect_clean_edge(void)
{
    cs_proc_drain(&g_edge);
    assert_int_equal(cs_proc_log_count(&g_edge, "not a clean flow"), 0);
    assert_int_equal(cs_proc_log_count(&g_edge, "level=ERROR"), 0);
}

/* ---- byte-exact through the edge -------------------------------------------------------------- */

static void through_edge(bool compressible)
{
    const char *args[] = {"--synthetic-count=12",
                          compressible ? "--synthetic-compressible" : "--synthetic-compressible=false", NULL};
    char run[128], following[2048];
    start_core(args, run, sizeof run);
    wait_stream_ledger(run, 1);
    start_edge(NULL, following, sizeof following);
    /* An empty ring follows the newest run from its first ledger. */
    char want[192];
    snprintf(want, sizeof want, "run=%s", run);
    assert_non_null(strstr(following, want));
    assert_non_null(strstr(following, "from_ledger=0"));

    subscriber sub;
    subscriber_start(&sub, g_edge.port, 1, 12, compressible);
    subscriber_finish(&sub);
    assert_int_equal(cs_proc_wait_exit(&g_core, WAIT_MS), 0);

    /* What the edge relayed was the stream's chunking: zstd frames for the compressible run,
     * raw chunks for the other. */
    cs_jsr r;
    char err[256];
    if (cs_jsr_read(g_nats.url, STREAM, run, &r, err, sizeof err) != 0)
        fail_msg("reading the stream: %s", err);
    assert_int_equal(r.nledgers, 12);
    for (size_t i = 0; i < r.nledgers; i++)
        assert_int_equal(r.ledgers[i].zstd_chunks, compressible ? r.ledgers[i].chunks : 0);
    cs_jsr_free(&r);
    assert_int_equal(cs_proc_stop(&g_edge, SIGTERM, WAIT_MS), 0);
    expect_clean_edge();
}

static void test_edge_byte_exact_zstd(void **state)
{
    (void)state;
    through_edge(true);
}

static void test_edge_byte_exact_raw(void **state)
{
    (void)state;
    through_edge(false);
}

/* ---- an edge restarted resumes where its ring ends -------------------------------------------- */

static uint64_t metric(const char *text, const char *name)
{
    char needle[128];
    snprintf(needle, sizeof needle, "\n%s ", name);
    const char *p = strstr(text, needle);
    if (!p)
        fail_msg("no %s in /metrics:\n%s", name, text);
    return strtoull(p + strlen(needle), NULL, 10);
}

/* The core's /metrics show a connected publisher that has published at least `ledgers`. */
static void expect_core_publishing(uint64_t ledgers)
{
    enum { CAP = 1 << 17 };
    char *body = malloc(CAP);
    assert_int_equal(cs_http_get("127.0.0.1", g_core.port, "/metrics", WAIT_MS, body, CAP, NULL, 0), 200);
    assert_int_equal(metric(body, "corestreamd_jetstream_connected"), 1);
    assert_int_equal(metric(body, "corestreamd_jetstream_gaps_total"), 0);
    assert_true(metric(body, "corestreamd_jetstream_ledgers_total") >= ledgers);
    /* A ledger counts once its END is handed to NATS: BEGIN, 5 chunks and END; acks come later. */
    assert_true(metric(body, "corestreamd_jetstream_published_total") >= ledgers * 7);
    assert_true(metric(body, "corestreamd_jetstream_acked_total") > 0);
    free(body);
}

static uint32_t from_ledger(const char *following)
{
    const char *p = strstr(following, "from_ledger=");
    assert_non_null(p);
    return (uint32_t)strtoul(p + 12, NULL, 10);
}

/* The edge's run token (its listening line's run=) is the stream's run's, with no nonce of its
 * own data dir: "jetstream-<XXH64 of its identity, seed 0>", the same on every edge of the run. */
static void expect_edge_run(const char *run)
{
    char identity[256], want[64];
    snprintf(identity, sizeof identity, "source=jetstream stream=" STREAM " run=%s", run);
    snprintf(want, sizeof want, " run=jetstream-%016llx\n", /* the line's last field */
             (unsigned long long)XXH64(identity, strlen(identity), 0));
    const char *line = strstr(g_edge.log, "msg=\"corestreamd listening\"");
    const char *at = line ? strstr(line, want) : NULL;
    if (!at || strchr(line, '\n') != at + strlen(want) - 1)
        fail_msg("no%s on the edge's listening line:\n%s", want, g_edge.log);
}

static void test_edge_restart_resumes_at_ring_end(void **state)
{
    (void)state;
    const char *args[] = {"--synthetic-count=40", "--synthetic-compressible", NULL};
    char run[128], following[2048];
    start_core(args, run, sizeof run);
    wait_stream_ledger(run, 1);
    start_edge(NULL, NULL, 0);
    expect_edge_run(run);
    subscriber sub;
    subscriber_start(&sub, g_edge.port, 1, 10, true);
    subscriber_finish(&sub);
    expect_core_publishing(10);
    assert_int_equal(cs_proc_stop(&g_edge, SIGTERM, WAIT_MS), 0);
    expect_clean_edge();
    cs_proc_free(&g_edge);
    g_edge_live = false;

    start_edge(NULL, following, sizeof following);
    expect_edge_run(run);
    uint32_t from = from_ledger(following);
    assert_true(from >= 11); /* the ring held at least what the subscriber was served */
    assert_int_equal(cs_proc_log_count(&g_edge, "ring reset at start"), 0);
    /* Ring replay below `from`, the stream after it: one unbroken run from 1. */
    subscriber_start(&sub, g_edge.port, 1, 40, true);
    subscriber_finish(&sub);
    assert_int_equal(cs_proc_stop(&g_edge, SIGTERM, WAIT_MS), 0);
    expect_clean_edge();
}

/* ---- the core killed and restarted mid-stream ------------------------------------------------- */

static void test_core_restart_edge_sees_no_gap_no_dup(void **state)
{
    (void)state;
    const char *args[] = {"--synthetic-compressible", NULL};
    char run[128], run2[128];
    start_core(args, run, sizeof run);
    wait_stream_ledger(run, 1);
    start_edge(NULL, NULL, 0);
    subscriber sub;
    subscriber_start(&sub, g_edge.port, 1, 40, true);
    subscriber_wait(&sub, 8);
    cs_proc_stop(&g_core, SIGKILL, WAIT_MS);
    cs_proc_free(&g_core);
    g_core_live = false;
    start_core(args, run2, sizeof run2);
    assert_string_equal(run, run2);
    subscriber_finish(&sub);
    assert_int_equal(cs_proc_stop(&g_edge, SIGTERM, WAIT_MS), 0);
    expect_clean_edge();
}

/* ---- the NATS server killed and restarted mid-stream ------------------------------------------ */

static void test_nats_restart_edge_resumes(void **state)
{
    (void)state;
    const char *args[] = {"--synthetic-compressible", NULL};
    char run[128];
    start_core(args, run, sizeof run);
    wait_stream_ledger(run, 1);
    start_edge(NULL, NULL, 0);
    subscriber sub;
    subscriber_start(&sub, g_edge.port, 1, 40, true);
    subscriber_wait(&sub, 8);
    assert_int_equal(cs_nats_stop(&g_nats, SIGKILL, WAIT_MS), 0);
    /* The edge's tip stands still while NATS is away; the core's ring keeps what it misses. */
    if (cs_proc_wait_line(&g_edge, "jetstream source lost the stream; resuming", WAIT_MS) != 0)
        fail_msg("the edge did not notice NATS going away:\n%s", g_edge.log);
    if (cs_nats_restart(&g_nats, WAIT_MS) != 0)
        fail_msg("nats-server did not restart:\n%s", g_nats.proc.log);
    subscriber_finish(&sub);
    assert_int_equal(cs_proc_stop(&g_edge, SIGTERM, WAIT_MS), 0);
    expect_clean_edge();
    assert_int_equal(cs_proc_log_count(&g_edge, "jetstream source resumed"), 1);
}

/* ---- a 3-node cluster, R3, one node killed mid-stream ----------------------------------------- */

static void test_cluster_node_loss_edge_keeps_serving(void **state)
{
    (void)state;
    const char *args[] = {"--synthetic-compressible", NULL};
    char run[128];
    start_core(args, run, sizeof run);
    wait_stream_ledger(run, 1);
    char following[2048];
    start_edge(NULL, following, sizeof following);
    /* The node the edge reads from is the one that dies. */
    int victim = -1;
    for (int i = 0; i < g_cluster.n; i++) {
        char want[96];
        snprintf(want, sizeof want, "server=%s", g_cluster.node[i].url);
        if (strstr(following, want))
            victim = i;
    }
    if (victim < 0)
        fail_msg("the edge names no cluster node it reads from: %s", following);
    subscriber sub;
    subscriber_start(&sub, g_edge.port, 1, 45, true);
    subscriber_wait(&sub, 10);
    assert_int_equal(cs_nats_stop(&g_cluster.node[victim], SIGKILL, WAIT_MS), 0);
    subscriber_finish(&sub);
    assert_int_equal(cs_proc_stop(&g_edge, SIGTERM, WAIT_MS), 0);
    expect_clean_edge();
    /* It noticed, once, and came back. */
    assert_int_equal(cs_proc_log_count(&g_edge, "jetstream source lost the stream; resuming"), 1);
    assert_int_equal(cs_proc_log_count(&g_edge, "jetstream source resumed"), 1);
}

/* ---- a gap and a corrupt ledger in the stream ------------------------------------------------- */

/* Publishes ledger seq of run as the core would (BEGIN, raw chunks of 64 KiB, END) with the
 * synthetic payload of ledger `fill`: at most max_chunks chunks, and END only when with_end and
 * every chunk went; a non-zero xor flips the END's checksum. */
static void put_copy(jsCtx *js, const char *run, uint32_t seq, uint32_t fill, uint32_t max_chunks, bool with_end,
                     uint64_t xor)
{
    uint8_t *body = malloc(SIZE), *msg = malloc(65536 + CS_WIRE_CHUNK_HEADER_LEN);
    cs_synthetic_fill(body, SIZE, fill, false);
    char subj[128];
    snprintf(subj, sizeof subj, "%s.%s.%u", STREAM, run, seq);
    jsErrCode jerr = 0;
    size_t n = cs_wire_put_begin(msg, seq, 1);
    assert_int_equal(js_Publish(NULL, js, subj, msg, (int)n, NULL, &jerr), NATS_OK);
    uint32_t idx = 0;
    for (size_t off = 0; off < SIZE && idx < max_chunks; off += 65536, idx++) {
        size_t k = SIZE - off < 65536 ? SIZE - off : 65536;
        n = cs_wire_append_chunk(msg, seq, idx, CS_CODEC_RAW, body + off, k);
        assert_int_equal(js_Publish(NULL, js, subj, msg, (int)n, NULL, &jerr), NATS_OK);
    }
    n = cs_wire_put_end(msg, seq, idx, SIZE, 2, XXH64(body, SIZE, 0) ^ xor);
    if (with_end && idx * (size_t)65536 >= SIZE)
        assert_int_equal(js_Publish(NULL, js, subj, msg, (int)n, NULL, &jerr), NATS_OK);
    free(body);
    free(msg);
}

static void put_ledger(jsCtx *js, const char *run, uint32_t seq, uint64_t xor)
{
    put_copy(js, run, seq, seq, UINT32_MAX, true, xor);
}

/* Publishes only ledger seq's END (as put_ledger would), checksum flipped by a non-zero xor. */
static void put_end(jsCtx *js, const char *run, uint32_t seq, uint64_t xor)
{
    uint8_t *body = malloc(SIZE), msg[CS_WIRE_END_LEN];
    cs_synthetic_fill(body, SIZE, seq, false);
    char subj[128];
    snprintf(subj, sizeof subj, "%s.%s.%u", STREAM, run, seq);
    uint32_t chunks = (SIZE + 65535) / 65536;
    size_t n = cs_wire_put_end(msg, seq, chunks, SIZE, 2, XXH64(body, SIZE, 0) ^ xor);
    jsErrCode jerr = 0;
    assert_int_equal(js_Publish(NULL, js, subj, msg, (int)n, NULL, &jerr), NATS_OK);
    free(body);
}

/* Connects to the single server and creates the stream the fault tests write by hand. */
static void fault_stream(natsConnection **ncp, jsCtx **jsp)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    assert_int_equal(natsConnection_ConnectTo(&nc, g_nats.url), NATS_OK);
    assert_int_equal(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    const char *subj[] = {STREAM ".>"};
    cfg.Name = STREAM;
    cfg.Subjects = subj;
    cfg.SubjectsLen = 1;
    jsStreamInfo *si = NULL;
    assert_int_equal(js_AddStream(&si, js, &cfg, NULL, NULL), NATS_OK);
    jsStreamInfo_Destroy(si);
    *ncp = nc;
    *jsp = js;
}

/* The edge's /readyz: its status, the body in body. */
static int edge_readyz(char *body, size_t cap)
{
    return cs_http_get("127.0.0.1", g_edge.port, "/readyz", WAIT_MS, body, cap, NULL, 0);
}

/* Waits (bounded) for the edge's log line, failing with its log. */
static void wait_edge_line(const char *needle)
{
    if (cs_proc_wait_line(&g_edge, needle, WAIT_MS) != 0)
        fail_msg("no `%s` in:\n%s", needle, g_edge.log);
}

/* Reads one ledger from ws and checks it is ledger seq with the synthetic bytes of fill. */
static void expect_ledger(cs_ws *ws, uint32_t seq, uint32_t fill)
{
    char err[256];
    cs_ledger l;
    if (cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err) != 1)
        fail_msg("ledger %u from the edge: %s\n%s", seq, err, g_edge.log);
    assert_int_equal(l.seq, seq);
    assert_int_equal(l.len, SIZE);
    uint8_t *want = malloc(SIZE);
    cs_synthetic_fill(want, SIZE, fill, false);
    if (memcmp(want, l.data, SIZE) != 0)
        fail_msg("ledger %u from the edge is not the genuine copy", seq);
    free(want);
    cs_ledger_free(&l);
}

/* A stream holding ledgers 1, 2 and then third (a gap when it is 4, a corrupt ledger 3 when xor is
 * set). The edge serves 1 and 2, skips the fault (logged with reason, counted), stays up, not ready
 * while it waits for ledger 3 (/readyz names it), and serves the genuine ledger 3 once it comes. */
static void bad_stream(uint32_t third, uint64_t xor, const char *want, const char *reason)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    fault_stream(&nc, &js);
    put_ledger(js, "test-fault", 1, 0);
    put_ledger(js, "test-fault", 2, 0);
    put_ledger(js, "test-fault", third, xor);

    const char *args[] = {"--jetstream-run=test-fault", NULL};
    start_edge(args, NULL, 0);
    int status = 0;
    cs_ws *ws = cs_ws_connect("127.0.0.1", g_edge.port, "/stream?start=1", WAIT_MS, &status, NULL, 0);
    if (!ws)
        fail_msg("connect to the edge: status %d\n%s", status, g_edge.log);
    expect_ledger(ws, 1, 1);
    expect_ledger(ws, 2, 2);
    wait_edge_line(want); /* on a `jetstream source skipped a message` line */
    char body[4096];
    assert_int_equal(edge_readyz(body, sizeof body), 503);
    if (!strstr(body, "\"state\":\"waiting\"") || !strstr(body, "\"waiting_for\":3"))
        fail_msg("/readyz does not say it waits for ledger 3: %s", body);
    char metric[96];
    snprintf(metric, sizeof metric, "corestreamd_edge_messages_skipped_total{reason=\"%s\"} ", reason);
    static char metrics[1 << 17];
    assert_int_equal(cs_http_get("127.0.0.1", g_edge.port, "/metrics", WAIT_MS, metrics, sizeof metrics, NULL, 0), 200);
    const char *line = strstr(metrics, metric);
    if (!line || atoi(line + strlen(metric)) < 1)
        fail_msg("no %s count in /metrics:\n%s", reason, metrics);

    put_ledger(js, "test-fault", 3, 0);
    expect_ledger(ws, 3, 3);
    wait_edge_line("jetstream source has the ledger it waited for");
    assert_int_equal(edge_readyz(body, sizeof body), 200);
    cs_ws_close(ws);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    assert_int_equal(cs_proc_stop(&g_edge, SIGTERM, WAIT_MS), 0);
    assert_int_equal(cs_proc_log_count(&g_edge, "level=ERROR"), 0);
}

static void test_gap_in_stream_waits_for_the_ledger(void **state)
{
    (void)state;
    bad_stream(4, 0, "reason=out_of_place error=\"ledger 4 where ledger 3 is next (a gap)\"", "out_of_place");
}

static void test_corrupt_ledger_skipped_then_genuine_served(void **state)
{
    (void)state;
    bad_stream(3, 1, "reason=corrupt error=\"remoteledger: protocol violation: ledger 3 checksum mismatch", "corrupt");
}

/* Junk on the next ledger's subject (six bytes; a message of ledger 9 under ledger 3's subject)
 * is skipped, never fatal, and the genuine ledger after it is served. */
static void test_junk_messages_are_skipped(void **state)
{
    (void)state;
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    fault_stream(&nc, &js);
    put_ledger(js, "test-fault", 1, 0);
    const char *args[] = {"--jetstream-run=test-fault", NULL};
    start_edge(args, NULL, 0);
    int status = 0;
    cs_ws *ws = cs_ws_connect("127.0.0.1", g_edge.port, "/stream?start=1", WAIT_MS, &status, NULL, 0);
    if (!ws)
        fail_msg("connect to the edge: status %d\n%s", status, g_edge.log);
    expect_ledger(ws, 1, 1);
    jsErrCode jerr = 0;
    assert_int_equal(js_Publish(NULL, js, STREAM ".test-fault.2", "junk!!", 6, NULL, &jerr), NATS_OK);
    uint8_t begin[CS_WIRE_BEGIN_LEN];
    size_t n = cs_wire_put_begin(begin, 9, 1);
    assert_int_equal(js_Publish(NULL, js, STREAM ".test-fault.2", begin, (int)n, NULL, &jerr), NATS_OK);
    wait_edge_line("reason=malformed");
    wait_edge_line("reason=subject");
    put_ledger(js, "test-fault", 2, 0);
    expect_ledger(ws, 2, 2);
    wait_edge_line("jetstream source has the ledger it waited for");
    cs_ws_close(ws);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    assert_int_equal(cs_proc_stop(&g_edge, SIGTERM, WAIT_MS), 0);
}

/* The edge forwards a ledger's body as the stream delivers it, and holds its END back until the
 * stream's END verifies: a subscriber of the edge gets BEGIN and the first chunk of ledger 3
 * while the stream holds no END for it yet; when that END comes with a wrong checksum, no END
 * goes out: the edge begins ledger 3 again (a fresh BEGIN: the subscriber drops its partial copy)
 * and forwards the genuine copy once it comes. */
static void test_corrupt_ledger_mid_forward_is_begun_again(void **state)
{
    (void)state;
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    fault_stream(&nc, &js);
    put_ledger(js, "test-fault", 1, 0);
    put_ledger(js, "test-fault", 2, 0);
    const char *args[] = {"--jetstream-run=test-fault", NULL};
    start_edge(args, NULL, 0);
    int status = 0;
    cs_ws *ws = cs_ws_connect("127.0.0.1", g_edge.port, "/stream?start=1", WAIT_MS, &status, NULL, 0);
    if (!ws)
        fail_msg("connect to the edge: status %d\n%s", status, g_edge.log);
    expect_ledger(ws, 1, 1);
    expect_ledger(ws, 2, 2);
    put_copy(js, "test-fault", 3, 7, UINT32_MAX, false, 0); /* a copy with other bytes */
    /* The edge's 256 KiB chunk fills from the stream's 64 KiB ones before any END exists. */
    cs_ws_msg m;
    cs_wire_msg w;
    for (int type = CS_WIRE_TYPE_BEGIN; type; type = type == CS_WIRE_TYPE_BEGIN ? CS_WIRE_TYPE_CHUNK : 0) {
        assert_int_equal(cs_ws_read(ws, &m, WAIT_MS), CS_WS_BINARY);
        assert_int_equal(cs_wire_decode(m.data, m.len, &w, NULL), 0);
        assert_int_equal(w.type, type);
        assert_int_equal(w.seq, 3);
    }
    put_end(js, "test-fault", 3, 0); /* the genuine END: copy 7's bytes do not match it */
    put_ledger(js, "test-fault", 3, 0);
    /* Next comes a fresh BEGIN of 3, then the genuine copy: never an END of the void bytes. */
    assert_int_equal(cs_ws_read(ws, &m, WAIT_MS), CS_WS_BINARY);
    assert_int_equal(cs_wire_decode(m.data, m.len, &w, NULL), 0);
    if (w.type != CS_WIRE_TYPE_BEGIN || w.seq != 3)
        fail_msg("after a copy that does not verify, the edge sent %s of ledger %u, not a fresh BEGIN of 3",
                 w.type == CS_WIRE_TYPE_END ? "END" : "CHUNK", w.seq);
    uint8_t *want = malloc(SIZE);
    cs_synthetic_fill(want, SIZE, 3, false);
    size_t got = 0;
    for (;;) {
        assert_int_equal(cs_ws_read(ws, &m, WAIT_MS), CS_WS_BINARY);
        assert_int_equal(cs_wire_decode(m.data, m.len, &w, NULL), 0);
        assert_int_equal(w.seq, 3);
        if (w.type == CS_WIRE_TYPE_END)
            break;
        assert_int_equal(w.type, CS_WIRE_TYPE_CHUNK);
        assert_int_equal(w.codec, 0);
        assert_true(got + w.payload_len <= SIZE);
        assert_memory_equal(w.payload, want + got, w.payload_len);
        got += w.payload_len;
    }
    assert_int_equal(got, SIZE);
    assert_int_equal(w.checksum, XXH64(want, SIZE, 0));
    free(want);
    wait_edge_line("ledger begins again: the bytes sent of it were void");
    cs_ws_close(ws);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    assert_int_equal(cs_proc_stop(&g_edge, SIGTERM, WAIT_MS), 0);
    assert_true(strstr(g_edge.log, "reason=corrupt") != NULL);
}

/* The stream begins ledger 3 again after the edge has forwarded its first 256 KiB: the edge begins
 * it again for its subscribers (a fresh BEGIN) and serves the second copy whole, whatever its bytes
 * (it verifies). */
static void restarted_ledger(uint32_t second_fill)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    fault_stream(&nc, &js);
    put_ledger(js, "test-fault", 1, 0);
    put_ledger(js, "test-fault", 2, 0);
    const char *args[] = {"--jetstream-run=test-fault", NULL};
    start_edge(args, NULL, 0);
    int status = 0;
    cs_ws *ws = cs_ws_connect("127.0.0.1", g_edge.port, "/stream?start=3", WAIT_MS, &status, NULL, 0);
    if (!ws)
        fail_msg("connect to the edge: status %d\n%s", status, g_edge.log);
    put_copy(js, "test-fault", 3, 3, 4, false, 0); /* BEGIN and 4 of its 5 chunks */
    cs_ws_msg m;
    cs_wire_msg w;
    for (int type = CS_WIRE_TYPE_BEGIN; type; type = type == CS_WIRE_TYPE_BEGIN ? CS_WIRE_TYPE_CHUNK : 0) {
        assert_int_equal(cs_ws_read(ws, &m, WAIT_MS), CS_WS_BINARY);
        assert_int_equal(cs_wire_decode(m.data, m.len, &w, NULL), 0);
        assert_int_equal(w.type, type);
        assert_int_equal(w.seq, 3);
    }
    put_copy(js, "test-fault", 3, second_fill, UINT32_MAX, true, 0);
    /* A fresh BEGIN of 3 (the partial copy is void), then the second copy to its END. */
    expect_ledger(ws, 3, second_fill);
    cs_ws_close(ws);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    wait_edge_line("ledger begins again: the bytes sent of it were void");
    wait_edge_line("jetstream stream began a ledger again");
    assert_int_equal(cs_proc_stop(&g_edge, SIGTERM, WAIT_MS), 0);
    assert_int_equal(cs_proc_log_count(&g_edge, "level=ERROR"), 0);
}

static void test_ledger_begun_again_same_bytes_is_served(void **state)
{
    (void)state;
    restarted_ledger(3);
}

static void test_ledger_begun_again_other_bytes_is_served(void **state)
{
    (void)state;
    restarted_ledger(7);
}

int main(void)
{
    nats_Open(-1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_edge_byte_exact_zstd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edge_byte_exact_raw, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edge_restart_resumes_at_ring_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_core_restart_edge_sees_no_gap_no_dup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nats_restart_edge_resumes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gap_in_stream_waits_for_the_ledger, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_ledger_skipped_then_genuine_served, setup, teardown),
        cmocka_unit_test_setup_teardown(test_junk_messages_are_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_ledger_mid_forward_is_begun_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ledger_begun_again_same_bytes_is_served, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ledger_begun_again_other_bytes_is_served, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cluster_node_loss_edge_keeps_serving, setup_cluster, teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rc;
}
