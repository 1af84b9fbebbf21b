/* SPDX-License-Identifier: Apache-2.0 */
/* Authenticated NATS end to end: a real nats-server run with the accounts, users, subject
 * permissions and TLS of docs/operations/jetstream.md (the config block is read from the page, so
 * the page cannot drift from what is tested), the secrets in its environment; a CA, server and
 * client certificates made by openssl (support/certs), and the edge's nkey made here with
 * OpenSSL's Ed25519, all in scratch directories. Cases:
 *   - a publisher without credentials is refused by NATS, and corestreamd's error names the cause;
 *   - the core (user and password file, TLS with a client certificate) publishes and the edge (nkey
 *     seed file, TLS) serves byte-exact ledgers; a client with the edge's permissions that tries to
 *     publish a forged ledger is refused by NATS, and the edge serves only genuine bytes; neither
 *     corestreamd meets a permission it lacks;
 *   - junk on the next ledger's subject (published with the core's credentials) is skipped by the
 *     edge, which stays up, counts it, says on /readyz that it waits, and serves the genuine ledger
 *     when the restarted core publishes it.
 * A publisher that takes a message id of the core's first is test_edge_faults_e2e's. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <nats/nats.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/synthetic.h"
#include "corestreamd/jetstream/library.h"
#include "corestreamd/jetstream/nkey.h"
#include "support/certs.h"
#include "support/event.h"
#include "support/jsreader.h"
#include "support/natsserver.h"
#include "support/procharness.h"
#include "support/tmpdir.h"
#include "support/wait.h"
#include "support/wsclient.h"
#include "wire/wire.h"

#ifndef CORESTREAMD_BIN
#error "CORESTREAMD_BIN must name the binary under test"
#endif
#ifndef JETSTREAM_DOC
#error "JETSTREAM_DOC must name docs/operations/jetstream.md"
#endif
#define STREAM "CORESTREAM"
#define SIZE 200000
#define MARKER "<!-- test_natsauth_e2e: nats-server config -->"

static cs_tmpdir g_tmp;
static cs_certs g_certs;
static cs_nats_server g_nats;
static char *g_conf; /* the page's config block */
static char g_edge_pub[CS_NKEY_TEXT_MAX];
static char g_pwfile[PATH_MAX + 16], g_seedfile[PATH_MAX + 16];
static cs_proc g_core, g_edge;
static bool g_core_live, g_edge_live;
/* Set as a case's last statement: a case that stops before it (a failed assertion) has its
 * processes' whole output written to stderr by teardown, which cmocka's messages would cut. */
static bool g_case_done;

/* The fenced block after the marker in the page. */
static char *doc_config(void)
{
    FILE *f = fopen(JETSTREAM_DOC, "r");
    if (!f)
        return NULL;
    static char page[1 << 17];
    size_t n = fread(page, 1, sizeof page - 1, f);
    fclose(f);
    page[n] = '\0';
    const char *m = strstr(page, MARKER);
    const char *open = m ? strstr(m, "```\n") : NULL;
    const char *close = open ? strstr(open + 4, "\n```") : NULL;
    if (!close)
        return NULL;
    return strndup(open + 4, (size_t)(close - open - 4) + 1);
}

/* A user nkey made now: the seed into the seed file, the public key into g_edge_pub. */
static int make_nkey(void)
{
    EVP_PKEY *k = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL);
    if (!ctx || EVP_PKEY_keygen_init(ctx) != 1 || EVP_PKEY_keygen(ctx, &k) != 1)
        return -1;
    EVP_PKEY_CTX_free(ctx);
    uint8_t priv[32], pub[32];
    size_t lp = 32, lu = 32;
    int ok = EVP_PKEY_get_raw_private_key(k, priv, &lp) == 1 && EVP_PKEY_get_raw_public_key(k, pub, &lu) == 1;
    EVP_PKEY_free(k);
    if (!ok)
        return -1;
    char seed[CS_NKEY_TEXT_MAX];
    cs_nkey_user_seed(priv, seed);
    cs_nkey_user_public(pub, g_edge_pub);
    FILE *f = fopen(g_seedfile, "w");
    if (!f)
        return -1;
    fprintf(f, "%s\n", seed);
    return fclose(f);
}

static int setup(void **state)
{
    (void)state;
    g_case_done = false;
    if (cs_tmpdir_make(&g_tmp, "natsauth") != 0 || cs_certs_make(&g_certs) != 0)
        return -1;
    snprintf(g_pwfile, sizeof g_pwfile, "%s/core.password", g_tmp.path);
    snprintf(g_seedfile, sizeof g_seedfile, "%s/edge.nk", g_tmp.path);
    FILE *f = fopen(g_pwfile, "w");
    if (!f)
        return -1;
    fputs("correct-horse-battery-staple\n", f);
    fclose(f);
    if (make_nkey() != 0 || !(g_conf = doc_config())) {
        fprintf(stderr, "no nkey, or no config block after the marker in %s\n", JETSTREAM_DOC);
        return -1;
    }
    /* The secrets and files the page's config names, from nats-server's environment. */
    setenv("CORESTREAM_CORE_PASSWORD", "correct-horse-battery-staple", 1);
    setenv("CORESTREAM_EDGE_NKEY", g_edge_pub, 1);
    setenv("CORESTREAM_TLS_CERT", g_certs.server_cert, 1);
    setenv("CORESTREAM_TLS_KEY", g_certs.server_key, 1);
    setenv("CORESTREAM_TLS_CA", g_certs.ca, 1);
    if (cs_nats_start_conf(&g_nats, g_conf, WAIT_MS) != 0) {
        fprintf(stderr, "nats-server did not start:\n%s\n", g_nats.proc.log ? g_nats.proc.log : "");
        return -1;
    }
    return 0;
}

/* A process started in this case (its log is freed with it). */
static void dump_log(const char *who, cs_proc *p)
{
    if (!p->log)
        return;
    cs_proc_drain(p);
    fprintf(stderr, "---- %s output (%zu bytes) ----\n%s\n---- end of %s output ----\n", who, p->loglen,
            p->log, who);
}

static int teardown(void **state)
{
    (void)state;
    if (!g_case_done) {
        dump_log("nats-server", &g_nats.proc);
        dump_log("core corestreamd", &g_core);
        dump_log("edge corestreamd", &g_edge);
    }
    if (g_core_live)
        cs_proc_free(&g_core);
    if (g_edge_live)
        cs_proc_free(&g_edge);
    g_core_live = g_edge_live = false;
    cs_nats_free(&g_nats);
    free(g_conf);
    g_conf = NULL;
    cs_certs_remove(&g_certs);
    cs_tmpdir_remove(&g_tmp);
    return 0;
}

/* ---- the processes ---------------------------------------------------------------------------- */

static void start_proc(cs_proc *p, bool *live, const char *const *args)
{
    char *argv[40];
    int n = 0;
    argv[n++] = CORESTREAMD_BIN;
    for (; *args && n < 39; args++)
        argv[n++] = (char *)*args;
    argv[n] = NULL;
    assert_int_equal(cs_proc_start(p, argv), 0);
    *live = true;
}

static const char *tls_args[6];

static void fill_tls_args(void)
{
    static char ca[PATH_MAX + 32], cert[PATH_MAX + 32], key[PATH_MAX + 32];
    snprintf(ca, sizeof ca, "--jetstream-tls-ca=%s", g_certs.ca);
    snprintf(cert, sizeof cert, "--jetstream-tls-cert=%s", g_certs.client_cert);
    snprintf(key, sizeof key, "--jetstream-tls-key=%s", g_certs.client_key);
    tls_args[0] = ca, tls_args[1] = cert, tls_args[2] = key, tls_args[3] = NULL;
}

/* The core on its data dir: user core with the password file (unless anonymous), TLS; synthetic
 * ledgers, count of them (0: endless). Returns once it listens (or, refused, has exited). */
static void start_core(bool anonymous, uint32_t count, char *run, size_t runlen)
{
    static char datadir[PATH_MAX + 32], url[96], pw[PATH_MAX + 48], cnt[48];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/core", g_tmp.path);
    snprintf(url, sizeof url, "--jetstream-url=%s", g_nats.url);
    snprintf(pw, sizeof pw, "--jetstream-password-file=%s", g_pwfile);
    snprintf(cnt, sizeof cnt, "--synthetic-count=%u", count);
    fill_tls_args();
    const char *args[24] = {datadir, "--listen=127.0.0.1:0", url, "--jetstream-max-bytes=268435456",
                            "--synthetic-size=200000", "--synthetic-interval=300ms", "--emit-window=20ms",
                            "--synthetic-compressible=false", cnt, tls_args[0], tls_args[1], tls_args[2]};
    int n = 12;
    if (!anonymous) {
        args[n++] = "--jetstream-user=core";
        args[n++] = pw;
    }
    args[n] = NULL;
    start_proc(&g_core, &g_core_live, args);
    if (anonymous)
        return;
    if (cs_proc_wait_line(&g_core, "jetstream publisher ready", WAIT_MS) != 0)
        fail_msg("no `jetstream publisher ready` in:\n%s", g_core.log);
    char line[2048];
    cs_proc_line(&g_core, line, sizeof line);
    const char *r = strstr(line, " run=");
    assert_non_null(r);
    size_t k = strcspn(r + 5, " ");
    assert_true(k > 0 && k < runlen);
    memcpy(run, r + 5, k);
    run[k] = '\0';
    if (cs_proc_wait_listening(&g_core, WAIT_MS) != 0)
        fail_msg("core not listening:\n%s", g_core.log);
}

/* What nats-server said so far (its reasons for refusing a client are there, not in the client's). */
static const char *nats_log(void)
{
    cs_proc_drain(&g_nats.proc);
    return g_nats.proc.log ? g_nats.proc.log : "";
}

static void start_edge(const char *run)
{
    static char datadir[PATH_MAX + 32], url[96], seed[PATH_MAX + 48], runarg[128];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/edge", g_tmp.path);
    snprintf(url, sizeof url, "--jetstream-source-url=%s", g_nats.url);
    snprintf(seed, sizeof seed, "--jetstream-nkey-seed=%s", g_seedfile);
    snprintf(runarg, sizeof runarg, "--jetstream-run=%s", run);
    fill_tls_args();
    const char *args[] = {datadir, "--listen=127.0.0.1:0", "--source=jetstream", url, runarg, seed,
                          tls_args[0], tls_args[1], tls_args[2], NULL};
    start_proc(&g_edge, &g_edge_live, args);
    if (cs_proc_wait_listening(&g_edge, WAIT_MS) != 0 ||
        cs_proc_wait_line(&g_edge, "jetstream source following", WAIT_MS) != 0)
        fail_msg("edge not following:\n%s\nnats-server:\n%s", g_edge.log, nats_log());
}

/* ---- NATS clients of the test ----------------------------------------------------------------- */

/* A permission violation reached the test's client. Set from nats.c's thread once per refused
 * message, so it lives for the whole program (main), not one case. */
static event g_violation;

static void on_client_error(natsConnection *nc, natsSubscription *sub, natsStatus s, void *closure)
{
    (void)nc, (void)sub, (void)closure;
    if (s == NATS_NOT_PERMITTED)
        event_set(&g_violation);
}

/* A client as the core (edge false) or as an edge (edge true), over TLS. */
static natsConnection *client(bool edge)
{
    natsOptions *o = NULL;
    assert_int_equal(natsOptions_Create(&o), NATS_OK);
    assert_int_equal(natsOptions_SetURL(o, g_nats.url), NATS_OK);
    assert_int_equal(natsOptions_SetSecure(o, true), NATS_OK);
    assert_int_equal(natsOptions_LoadCATrustedCertificates(o, g_certs.ca), NATS_OK);
    assert_int_equal(natsOptions_LoadCertificatesChain(o, g_certs.client_cert, g_certs.client_key), NATS_OK);
    assert_int_equal(natsOptions_SetErrorHandler(o, on_client_error, NULL), NATS_OK);
    if (edge)
        assert_int_equal(natsOptions_SetNKeyFromSeed(o, g_edge_pub, g_seedfile), NATS_OK);
    else
        assert_int_equal(natsOptions_SetUserInfo(o, "core", "correct-horse-battery-staple"), NATS_OK);
    natsConnection *nc = NULL;
    natsStatus s = natsConnection_Connect(&nc, o);
    natsOptions_Destroy(o);
    if (s != NATS_OK)
        fail_msg("test client (%s) cannot connect: %s", edge ? "edge" : "core", nats_GetLastError(NULL));
    return nc;
}

/* Publishes one message on subject with a Nats-Msg-Id (NULL: none), as a plain NATS publish (the
 * stream stores it when the publisher may publish there). */
static void put(natsConnection *nc, const char *subject, const char *id, const void *data, size_t len)
{
    natsMsg *m = NULL;
    assert_int_equal(natsMsg_Create(&m, subject, NULL, data, (int)len), NATS_OK);
    if (id)
        assert_int_equal(natsMsgHeader_Set(m, "Nats-Msg-Id", id), NATS_OK);
    assert_int_equal(natsConnection_PublishMsg(nc, m), NATS_OK);
    natsMsg_Destroy(m);
    assert_int_equal(natsConnection_FlushTimeout(nc, WAIT_MS), NATS_OK);
}

/* The run's newest ledger in the stream, read with the core's credentials. */
static uint32_t stream_tip(natsConnection *nc, const char *run)
{
    jsCtx *js = NULL;
    assert_int_equal(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
    uint32_t seq = 0;
    assert_int_equal(cs_jsr_tip(js, STREAM, run, &seq, NULL, 0), 0);
    jsCtx_Destroy(js);
    return seq;
}

/* A checksum-valid forged ledger seq (BEGIN, one chunk, END) on the core's subject with the core's
 * ids, published by nc. */
static void forge_ledger(natsConnection *nc, const char *run, uint32_t seq)
{
    static uint8_t body[SIZE], msg[SIZE + CS_WIRE_CHUNK_HEADER_LEN];
    memset(body, 0xAB, sizeof body);
    char subj[160], id[160];
    snprintf(subj, sizeof subj, "%s.%s.%u", STREAM, run, seq);
    size_t n = cs_wire_put_begin(msg, seq, 1);
    snprintf(id, sizeof id, "%s:%u:0", run, seq);
    put(nc, subj, id, msg, n);
    n = cs_wire_append_chunk(msg, seq, 0, 0, body, SIZE);
    snprintf(id, sizeof id, "%s:%u:1", run, seq);
    put(nc, subj, id, msg, n);
    n = cs_wire_put_end(msg, seq, 1, SIZE, 2, XXH64(body, SIZE, 0));
    snprintf(id, sizeof id, "%s:%u:2", run, seq);
    put(nc, subj, id, msg, n);
}

/* ---- checks ----------------------------------------------------------------------------------- */

static void expect_genuine(cs_ws *ws, uint32_t seq)
{
    char err[256];
    cs_ledger l;
    if (cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err) != 1)
        fail_msg("ledger %u from the edge: %s\n%s", seq, err, g_edge.log);
    assert_int_equal(l.seq, seq);
    assert_int_equal(l.len, SIZE);
    static uint8_t want[SIZE];
    cs_synthetic_fill(want, SIZE, seq, false);
    if (memcmp(want, l.data, SIZE) != 0)
        fail_msg("ledger %u from the edge is not the core's", seq);
    cs_ledger_free(&l);
}

static uint64_t metric(cs_proc *p, const char *name)
{
    static char body[1 << 17];
    assert_int_equal(cs_http_get("127.0.0.1", p->port, "/metrics", WAIT_MS, body, sizeof body, NULL, 0), 200);
    char line[256];
    snprintf(line, sizeof line, "\n%s", name); /* a sample, not its HELP line */
    const char *at = strstr(body, line);
    if (!at)
        fail_msg("no %s in /metrics", name);
    return strtoull(at + strlen(line), NULL, 10);
}

static void wait_line(cs_proc *p, const char *needle)
{
    if (cs_proc_wait_line(p, needle, WAIT_MS) != 0)
        fail_msg("no `%s` in:\n%s", needle, p->log);
}

/* ---- the cases -------------------------------------------------------------------------------- */

static void test_publisher_without_credentials_is_refused(void **state)
{
    (void)state;
    start_core(true, 0, NULL, 0);
    assert_int_equal(cs_proc_wait_exit(&g_core, WAIT_MS), 1);
    if (!strstr(g_core.log, "NATS refused the credentials (authorization violation") ||
        !strstr(g_core.log, "Authorization Violation"))
        fail_msg("the refusal does not name its cause:\n%s", g_core.log);
    g_case_done = true;
}

static void test_forged_ledger_refused_edge_serves_genuine(void **state)
{
    (void)state;
    char run[128];
    start_core(false, 0, run, sizeof run);
    start_edge(run);
    int status = 0;
    cs_ws *ws = cs_ws_connect("127.0.0.1", g_edge.port, "/stream?start=1", WAIT_MS, &status, NULL, 0);
    if (!ws)
        fail_msg("connect to the edge: status %d\n%s", status, g_edge.log);
    expect_genuine(ws, 1);
    /* A client with the edge's permissions forges the ledger after the next: refused. */
    natsConnection *forger = client(true);
    uint32_t target = stream_tip(forger, run) + 2;
    forge_ledger(forger, run, target);
    if (!event_wait(&g_violation, (int64_t)WAIT_MS * 1000000))
        fail_msg("NATS did not refuse the forger's publish");
    natsConnection_Destroy(forger);
    for (uint32_t seq = 2; seq <= target + 1; seq++)
        expect_genuine(ws, seq);
    cs_ws_close(ws);
    assert_int_equal(cs_proc_stop(&g_edge, SIGTERM, WAIT_MS), 0);
    assert_int_equal(cs_proc_stop(&g_core, SIGTERM, WAIT_MS), 0);
    /* Each corestreamd had every permission it needed, and nothing was skipped or foreign. */
    assert_int_equal(cs_proc_log_count(&g_core, "jetstream NATS error"), 0);
    assert_int_equal(cs_proc_log_count(&g_edge, "jetstream NATS error"), 0);
    assert_int_equal(cs_proc_log_count(&g_edge, "jetstream source skipped a message"), 0);
    assert_int_equal(cs_proc_log_count(&g_core, "never sent"), 0);
    g_case_done = true;
}

static void test_junk_is_survived_until_the_genuine_ledger(void **state)
{
    (void)state;
    char run[128];
    start_core(false, 3, run, sizeof run);
    start_edge(run);
    int status = 0;
    cs_ws *ws = cs_ws_connect("127.0.0.1", g_edge.port, "/stream?start=1", WAIT_MS, &status, NULL, 0);
    if (!ws)
        fail_msg("connect to the edge: status %d\n%s", status, g_edge.log);
    for (uint32_t seq = 1; seq <= 3; seq++)
        expect_genuine(ws, seq);
    assert_int_equal(cs_proc_wait_exit(&g_core, WAIT_MS), 0);
    cs_proc_free(&g_core);
    g_core_live = false;
    /* Six junk bytes on ledger 4's subject, from a user allowed to publish there. */
    natsConnection *nc = client(false);
    char subj[160];
    snprintf(subj, sizeof subj, "%s.%s.4", STREAM, run);
    put(nc, subj, NULL, "junk!!", 6);
    natsConnection_Destroy(nc);
    wait_line(&g_edge, "reason=malformed");
    char body[1024];
    assert_int_equal(cs_http_get("127.0.0.1", g_edge.port, "/readyz", WAIT_MS, body, sizeof body, NULL, 0), 503);
    if (!strstr(body, "\"waiting_for\":4"))
        fail_msg("/readyz does not say it waits for ledger 4: %s", body);
    assert_int_equal(metric(&g_edge, "corestreamd_edge_messages_skipped_total{reason=\"malformed\"} "), 1);
    /* The core comes back and publishes ledger 4: served, and the edge is ready again. */
    char again[128];
    start_core(false, 5, again, sizeof again);
    assert_string_equal(again, run);
    expect_genuine(ws, 4);
    wait_line(&g_edge, "jetstream source has the ledger it waited for");
    assert_int_equal(cs_http_get("127.0.0.1", g_edge.port, "/readyz", WAIT_MS, body, sizeof body, NULL, 0), 200);
    cs_ws_close(ws);
    assert_int_equal(cs_proc_stop(&g_edge, SIGTERM, WAIT_MS), 0);
    g_case_done = true;
}

int main(void)
{
    /* As corestreamd opens it: with nats.c 3.4.1's signature encoder corrected, which the test's
     * own nkey client (the forger) needs as much as the edge. */
    if (cs_js_library_open() != NATS_OK)
        return 1;
    event_init(&g_violation);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_publisher_without_credentials_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forged_ledger_refused_edge_serves_genuine, setup, teardown),
        cmocka_unit_test_setup_teardown(test_junk_is_survived_until_the_genuine_ledger, setup, teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close(); /* no nats.c callback runs after it */
    event_destroy(&g_violation);
    return rc;
}
