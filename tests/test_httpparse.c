/* SPDX-License-Identifier: Apache-2.0 */
/* The one request parser (net/httpparse.h): where a head ends, what RFC 9112 refuses and with
 * which status and text, which limit a head passes; the same verdict whether the bytes arrive
 * whole or one at a time. Table-driven: each row is what a peer sends and what it gets. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "corestreamd/net/httpparse.h"

static const cs_head_limits LIM = {.uri_max = 16, .head_max = 64, .fields_max = 3, .pairs_max = 3};
static const cs_head_limits WIDE = {.uri_max = 4096, .head_max = 16384, .fields_max = 48, .pairs_max = 32};

/* req[0..len) fed whole under lim, checked against the same bytes fed one at a time. */
static cs_http_verdict parse_n(const char *req, size_t len, const cs_head_limits *lim, cs_http_parser *out)
{
    cs_http_parser b;
    cs_http_parser_init(out, lim);
    cs_http_parser_init(&b, lim);
    cs_http_verdict whole = cs_http_parser_feed(out, req, len);
    cs_http_verdict trickle = CS_HTTP_MORE;
    for (size_t i = 1; i <= len && trickle == CS_HTTP_MORE; i++)
        trickle = cs_http_parser_feed(&b, req, i);
    assert_int_equal(whole, trickle);
    assert_int_equal(out->head_len, b.head_len);
    assert_int_equal(out->status, b.status);
    return whole;
}

static cs_http_verdict parse(const char *req, const cs_head_limits *lim, cs_http_parser *out)
{
    return parse_n(req, strlen(req), lim, out);
}

typedef struct row {
    const char *req;
    unsigned status; /* 0: the head is whole */
    const char *why;
} row;

static void check_rows(const row *rows, size_t n, const cs_head_limits *lim)
{
    for (size_t i = 0; i < n; i++) {
        cs_http_parser p;
        cs_http_verdict v = parse(rows[i].req, lim, &p);
        if (rows[i].status == 0 && v != CS_HTTP_DONE)
            fail_msg("row %zu %s: verdict %d %u %s, want the head whole", i, rows[i].req, v, p.status,
                     p.why ? p.why : "");
        if (rows[i].status && (v != CS_HTTP_REFUSE || p.status != rows[i].status || strcmp(p.why, rows[i].why) != 0))
            fail_msg("row %zu %s: verdict %d %u %s, want %u %s", i, rows[i].req, v, p.status, p.why ? p.why : "",
                     rows[i].status, rows[i].why);
    }
}

static void test_rfc_9112_heads(void **state)
{
    (void)state;
    static const row rows[] = {
        {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", 0, NULL},
        {"GET / HTTP/1.0\r\n\r\n", 0, NULL}, /* HTTP/1.0 needs no Host */
        {"HEAD /healthz HTTP/1.1\r\nHost: 127.0.0.1:8462\r\nX:\r\n\r\n", 0, NULL},
        {"GET / HTTP/1.1\r\nHost: [::1]:8462\r\nA: \t v \t\r\n\r\n", 0, NULL},
        {"GET / HTTP/1.1\r\nHost:\r\n\r\n", 0, NULL}, /* an empty Host (RFC 9112 3.2) */
        {"GET /?a=%41&&b HTTP/1.1\r\nHost: a\r\nX: caf\xc3\xa9\r\n\r\n", 0, NULL}, /* obs-text in a value */
        {"get / HTTP/1.1\r\nHost: a\r\n\r\n", 0, NULL}, /* a token, if not a method this server serves */
        {"GET http://a/healthz HTTP/1.1\r\nHost: a\r\n\r\n", 0, NULL}, /* absolute-form: a path it routes nowhere */
        /* The request line. */
        {"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400, "malformed HTTP request"},
        {"\x16\x03\x01\x02\x00", 400, "malformed HTTP request"}, /* a TLS ClientHello */
        {"AAAAAAAAAAAAAAAAAAAAAAAA", 400, "malformed HTTP request"}, /* no method that long */
        {"GET  / HTTP/1.1\r\n", 400, "malformed HTTP request"},
        {"GET /  HTTP/1.1\r\n", 400, "malformed HTTP version"},
        {"GET /\r\n\r\n", 400, "malformed HTTP request"}, /* HTTP/0.9 */
        {"G(T / HTTP/1.1\r\n", 400, "malformed HTTP request"},
        {"GET / HTTP/9.9\r\nHost: a\r\n\r\n", 505, "unsupported HTTP version"},
        {"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505, "unsupported HTTP version"},
        {"GET / HTTP/1.2\r\nHost: a\r\n\r\n", 505, "unsupported HTTP version"},
        {"GET / FOO\r\nHost: a\r\n\r\n", 400, "malformed HTTP version"},
        {"GET / HTTP/1.10\r\n", 400, "malformed HTTP version"},
        {"GET / http/1.1\r\n", 400, "malformed HTTP version"},
        /* The target. */
        {"GET /stream%00.css HTTP/1.1\r\n", 400, "invalid request target"},
        {"GET /healthz%1f HTTP/1.1\r\n", 400, "invalid request target"},
        {"GET /a%7F HTTP/1.1\r\n", 400, "invalid request target"},
        {"GET /a%zz HTTP/1.1\r\n", 400, "invalid request target"},
        {"GET /a% HTTP/1.1\r\n", 400, "invalid request target"},
        {"GET /?start=1%00 HTTP/1.1\r\n", 400, "invalid request target"},
        {"GET /a\x01 HTTP/1.1\r\n", 400, "invalid request target"},
        {"GET /a\x7f HTTP/1.1\r\n", 400, "invalid request target"},
        {"GET /caf\xc3\xa9 HTTP/1.1\r\n", 400, "invalid request target"},
        {"GET /a\tb HTTP/1.1\r\n", 400, "invalid request target"},
        /* Line ends. */
        {"GET / HTTP/1.1\nHost: a\n\n", 400, "lines must end with CRLF"},
        {"GET / HTTP/1.1\r\nHost: a\n\r\n", 400, "lines must end with CRLF"},
        {"GET / HTTP/1.1\r\nHost: a\r\n\n", 400, "lines must end with CRLF"},
        {"GET / HTTP/1.1\rHost: a\r\n\r\n", 400, "lines must end with CRLF"},
        {"GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n", 400, "lines must end with CRLF"},
        {"GET / HTTP/1.1\r\nHost: a\r\n\rX", 400, "lines must end with CRLF"},
        /* Field lines. */
        {"GET / HTTP/1.1\r\nContent-Length : 29\r\n\r\n", 400, "invalid header field name"},
        {"GET / HTTP/1.1\r\nHost: a\r\n Content-Length: 36\r\n\r\n", 400, "obsolete line folding is not accepted"},
        {"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n\t2\r\n\r\n", 400, "obsolete line folding is not accepted"},
        {"GET / HTTP/1.1\r\n Host: a\r\n\r\n", 400, "obsolete line folding is not accepted"},
        {"GET / HTTP/1.1\r\nHo st: a\r\n\r\n", 400, "invalid header field name"},
        {"GET / HTTP/1.1\r\n: a\r\n\r\n", 400, "invalid header field name"},
        {"GET / HTTP/1.1\r\nX(: a\r\n\r\n", 400, "invalid header field name"},
        {"GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400, "invalid header field name"},
        {"GET / HTTP/1.1\r\nX: a\x01\r\n\r\n", 400, "invalid header field value"},
        {"GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n", 400, "invalid header field value"},
        /* Host. */
        {"GET / HTTP/1.1\r\n\r\n", 400, "missing Host header"},
        {"GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 400, "more than one Host header"},
        {"GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", 400, "more than one Host header"},
        {"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400, "invalid Host header"},
        {"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "invalid Host header"},
        {"GET / HTTP/1.1\r\nHost: a@b\r\n\r\n", 400, "invalid Host header"},
    };
    check_rows(rows, sizeof rows / sizeof rows[0], &WIDE);
}

/* A NUL is a byte like any other to the parser: a value holding one is refused. */
static void test_nul_in_a_value(void **state)
{
    (void)state;
    static const char req[] = "GET / HTTP/1.1\r\nHost: a\0b\r\n\r\n";
    cs_http_parser p;
    assert_int_equal(parse_n(req, sizeof req - 1, &WIDE, &p), CS_HTTP_REFUSE);
    assert_int_equal(p.status, 400);
    assert_string_equal(p.why, "invalid header field value");
}

static void test_where_a_head_ends(void **state)
{
    (void)state;
    cs_http_parser p;
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\n\r\n", &LIM, &p), CS_HTTP_DONE);
    assert_int_equal(p.head_len, 27);
    /* Bytes after the head are not the head's. */
    assert_int_equal(parse("GET / HTTP/1.0\r\n\r\n\x81\x00", &LIM, &p), CS_HTTP_DONE);
    assert_int_equal(p.head_len, 18);
    assert_int_equal(parse("", &LIM, &p), CS_HTTP_MORE);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\n", &LIM, &p), CS_HTTP_MORE);
    assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\n\r", &LIM, &p), CS_HTTP_MORE);
}

static void test_limits(void **state)
{
    (void)state;
    static const row rows[] = {
        /* 16 target bytes pass, 17 do not, complete or not (escapes count as sent). */
        {"GET /aaaaaaaaaaaaaaa HTTP/1.0\r\n\r\n", 0, NULL},
        {"GET /aaaaaaaaaaaaaaaa HTTP/1.0\r\n\r\n", 414, "request URI too long"},
        {"GET /aaaaaaaaaaaaaaaa", 414, "request URI too long"},
        {"GET /aaaaaaaaaaaaa%41 HTTP/1.0\r\n\r\n", 414, "request URI too long"},
        /* Three field lines pass, four do not. */
        {"GET / HTTP/1.0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", 0, NULL},
        {"GET / HTTP/1.0\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", 431, "request header fields too large"},
        /* Three non-empty query pieces pass, four do not; empty pieces are none. */
        {"GET /?a&b&&c& HTTP/1.0\r\n\r\n", 0, NULL},
        {"GET /?a&b&c&d HTTP/1.0\r\n\r\n", 400, "too many query parameters"},
        {"GET /&&&&?a HTTP/1.0\r\n\r\n", 0, NULL}, /* '&' before the '?' is the path's */
        /* The request line's limit is met first. */
        {"GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 414, "request URI too long"},
    };
    check_rows(rows, sizeof rows / sizeof rows[0], &LIM);
    /* Exactly 64 bytes pass; 65 do not, and neither do 65 without the end. */
    char req[128];
    strcpy(req, "GET / HTTP/1.0\r\nX: ");
    size_t fill = 64 - strlen(req) - 4;
    memset(req + strlen(req), 'x', fill);
    strcpy(req + 19 + fill, "\r\n\r\n");
    assert_int_equal(strlen(req), 64);
    cs_http_parser p;
    assert_int_equal(parse(req, &LIM, &p), CS_HTTP_DONE);
    assert_int_equal(p.head_len, 64);
    memmove(req + 20, req + 19, strlen(req + 19) + 1);
    req[19] = 'x';
    assert_int_equal(parse(req, &LIM, &p), CS_HTTP_REFUSE);
    assert_int_equal(p.status, 431);
    req[64] = '\0';
    assert_int_equal(parse(req, &LIM, &p), CS_HTTP_MORE); /* 64 bytes, no end yet: one more decides */
}

/* The head copied out: the path as sent, the query's pieces decoded, values trimmed. */
static void test_head_made(void **state)
{
    (void)state;
    static const char req[] = "GET /%73tream?start=5&&a+b=%41& HTTP/1.1\r\nHost: x\r\nX-A:  1 \r\nx-a: 2\r\nE:\r\n\r\n";
    cs_http_parser p;
    assert_int_equal(parse(req, &WIDE, &p), CS_HTTP_DONE);
    cs_http_head h;
    assert_int_equal(cs_http_head_make(&p, req, &h), 0);
    assert_string_equal(h.method, "GET");
    assert_string_equal(h.path, "/%73tream"); /* never /stream */
    assert_string_equal(h.version, "HTTP/1.1");
    assert_int_equal(h.target_len, strlen("/%73tream?start=5&&a+b=%41&"));
    assert_int_equal(h.npairs, 2);
    assert_string_equal(cs_http_head_pair(&h, 0), "start=5");
    assert_string_equal(cs_http_head_pair(&h, 1), "a b=A");
    assert_int_equal(h.nfields, 4);
    assert_string_equal(cs_http_head_nth(&h, "x-a", 0), "1");
    assert_string_equal(cs_http_head_nth(&h, "X-A", 1), "2");
    assert_string_equal(cs_http_head_nth(&h, "e", 0), "");
    cs_http_head_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc_9112_heads),
        cmocka_unit_test(test_nul_in_a_value),
        cmocka_unit_test(test_where_a_head_ends),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_head_made),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
