/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger over wss://: the same client against the scripted server in TLS mode, with
 * certificates made at run time (support/certs.h). Delivery is byte-exact over TLS as over ws://;
 * every TLS failure ends the call with RL_ERR_TLS and says why in words; a bearer token travels in
 * the Authorization header and a 401 is worded; the transports never hang on the wrong scheme. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <xxhash.h>
#include <zstd.h>

#include "corestream/remoteledger.h"
#include "corestream/wire.h"
#include "support/certs.h"
#include "support/rlclient.h"
#include "support/scriptserver.h"
#include "wire/wire.h"

static cs_certs g_certs;

static int group_setup(void **state)
{
    (void)state;
    return cs_certs_make(&g_certs);
}

static int group_teardown(void **state)
{
    (void)state;
    cs_certs_remove(&g_certs);
    return 0;
}

#define assert_contains(hay, needle)                                                              \
    do {                                                                                           \
        if (!strstr((hay), (needle)))                                                              \
            fail_msg("\"%s\" does not contain \"%s\"", (hay), (needle));                           \
    } while (0)

static ss_server *tls_server(const char *cert, const char *key)
{
    ss_tls t = {.cert_file = cert, .key_file = key};
    ss_server *ss = ss_start_tls(&t);
    assert_non_null(ss);
    return ss;
}

static ss_server *good_server(void) { return tls_server(g_certs.server_cert, g_certs.server_key); }

/* Defaults, trusting the test CA. */
static rl_options trusting(void)
{
    rl_options o;
    rl_options_init(&o);
    o.tls_ca_file = g_certs.ca;
    o.dial_timeout_ns = 5000000000LL;
    o.handshake_timeout_ns = 5000000000LL;
    return o;
}

/* "<scheme>://<host>:<port>" for the server. */
static const char *url_for(const ss_server *ss, const char *scheme, const char *host, char *buf, size_t len)
{
    snprintf(buf, len, "%s://%s:%d", scheme, host, ss_port(ss));
    return buf;
}

/* The endpoint-prefixed dial message for a single-ledger-1 unbounded run. */
static void expect_dial_error(const collected *c, const char *url, rl_result r, const char *why)
{
    expect(c, r, 0);
    char want[1024];
    snprintf(want, sizeof want, "remoteledger: dial %s/stream?start=1: %s", url, why);
    assert_string_equal(c->err, want);
}

/* ---- delivery --------------------------------------------------------------------------------- */

static void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        p[i] = (uint8_t)(seed >> 56);
    }
}

/* A bounded range over wss://, byte for byte: raw chunks bigger than a TLS record and the receive
 * buffer, a zstd chunk, and the client's close 1000 written over TLS. */
static void test_wss_bounded_range_byte_exact(void **state)
{
    (void)state;
    ss_server *ss = good_server();
    const size_t big = 3u << 20;
    uint8_t *raw = malloc(big);
    assert_non_null(raw);
    fill_random(raw, big, 7);
    const void *pieces[3] = {raw, raw + 1000000, raw + 2000000};
    size_t lens[3] = {1000000, 1000000, big - 2000000};
    ss_flow(ss, 5, 11, 12, 3, pieces, lens);

    /* ledger 6: one zstd chunk of compressible bytes */
    size_t zn = 200000;
    uint8_t *plain = malloc(zn);
    assert_non_null(plain);
    for (size_t i = 0; i < zn; i++)
        plain[i] = (uint8_t)(i / 1000);
    size_t bound = ZSTD_compressBound(zn);
    uint8_t *z = malloc(bound);
    assert_non_null(z);
    size_t zl = ZSTD_compress(z, bound, plain, zn, 1);
    assert_false(ZSTD_isError(zl));
    ss_begin(ss, 6, 0);
    ss_chunk(ss, 6, 0, CS_CODEC_ZSTD, z, zl);
    ss_end(ss, 6, 1, zn, 0, XXH64(plain, zn, 0));

    rl_options o = trusting();
    collected c = {0};
    drain_url(ss_url(ss), &o, rl_bounded_range(5, 6), &c);
    expect(&c, RL_OK, 2);
    assert_int_equal(c.sizes[0], big);
    assert_memory_equal(c.copies[0], raw, big);
    assert_int_equal(c.infos[0].chunks, 3);
    assert_int_equal(c.sizes[1], zn);
    assert_memory_equal(c.copies[1], plain, zn);
    drain_done(ss, &c);
    expect_client_close(ss, 0, 1000, "range complete");
    assert_int_equal(ss_client_unmasked(ss, 0), 0);
    assert_string_equal(ss_tls_error(ss, 0), "");
    ss_stop(ss);
    collected_free(&c);
    free(raw);
    free(plain);
    free(z);
}

/* The close classification is the transport's business no more than on ws://: 4001 with bounds, a
 * close_notify mid-message, a ping answered. */
static void test_wss_close_codes_and_control_frames(void **state)
{
    (void)state;
    ss_server *ss = good_server();
    ss_send_ping(ss, "hello");
    ss_ledger(ss, 1, 100);
    ss_send_close(ss, CS_CLOSE_TOO_FAR_BEHIND, "too far behind: oldest=2 latest=9");
    ss_next_connection(ss);
    ss_begin(ss, 1, 0);
    uint8_t part[100] = {0};
    ss_send_partial(ss, part, 40, 400);
    ss_drop(ss);
    rl_options o = trusting();
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), &o), RL_OK);
    collected c = {0};
    assert_int_equal(rl_stream_raw_ledgers(s, rl_unbounded_range(1), on_ledger, &c), RL_ERR_TOO_FAR_BEHIND);
    uint32_t req, oldest, latest;
    assert_true(rl_stream_too_far_behind(s, &req, &oldest, &latest));
    assert_int_equal(req, 2);
    assert_int_equal(oldest, 2);
    assert_int_equal(latest, 9);
    assert_int_equal(rl_stream_raw_ledgers(s, rl_unbounded_range(1), on_ledger, &c), RL_ERR_READ);
    assert_string_equal(rl_stream_error(s), "remoteledger: read: failed to read frame payload: unexpected EOF");
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    assert_string_equal(ss_client_pong(ss, 0), "hello");
    expect_client_close(ss, 0, CS_CLOSE_TOO_FAR_BEHIND, "too far behind: oldest=2 latest=9"); /* the echo */
    ss_stop(ss);
    collected_free(&c);
}

/* A host name (not an address) is verified against the DNS SAN and sent as SNI. */
static void test_wss_localhost_by_name(void **state)
{
    (void)state;
    ss_server *ss = good_server();
    ss_ledger(ss, 1, 10);
    rl_options o = trusting();
    char url[128];
    collected c = {0};
    drain_url(url_for(ss, "wss", "localhost", url, sizeof url), &o, rl_single_ledger_range(1), &c);
    expect(&c, RL_OK, 1);
    drain_done(ss, &c);
    ss_stop(ss);
    collected_free(&c);
}

/* Cancelling while the server stalls over TLS returns promptly. */
static void cancel_stream(void *arg) { rl_stream_cancel(arg); }

static void test_wss_cancel(void **state)
{
    (void)state;
    ss_server *ss = good_server();
    rl_options o = trusting();
    o.dial_timeout_ns = -1;
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), &o), RL_OK);
    ss_ledger(ss, 1, 10);
    ss_call(ss, cancel_stream, s);
    ss_stall(ss);
    collected c = {0};
    assert_int_equal(rl_stream_raw_ledgers(s, rl_unbounded_range(1), on_ledger, &c), RL_ERR_CANCELLED);
    assert_string_equal(rl_stream_error(s), "context canceled");
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    ss_stop(ss);
    collected_free(&c);
}

/* ---- verification ------------------------------------------------------------------------------ */

static void run_dial_error(ss_server *ss, const rl_options *opts, const char *url, rl_result r, const char *why)
{
    rl_options o = *opts;
    collected c = {0};
    drain_url(url, &o, rl_unbounded_range(1), &c);
    expect_dial_error(&c, url, r, why);
    drain_done(ss, &c);
}

/* Verification is on by default: the system's CA paths do not know the test CA. */
static void test_wss_untrusted_ca(void **state)
{
    (void)state;
    ss_server *ss = good_server();
    rl_options o;
    rl_options_init(&o);
    run_dial_error(ss, &o, ss_url(ss), RL_ERR_TLS,
                   "certificate verify failed: unable to get local issuer certificate");
    assert_string_not_equal(ss_tls_error(ss, 0), ""); /* the server saw the client give up */
    ss_stop(ss);

    /* ...unless verification is skipped, for tests */
    ss = good_server();
    ss_ledger(ss, 1, 10);
    o.tls_insecure_skip_verify = true;
    collected c = {0};
    drain_url(ss_url(ss), &o, rl_single_ledger_range(1), &c);
    expect(&c, RL_OK, 1);
    drain_done(ss, &c);
    ss_stop(ss);
    collected_free(&c);
}

static void test_wss_wrong_host(void **state)
{
    (void)state;
    char url[128];
    rl_options o = trusting();
    /* a certificate for other.example, dialled by address */
    ss_server *ss = tls_server(g_certs.other_cert, g_certs.other_key);
    run_dial_error(ss, &o, ss_url(ss), RL_ERR_TLS, "certificate verify failed: IP address mismatch for 127.0.0.1");
    ss_stop(ss);
    /* ...and by a name it does not hold */
    ss = tls_server(g_certs.other_cert, g_certs.other_key);
    run_dial_error(ss, &o, url_for(ss, "wss", "localhost", url, sizeof url), RL_ERR_TLS,
                   "certificate verify failed: hostname mismatch for localhost");
    ss_stop(ss);
    /* the server's certificate (127.0.0.1) for the address 127.0.0.2 */
    ss = good_server();
    o.tls_server_name = "127.0.0.2";
    run_dial_error(ss, &o, ss_url(ss), RL_ERR_TLS, "certificate verify failed: IP address mismatch for 127.0.0.2");
    ss_stop(ss);
    /* tls_server_name names what the certificate holds: accepted */
    ss = tls_server(g_certs.other_cert, g_certs.other_key);
    ss_ledger(ss, 1, 10);
    o.tls_server_name = "other.example";
    collected c = {0};
    drain_url(ss_url(ss), &o, rl_single_ledger_range(1), &c);
    expect(&c, RL_OK, 1);
    drain_done(ss, &c);
    ss_stop(ss);
    collected_free(&c);
}

static void test_wss_expired(void **state)
{
    (void)state;
    ss_server *ss = tls_server(g_certs.expired_cert, g_certs.expired_key);
    rl_options o = trusting();
    run_dial_error(ss, &o, ss_url(ss), RL_ERR_TLS, "certificate verify failed: certificate has expired");
    ss_stop(ss);
}

/* ---- client certificates ------------------------------------------------------------------------ */

static ss_server *mtls_server(void)
{
    ss_tls t = {.cert_file = g_certs.server_cert, .key_file = g_certs.server_key,
                .client_ca_file = g_certs.ca, .require_client_cert = true};
    ss_server *ss = ss_start_tls(&t);
    assert_non_null(ss);
    return ss;
}

static void test_mtls_without_client_cert(void **state)
{
    (void)state;
    ss_server *ss = mtls_server();
    rl_options o = trusting();
    run_dial_error(ss, &o, ss_url(ss), RL_ERR_TLS, "tls handshake failed: tlsv13 alert certificate required");
    assert_contains(ss_tls_error(ss, 0), "certificate");
    ss_stop(ss);
}

static void test_mtls_with_client_cert(void **state)
{
    (void)state;
    ss_server *ss = mtls_server();
    ss_ledger(ss, 1, 1000);
    ss_ledger(ss, 2, 1000);
    rl_options o = trusting();
    o.tls_cert_file = g_certs.client_cert;
    o.tls_key_file = g_certs.client_key;
    collected c = {0};
    drain_url(ss_url(ss), &o, rl_bounded_range(1, 2), &c);
    expect(&c, RL_OK, 2);
    drain_done(ss, &c);
    assert_string_equal(ss_client_cert(ss, 0), "client");
    ss_stop(ss);
    collected_free(&c);
}

/* Files that cannot be loaded fail the call in words; a key without a certificate is refused up
 * front. */
static void test_tls_files(void **state)
{
    (void)state;
    ss_server *ss = good_server();
    rl_options o = trusting();
    o.tls_ca_file = "/nonexistent/ca.pem";
    collected c = {0};
    drain_url(ss_url(ss), &o, rl_unbounded_range(1), &c);
    expect(&c, RL_ERR_TLS, 0);
    assert_contains(c.err, "tls: CA file \"/nonexistent/ca.pem\": ");
    drain_done(ss, &c);
    ss_stop(ss);

    ss = good_server();
    o = trusting();
    o.tls_cert_file = g_certs.client_cert;
    o.tls_key_file = g_certs.server_key; /* not its key */
    collected_reset(&c);
    drain_url(ss_url(ss), &o, rl_unbounded_range(1), &c);
    expect(&c, RL_ERR_TLS, 0);
    assert_contains(c.err, "does not match certificate");
    drain_done(ss, &c);
    ss_stop(ss);

    o = trusting();
    o.tls_key_file = g_certs.client_key;
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, "wss://box", &o), RL_ERR_INVALID);
    assert_string_equal(rl_stream_error(s), "remoteledger: tls_key_file is set without tls_cert_file");
    rl_stream_free(s);
}

/* The option strings are copied: the caller's buffers may change after rl_stream_new. */
static void test_tls_options_copied(void **state)
{
    (void)state;
    ss_server *ss = good_server();
    ss_require_token(ss, "tok");
    ss_ledger(ss, 1, 10);
    char ca[4096], token[16];
    snprintf(ca, sizeof ca, "%s", g_certs.ca);
    snprintf(token, sizeof token, "tok");
    rl_options o = trusting();
    o.tls_ca_file = ca;
    o.bearer_token = token;
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), &o), RL_OK);
    memset(ca, 'x', 100);
    memset(token, 'y', 3);
    collected c = {0};
    assert_int_equal(rl_stream_raw_ledgers(s, rl_single_ledger_range(1), on_ledger, &c), RL_OK);
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    ss_stop(ss);
    collected_free(&c);
}

/* ---- the wrong scheme for the server --------------------------------------------------------------- */

static void test_plain_server_on_wss_url(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_answer_raw(ss, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    rl_options o = trusting();
    char url[128];
    run_dial_error(ss, &o, url_for(ss, "wss", "127.0.0.1", url, sizeof url), RL_ERR_TLS,
                   "tls handshake failed: the server did not answer TLS (is it plain ws://?)");
    ss_stop(ss);
}

/* A TLS server given an HTTP request: an error within the handshake timeout, never a hang. */
static void test_tls_server_on_ws_url(void **state)
{
    (void)state;
    ss_server *ss = good_server();
    rl_options o = trusting();
    o.handshake_timeout_ns = 1000000000LL;
    char url[128];
    collected c = {0};
    drain_url(url_for(ss, "ws", "127.0.0.1", url, sizeof url), &o, rl_unbounded_range(1), &c);
    assert_true(c.r == RL_ERR_TLS || c.r == RL_ERR_DIAL || c.r == RL_ERR_HANDSHAKE_TIMEOUT);
    char want[256];
    snprintf(want, sizeof want, "remoteledger: dial %s/stream?start=1: ", url);
    assert_contains(c.err, want);
    if (c.elapsed_ms > 3000)
        fail_msg("the wrong scheme took %lld ms", (long long)c.elapsed_ms);
    drain_done(ss, &c);
    ss_stop(ss);
}

/* ---- bearer tokens ----------------------------------------------------------------------------------- */

static void test_bearer_token(void **state)
{
    (void)state;
    /* sent over wss:// in the Authorization header, and accepted */
    ss_server *ss = good_server();
    ss_require_token(ss, "s3cret-token");
    ss_ledger(ss, 1, 10);
    rl_options o = trusting();
    o.bearer_token = "s3cret-token";
    collected c = {0};
    drain_url(ss_url(ss), &o, rl_single_ledger_range(1), &c);
    expect(&c, RL_OK, 1);
    drain_done(ss, &c);
    assert_contains(ss_request(ss, 0), "\r\nAuthorization: Bearer s3cret-token\r\n");
    ss_stop(ss);

    /* none sent: the 401 in words */
    ss = good_server();
    ss_require_token(ss, "s3cret-token");
    o.bearer_token = NULL;
    run_dial_error(ss, &o, ss_url(ss), RL_ERR_DIAL, "server requires a token (401)");
    assert_null(strstr(ss_request(ss, 0), "Authorization"));
    ss_stop(ss);

    /* the wrong one, over ws:// this time */
    ss = ss_start();
    ss_require_token(ss, "s3cret-token");
    o.bearer_token = "guess";
    run_dial_error(ss, &o, ss_url(ss), RL_ERR_DIAL, "server rejected the token (401)");
    ss_stop(ss);

    /* a token that would break the header is refused before any dial */
    o.bearer_token = "a\r\nX-Evil: 1";
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, "ws://box", &o), RL_ERR_INVALID);
    assert_string_equal(rl_stream_error(s), "remoteledger: bearer_token holds a control character");
    rl_stream_free(s);
    collected_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wss_bounded_range_byte_exact),
        cmocka_unit_test(test_wss_close_codes_and_control_frames),
        cmocka_unit_test(test_wss_localhost_by_name),
        cmocka_unit_test(test_wss_cancel),
        cmocka_unit_test(test_wss_untrusted_ca),
        cmocka_unit_test(test_wss_wrong_host),
        cmocka_unit_test(test_wss_expired),
        cmocka_unit_test(test_mtls_without_client_cert),
        cmocka_unit_test(test_mtls_with_client_cert),
        cmocka_unit_test(test_tls_files),
        cmocka_unit_test(test_tls_options_copied),
        cmocka_unit_test(test_plain_server_on_wss_url),
        cmocka_unit_test(test_tls_server_on_ws_url),
        cmocka_unit_test(test_bearer_token),
    };
    /* Through the callback API, then the pull API (rlclient_pull): the same results. */
    int failed = cmocka_run_group_tests_name("callback", tests, group_setup, group_teardown);
    rlclient_pull = true;
    failed += cmocka_run_group_tests_name("pull", tests, group_setup, group_teardown);
    /* ...and as a poll loop (rlclient_poll): what OpenSSL holds must be drained by next(0) too. */
    rlclient_poll = true;
    failed += cmocka_run_group_tests_name("poll", tests, group_setup, group_teardown);
    return failed;
}
