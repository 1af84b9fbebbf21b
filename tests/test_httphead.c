/* SPDX-License-Identifier: Apache-2.0 */
/* A parsed request head (net/httphead.h, as net/httpparse.h makes it): its fields and query
 * pairs, and what it says of a body and of keep-alive. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corestreamd/net/httpparse.h"

static void parse(const char *text, cs_http_head *h)
{
    static const cs_head_limits lim = {.uri_max = 4096, .head_max = 16384, .fields_max = 48, .pairs_max = 32};
    cs_http_parser p;
    cs_http_parser_init(&p, &lim);
    assert_int_equal(cs_http_parser_feed(&p, text, strlen(text)), CS_HTTP_DONE);
    assert_int_equal(cs_http_head_make(&p, text, h), 0);
}

static void test_split(void **state)
{
    (void)state;
    cs_http_head h;
    parse("GET /stream?start=5&a+b=%41 HTTP/1.1\r\nHost: x\r\nX-A:  1 \r\nx-a: 2\r\n\r\n", &h);
    assert_string_equal(h.method, "GET");
    assert_string_equal(h.path, "/stream");
    assert_string_equal(h.version, "HTTP/1.1");
    assert_string_equal(cs_http_head_pair(&h, 0), "start=5");
    assert_string_equal(cs_http_head_pair(&h, 1), "a b=A");
    assert_null(cs_http_head_pair(&h, 2));
    char *v = cs_http_head_get(&h, "x-a");
    assert_string_equal(v, "1,2");
    free(v);
    assert_string_equal(cs_http_head_nth(&h, "X-A", 1), "2");
    cs_http_head_free(&h);
}

static cs_http_body body_of(const char *fields)
{
    char text[512];
    snprintf(text, sizeof text, "POST /healthz HTTP/1.1\r\nHost: x\r\n%s\r\n", fields);
    cs_http_head h;
    parse(text, &h);
    cs_http_body b = cs_http_head_body(&h);
    cs_http_head_free(&h);
    return b;
}

static void test_body(void **state)
{
    (void)state;
    assert_int_equal(body_of(""), CS_HTTP_BODY_NONE);
    assert_int_equal(body_of("Content-Length: 0\r\n"), CS_HTTP_BODY_NONE);
    assert_int_equal(body_of("Content-Length: 000\r\nContent-Length: 0\r\n"), CS_HTTP_BODY_NONE);
    assert_int_equal(body_of("Content-Length: 1\r\n"), CS_HTTP_BODY_LENGTH);
    assert_int_equal(body_of("content-length: 9999999999999\r\n"), CS_HTTP_BODY_LENGTH);
    assert_int_equal(body_of("Content-Length: 3\r\nContent-Length: 3\r\n"), CS_HTTP_BODY_LENGTH);
    assert_int_equal(body_of("Transfer-Encoding: chunked\r\n"), CS_HTTP_BODY_TRANSFER);
    assert_int_equal(body_of("Transfer-Encoding: identity\r\nContent-Length: 0\r\n"), CS_HTTP_BODY_TRANSFER);
    assert_int_equal(body_of("Content-Length: 3\r\nTransfer-Encoding: chunked\r\n"), CS_HTTP_BODY_TRANSFER);
    static const char *const invalid[] = {
        "Content-Length:\r\n",          "Content-Length: abc\r\n",         "Content-Length: -1\r\n",
        "Content-Length: +1\r\n",       "Content-Length: 1 2\r\n",         "Content-Length: 3,3\r\n",
        "Content-Length: 0x10\r\n",     "Content-Length: 10000000000000\r\n",
        "Content-Length: 1\r\nContent-Length: 2\r\n", "Content-Length: 0\r\nContent-Length: 1\r\n",
    };
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
        if (body_of(invalid[i]) != CS_HTTP_BODY_INVALID)
            fail_msg("not invalid: %s", invalid[i]);
}

static bool keep_of(const char *version, const char *fields)
{
    char text[512];
    snprintf(text, sizeof text, "GET /healthz %s\r\nHost: x\r\n%s\r\n", version, fields);
    cs_http_head h;
    parse(text, &h);
    bool k = cs_http_head_keep_alive(&h);
    cs_http_head_free(&h);
    return k;
}

static void test_keep_alive(void **state)
{
    (void)state;
    assert_true(keep_of("HTTP/1.1", ""));
    assert_true(keep_of("HTTP/1.1", "Connection: keep-alive\r\n"));
    assert_true(keep_of("HTTP/1.1", "Connection: closed\r\n"));
    assert_false(keep_of("HTTP/1.1", "Connection: close\r\n"));
    assert_false(keep_of("HTTP/1.1", "Connection: Upgrade, CLOSE \r\n"));
    assert_false(keep_of("HTTP/1.1", "Connection: keep-alive\r\nConnection: close\r\n"));
    assert_false(keep_of("HTTP/1.0", ""));
    assert_false(keep_of("HTTP/1.0", "Connection: keep-alive\r\n"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_body),
        cmocka_unit_test(test_keep_alive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
