/* The /stream handshake answers of issue 10, byte for byte, from a real server in process: the
 * prototype's WebSocket rules that libwebsockets did not enforce (version, key, method, HTTP/1.0),
 * the URI limit it answered by hanging up (414), and `too many query parameters` instead of
 * dropping pairs. Every refusal is one DEBUG line naming the peer. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "support/logcapture.h"
#include "support/serverharness.h"
#include "support/wsclient.h"

#define WAIT_MS 10000
#define KEY "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
#define V13 "Sec-WebSocket-Version: 13\r\n"
#define UPGRADE "Host: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"

static harness g_h;

static int setup(void **state)
{
    (void)state;
    if (cs_logcap_start(CS_LOG_DEBUG) != 0)
        return -1;
    harness_opts o = {.start = 1, .size = 1024, .interval_ms = 100, .retention = 100};
    harness_start(&g_h, &o);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    harness_stop(&g_h);
    cs_logcap_stop();
    return 0;
}

/* The exact response for a refusal: our status line, then lws' header style. */
static char *expected(unsigned code, const char *reason, const char *extra, const char *body)
{
    char *out = malloc(strlen(body) + 512);
    sprintf(out,
            "HTTP/1.1 %u %s\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: %zu\r\n"
            "x-content-type-options: nosniff\r\n%s\r\n%s\n",
            code, reason, strlen(body) + 1, extra, body);
    return out;
}

static void expect_answer(const char *request, unsigned code, const char *reason, const char *extra,
                          const char *body)
{
    static char resp[1 << 16];
    int st = cs_http_raw("127.0.0.1", g_h.port, request, WAIT_MS, resp, sizeof resp);
    char *want = expected(code, reason, extra, body);
    if (st != (int)code || strcmp(resp, want) != 0)
        fail_msg("status %d, response\n%s\nwant\n%s", st, resp, want);
    free(want);
}

/* How many lines of the log so far contain needle. */
static void test_other_websocket_versions_get_400_with_13(void **state)
{
    (void)state;
    expect_answer("GET /stream HTTP/1.1\r\n" UPGRADE "Sec-WebSocket-Version: 8\r\n" KEY "\r\n", 400,
                  "Bad Request", "sec-websocket-version: 13\r\n",
                  "unsupported WebSocket protocol version (only 13 is supported): \"8\"");
    expect_answer("GET /stream HTTP/1.1\r\n" UPGRADE KEY "\r\n", 400, "Bad Request",
                  "sec-websocket-version: 13\r\n",
                  "unsupported WebSocket protocol version (only 13 is supported): \"\"");
    assert_int_equal(cs_logcap_count("msg=\"websocket handshake failed\""), 2);
    char want[128];
    snprintf(want, sizeof want, "level=DEBUG msg=\"websocket handshake failed\" pid=%ld remote=127.0.0.1:",
             (long)getpid());
    assert_int_equal(cs_logcap_count(want), 2);
}

static void test_bad_keys_get_400(void **state)
{
    (void)state;
    expect_answer("GET /stream HTTP/1.1\r\n" UPGRADE V13 "\r\n", 400, "Bad Request", "",
                  "WebSocket protocol violation: missing Sec-WebSocket-Key");
    expect_answer("GET /stream HTTP/1.1\r\n" UPGRADE V13 KEY KEY "\r\n", 400, "Bad Request", "",
                  "WebSocket protocol violation: multiple Sec-WebSocket-Key headers");
    expect_answer("GET /stream HTTP/1.1\r\n" UPGRADE V13 "Sec-WebSocket-Key: abc\r\n\r\n", 400, "Bad Request",
                  "",
                  "WebSocket protocol violation: invalid Sec-WebSocket-Key \"abc\", must be a 16 byte base64 "
                  "encoded string");
    /* 16 bytes of base64 but with padding bits set: Go's decoder refuses it too. */
    expect_answer("GET /stream HTTP/1.1\r\n" UPGRADE V13 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZR==\r\n\r\n",
                  400, "Bad Request", "",
                  "WebSocket protocol violation: invalid Sec-WebSocket-Key \"dGhlIHNhbXBsZSBub25jZR==\", must "
                  "be a 16 byte base64 encoded string");
}

static void test_non_get_gets_405(void **state)
{
    (void)state;
    expect_answer("POST /stream HTTP/1.1\r\n" UPGRADE V13 KEY "\r\n", 405, "Method Not Allowed", "",
                  "WebSocket protocol violation: handshake request method is not GET but \"POST\"");
}

static void test_http_1_0_gets_426(void **state)
{
    (void)state;
    expect_answer("GET /stream HTTP/1.0\r\n" UPGRADE V13 KEY "\r\n", 426, "Upgrade Required", "",
                  "WebSocket protocol violation: handshake request must be at least HTTP/1.1: \"HTTP/1.0\"");
    expect_answer("GET /stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 426, "Upgrade Required",
                  "connection: Upgrade\r\nupgrade: websocket\r\n",
                  "WebSocket protocol violation: Connection header \"\" does not contain Upgrade");
}

static void test_query_pairs_are_never_dropped(void **state)
{
    (void)state;
    char req[2048];
    int n = snprintf(req, sizeof req, "GET /stream?");
    for (int i = 0; i < 32; i++)
        n += snprintf(req + n, sizeof req - (size_t)n, "x%d=1&", i);
    snprintf(req + n, sizeof req - (size_t)n, "start=abc HTTP/1.1\r\n" UPGRADE V13 KEY "\r\n");
    /* Pair 33 is the bad start: it must not be lost. */
    expect_answer(req, 400, "Bad Request", "", "too many query parameters");
    /* 32 pairs are read, the last of them included. */
    n = snprintf(req, sizeof req, "GET /stream?");
    for (int i = 0; i < 31; i++)
        n += snprintf(req + n, sizeof req - (size_t)n, "x%d=1&", i);
    snprintf(req + n, sizeof req - (size_t)n, "start=abc HTTP/1.1\r\n" UPGRADE V13 KEY "\r\n");
    expect_answer(req, 400, "Bad Request", "", "invalid start parameter \"abc\"");
}

/* A URI past 4 KiB is answered 414. A request past lws' 16 KiB header store is closed with no
 * answer (libwebsockets 4.1 hangs up on it): the server must carry on serving. */
static void test_oversized_requests(void **state)
{
    (void)state;
    size_t big = 70 * 1024;
    char *req = malloc(big + 256);
    char *p = req + sprintf(req, "GET /stream?x=");
    memset(p, 'a', 5000);
    sprintf(p + 5000, " HTTP/1.1\r\n" UPGRADE V13 KEY "\r\n");
    expect_answer(req, 414, "Request URI Too Long", "", "request URI too long");
    p = req + sprintf(req, "GET /healthz?x=");
    memset(p, 'a', 5000);
    sprintf(p + 5000, " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    expect_answer(req, 414, "Request URI Too Long", "", "request URI too long");
    assert_int_equal(cs_logcap_count("status=414 error=\"request URI too long\""), 2);
    p = req + sprintf(req, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ");
    memset(p, 'b', big);
    sprintf(p + big, "\r\n\r\n");
    static char resp[4096];
    assert_true(cs_http_raw("127.0.0.1", g_h.port, req, WAIT_MS, resp, sizeof resp) <= 0);
    free(req);
    char body[512];
    assert_int_equal(cs_http_get("127.0.0.1", g_h.port, "/healthz", WAIT_MS, body, sizeof body, NULL, 0), 200);
}

static void test_valid_handshake_still_upgrades(void **state)
{
    (void)state;
    char resp[1024];
    int st = cs_http_raw("127.0.0.1", g_h.port, "GET /stream?start=1&end=1 HTTP/1.1\r\n" UPGRADE V13 KEY "\r\n",
                         WAIT_MS, resp, sizeof resp);
    assert_int_equal(st, 101);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_other_websocket_versions_get_400_with_13),
        cmocka_unit_test(test_bad_keys_get_400),
        cmocka_unit_test(test_non_get_gets_405),
        cmocka_unit_test(test_http_1_0_gets_426),
        cmocka_unit_test(test_query_pairs_are_never_dropped),
        cmocka_unit_test(test_oversized_requests),
        cmocka_unit_test(test_valid_handshake_still_upgrades),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
