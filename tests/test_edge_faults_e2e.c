/* SPDX-License-Identifier: Apache-2.0 */
/* The edge (corestreamd --source jetstream) against a bad stream, written by hand into a real
 * nats-server: a gap, a corrupt ledger, junk messages, a copy that fails mid-forward, a ledger
 * begun again, and signed ledgers (with --trusted-keys: unsigned, another key's, forged bytes,
 * out of the chain). The edge never serves what it cannot verify and never dies of it: it skips
 * (logged with a reason, counted), waits not ready, and serves the genuine ledger once it comes.
 * And a signing core's stream that another publisher tries to pre-empt: junk published under the
 * id of the core's next BEGIN, as a stranger could compute it (the core's old `<run>:<seq>:0`, a
 * tag copied from a stored id, a tag under an all-zero secret) is just junk, and under the real
 * id (someone holding the core's secret) makes the core republish the ledger under fresh ids:
 * either way a verifying subscriber of the edge reads every ledger. */
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
#include <openssl/evp.h>
#include <xxhash.h>

#include "common/synthetic.h"
#include "corestream/remoteledger.h"
#include "corestreamd/jetstream/idkey.h"
#include "corestreamd/jetstream/naming.h"
#include "support/certs.h"
#include "support/edgefixture.h"
#include "support/jsreader.h"
#include "support/natsserver.h"
#include "support/procharness.h"
#include "support/tmpdir.h"
#include "support/wsclient.h"
#include "support/wait.h"
#include "wire/ledgersig.h"
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

static int teardown(void **state)
{
    (void)state;
    cs_edgefx_teardown(&fx);
    return 0;
}

/* ---- a gap and a corrupt ledger in the stream ------------------------------------------------- */

static void publish(jsCtx *js, const char *subj, const uint8_t *msg, size_t n)
{
    jsErrCode jerr = 0;
    assert_int_equal(js_Publish(NULL, js, subj, msg, (int)n, NULL, &jerr), NATS_OK);
}

/* BEGIN and at most max_chunks raw chunks of 64 KiB of ledger seq's body to subj; returns how
 * many chunks went. */
static uint32_t put_begin_chunks(jsCtx *js, const char *subj, uint32_t seq, const uint8_t *body,
                                 uint32_t max_chunks)
{
    uint8_t *msg = malloc(65536 + CS_WIRE_CHUNK_HEADER_LEN);
    publish(js, subj, msg, cs_wire_put_begin(msg, seq, 1));
    uint32_t idx = 0;
    for (size_t off = 0; off < SIZE && idx < max_chunks; off += 65536, idx++) {
        size_t k = SIZE - off < 65536 ? SIZE - off : 65536;
        publish(js, subj, msg, cs_wire_append_chunk(msg, seq, idx, CS_CODEC_RAW, body + off, k));
    }
    free(msg);
    return idx;
}

/* Publishes ledger seq of run as the core would (BEGIN, raw chunks of 64 KiB, END) with the
 * synthetic payload of ledger `fill`: at most max_chunks chunks, and END only when with_end and
 * every chunk went; a non-zero xor flips the END's checksum. */
static void put_copy(jsCtx *js, const char *run, uint32_t seq, uint32_t fill, uint32_t max_chunks, bool with_end,
                     uint64_t xor)
{
    uint8_t *body = malloc(SIZE), end[CS_WIRE_END_LEN];
    cs_synthetic_fill(body, SIZE, fill, false);
    char subj[128];
    snprintf(subj, sizeof subj, "%s.%s.%u", STREAM, run, seq);
    uint32_t idx = put_begin_chunks(js, subj, seq, body, max_chunks);
    if (with_end && idx * (size_t)65536 >= SIZE)
        publish(js, subj, end, cs_wire_put_end(end, seq, idx, SIZE, 2, XXH64(body, SIZE, 0) ^ xor));
    free(body);
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
    publish(js, subj, msg, cs_wire_put_end(msg, seq, chunks, SIZE, 2, XXH64(body, SIZE, 0) ^ xor));
    free(body);
}

/* Connects to the single server and creates the stream the fault tests write by hand, with the
 * genuine ledgers 1..ledgers of the run test-fault in it. */
static void fault_stream(natsConnection **ncp, jsCtx **jsp, uint32_t ledgers)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    assert_int_equal(natsConnection_ConnectTo(&nc, fx.nats.url), NATS_OK);
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
    for (uint32_t seq = 1; seq <= ledgers; seq++)
        put_ledger(js, "test-fault", seq, 0);
    *ncp = nc;
    *jsp = js;
}

/* The edge on the hand-written run test-fault with extra flags (after --jetstream-run), and a
 * subscriber of it asking path. */
static cs_ws *open_edge(const char *const *extra, const char *path)
{
    const char *args[8] = {"--jetstream-run=test-fault"};
    for (size_t i = 1; extra && *extra && i < 7; extra++)
        args[i++] = *extra;
    cs_edgefx_start_edge(&fx, args, NULL, 0);
    int status = 0;
    cs_ws *ws = cs_ws_connect("127.0.0.1", fx.edge.port, path, WAIT_MS, &status, NULL, 0);
    if (!ws)
        fail_msg("connect to the edge at %s: status %d\n%s", path, status, fx.edge.log);
    return ws;
}

/* The edge's /readyz: its status, the body in body. */
static int edge_readyz(char *body, size_t cap)
{
    return cs_http_get("127.0.0.1", fx.edge.port, "/readyz", WAIT_MS, body, cap, NULL, 0);
}

/* A sample of /metrics (a family with no labels). */
static uint64_t metric(cs_proc *p, const char *name)
{
    static char body[1 << 17];
    assert_int_equal(cs_http_get("127.0.0.1", p->port, "/metrics", WAIT_MS, body, sizeof body, NULL, 0), 200);
    char line[256];
    snprintf(line, sizeof line, "\n%s ", name);
    const char *at = strstr(body, line);
    if (!at)
        fail_msg("no %s in /metrics", name);
    return strtoull(at + strlen(line), NULL, 10);
}

/* Waits (bounded) for the edge's log line, failing with its log. */
static void wait_edge_line(const char *needle)
{
    if (cs_proc_wait_line(&fx.edge, needle, WAIT_MS) != 0)
        fail_msg("no `%s` in:\n%s", needle, fx.edge.log);
}

/* Reads one ledger from ws and checks it is ledger seq with the synthetic bytes of fill. */
static void expect_ledger(cs_ws *ws, uint32_t seq, uint32_t fill)
{
    char err[256];
    cs_ledger l;
    if (cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err) != 1)
        fail_msg("ledger %u from the edge: %s\n%s", seq, err, fx.edge.log);
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
    fault_stream(&nc, &js, 2);
    put_ledger(js, "test-fault", third, xor);

    /* Ledger 4 verifies after the fault: a gap the edge would report after --jetstream-gap-wait,
     * which is longer than any test. */
    cs_ws *ws = open_edge((const char *const[]){"--jetstream-gap-wait=1h", NULL}, "/stream?start=1");
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
    assert_int_equal(cs_http_get("127.0.0.1", fx.edge.port, "/metrics", WAIT_MS, metrics, sizeof metrics, NULL, 0), 200);
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
    assert_int_equal(cs_proc_stop(&fx.edge, SIGTERM, WAIT_MS), 0);
    assert_int_equal(cs_proc_log_count(&fx.edge, "level=ERROR"), 0);
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

/* A stream that goes on without ledger 3 (ledgers 1, 2, 4, 5; --jetstream-gap-wait 0s): the edge
 * reports the gap once ledger 4 verified (WARN naming 3, counted), serves on from 4 (its ring
 * restarts there), is ready, and a subscriber still owed ledger 3 is told it is too far behind. */
static void test_gap_in_stream_is_reported_and_passed(void **state)
{
    (void)state;
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    fault_stream(&nc, &js, 2);
    cs_ws *ws = open_edge((const char *const[]){"--jetstream-gap-wait=0s", NULL}, "/stream?start=1");
    expect_ledger(ws, 1, 1);
    expect_ledger(ws, 2, 2);
    put_ledger(js, "test-fault", 4, 0);
    put_ledger(js, "test-fault", 5, 0);
    wait_edge_line("jetstream source gap: the stream went on without these ledgers");
    if (!strstr(fx.edge.log, " stream=CORESTREAM run=test-fault from=3 to=3 resume_ledger=4 "))
        fail_msg("the gap is not named:\n%s", fx.edge.log);
    cs_ws_msg m;
    assert_int_equal(cs_ws_read(ws, &m, WAIT_MS), CS_WS_CLOSE);
    assert_int_equal(m.close_code, 4001);
    cs_ws_close(ws);
    int status = 0;
    ws = cs_ws_connect("127.0.0.1", fx.edge.port, "/stream?start=4", WAIT_MS, &status, NULL, 0);
    if (!ws)
        fail_msg("connect to the edge from 4: status %d\n%s", status, fx.edge.log);
    expect_ledger(ws, 4, 4);
    expect_ledger(ws, 5, 5);
    cs_ws_close(ws);
    assert_int_equal(metric(&fx.edge, "corestreamd_edge_gaps_total"), 1);
    assert_int_equal(metric(&fx.edge, "corestreamd_edge_gap_ledgers_total"), 1);
    char body[4096];
    assert_int_equal(edge_readyz(body, sizeof body), 200);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    assert_int_equal(cs_proc_stop(&fx.edge, SIGTERM, WAIT_MS), 0);
    assert_int_equal(cs_proc_log_count(&fx.edge, "level=ERROR"), 0);
}

/* Junk on the next ledger's subject (six bytes; a message of ledger 9 under ledger 3's subject)
 * is skipped, never fatal, and the genuine ledger after it is served. */
static void test_junk_messages_are_skipped(void **state)
{
    (void)state;
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    fault_stream(&nc, &js, 1);
    cs_ws *ws = open_edge(NULL, "/stream?start=1");
    expect_ledger(ws, 1, 1);
    publish(js, STREAM ".test-fault.2", (const uint8_t *)"junk!!", 6);
    uint8_t begin[CS_WIRE_BEGIN_LEN];
    publish(js, STREAM ".test-fault.2", begin, cs_wire_put_begin(begin, 9, 1)); /* ledger 9 under 2 */
    wait_edge_line("reason=malformed");
    wait_edge_line("reason=subject");
    put_ledger(js, "test-fault", 2, 0);
    expect_ledger(ws, 2, 2);
    wait_edge_line("jetstream source has the ledger it waited for");
    cs_ws_close(ws);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    assert_int_equal(cs_proc_stop(&fx.edge, SIGTERM, WAIT_MS), 0);
}

/* The stream with the genuine ledgers 1 and 2, an edge on it, and a subscriber of the edge from
 * ledger 1 that has read both. */
static cs_ws *edge_past_two(natsConnection **nc, jsCtx **js)
{
    fault_stream(nc, js, 2);
    cs_ws *ws = open_edge(NULL, "/stream?start=1");
    expect_ledger(ws, 1, 1);
    expect_ledger(ws, 2, 2);
    return ws;
}

/* Ledgers published one by one until the edge follows the live messages (bounded); returns the
 * next ledger to publish. */
static uint32_t until_live(jsCtx *js, cs_ws *ws, uint32_t seq)
{
    for (uint32_t end = seq + 20; seq < end; seq++) {
        put_ledger(js, "test-fault", seq, 0);
        expect_ledger(ws, seq, seq);
        cs_proc_drain(&fx.edge);
        if (cs_proc_log_count(&fx.edge, "jetstream source following the live messages") > 0)
            return seq + 1;
    }
    fail_msg("the edge never followed the live messages:\n%s", fx.edge.log);
    return 0;
}

/* A chunk that comes twice on live mid-ledger (a publisher's retry, say) moves the edge to the
 * stream inside the ledger: the stream's copies of what live already gave (the BEGIN, chunks 0
 * and 1) are passed over, the stream's repeat of chunk 1 is skipped as a stream-only edge would
 * skip it, and the ledger goes out whole and once: no void, no second BEGIN. */
static void test_live_mid_ledger_move_to_stream(void **state)
{
    (void)state;
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    cs_ws *ws = edge_past_two(&nc, &js);
    uint32_t seq = until_live(js, ws, 3);
    uint8_t *body = malloc(SIZE), *msg = malloc(65536 + CS_WIRE_CHUNK_HEADER_LEN), end[CS_WIRE_END_LEN];
    cs_synthetic_fill(body, SIZE, seq, false);
    char subj[128];
    snprintf(subj, sizeof subj, "%s.test-fault.%u", STREAM, seq);
    publish(js, subj, msg, cs_wire_put_begin(msg, seq, 1));
    uint32_t idx = 0;
    for (size_t off = 0; off < SIZE; off += 65536, idx++) {
        size_t k = SIZE - off < 65536 ? SIZE - off : 65536;
        size_t n = cs_wire_append_chunk(msg, seq, idx, CS_CODEC_RAW, body + off, k);
        publish(js, subj, msg, n);
        if (idx == 1)
            publish(js, subj, msg, n); /* chunk 1 again */
    }
    publish(js, subj, end, cs_wire_put_end(end, seq, idx, SIZE, 2, XXH64(body, SIZE, 0)));
    free(msg);
    free(body);
    expect_ledger(ws, seq, seq);
    wait_edge_line("jetstream source reading the stream");
    char line[2048];
    cs_proc_line(&fx.edge, line, sizeof line);
    if (!strstr(line, "chunks_in=2 ") || !strstr(line, "chunk 1 of ledger"))
        fail_msg("the move names neither the chunks in nor the cause: %s", line);
    /* And back to live at a later ledger. */
    put_ledger(js, "test-fault", seq + 1, 0);
    expect_ledger(ws, seq + 1, seq + 1);
    cs_ws_close(ws);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    assert_int_equal(cs_proc_stop(&fx.edge, SIGTERM, WAIT_MS), 0);
    assert_int_equal(cs_proc_log_count(&fx.edge, "the bytes sent of it were void"), 0);
    assert_int_equal(cs_proc_log_count(&fx.edge, "jetstream source skipped a message"), 1);
    assert_int_equal(cs_proc_log_count(&fx.edge, "reason=out_of_place error=\"chunk 1 of ledger"), 1);
    assert_int_equal(cs_proc_log_count(&fx.edge, "level=ERROR"), 0);
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
    cs_ws *ws = edge_past_two(&nc, &js);
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
    assert_int_equal(cs_proc_stop(&fx.edge, SIGTERM, WAIT_MS), 0);
    assert_true(strstr(fx.edge.log, "reason=corrupt") != NULL);
}

/* The stream begins ledger 3 again after the edge has forwarded its first 256 KiB: the edge begins
 * it again for its subscribers (a fresh BEGIN) and serves the second copy whole, whatever its bytes
 * (it verifies). */
static void restarted_ledger(uint32_t second_fill)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    fault_stream(&nc, &js, 2);
    cs_ws *ws = open_edge(NULL, "/stream?start=3");
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
    assert_int_equal(cs_proc_stop(&fx.edge, SIGTERM, WAIT_MS), 0);
    assert_int_equal(cs_proc_log_count(&fx.edge, "level=ERROR"), 0);
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

/* ---- signed ledgers at an edge with --trusted-keys ------------------------------------------- */

#define SIGNING_RUN "synthetic-0123456789abcdef"

/* How a hand-made signed copy departs from the core's. */
typedef struct signed_copy {
    const cs_sig_signer *by; /* NULL: no SIG */
    uint32_t fill;           /* the bytes published (the synthetic ledger's) */
    uint32_t signed_fill;    /* the bytes signed */
    bool wrong_prev;         /* a previous signature other than the last one signed */
    bool genuine;            /* the core's own copy: the chain moves on to its signature */
} signed_copy;

static uint8_t g_last_sig[CS_SIG_LEN];
static bool g_have_last;

/* Ledger seq as a signing core publishes it: BEGIN, 64 KiB raw chunks, SIG, END. Only the
 * genuine copy moves the chain on. */
static void put_signed(jsCtx *js, uint32_t seq, signed_copy c)
{
    uint8_t *body = malloc(SIZE), *signed_body = malloc(SIZE), end[CS_WIRE_END_LEN];
    cs_synthetic_fill(body, SIZE, c.fill, false);
    cs_synthetic_fill(signed_body, SIZE, c.signed_fill, false);
    char subj[128];
    snprintf(subj, sizeof subj, "%s.test-fault.%u", STREAM, seq);
    uint32_t idx = put_begin_chunks(js, subj, seq, body, UINT32_MAX);
    if (c.by) {
        cs_sig sig = {.seq = seq, .run_len = (uint8_t)strlen(SIGNING_RUN)};
        memcpy(sig.run, SIGNING_RUN, sig.run_len);
        unsigned int dn = 0;
        assert_int_equal(EVP_Digest(signed_body, SIZE, sig.sha256, &dn, EVP_sha256(), NULL), 1);
        if (g_have_last)
            memcpy(sig.prev, g_last_sig, CS_SIG_LEN);
        if (c.wrong_prev)
            sig.prev[0] ^= 1;
        assert_int_equal(cs_sig_sign(c.by, &sig, SIZE, XXH64(signed_body, SIZE, 0), NULL), 0);
        if (c.genuine) {
            memcpy(g_last_sig, sig.sig, CS_SIG_LEN);
            g_have_last = true;
        }
        uint8_t m[CS_WIRE_SIG_MAX_LEN];
        publish(js, subj, m, cs_sig_encode(&sig, m));
    }
    publish(js, subj, end, cs_wire_put_end(end, seq, idx, SIZE, 2, XXH64(body, SIZE, 0)));
    free(body);
    free(signed_body);
}

static bool four_skipped(void *arg)
{
    (void)arg;
    static char metrics[1 << 17];
    const char *name = "corestreamd_edge_messages_skipped_total{reason=\"signature\"} ";
    if (cs_http_get("127.0.0.1", fx.edge.port, "/metrics", WAIT_MS, metrics, sizeof metrics, NULL, 0) != 200)
        return false;
    const char *line = strstr(metrics, name);
    return line && atoi(line + strlen(name)) >= 4;
}

static int count_ledger(const uint8_t *p, size_t n, const rl_ledger_info *info, void *ctx)
{
    uint8_t *want = malloc(SIZE);
    cs_synthetic_fill(want, SIZE, info->sequence, false);
    if (n != SIZE || memcmp(p, want, SIZE) != 0)
        fail_msg("ledger %u from the edge is not the genuine copy", info->sequence);
    free(want);
    (*(int *)ctx)++;
    return 0;
}

/* Ledgers 1..last from the edge through libremoteledger, each signature checked against the keys
 * in pub: fn gets each; a failure fails the case with the logs. */
static void read_signed(const char *pub, uint32_t last, rl_ledger_fn fn, void *ctx)
{
    char url[64];
    snprintf(url, sizeof url, "ws://127.0.0.1:%d", fx.edge.port);
    rl_options o;
    rl_options_init(&o);
    o.trusted_keys_file = pub;
    rl_stream *st;
    assert_int_equal(rl_stream_new(&st, url, &o), RL_OK);
    if (rl_stream_raw_ledgers(st, rl_bounded_range(1, last), fn, ctx) != RL_OK) {
        if (fx.core_live)
            cs_proc_drain(&fx.core);
        cs_proc_drain(&fx.edge);
        fail_msg("%s\ncore:\n%s\nedge:\n%s", rl_stream_error(st), fx.core_live ? fx.core.log : "",
                 fx.edge.log);
    }
    rl_stream_free(st);
}

/* An edge with the core's key: ledgers 1 and 2 signed pass; four copies of ledger 3 that are
 * unsigned, signed by another key, signed over other bytes, or out of the chain are skipped
 * (reason signature, the first logged with why), the edge waits for 3, not ready, and serves the
 * genuine copy once it comes; a subscriber that checks the signatures itself reads 1..3 whole. */
static void test_edge_checks_signatures(void **state)
{
    (void)state;
    cs_certs certs;
    cs_sig_signer *key, *other;
    assert_int_equal(cs_certs_make(&certs), 0);
    assert_int_equal(cs_sig_signer_load(certs.sign_key, &key, NULL), 0);
    assert_int_equal(cs_sig_signer_load(certs.other_sign_key, &other, NULL), 0);
    g_have_last = false;
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    fault_stream(&nc, &js, 0);
    put_signed(js, 1, (signed_copy){.by = key, .fill = 1, .signed_fill = 1, .genuine = true});
    put_signed(js, 2, (signed_copy){.by = key, .fill = 2, .signed_fill = 2, .genuine = true});
    put_signed(js, 3, (signed_copy){.by = NULL, .fill = 3, .signed_fill = 3});
    put_signed(js, 3, (signed_copy){.by = other, .fill = 3, .signed_fill = 3});
    put_signed(js, 3, (signed_copy){.by = key, .fill = 7, .signed_fill = 3});
    put_signed(js, 3, (signed_copy){.by = key, .fill = 3, .signed_fill = 3, .wrong_prev = true});
    char keys[PATH_MAX + 32];
    snprintf(keys, sizeof keys, "--trusted-keys=%s", certs.sign_pub);
    const char *args[] = {"--jetstream-run=test-fault", keys, NULL};
    cs_edgefx_start_edge(&fx, args, NULL, 0);
    wait_edge_line("reason=signature error=\"ledger 3 is unsigned\"");
    if (cs_wait_until(four_skipped, NULL, WAIT_MS) != 0)
        fail_msg("not four signature skips:\n%s", fx.edge.log);
    char body[4096];
    assert_int_equal(edge_readyz(body, sizeof body), 503);
    if (!strstr(body, "\"waiting_for\":3"))
        fail_msg("/readyz does not say it waits for ledger 3: %s", body);

    put_signed(js, 3, (signed_copy){.by = key, .fill = 3, .signed_fill = 3, .genuine = true});
    int n = 0;
    read_signed(certs.sign_pub, 3, count_ledger, &n);
    assert_int_equal(n, 3);
    wait_edge_line("jetstream source has the ledger it waited for");
    assert_int_equal(edge_readyz(body, sizeof body), 200);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    assert_int_equal(cs_proc_stop(&fx.edge, SIGTERM, WAIT_MS), 0);
    assert_int_equal(cs_proc_log_count(&fx.edge, "level=ERROR"), 0);
    cs_sig_signer_free(key);
    cs_sig_signer_free(other);
    cs_certs_remove(&certs);
}

/* ---- a signing core's next BEGIN pre-empted ---------------------------------------------------- */

/* The core's message id secret, read from its data directory as an insider could. */
static void core_secret(uint8_t key[CS_JS_ID_KEY_LEN])
{
    char path[PATH_MAX + 64], text[2 * CS_JS_ID_KEY_LEN + 2] = "";
    snprintf(path, sizeof path, "%s/core/%s", fx.tmp.path, CS_JS_ID_KEY_FILE);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(text, sizeof text, f));
    fclose(f);
    for (int i = 0; i < CS_JS_ID_KEY_LEN; i++) {
        unsigned v;
        assert_int_equal(sscanf(text + 2 * i, "%2x", &v), 1);
        key[i] = (uint8_t)v;
    }
}

/* The ids of ledger seq's BEGIN someone may publish under first: a stranger's guesses, or (insider)
 * the id the core derives from its secret. */
static size_t begin_ids(const char *run, uint32_t seq, const char *stored_id, bool insider,
                        char ids[3][CS_JS_SUBJECT_MAX])
{
    uint8_t key[CS_JS_ID_KEY_LEN] = {0};
    if (insider) {
        core_secret(key);
        assert_int_equal(cs_js_msg_id(ids[0], CS_JS_SUBJECT_MAX, run, seq, 0, key, 0), 0);
        return 1;
    }
    snprintf(ids[0], CS_JS_SUBJECT_MAX, "%s:%u:0", run, seq);                         /* the old form */
    snprintf(ids[1], CS_JS_SUBJECT_MAX, "%s:%u:0%s", run, seq, strrchr(stored_id, ':')); /* a seen tag */
    assert_int_equal(cs_js_msg_id(ids[2], CS_JS_SUBJECT_MAX, run, seq, 0, key, 0), 0); /* a zero secret */
    return 3;
}

/* Four junk bytes on ledger seq's subject under id: stored, not a duplicate (nobody used the id
 * before). Returns the stream sequence. */
static uint64_t put_junk(jsCtx *js, const char *run, uint32_t seq, const char *id)
{
    char subj[160];
    snprintf(subj, sizeof subj, "%s.%s.%u", STREAM, run, seq);
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MsgId = id;
    jsPubAck *pa = NULL;
    assert_int_equal(js_Publish(&pa, js, subj, "junk", 4, &po, NULL), NATS_OK);
    assert_false(pa->Duplicate);
    uint64_t sseq = pa->Sequence;
    jsPubAck_Destroy(pa);
    return sseq;
}

/* The stream sequence of ledger seq's first BEGIN after stream sequence after (bounded scan). */
static uint64_t begin_after(jsCtx *js, const char *run, uint32_t seq, uint64_t after)
{
    char subj[160];
    snprintf(subj, sizeof subj, "%s.%s.%u", STREAM, run, seq);
    for (uint64_t q = after + 1; q <= after + 4096; q++) {
        natsMsg *m = NULL;
        if (js_GetMsg(&m, js, STREAM, q, NULL, NULL) != NATS_OK)
            break;
        cs_wire_msg w;
        bool hit = strcmp(natsMsg_GetSubject(m), subj) == 0 &&
                   cs_wire_decode((const uint8_t *)natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), &w, NULL) ==
                       0 &&
                   w.type == CS_WIRE_TYPE_BEGIN;
        natsMsg_Destroy(m);
        if (hit)
            return q;
    }
    return 0;
}

static int next_in_order(const uint8_t *p, size_t n, const rl_ledger_info *info, void *ctx)
{
    (void)p, (void)n;
    uint32_t *next = ctx;
    assert_int_equal(info->sequence, *next);
    (*next)++;
    return 0;
}

/* A signing core publishes to the stream; an edge with the core's key follows it. Junk goes on the
 * subject of the ledger five ahead of the stream's newest, under ids of its BEGIN, before the core
 * gets there. A subscriber of the edge that checks signatures reads ledgers 1 to that one + 2:
 * all of them, in order, none missing. */
static void preempted_begin(bool insider)
{
    cs_certs certs;
    assert_int_equal(cs_certs_make(&certs), 0);
    char key[PATH_MAX + 32], keys[PATH_MAX + 32], run[128], runarg[160];
    snprintf(key, sizeof key, "--signing-key=%s", certs.sign_key);
    snprintf(keys, sizeof keys, "--trusted-keys=%s", certs.sign_pub);
    const char *core_args[] = {key, NULL};
    cs_edgefx_start_core(&fx, core_args, run, sizeof run);
    cs_edgefx_wait_stream_ledger(&fx, run, 1);
    snprintf(runarg, sizeof runarg, "--jetstream-run=%s", run);
    /* Later ledgers verify before the republished one comes: the edge waits for it (any gap wait
     * does; this one is longer than any test). */
    const char *edge_args[] = {runarg, keys, "--jetstream-gap-wait=1h", NULL};
    cs_edgefx_start_edge(&fx, edge_args, NULL, 0);

    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    assert_int_equal(natsConnection_ConnectTo(&nc, fx.nats.url), NATS_OK);
    assert_int_equal(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
    char stored[CS_JS_SUBJECT_MAX], ids[3][CS_JS_SUBJECT_MAX];
    uint32_t target = 0;
    assert_int_equal(cs_jsr_tip(js, STREAM, run, &target, stored, sizeof stored), 0);
    target += 5;
    size_t nids = begin_ids(run, target, stored, insider, ids);
    uint64_t junk = 0;
    for (size_t i = 0; i < nids; i++)
        junk = put_junk(js, run, target, ids[i]);

    uint32_t next = 1;
    read_signed(certs.sign_pub, target + 2, next_in_order, &next);
    assert_int_equal(next, target + 3);
    /* The junk came first: the genuine BEGIN is stored after it. */
    assert_true(begin_after(js, run, target, junk) > junk);
    cs_proc_drain(&fx.core);
    if (insider) {
        char want[512];
        snprintf(want, sizeof want, "subject=%s.%s.%u msg_id=%s ", STREAM, run, target, ids[0]);
        if (!strstr(fx.core.log, want) || !strstr(fx.core.log, "jetstream publisher republishing a ledger under fresh ids"))
            fail_msg("no foreign duplicate of `%s` and republish in:\n%s", want, fx.core.log);
        assert_true(metric(&fx.core, "corestreamd_jetstream_foreign_duplicates_total") >= 1);
        assert_true(metric(&fx.core, "corestreamd_jetstream_republishes_total") >= 1);
    } else {
        assert_int_equal(cs_proc_log_count(&fx.core, "never sent"), 0);
        assert_int_equal(metric(&fx.core, "corestreamd_jetstream_foreign_duplicates_total"), 0);
    }
    wait_edge_line("reason=malformed"); /* the junk, skipped */
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    assert_int_equal(cs_proc_stop(&fx.edge, SIGTERM, WAIT_MS), 0);
    assert_int_equal(cs_proc_log_count(&fx.edge, "level=ERROR"), 0);
    cs_certs_remove(&certs);
}

static void test_stranger_cannot_preempt_a_begin(void **state)
{
    (void)state;
    preempted_begin(false);
}

static void test_preempted_begin_is_republished(void **state)
{
    (void)state;
    preempted_begin(true);
}

int main(void)
{
    nats_Open(-1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gap_in_stream_waits_for_the_ledger, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_ledger_skipped_then_genuine_served, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gap_in_stream_is_reported_and_passed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_junk_messages_are_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_live_mid_ledger_move_to_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_ledger_mid_forward_is_begun_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ledger_begun_again_same_bytes_is_served, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ledger_begun_again_other_bytes_is_served, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edge_checks_signatures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stranger_cannot_preempt_a_begin, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preempted_begin_is_republished, setup, teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rc;
}
