/* SPDX-License-Identifier: Apache-2.0 */
/* Token authentication end to end (issue 10), a real server in process with --auth-tokens: a
 * missing or unknown token gets 401 with WWW-Authenticate before the upgrade, byte for byte; the
 * library names the cause in words; a good token streams, and its name (never the token) is in
 * the subscriber's log lines; a reload that drops the token closes its open stream with 1008
 * `token revoked`; /healthz stays open unless --auth-healthz. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "corestream/remoteledger.h"
#include "support/logcapture.h"
#include "support/serverharness.h"
#include "support/certs.h"
#include "support/tlstunnel.h"
#include "support/tmpdir.h"
#include "support/wsclient.h"
#include "support/wait.h"

#define TOKEN_A "tokenA-0123456789abcdefghijklmnopqrstuvwxyz"
#define TOKEN_B "tokenB-0123456789abcdefghijklmnopqrstuvwxyz"
#define UPGRADE "Host: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" \
                "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"

static cs_tmpdir g_dir;
/* CS_TEST_TLS=1 (ctest test_auth_e2e_tls): the server speaks TLS and every client goes through a
 * plaintext-to-TLS tunnel; refusals, revocation and all come from the TLS path. */
static bool g_tls;
static cs_certs g_certs;
static cs_tlstunnel *g_tun;
static int g_port;
static char g_tokens[PATH_MAX + 16];

static void write_tokens(const char *text)
{
    FILE *f = fopen(g_tokens, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    if (cs_tmpdir_make(&g_dir, "auth") != 0)
        return -1;
    cs_tmpdir_join(&g_dir, "tokens", g_tokens, sizeof g_tokens);
    if (cs_logcap_start(CS_LOG_DEBUG) != 0)
        return -1;
    const char *t = getenv("CS_TEST_TLS");
    g_tls = t && strcmp(t, "1") == 0;
    if (g_tls && cs_certs_make(&g_certs) != 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cs_logcap_stop();
    cs_tmpdir_remove(&g_dir);
    if (g_tls)
        cs_certs_remove(&g_certs);
    return 0;
}

static void start(harness *h, bool auth_healthz)
{
    write_tokens("# test tokens\nrpc-a " TOKEN_A "\nrpc-b " TOKEN_B "\n");
    harness_opts o = {.start = 1, .size = 2048, .interval_ms = 20, .retention = 1000,
                      .auth_tokens = g_tokens, .auth_healthz = auth_healthz};
    if (g_tls) {
        o.tls_cert = g_certs.server_cert;
        o.tls_key = g_certs.server_key;
    }
    harness_start(h, &o);
    g_port = h->port;
    g_tun = NULL;
    if (g_tls)
        assert_int_equal(cs_tlstunnel_start(&g_tun, h->port, g_certs.ca, &g_port), 0);
}

static void stop(harness *h)
{
    cs_tlstunnel_stop(g_tun);
    g_tun = NULL;
    harness_stop(h);
}

static void expect_401(const harness *h, const char *extra_header, const char *body)
{
    (void)h; /* reached at g_port: its port, or the tunnel's */
    char req[1024], resp[4096], want[1024];
    snprintf(req, sizeof req, "GET /stream?start=1&end=2 HTTP/1.1\r\n" UPGRADE "%s\r\n", extra_header);
    int st = cs_http_raw("127.0.0.1", g_port, req, WAIT_MS, resp, sizeof resp);
    snprintf(want, sizeof want,
             "HTTP/1.1 401 Unauthorized\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: %zu\r\n"
             "x-content-type-options: nosniff\r\nconnection: close\r\nwww-authenticate: Bearer realm=\"corestream\"\r\n"
             "\r\n%s\n",
             strlen(body) + 1, body);
    if (st != 401 || strcmp(resp, want) != 0)
        fail_msg("status %d\n%s\nwant\n%s", st, resp, want);
}

static void test_missing_or_unknown_token_gets_401(void **state)
{
    (void)state;
    harness h;
    start(&h, false);
    expect_401(&h, "", "a bearer token is required");
    expect_401(&h, "Authorization: Bearer " TOKEN_A "x\r\n", "unknown bearer token");
    expect_401(&h, "Authorization: Basic cnBjOnB3\r\n", "a bearer token is required");
    /* Even a bad query learns nothing before the token. */
    char resp[2048];
    assert_int_equal(cs_http_raw("127.0.0.1", g_port, "GET /stream?start=x HTTP/1.1\r\n" UPGRADE "\r\n", WAIT_MS,
                                 resp, sizeof resp),
                     401);
    /* /healthz stays open without --auth-healthz. */
    char body[512];
    assert_int_equal(cs_http_get("127.0.0.1", g_port, "/healthz", WAIT_MS, body, sizeof body, NULL, 0), 200);
    assert_int_equal(cs_logcap_count(TOKEN_A), 0);
    stop(&h);
}

typedef struct counted {
    uint32_t n;
} counted;

static int count_ledger(const uint8_t *l, size_t len, const rl_ledger_info *info, void *ctx)
{
    (void)l;
    (void)len;
    (void)info;
    ((counted *)ctx)->n++;
    return 0;
}

static rl_result run_client(const harness *h, const char *token, uint32_t from, uint32_t to, counted *c,
                            char *err, size_t errlen)
{
    (void)h; /* reached at g_port */
    char url[128];
    snprintf(url, sizeof url, "ws://127.0.0.1:%d", g_port);
    rl_options o;
    rl_options_init(&o);
    o.bearer_token = token;
    rl_stream *s;
    rl_result r = rl_stream_new(&s, url, &o);
    if (r == RL_OK)
        r = rl_stream_raw_ledgers(s, rl_bounded_range(from, to), count_ledger, c);
    snprintf(err, errlen, "%s", rl_stream_error(s));
    rl_stream_free(s);
    return r;
}

static void test_library_streams_with_a_token_and_names_refusals(void **state)
{
    (void)state;
    harness h;
    start(&h, false);
    counted c = {0};
    char err[512];
    rl_result r = run_client(&h, NULL, 1, 3, &c, err, sizeof err);
    assert_int_not_equal(r, RL_OK);
    assert_non_null(strstr(err, "server requires a token (401)"));
    r = run_client(&h, TOKEN_B "x", 1, 3, &c, err, sizeof err);
    assert_non_null(strstr(err, "server rejected the token (401)"));
    assert_int_equal(c.n, 0);
    r = run_client(&h, TOKEN_B, 1, 3, &c, err, sizeof err);
    if (r != RL_OK)
        fail_msg("%s", err);
    assert_int_equal(c.n, 3);
    assert_true(cs_logcap_count("msg=\"subscriber connected\"") >= 1);
    assert_true(cs_logcap_count("token=rpc-b") >= 1);
    assert_int_equal(cs_logcap_count(TOKEN_B), 0);
    stop(&h);
}

static void test_reload_revokes_open_streams(void **state)
{
    (void)state;
    harness h;
    start(&h, false);
    cs_ws_opts wo = {.extra_headers = "Authorization: Bearer " TOKEN_A "\r\n"};
    int status;
    char body[256];
    cs_ws *a = cs_ws_connect_opts("127.0.0.1", g_port, "/stream", &wo, WAIT_MS, &status, body, sizeof body);
    if (!a)
        fail_msg("status %d %s", status, body);
    cs_ws_opts wb = {.extra_headers = "Authorization: Bearer " TOKEN_B "\r\n"};
    cs_ws *b = cs_ws_connect_opts("127.0.0.1", g_port, "/stream", &wb, WAIT_MS, &status, body, sizeof body);
    assert_non_null(b);
    cs_ledger l;
    assert_int_equal(cs_ws_read_ledger(a, &l, WAIT_MS, NULL, 0), 1);
    cs_ledger_free(&l);
    /* rpc-a's token is withdrawn; rpc-b keeps streaming. */
    write_tokens("rpc-b " TOKEN_B "\n");
    cs_server_reload(h.srv);
    int kind = CS_WS_BINARY;
    cs_ws_msg m;
    for (int i = 0; i < 100000 && (kind = cs_ws_read(a, &m, WAIT_MS)) == CS_WS_BINARY; i++)
        ;
    assert_int_equal(kind, CS_WS_CLOSE);
    int code;
    char reason[128];
    assert_int_equal(cs_ws_last_close(a, &code, reason, sizeof reason), 1);
    assert_int_equal(code, 1008);
    assert_string_equal(reason, "token revoked");
    for (int i = 0; i < 3; i++) {
        assert_int_equal(cs_ws_read_ledger(b, &l, WAIT_MS, NULL, 0), 1);
        cs_ledger_free(&l);
    }
    /* A reload that fails keeps the tokens in force. */
    write_tokens("rpc-b short\n");
    cs_server_reload(h.srv);
    assert_int_equal(cs_logcap_count("level=ERROR msg=\"reload: auth tokens kept\""), 1);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(cs_ws_read_ledger(b, &l, WAIT_MS, NULL, 0), 1);
        cs_ledger_free(&l);
    }
    cs_ws_close(a);
    cs_ws_close(b);
    stop(&h);
}

static void test_auth_healthz(void **state)
{
    (void)state;
    harness h;
    start(&h, true);
    char resp[2048];
    assert_int_equal(cs_http_raw("127.0.0.1", g_port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", WAIT_MS, resp,
                                 sizeof resp),
                     401);
    assert_int_equal(cs_http_raw("127.0.0.1", g_port,
                                 "GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOKEN_A "\r\n\r\n",
                                 WAIT_MS, resp, sizeof resp),
                     200);
    stop(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_or_unknown_token_gets_401),
        cmocka_unit_test(test_library_streams_with_a_token_and_names_refusals),
        cmocka_unit_test(test_reload_revokes_open_streams),
        cmocka_unit_test(test_auth_healthz),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
