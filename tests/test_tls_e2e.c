/* SPDX-License-Identifier: Apache-2.0 */
/* TLS on the server (issue 10), end to end in process: the real server with --tls-cert/--tls-key
 * (and --tls-client-ca) and libremoteledger's own TLS client, with certificates the test makes
 * (support/certs.h). A verified wss:// stream; every refused access named in words (plaintext
 * to the TLS port, TLS to the plaintext port, untrusted CA, wrong host, expired certificate,
 * mutual TLS without a client certificate), none of them a hang; and a SIGHUP-style reload that
 * serves the new certificate to new connections while the open stream carries on, or keeps the
 * old one when the new one is bad. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "corestream/remoteledger.h"
#include "support/certs.h"
#include "support/logcapture.h"
#include "support/serverharness.h"
#include "support/tlstunnel.h"
#include "support/wsclient.h"
#include "transport/xport.h"

#define WAIT_NS (20 * T_SEC)

static cs_certs g_certs;

static int setup(void **state)
{
    (void)state;
    if (cs_certs_make(&g_certs) != 0)
        return -1;
    if (cs_logcap_start(CS_LOG_INFO) != 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cs_logcap_stop();
    cs_certs_remove(&g_certs);
    return 0;
}

static void start(harness *h, const char *cert, const char *key, const char *client_ca)
{
    harness_opts o = {.start = 1, .size = 4096, .interval_ms = 20, .retention = 1000,
                      .tls_cert = cert, .tls_key = key, .tls_client_ca = client_ca};
    harness_start(h, &o);
}

typedef struct client {
    const char *scheme, *ca, *cert, *key, *server_name;
    uint32_t got;
    char err[512];
} client;

static int count_ledger(const uint8_t *l, size_t len, const rl_ledger_info *info, void *ctx)
{
    (void)l;
    (void)len;
    (void)info;
    ((client *)ctx)->got++;
    return 0;
}

/* Streams [1,n] and returns the result, the error text in c->err; never longer than the dial and
 * handshake timeouts, which the test also asserts. */
static rl_result run(const harness *h, client *c, uint32_t n)
{
    char url[128];
    snprintf(url, sizeof url, "%s://127.0.0.1:%d", c->scheme, h->port);
    rl_options o;
    rl_options_init(&o);
    o.dial_timeout_ns = 5 * T_SEC;
    o.handshake_timeout_ns = 5 * T_SEC;
    o.tls_ca_file = c->ca;
    o.tls_cert_file = c->cert;
    o.tls_key_file = c->key;
    o.tls_server_name = c->server_name;
    rl_stream *s;
    int64_t t0 = cs_mono_ns();
    rl_result r = rl_stream_new(&s, url, &o);
    if (r == RL_OK)
        r = rl_stream_raw_ledgers(s, rl_bounded_range(1, n), count_ledger, c);
    snprintf(c->err, sizeof c->err, "%s", rl_stream_error(s));
    rl_stream_free(s);
    assert_true(cs_mono_ns() - t0 < WAIT_NS);
    return r;
}

static void expect_error(const harness *h, client *c, const char *words)
{
    rl_result r = run(h, c, 3);
    if (r == RL_OK || !strstr(c->err, words))
        fail_msg("%s: %s; want an error with \"%s\"", rl_result_name(r), c->err, words);
}

/* 20 ledgers over wss://, and the start-up line that says who sealed their records: the kernel
 * where it has TLS, else OpenSSL, with the kernel's answer as the reason. */
static void test_wss_streams_verified_ledgers(void **state)
{
    (void)state;
    int before = cs_logcap_count("msg=\"tls records\"");
    harness h;
    start(&h, g_certs.server_cert, g_certs.server_key, NULL);
    client c = {.scheme = "wss", .ca = g_certs.ca};
    rl_result r = run(&h, &c, 20);
    if (r != RL_OK)
        fail_msg("%s", c.err);
    assert_int_equal(c.got, 20);
    harness_stop(&h);
    const char *why;
    bool kernel = cs_xport_ktls_probe(&why);
    char want[256];
    snprintf(want, sizeof want, "sealed_by=%s why=\"%s\"", kernel ? "kernel" : "openssl", why);
    assert_int_equal(cs_logcap_count("msg=\"tls records\""), before + 1);
    if (cs_logcap_count(want) < 1)
        fail_msg("no line with %s", want);
    if (!kernel)
        assert_non_null(strstr(why, "TCP_ULP tls: "));
}

/* The TLS 1.3 suite the server picks for a client that offers OpenSSL's default order (AES-256
 * first) or puts ChaCha20 first, as a client without AES instructions does. */
static const char *suite_for(const harness *h, const char *client_suites)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    assert_non_null(ctx);
    if (client_suites)
        assert_int_equal(SSL_CTX_set_ciphersuites(ctx, client_suites), 1);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)h->port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    SSL *ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    assert_int_equal(SSL_connect(ssl), 1);
    const char *name = SSL_CIPHER_get_name(SSL_get_current_cipher(ssl));
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
    return name; /* a static string of OpenSSL's */
}

static void test_aes128_first_unless_the_client_prefers_chacha(void **state)
{
    (void)state;
    harness h;
    start(&h, g_certs.server_cert, g_certs.server_key, NULL);
    assert_string_equal(suite_for(&h, NULL), "TLS_AES_128_GCM_SHA256");
    assert_string_equal(suite_for(&h, "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256"), "TLS_AES_128_GCM_SHA256");
    assert_string_equal(suite_for(&h, "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256"),
                        "TLS_CHACHA20_POLY1305_SHA256");
    harness_stop(&h);
}

static void test_refused_access_is_named(void **state)
{
    (void)state;
    harness h;
    start(&h, g_certs.server_cert, g_certs.server_key, NULL);
    client plain = {.scheme = "ws"};
    assert_int_not_equal(run(&h, &plain, 3), RL_OK); /* plaintext to the TLS port: refused, at once */
    client untrusted = {.scheme = "wss"};
    expect_error(&h, &untrusted, "certificate verify failed: unable to get local issuer certificate");
    client wrong_name = {.scheme = "wss", .ca = g_certs.ca, .server_name = "other.example"};
    expect_error(&h, &wrong_name, "certificate verify failed: hostname mismatch for other.example");
    harness_stop(&h);

    start(&h, g_certs.other_cert, g_certs.other_key, NULL);
    client wrong_host = {.scheme = "wss", .ca = g_certs.ca};
    expect_error(&h, &wrong_host, "certificate verify failed: IP address mismatch for 127.0.0.1");
    harness_stop(&h);

    start(&h, g_certs.expired_cert, g_certs.expired_key, NULL);
    client expired = {.scheme = "wss", .ca = g_certs.ca};
    expect_error(&h, &expired, "certificate verify failed: certificate has expired");
    harness_stop(&h);

    harness_opts o = {.start = 1, .size = 4096, .interval_ms = 20, .retention = 1000};
    harness_start(&h, &o);
    client tls_to_plain = {.scheme = "wss", .ca = g_certs.ca};
    expect_error(&h, &tls_to_plain, "tls handshake failed");
    harness_stop(&h);
}

/* A plaintext client on the TLS port is told so in plaintext, byte for byte, whatever it asked
 * for; libremoteledger on ws:// names the cause as a TLS mismatch. */
static void test_plaintext_on_the_tls_port_is_answered(void **state)
{
    (void)state;
    harness h;
    start(&h, g_certs.server_cert, g_certs.server_key, NULL);
    static const char want[] =
        "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: 45\r\n"
        "x-content-type-options: nosniff\r\nconnection: close\r\nx-corestream-tls: required\r\n\r\n"
        "this port speaks TLS: use wss:// or https://\n";
    const char *requests[] = {
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        "GET /stream?start=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        "x",
    };
    for (size_t i = 0; i < sizeof requests / sizeof requests[0]; i++) {
        char resp[1024];
        assert_int_equal(cs_http_raw("127.0.0.1", h.port, requests[i], 5000, resp, sizeof resp), 400);
        assert_string_equal(resp, want);
    }
    client plain = {.scheme = "ws"};
    assert_int_equal(run(&h, &plain, 3), RL_ERR_TLS);
    assert_non_null(strstr(plain.err, "the server speaks TLS on this port (is it wss://?)"));
    /* The TLS port still serves TLS after those. */
    client c = {.scheme = "wss", .ca = g_certs.ca};
    assert_int_equal(run(&h, &c, 3), RL_OK);
    harness_stop(&h);
}

static void test_mutual_tls(void **state)
{
    (void)state;
    harness h;
    start(&h, g_certs.server_cert, g_certs.server_key, g_certs.ca);
    /* In TLS 1.3 the client's handshake is done before the server judges its (missing)
     * certificate: the refusal arrives as an alert while the client sends its upgrade, or, when
     * the server's close resets the connection first, as a failed read. Either way: refused. */
    client anonymous = {.scheme = "wss", .ca = g_certs.ca};
    rl_result r = run(&h, &anonymous, 3);
    if (r == RL_OK || (!strstr(anonymous.err, "certificate required") && !strstr(anonymous.err, "read failed")))
        fail_msg("%s: %s; want a refusal", rl_result_name(r), anonymous.err);
    assert_int_equal(anonymous.got, 0);
    client known = {.scheme = "wss", .ca = g_certs.ca, .cert = g_certs.client_cert, .key = g_certs.client_key};
    r = run(&h, &known, 5);
    if (r != RL_OK)
        fail_msg("%s", known.err);
    assert_int_equal(known.got, 5);
    harness_stop(&h);
}

static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
}

typedef struct long_run {
    harness *h;
    client c;
    rl_result r;
} long_run;

static void *long_stream(void *arg)
{
    long_run *lr = arg;
    lr->r = run(lr->h, &lr->c, 60); /* 60 ledgers at 20 ms: the reloads happen meanwhile */
    return NULL;
}

static void test_reload_swaps_the_certificate_for_new_connections(void **state)
{
    (void)state;
    cs_tmpdir d;
    assert_int_equal(cs_tmpdir_make(&d, "tlsreload"), 0);
    char cert[PATH_MAX + 16], key[PATH_MAX + 16];
    cs_tmpdir_join(&d, "cert.pem", cert, sizeof cert);
    cs_tmpdir_join(&d, "key.pem", key, sizeof key);
    copy_file(g_certs.server_cert, cert);
    copy_file(g_certs.server_key, key);
    harness h;
    start(&h, cert, key, NULL);
    long_run lr = {.h = &h, .c = {.scheme = "wss", .ca = g_certs.ca}};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, long_stream, &lr), 0);

    /* A bad pair is refused and the old certificate stays. */
    copy_file(g_certs.other_key, key);
    cs_server_reload(h.srv);
    assert_int_equal(cs_logcap_count("level=ERROR msg=\"reload: TLS certificate kept\""), 1);
    client still = {.scheme = "wss", .ca = g_certs.ca};
    assert_int_equal(run(&h, &still, 2), RL_OK);

    /* A good new pair serves new connections: now for other.example. */
    copy_file(g_certs.other_cert, cert);
    cs_server_reload(h.srv);
    int64_t deadline = cs_mono_ns() + WAIT_NS;
    while (cs_logcap_count("msg=\"reload: TLS certificate reloaded\"") == 0 && cs_mono_ns() < deadline) {
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL); /* the I/O thread applies it at its next wake; no event to await */
    }
    char want[96];
    snprintf(want, sizeof want, "msg=\"reload: TLS certificate reloaded\" pid=%ld cert=", (long)getpid());
    assert_int_equal(cs_logcap_count(want), 1);
    client renamed = {.scheme = "wss", .ca = g_certs.ca, .server_name = "other.example"};
    rl_result r = run(&h, &renamed, 2);
    if (r != RL_OK)
        fail_msg("%s", renamed.err);
    /* The stream that started before either reload got all of its range. */
    pthread_join(th, NULL);
    if (lr.r != RL_OK)
        fail_msg("%s", lr.c.err);
    assert_int_equal(lr.c.got, 60);
    harness_stop(&h);
    cs_tmpdir_remove(&d);
}

/* The TLS I/O threads' own framing, seen by the test's WebSocket client through a tunnel: a
 * verified 101 (Sec-WebSocket-Accept checked), binary ledger frames byte-exact, a ping answered
 * (the stream carries on), a data message closed 1008 `unexpected data message`, a client close
 * echoed, an unmasked frame closed 1002, /healthz, /readyz and /metrics over TLS, and a
 * shutdown's 1001. */
static void test_tls_subscriber_framing(void **state)
{
    (void)state;
    harness h;
    start(&h, g_certs.server_cert, g_certs.server_key, NULL);
    cs_tlstunnel *tun;
    int port = 0;
    assert_int_equal(cs_tlstunnel_start(&tun, h.port, g_certs.ca, &port), 0);
    int st = 0;
    char body[512];
    cs_ws *ws = cs_ws_connect("127.0.0.1", port, "/stream?start=1", 10000, &st, body, sizeof body);
    if (!ws)
        fail_msg("connect: status %d %s", st, body);
    char err[256];
    for (uint32_t seq = 1; seq <= 3; seq++) {
        cs_ledger l;
        if (cs_ws_read_ledger(ws, &l, 10000, err, sizeof err) != 1)
            fail_msg("ledger %u: %s", seq, err);
        assert_int_equal(l.seq, seq);
        cs_ledger_free(&l);
        assert_int_equal(cs_ws_send(ws, 9, "ping", 4), 0);
    }
    assert_int_equal(cs_ws_send(ws, 2, "hello", 5), 0);
    cs_ws_msg m;
    for (int i = 0; i < 200; i++)
        if (cs_ws_read(ws, &m, 10000) != CS_WS_BINARY)
            break;
    assert_int_equal(m.kind, CS_WS_CLOSE);
    assert_int_equal(m.close_code, 1008);
    assert_string_equal(m.reason, "unexpected data message");
    cs_ws_close(ws);

    ws = cs_ws_connect("127.0.0.1", port, "/stream?start=1", 10000, &st, body, sizeof body);
    assert_non_null(ws);
    assert_int_equal(cs_ws_send_close(ws, 1000, "bye"), 0);
    for (int i = 0; i < 200; i++)
        if (cs_ws_read(ws, &m, 10000) != CS_WS_BINARY)
            break;
    assert_int_equal(m.kind, CS_WS_CLOSE);
    assert_int_equal(m.close_code, 1000);
    cs_ws_close(ws);

    ws = cs_ws_connect("127.0.0.1", port, "/stream?start=1", 10000, &st, body, sizeof body);
    assert_non_null(ws);
    static const uint8_t unmasked[] = {0x89, 0x00}; /* a ping without a mask */
    assert_int_equal(cs_ws_send_raw(ws, unmasked, sizeof unmasked), 0);
    for (int i = 0; i < 200; i++)
        if (cs_ws_read(ws, &m, 10000) != CS_WS_BINARY)
            break;
    assert_int_equal(m.kind, CS_WS_CLOSE);
    assert_int_equal(m.close_code, 1002);
    cs_ws_close(ws);

    /* The probes and the scrape over TLS, answered on the head reader. */
    char page[1 << 16], ctype[128];
    assert_int_equal(cs_http_get("127.0.0.1", port, "/healthz", 10000, page, sizeof page, NULL, 0), 200);
    assert_non_null(strstr(page, "\"subscribers\":"));
    assert_int_equal(cs_http_get("127.0.0.1", port, "/readyz", 10000, page, sizeof page, NULL, 0), 200);
    assert_int_equal(cs_http_get("127.0.0.1", port, "/metrics", 10000, page, sizeof page, ctype, sizeof ctype), 200);
    assert_string_equal(ctype, "text/plain; version=0.0.4; charset=utf-8");
    assert_non_null(strstr(page, "corestreamd_"));
    assert_int_equal(cs_http_get("127.0.0.1", port, "/nowhere", 10000, page, sizeof page, NULL, 0), 404);

    /* Shutdown reaches the TLS threads' subscribers: 1001. */
    ws = cs_ws_connect("127.0.0.1", port, "/stream?start=1", 10000, &st, body, sizeof body);
    assert_non_null(ws);
    cs_ledger l;
    assert_int_equal(cs_ws_read_ledger(ws, &l, 10000, err, sizeof err), 1);
    cs_ledger_free(&l);
    cs_server_stop(h.srv);
    for (int i = 0; i < 100000; i++)
        if (cs_ws_read(ws, &m, 10000) != CS_WS_BINARY)
            break;
    assert_int_equal(m.kind, CS_WS_CLOSE);
    assert_int_equal(m.close_code, 1001);
    assert_int_equal(harness_join(&h), 0);
    cs_ws_close(ws);
    cs_tlstunnel_stop(tun);
    harness_stop(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wss_streams_verified_ledgers),
        cmocka_unit_test(test_aes128_first_unless_the_client_prefers_chacha),
        cmocka_unit_test(test_refused_access_is_named),
        cmocka_unit_test(test_plaintext_on_the_tls_port_is_answered),
        cmocka_unit_test(test_mutual_tls),
        cmocka_unit_test(test_reload_swaps_the_certificate_for_new_connections),
        cmocka_unit_test(test_tls_subscriber_framing),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
