/* SPDX-License-Identifier: Apache-2.0 */
/* The edge (corestreamd --source jetstream) end to end: a core publishing to real Debian
 * nats-server processes (support/natsserver), an edge consuming the stream, and a subscriber of
 * the edge that verifies every ledger with libremoteledger and checks its bytes against the
 * synthetic source. Cases: byte-exact delivery of zstd and raw chunk streams; an edge restarted
 * resumes where its ring ends; the core killed and restarted mid-stream; a 3-node JetStream
 * cluster with an R3 stream losing a node mid-stream, and losing its quorum under a connected
 * publisher (acks stop while the server still answers); the NATS server killed and restarted; a
 * signing core's ledgers checked by the edge and by its subscriber. Every
 * ledger must arrive exactly once, in order. What the edge does with a bad stream is
 * test_edge_faults_e2e's. */
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
#include "support/certs.h"
#include "support/edgefixture.h"
#include "support/natsserver.h"
#include "support/procharness.h"
#include "support/tmpdir.h"
#include "support/wsclient.h"
#include "support/wait.h"
#include "wire/wire.h"

#ifndef CORESTREAMD_BIN
#error "CORESTREAMD_BIN must name the binary under test"
#endif
#define STREAM CS_EDGEFX_STREAM
#define SIZE CS_EDGEFX_SIZE
#define MAX_SEQ 128

static cs_edgefx fx;

static int setup(void **state)
{
    (void)state;
    return cs_edgefx_setup(&fx, false);
}

static int setup_cluster(void **state)
{
    (void)state;
    return cs_edgefx_setup(&fx, true);
}

static int teardown(void **state)
{
    (void)state;
    cs_edgefx_teardown(&fx);
    return 0;
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
    (void)cs_proc_stop(&fx.edge, SIGTERM, WAIT_MS);
    fprintf(stderr, "edge:\n%s\n", fx.edge.log ? fx.edge.log : "");
    if (fx.core_live) {
        cs_proc_drain(&fx.core);
        fprintf(stderr, "core:\n%s\n", fx.core.log ? fx.core.log : "");
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
    cs_proc_drain(&fx.edge);
    assert_int_equal(cs_proc_log_count(&fx.edge, "not a clean flow"), 0);
    assert_int_equal(cs_proc_log_count(&fx.edge, "level=ERROR"), 0);
}

/* ---- byte-exact through the edge -------------------------------------------------------------- */

static void through_edge(bool compressible)
{
    const char *args[] = {"--synthetic-count=12",
                          compressible ? "--synthetic-compressible" : "--synthetic-compressible=false", NULL};
    char run[128], following[2048];
    cs_edgefx_start_core(&fx, args, run, sizeof run);
    cs_edgefx_wait_stream_ledger(&fx, run, 1);
    cs_edgefx_start_edge(&fx, NULL, following, sizeof following);
    /* An empty ring follows the newest run from its first ledger. */
    char want[192];
    snprintf(want, sizeof want, "run=%s", run);
    assert_non_null(strstr(following, want));
    assert_non_null(strstr(following, "from_ledger=0"));

    subscriber sub;
    subscriber_start(&sub, fx.edge.port, 1, 12, compressible);
    subscriber_finish(&sub);
    assert_int_equal(cs_proc_wait_exit(&fx.core, WAIT_MS), 0);

    /* What the edge relayed was the stream's chunking: zstd frames for the compressible run,
     * raw chunks for the other. */
    cs_jsr r;
    char err[256];
    if (cs_jsr_read(fx.nats.url, STREAM, run, &r, err, sizeof err) != 0)
        fail_msg("reading the stream: %s", err);
    assert_int_equal(r.nledgers, 12);
    for (size_t i = 0; i < r.nledgers; i++)
        assert_int_equal(r.ledgers[i].zstd_chunks, compressible ? r.ledgers[i].chunks : 0);
    cs_jsr_free(&r);
    assert_int_equal(cs_proc_stop(&fx.edge, SIGTERM, WAIT_MS), 0);
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

/* ---- the live messages ------------------------------------------------------------------------ */

/* A compressible core with extra args, an edge once ledger 1 is in the stream, and a subscriber
 * of the edge for ledgers 1 to `to`. */
static void core_edge_subscriber(const char *const *args, subscriber *sub, uint32_t to)
{
    char run[128];
    cs_edgefx_start_core(&fx, args, run, sizeof run);
    cs_edgefx_wait_stream_ledger(&fx, run, 1);
    cs_edgefx_start_edge(&fx, NULL, NULL, 0);
    subscriber_start(sub, fx.edge.port, 1, to, true);
}

/* The number of consumers on the test's stream. */
static int64_t stream_consumers(void)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsStreamInfo *si = NULL;
    assert_int_equal(natsConnection_ConnectTo(&nc, fx.nats.url), NATS_OK);
    assert_int_equal(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
    assert_int_equal(js_GetStreamInfo(&si, js, STREAM, NULL, NULL), NATS_OK);
    int64_t n = si->State.Consumers;
    jsStreamInfo_Destroy(si);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return n;
}

/* At the tip the edge takes the run's messages as the server receives them (before the stream
 * stores them) and keeps no consumer on the stream; every ledger still comes once, byte-exact. */
static void test_edge_follows_live_messages(void **state)
{
    (void)state;
    const char *args[] = {"--synthetic-count=40", "--synthetic-compressible", NULL};
    subscriber sub;
    core_edge_subscriber(args, &sub, 40);
    if (cs_proc_wait_line(&fx.edge, "jetstream source following the live messages", WAIT_MS) != 0) {
        edge_log_whole();
        fail_msg("the edge never followed the live messages; logs above");
    }
    /* The consumer it started with is gone once it follows live (its deletion is answered). */
    assert_int_equal(stream_consumers(), 0);
    subscriber_finish(&sub);
    enum { CAP = 1 << 17 };
    char *body = malloc(CAP);
    assert_int_equal(cs_http_get("127.0.0.1", fx.edge.port, "/metrics", WAIT_MS, body, CAP, NULL, 0), 200);
    const char *live = strstr(body, "\ncorestreamd_edge_ledgers_total{path=\"live\"} ");
    assert_non_null(live);
    assert_true(strtoull(strchr(live, '}') + 2, NULL, 10) >= 1);
    assert_non_null(strstr(body, "\ncorestreamd_edge_stream_moves_total 0\n"));
    free(body);
    assert_int_equal(cs_proc_stop(&fx.edge, SIGTERM, WAIT_MS), 0);
    expect_clean_edge();
    assert_int_equal(cs_proc_log_count(&fx.edge, "jetstream source reading the stream"), 0);
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
    assert_int_equal(cs_http_get("127.0.0.1", fx.core.port, "/metrics", WAIT_MS, body, CAP, NULL, 0), 200);
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
    const char *line = strstr(fx.edge.log, "msg=\"corestreamd listening\"");
    const char *at = line ? strstr(line, want) : NULL;
    if (!at || strchr(line, '\n') != at + strlen(want) - 1)
        fail_msg("no%s on the edge's listening line:\n%s", want, fx.edge.log);
}

static void test_edge_restart_resumes_at_ring_end(void **state)
{
    (void)state;
    const char *args[] = {"--synthetic-count=40", "--synthetic-compressible", NULL};
    char run[128], following[2048];
    cs_edgefx_start_core(&fx, args, run, sizeof run);
    cs_edgefx_wait_stream_ledger(&fx, run, 1);
    cs_edgefx_start_edge(&fx, NULL, NULL, 0);
    expect_edge_run(run);
    subscriber sub;
    subscriber_start(&sub, fx.edge.port, 1, 10, true);
    subscriber_finish(&sub);
    expect_core_publishing(10);
    assert_int_equal(cs_proc_stop(&fx.edge, SIGTERM, WAIT_MS), 0);
    expect_clean_edge();
    cs_proc_free(&fx.edge);
    fx.edge_live = false;

    cs_edgefx_start_edge(&fx, NULL, following, sizeof following);
    expect_edge_run(run);
    uint32_t from = from_ledger(following);
    assert_true(from >= 11); /* the ring held at least what the subscriber was served */
    assert_int_equal(cs_proc_log_count(&fx.edge, "ring reset at start"), 0);
    /* Ring replay below `from`, the stream after it: one unbroken run from 1. */
    subscriber_start(&sub, fx.edge.port, 1, 40, true);
    subscriber_finish(&sub);
    assert_int_equal(cs_proc_stop(&fx.edge, SIGTERM, WAIT_MS), 0);
    expect_clean_edge();
}

/* ---- the core killed and restarted mid-stream ------------------------------------------------- */

static void test_core_restart_edge_sees_no_gap_no_dup(void **state)
{
    (void)state;
    const char *args[] = {"--synthetic-compressible", NULL};
    char run[128], run2[128];
    cs_edgefx_start_core(&fx, args, run, sizeof run);
    cs_edgefx_wait_stream_ledger(&fx, run, 1);
    cs_edgefx_start_edge(&fx, NULL, NULL, 0);
    subscriber sub;
    subscriber_start(&sub, fx.edge.port, 1, 40, true);
    subscriber_wait(&sub, 8);
    cs_proc_stop(&fx.core, SIGKILL, WAIT_MS);
    cs_proc_free(&fx.core);
    fx.core_live = false;
    cs_edgefx_start_core(&fx, args, run2, sizeof run2);
    assert_string_equal(run, run2);
    subscriber_finish(&sub);
    assert_int_equal(cs_proc_stop(&fx.edge, SIGTERM, WAIT_MS), 0);
    expect_clean_edge();
}

/* ---- the NATS server killed and restarted mid-stream ------------------------------------------ */

static void test_nats_restart_edge_resumes(void **state)
{
    (void)state;
    const char *args[] = {"--synthetic-compressible", NULL};
    subscriber sub;
    core_edge_subscriber(args, &sub, 40);
    subscriber_wait(&sub, 8);
    if (cs_proc_wait_line(&fx.edge, "jetstream source following the live messages", WAIT_MS) != 0)
        fail_msg("the edge never followed the live messages:\n%s", fx.edge.log);
    assert_int_equal(cs_nats_stop(&fx.nats, SIGKILL, WAIT_MS), 0);
    /* The edge's tip stands still while NATS is away; the core's ring keeps what it misses. It
     * leaves the live messages for the stream, which it reads again from where live left off. */
    if (cs_proc_wait_line(&fx.edge, "jetstream source lost the stream; resuming", WAIT_MS) != 0)
        fail_msg("the edge did not notice NATS going away:\n%s", fx.edge.log);
    assert_int_equal(cs_proc_log_count(&fx.edge, "jetstream source reading the stream"), 1);
    assert_int_equal(cs_proc_log_count(&fx.edge, "reason=\"the connection to NATS was lost\""), 1);
    if (cs_nats_restart(&fx.nats, WAIT_MS) != 0)
        fail_msg("nats-server did not restart:\n%s", fx.nats.proc.log);
    subscriber_finish(&sub);
    assert_int_equal(cs_proc_stop(&fx.edge, SIGTERM, WAIT_MS), 0);
    expect_clean_edge();
    assert_int_equal(cs_proc_log_count(&fx.edge, "jetstream source resumed"), 1);
}

/* ---- a 3-node cluster, R3, one node killed mid-stream ----------------------------------------- */

static void test_cluster_node_loss_edge_keeps_serving(void **state)
{
    (void)state;
    const char *args[] = {"--synthetic-compressible", NULL};
    char run[128];
    cs_edgefx_start_core(&fx, args, run, sizeof run);
    cs_edgefx_wait_stream_ledger(&fx, run, 1);
    char following[2048];
    cs_edgefx_start_edge(&fx, NULL, following, sizeof following);
    /* The node the edge reads from is the one that dies. */
    int victim = -1;
    for (int i = 0; i < fx.cluster.n; i++) {
        char want[96];
        snprintf(want, sizeof want, "server=%s", fx.cluster.node[i].url);
        if (strstr(following, want))
            victim = i;
    }
    if (victim < 0)
        fail_msg("the edge names no cluster node it reads from: %s", following);
    subscriber sub;
    subscriber_start(&sub, fx.edge.port, 1, 45, true);
    subscriber_wait(&sub, 10);
    assert_int_equal(cs_nats_stop(&fx.cluster.node[victim], SIGKILL, WAIT_MS), 0);
    subscriber_finish(&sub);
    assert_int_equal(cs_proc_stop(&fx.edge, SIGTERM, WAIT_MS), 0);
    expect_clean_edge();
    /* It noticed, once, and came back. */
    assert_int_equal(cs_proc_log_count(&fx.edge, "jetstream source lost the stream; resuming"), 1);
    assert_int_equal(cs_proc_log_count(&fx.edge, "jetstream source resumed"), 1);
}

/* ---- a 3-node cluster, R3, the quorum lost under a connected publisher ------------------------- */

/* The core, publishing through node 0 only, once ledger 3 is in the stream. */
static void start_core_on_node0(char *run, size_t runlen)
{
    char only0[128];
    snprintf(only0, sizeof only0, "--jetstream-url=%s", fx.cluster.node[0].url);
    const char *args[] = {only0, "--synthetic-compressible", NULL};
    cs_edgefx_start_core(&fx, args, run, runlen);
    cs_edgefx_wait_stream_ledger(&fx, run, 3);
}

/* Nodes 1 and 2 frozen (SIGSTOP) under a core connected to node 0 only: node 0 still answers the
 * connection's pings while the R3 stream can store nothing and no publish is acknowledged. Waits
 * for the publisher's next WARN `jetstream publish acks stopped`, thaws the nodes, and returns the
 * ledger the publisher resumes at once the stream answers again. */
static uint32_t freeze_quorum_until_acks_stop(int round)
{
    for (int i = 1; i < 3; i++)
        assert_int_equal(kill(fx.cluster.node[i].proc.pid, SIGSTOP), 0);
    int stalled = cs_proc_wait_line(&fx.core, "jetstream publish acks stopped", WAIT_MS);
    for (int i = 1; i < 3; i++)
        assert_int_equal(kill(fx.cluster.node[i].proc.pid, SIGCONT), 0);
    if (stalled != 0) {
        cs_proc_drain(&fx.core);
        fail_msg("no `jetstream publish acks stopped` (round %d) with the quorum gone:\n%s", round, fx.core.log);
    }
    char line[2048];
    cs_proc_line(&fx.core, line, sizeof line);
    assert_non_null(strstr(line, "level=WARN"));
    /* Elections after the thaw, beside busy loops: minutes, not WAIT_MS. */
    if (cs_proc_wait_line(&fx.core, "jetstream publisher resuming", 4 * WAIT_MS) != 0) {
        cs_proc_drain(&fx.core);
        fail_msg("the publisher never resumed after the quorum came back (round %d):\n%s", round, fx.core.log);
    }
    cs_proc_line(&fx.core, line, sizeof line);
    const char *at = strstr(line, " ledger=");
    assert_non_null(at);
    return (uint32_t)strtoul(at + 8, NULL, 10);
}

/* The quorum lost twice under a connected publisher: each time it notices that acks stopped, asks
 * the stream again until the quorum is back and goes on, and never declares a gap (a publish
 * refused while the stream elects a leader has its ledger sent again under fresh ids). */
static void test_cluster_quorum_loss_publisher_resumes(void **state)
{
    (void)state;
    char run[128];
    start_core_on_node0(run, sizeof run);
    uint32_t resumed = 0;
    for (int round = 1; round <= 2; round++) {
        resumed = freeze_quorum_until_acks_stop(round);
        /* Elections after the thaw may drop publishes again (then acks stop again, 5 s, and
         * another resync): minutes, not WAIT_MS, on a loaded machine. */
        if (cs_jsr_wait_ledger(fx.cluster.node[0].url, STREAM, run, resumed + 5, 4 * WAIT_MS) != 0) {
            cs_proc_drain(&fx.core);
            fail_msg("ledger %u never reached the stream (round %d); core:\n%s", resumed + 5, round, fx.core.log);
        }
    }
    assert_int_equal(cs_proc_stop(&fx.core, SIGTERM, WAIT_MS), 0);
    assert_int_equal(cs_proc_log_count(&fx.core, "jetstream stream gap"), 0);
    assert_true(cs_proc_log_count(&fx.core, "jetstream publish acks stopped") >= 2);
}

/* An edge started while the cluster has no quorum (its stream leaderless: JetStream answers 10008)
 * waits, says so once, and follows the stream from its first ledger once the quorum is back. */
static void test_cluster_edge_start_waits_for_quorum(void **state)
{
    (void)state;
    char run[128];
    start_core_on_node0(run, sizeof run);
    for (int i = 1; i < 3; i++)
        assert_int_equal(kill(fx.cluster.node[i].proc.pid, SIGSTOP), 0);
    /* Node 0's stream leadership lapses some seconds after its peers stop answering. */
    int leaderless = cs_jsr_wait_unavailable(fx.cluster.node[0].url, STREAM, 4 * WAIT_MS);
    if (leaderless == 0) {
        cs_edgefx_launch_edge(&fx, fx.cluster.node[0].url, NULL);
        leaderless = cs_proc_wait_line(&fx.edge, "jetstream source waiting for JetStream to answer", WAIT_MS);
    }
    for (int i = 1; i < 3; i++)
        assert_int_equal(kill(fx.cluster.node[i].proc.pid, SIGCONT), 0);
    if (leaderless != 0) {
        cs_proc_drain(&fx.edge);
        fail_msg("the stream never went leaderless, or the edge did not wait for it:\n%s",
                 fx.edge_live ? fx.edge.log : "(no edge)");
    }
    char line[2048];
    cs_proc_line(&fx.edge, line, sizeof line);
    assert_non_null(strstr(line, "level=WARN"));
    assert_non_null(strstr(line, "code=10008"));
    /* It listens once its source is built, then says where it follows from. */
    if (cs_proc_wait_listening(&fx.edge, 4 * WAIT_MS) != 0 ||
        cs_proc_wait_line(&fx.edge, "jetstream source following", WAIT_MS) != 0) {
        cs_proc_drain(&fx.edge);
        fail_msg("the edge did not follow the stream once the quorum was back:\n%s", fx.edge.log);
    }
    subscriber sub;
    subscriber_start(&sub, fx.edge.port, 1, 8, true);
    subscriber_finish(&sub);
    assert_int_equal(cs_proc_stop(&fx.edge, SIGTERM, WAIT_MS), 0);
    expect_clean_edge();
    assert_int_equal(cs_proc_log_count(&fx.edge, "jetstream source waiting for JetStream to answer"), 1);
}

/* ---- signed ledgers through the edge ---------------------------------------------------------- */

static int count_ledger(const uint8_t *p, size_t n, const rl_ledger_info *info, void *ctx)
{
    (void)p, (void)n, (void)info;
    (*(int *)ctx)++;
    return 0;
}

/* A signing core: the stream carries each ledger's SIG (between its last chunk and END, under its
 * own Nats-Msg-Id), an edge that checks them with the core's key serves them on, and a subscriber
 * of the edge that checks them too reads the range whole: first as the edge took it from the
 * stream, then, the edge restarted, from the edge's ring. */
static void test_signed_core_through_edge(void **state)
{
    (void)state;
    cs_certs certs;
    assert_int_equal(cs_certs_make(&certs), 0);
    char key[PATH_MAX + 32], keys[PATH_MAX + 32], run[128];
    snprintf(key, sizeof key, "--signing-key=%s", certs.sign_key);
    snprintf(keys, sizeof keys, "--trusted-keys=%s", certs.sign_pub);
    const char *core_args[] = {"--synthetic-count=8", key, NULL}, *edge_args[] = {keys, NULL};
    cs_edgefx_start_core(&fx, core_args, run, sizeof run);
    cs_edgefx_wait_stream_ledger(&fx, run, 8);
    for (int pass = 0; pass < 2; pass++) {
        cs_edgefx_start_edge(&fx, edge_args, NULL, 0);
        char url[64];
        snprintf(url, sizeof url, "ws://127.0.0.1:%d", fx.edge.port);
        rl_options o;
        rl_options_init(&o);
        o.trusted_keys_file = certs.sign_pub;
        rl_stream *st;
        assert_int_equal(rl_stream_new(&st, url, &o), RL_OK);
        int n = 0;
        if (rl_stream_raw_ledgers(st, rl_bounded_range(1, 8), count_ledger, &n) != RL_OK)
            fail_msg("pass %d: %s\nedge:\n%s", pass, rl_stream_error(st), fx.edge.log);
        assert_int_equal(n, 8);
        rl_stream_free(st);
        assert_int_equal(cs_proc_stop(&fx.edge, SIGTERM, WAIT_MS), 0);
        assert_int_equal(cs_proc_log_count(&fx.edge, "jetstream source skipped a message"), 0);
        cs_proc_free(&fx.edge);
        fx.edge_live = false;
    }
    cs_jsr r;
    char err[256];
    if (cs_jsr_read(fx.nats.url, STREAM, run, &r, err, sizeof err) != 0)
        fail_msg("reading the stream: %s", err);
    assert_string_equal(r.violation, "");
    assert_int_equal(r.nledgers, 8);
    for (size_t i = 0; i < r.nledgers; i++)
        assert_true(r.ledgers[i].sig);
    cs_jsr_free(&r);
    cs_certs_remove(&certs);
}

int main(void)
{
    nats_Open(-1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_edge_byte_exact_zstd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edge_byte_exact_raw, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edge_follows_live_messages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edge_restart_resumes_at_ring_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_core_restart_edge_sees_no_gap_no_dup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nats_restart_edge_resumes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signed_core_through_edge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cluster_node_loss_edge_keeps_serving, setup_cluster, teardown),
        cmocka_unit_test_setup_teardown(test_cluster_quorum_loss_publisher_resumes, setup_cluster, teardown),
        cmocka_unit_test_setup_teardown(test_cluster_edge_start_waits_for_quorum, setup_cluster, teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rc;
}
