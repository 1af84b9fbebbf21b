/* The request-head scanner (net/headscan.h): where a head ends, and which limit a head passes,
 * the same whether it arrives whole or a byte at a time. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "corestreamd/net/headscan.h"

static const cs_head_limits LIM = {.uri_max = 16, .head_max = 64, .fields_max = 3, .pairs_max = 3};

/* The verdict for req fed whole, checked against the same bytes fed one at a time. */
static cs_head_verdict scan(const char *req, size_t *head_len)
{
    size_t len = strlen(req), whole_len = 0, trickle_len = 0;
    cs_head_scan a = CS_HEAD_SCAN_INIT, b = CS_HEAD_SCAN_INIT;
    cs_head_verdict whole = cs_head_scan_feed(&a, req, len, &LIM, &whole_len);
    cs_head_verdict trickle = CS_HEAD_MORE;
    for (size_t i = 1; i <= len && trickle == CS_HEAD_MORE; i++)
        trickle = cs_head_scan_feed(&b, req, i, &LIM, &trickle_len);
    assert_int_equal(whole, trickle);
    assert_int_equal(whole_len, trickle_len);
    *head_len = whole_len;
    return whole;
}

static void test_complete_heads(void **state)
{
    (void)state;
    size_t n;
    assert_int_equal(scan("GET / HTTP/1.1\r\nHost: a\r\n\r\n", &n), CS_HEAD_DONE);
    assert_int_equal(n, 27);
    /* Bytes after the head are not the head's. */
    assert_int_equal(scan("GET / HTTP/1.1\r\n\r\n\x81\x00", &n), CS_HEAD_DONE);
    assert_int_equal(n, 18);
    /* Bare LF line ends, as lenient servers take them. */
    assert_int_equal(scan("GET / HTTP/1.1\nHost: a\n\n", &n), CS_HEAD_DONE);
    assert_int_equal(n, 24);
    assert_int_equal(scan("GET /?a&b&c HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", &n), CS_HEAD_DONE);
}

static void test_incomplete_heads(void **state)
{
    (void)state;
    size_t n;
    assert_int_equal(scan("", &n), CS_HEAD_MORE);
    assert_int_equal(scan("GET / HTTP/1.1\r\nHost: a\r\n", &n), CS_HEAD_MORE);
    assert_int_equal(scan("GET / HTTP/1.1\r\nHost: a\r\n\r", &n), CS_HEAD_MORE);
}

static void test_limits(void **state)
{
    (void)state;
    size_t n;
    /* 16 target bytes pass, 17 do not, complete or not. */
    assert_int_equal(scan("GET /aaaaaaaaaaaaaaa HTTP/1.1\r\n\r\n", &n), CS_HEAD_DONE);
    assert_int_equal(scan("GET /aaaaaaaaaaaaaaaa HTTP/1.1\r\n\r\n", &n), CS_HEAD_URI_TOO_LONG);
    assert_int_equal(scan("GET /aaaaaaaaaaaaaaaa", &n), CS_HEAD_URI_TOO_LONG);
    /* Four header lines, four pairs. */
    assert_int_equal(scan("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", &n), CS_HEAD_TOO_LARGE);
    assert_int_equal(scan("GET /?a&b&c&d HTTP/1.1\r\n\r\n", &n), CS_HEAD_TOO_MANY_PAIRS);
    /* '&' before the '?' is the path's. */
    assert_int_equal(scan("GET /&&&&?a HTTP/1.1\r\n\r\n", &n), CS_HEAD_DONE);
    /* Exactly 64 bytes pass; 65 do not, and neither do 65 without the end. */
    char req[128];
    strcpy(req, "GET / HTTP/1.1\r\nX: ");
    size_t fill = 64 - strlen(req) - 4;
    memset(req + strlen(req), 'x', fill);
    strcpy(req + 19 + fill, "\r\n\r\n");
    assert_int_equal(strlen(req), 64);
    assert_int_equal(scan(req, &n), CS_HEAD_DONE);
    assert_int_equal(n, 64);
    memmove(req + 20, req + 19, strlen(req + 19) + 1);
    req[19] = 'x';
    assert_int_equal(scan(req, &n), CS_HEAD_TOO_LARGE);
    req[64] = 'x';
    req[65] = '\0';
    assert_int_equal(scan(req, &n), CS_HEAD_TOO_LARGE);
    req[64] = '\0';
    assert_int_equal(scan(req, &n), CS_HEAD_MORE); /* 64 bytes, no end yet: one more decides */
    /* The request line's limit is met first. */
    assert_int_equal(scan("GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", &n),
                     CS_HEAD_URI_TOO_LONG);
}

static void test_not_http(void **state)
{
    (void)state;
    size_t n;
    assert_int_equal(scan("\x16\x03\x01\x02\x00", &n), CS_HEAD_NOT_HTTP); /* a TLS ClientHello */
    assert_int_equal(scan("get / HTTP/1.1\r\n\r\n", &n), CS_HEAD_NOT_HTTP);
    assert_int_equal(scan("AAAAAAAAAAAAAAAAAAAAAAAA", &n), CS_HEAD_NOT_HTTP); /* no method that long */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_complete_heads),
        cmocka_unit_test(test_incomplete_heads),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_not_http),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
