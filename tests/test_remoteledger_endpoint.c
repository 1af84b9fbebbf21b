/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger: what a stream is asked for, before anything is dialed. The subscription URL as
 * Go's net/url parses it and the /stream endpoint built from it for a range (endpoint.c,
 * urlescape.c), with the exact messages of what is refused; the range rules; the read limit and
 * expansion bound derived from the options; rl_options_init's defaults and the result names; and
 * GET /healthz, the request rl_stream_bounds writes and the parser of its answer (healthz.c).
 * The numbers in comments (143-147) are the prototype's test cases these carry over. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "corestream/remoteledger.h"
#include "corestream/wire.h"
#include "remoteledger/endpoint.h"
#include "remoteledger/healthz.h"
#include "support/rlclient.h"
#include "support/rlsuite.h"

/* ==== endpoint (cases 143-147) ================================================================ */

static void endpoint_of(const char *url, rl_range r, char *out, size_t len)
{
    rli_url u;
    cs_err err;
    if (rli_url_parse(&u, url, &err))
        fail_msg("parse %s: %s", url, err.msg);
    char *ep, *target;
    if (rli_endpoint_build(&u, r, false, &ep, &target, &err))
        fail_msg("endpoint %s: %s", url, err.msg);
    snprintf(out, len, "%s", ep);
    free(ep);
    free(target);
    rli_url_free(&u);
}

/* The error of building the endpoint (parse or range), "" when both succeed. */
static int endpoint_error(const char *url, rl_range r, char *out, size_t len)
{
    rli_url u;
    cs_err err;
    out[0] = '\0';
    if (rli_url_parse(&u, url, &err)) {
        snprintf(out, len, "%s", err.msg);
        return err.kind;
    }
    char *ep, *target;
    int rc = rli_endpoint_build(&u, r, false, &ep, &target, &err);
    if (rc) {
        snprintf(out, len, "%s", err.msg);
        rc = err.kind;
    } else {
        free(ep);
        free(target);
    }
    rli_url_free(&u);
    return rc;
}

/* 147 */
static void test_endpoint(void **state)
{
    (void)state;
    static const struct {
        const char *url;
        rl_range r;
        const char *want;
    } cases[] = {
        {"ws://box:8462", {10, 0, false}, "ws://box:8462/stream?start=10"},
        {"ws://box:8462/", {10, 0, false}, "ws://box:8462/stream?start=10"},
        {"http://box:8462", {10, 0, false}, "ws://box:8462/stream?start=10"},
        {"https://box", {10, 0, false}, "wss://box/stream?start=10"},
        {"ws://box/custom", {1, 0, false}, "ws://box/custom?start=1"},
        {"ws://box", {4, 9, true}, "ws://box/stream?end=9&start=4"},
        {"ws://box", {7, 7, true}, "ws://box/stream?end=7&start=7"},
        {"ws://box", {0, 0, false}, "ws://box/stream?start=0"},
        /* beyond the Go test: what net/url keeps and re-encodes */
        {"WS://Box:8462", {1, 0, false}, "ws://Box:8462/stream?start=1"},
        {"wss://box", {1, 0, false}, "wss://box/stream?start=1"},
        {"ws://[::1]:8462", {1, 0, false}, "ws://[::1]:8462/stream?start=1"},
        {"ws://user:p%40ss@box", {1, 0, false}, "ws://user:p%40ss@box/stream?start=1"},
        {"ws://box/a%20b/c", {1, 0, false}, "ws://box/a%20b/c?start=1"},
        {"ws://box/a b", {1, 0, false}, "ws://box/a%20b?start=1"},
        {"ws://box/x#frag", {1, 0, false}, "ws://box/x?start=1#frag"},
        {"ws://box?", {1, 0, false}, "ws://box/stream?start=1"},
        {"ws://box/%2F", {1, 0, false}, "ws://box/%2F?start=1"}, /* decodes to "//": kept */
    };
    char got[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        endpoint_of(cases[i].url, cases[i].r, got, sizeof got);
        if (strcmp(got, cases[i].want))
            fail_msg("endpoint(%s) = %s, want %s", cases[i].url, got, cases[i].want);
    }
}

/* 144 */
static void test_endpoint_scrubs_stale_range_params(void **state)
{
    (void)state;
    char got[512];
    endpoint_of("ws://box:8462/stream?start=9&end=5&token=abc", rl_unbounded_range(10), got, sizeof got);
    assert_string_equal(got, "ws://box:8462/stream?start=10&token=abc");
    endpoint_of("ws://box:8462/stream?start=9&end=5&token=abc", rl_bounded_range(2, 3), got, sizeof got);
    assert_string_equal(got, "ws://box:8462/stream?end=3&start=2&token=abc");
}

/* url.Values: sorted keys, values in order, QueryEscape, pairs ParseQuery drops are gone. */
static void test_endpoint_query_encoding(void **state)
{
    (void)state;
    char got[512];
    endpoint_of("ws://box/s?z=1&a=x+y&a=%2F&st%61rt=9&flag&bad=%zz&semi=1;2&tok=a%26b%3Dc", rl_unbounded_range(3),
                got, sizeof got);
    assert_string_equal(got, "ws://box/s?a=x+y&a=%2F&flag=&start=3&tok=a%26b%3Dc&z=1");
    endpoint_of("ws://box?e%20nd=1&end=7", rl_bounded_range(1, 2), got, sizeof got);
    assert_string_equal(got, "ws://box/stream?e+nd=1&end=2&start=1");
}

/* 145 and the exact messages */
static void test_endpoint_rejects(void **state)
{
    (void)state;
    static const struct {
        const char *url;
        rl_range r;
        const char *want;
    } cases[] = {
        {"ftp://box", {1, 0, false}, "remoteledger: url \"ftp://box\" must use ws, wss, http or https"},
        {"ws://", {1, 0, false}, "remoteledger: url \"ws://\" has no host"},
        {"ws://[::1", {1, 0, false}, "remoteledger: invalid url \"ws://[::1\": parse \"ws://[::1\": missing ']' in host"},
        {"ws://box", {MAXU32, 0, false},
         "remoteledger: range [4294967295,latest) reaches ledger 4294967295, the last representable sequence"},
        {"ws://box", {5, MAXU32, true},
         "remoteledger: range [5,4294967295] reaches ledger 4294967295, the last representable sequence"},
        {"ws://box", {MAXU32, MAXU32, true},
         "remoteledger: range [4294967295,4294967295] reaches ledger 4294967295, the last representable sequence"},
        {"ws://box", {9, 4, true}, "remoteledger: range [9,4] ends before it starts"},
        {"box:8462", {1, 0, false}, "remoteledger: url \"box:8462\" must use ws, wss, http or https"},
        {"localhost", {1, 0, false}, "remoteledger: url \"localhost\" must use ws, wss, http or https"},
        {"ws:box", {1, 0, false}, "remoteledger: url \"ws:box\" has no host"},
        /* Quoted as Go's %q does: a non-printing rune (U+00A0) is escaped, not copied. */
        {"ws:\xc2\xa0", {1, 0, false}, "remoteledger: url \"ws:\\u00a0\" has no host"},
        {"ws://box:80x", {1, 0, false},
         "remoteledger: invalid url \"ws://box:80x\": parse \"ws://box:80x\": invalid port \":80x\" after host"},
        {"ws://b%zzx", {1, 0, false},
         "remoteledger: invalid url \"ws://b%zzx\": parse \"ws://b%zzx\": invalid URL escape \"%zz\""},
        {"ws://b x", {1, 0, false},
         "remoteledger: invalid url \"ws://b x\": parse \"ws://b x\": invalid character \" \" in host name"},
        {"ws://box\n", {1, 0, false},
         "remoteledger: invalid url \"ws://box\\n\": parse \"ws://box\\n\": net/url: invalid control character in URL"},
        {":8462", {1, 0, false}, "remoteledger: invalid url \":8462\": parse \":8462\": missing protocol scheme"},
        {"", {1, 0, false}, "remoteledger: url \"\" must use ws, wss, http or https"},
        {"ws://box/p%", {1, 0, false},
         "remoteledger: invalid url \"ws://box/p%\": parse \"ws://box/p%\": invalid URL escape \"%\""},
    };
    char got[1024];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int kind = endpoint_error(cases[i].url, cases[i].r, got, sizeof got);
        if (kind != RL_ERR_INVALID || strcmp(got, cases[i].want))
            fail_msg("endpoint(%s): kind %d \"%s\", want \"%s\"", cases[i].url, kind, got, cases[i].want);
    }
}

static void test_url_dial_target(void **state)
{
    (void)state;
    rli_url u;
    cs_err err;
    assert_int_equal(rli_url_parse(&u, "wss://[::1]:9443/x?y=1", &err), 0);
    assert_true(u.tls);
    assert_string_equal(u.hostname, "::1");
    assert_int_equal(u.port, 9443);
    assert_string_equal(u.host, "[::1]:9443");
    rli_url_free(&u);
    assert_int_equal(rli_url_parse(&u, "https://box", &err), 0);
    assert_int_equal(u.port, 443);
    assert_string_equal(u.hostname, "box");
    rli_url_free(&u);
    assert_int_equal(rli_url_parse(&u, "http://box:", &err), 0);
    assert_false(u.tls);
    assert_int_equal(u.port, 80);
    rli_url_free(&u);
    assert_int_equal(rli_url_parse(&u, "ws://box:99999", &err), 0);
    assert_int_equal(u.port, -1);
    rli_url_free(&u);
}

static void test_range_format(void **state)
{
    (void)state;
    char b[64];
    rli_range_format(rl_bounded_range(7, 9), b, sizeof b);
    assert_string_equal(b, "[7,9]");
    rli_range_format(rl_unbounded_range(3), b, sizeof b);
    assert_string_equal(b, "[3,latest)");
    rli_range_format(rl_single_ledger_range(5), b, sizeof b);
    assert_string_equal(b, "[5,5]");
}

/* 143 */
static void test_read_limit_is_chunk_sized(void **state)
{
    (void)state;
    assert_int_equal(rli_read_limit(CS_MAX_CHUNK_SIZE), 8388619);
    assert_int_equal(rli_read_limit(64 << 10), 65547);
    assert_int_equal(rli_read_limit(0), 8388619);
    assert_int_equal(rli_read_limit(-1), -1);
    assert_int_equal(rli_read_limit(10), 263); /* never below the longest message but a CHUNK, a SIG */
    int64_t big = rli_read_limit(INT64_MAX);
    assert_true(big > 0);
    assert_true(big + 1 > 0);
    assert_int_equal(big, INT64_MAX - 1);
    assert_int_equal(rli_read_limit(INT64_MAX - 12), INT64_MAX - 1);
    assert_int_equal(rli_expand_bound(0), 8388608);
    assert_int_equal(rli_expand_bound(-5), 8388608);
    assert_int_equal(rli_expand_bound(4096), 4096);
    assert_int_equal(rli_expand_bound(INT64_MAX), 8388608);
}

/* 146 */
static void test_rejects_ceiling_range_before_dialing(void **state)
{
    (void)state;
    collected c = {0};
    drain_url("ws://127.0.0.1:1", NULL, rl_bounded_range(5, MAXU32), &c);
    expect(&c, RL_ERR_INVALID, 0);
    assert_null(strstr(c.err, "dial"));
    assert_string_equal(c.err,
                        "remoteledger: range [5,4294967295] reaches ledger 4294967295, the last representable sequence");
    rl_stream_free(c.s);
}

/* ==== options and names ======================================================================= */

static void test_names_and_defaults(void **state)
{
    (void)state;
    assert_string_equal(rl_result_name(RL_OK), "RL_OK");
    assert_string_equal(rl_result_name(RL_ERR_GAP), "RL_ERR_GAP");
    assert_string_equal(rl_result_name(RL_ERR_NOMEM), "RL_ERR_NOMEM");
    assert_string_equal(rl_result_name((rl_result)99), "RL_ERR_UNKNOWN");
    /* rl_options_init is the zero struct with its size: zero means "the default" everywhere. */
    rl_options o;
    memset(&o, 0xAB, sizeof o);
    rl_options_init(&o);
    assert_int_equal(o.struct_size, sizeof o);
    assert_int_equal(o.max_message_size, 0);
    assert_int_equal(o.max_chunk_size, 0);
    assert_int_equal(o.dial_timeout_ns, 0);
    assert_null(o.observer);
    assert_null(o.bearer_token);
    assert_false(o.tls_insecure_skip_verify);
    assert_int_equal(RL_DEFAULT_MAX_MESSAGE_SIZE, 268435456);
    assert_int_equal(RL_DEFAULT_MAX_CHUNK_SIZE, 8388608);
    assert_int_equal(RL_DEFAULT_DIAL_TIMEOUT_NS, 30000000000LL);
    rl_range r = rl_bounded_range(3, 4);
    assert_true(r.bounded);
    r = rl_unbounded_range(3);
    assert_false(r.bounded);
    r = rl_single_ledger_range(8);
    assert_true(r.bounded && r.from == 8 && r.to == 8);
    rl_stream_free(NULL);
}

/* ==== GET /healthz (healthz.c) ================================================================ */

static void expect_hz(const char *answer, bool eof, rli_hz_status want, int status, uint32_t o, uint32_t l,
                      const char *why)
{
    size_t n = strlen(answer);
    char *copy = malloc(n ? n : 1); /* exact size: ASan sees a read past it */
    memcpy(copy, answer, n);
    int st = 0;
    uint32_t oldest = 7, latest = 7;
    const char *w = NULL;
    rli_hz_status got = rli_hz_parse(copy, n, eof, &st, &oldest, &latest, &w);
    free(copy);
    if (got != want)
        fail_msg("%s: status %d (%s), want %d", answer, got, w ? w : "", want);
    if (want == RLI_HZ_DONE) {
        assert_int_equal(st, status);
        if (status == 200) {
            assert_int_equal(oldest, o);
            assert_int_equal(latest, l);
        }
    }
    if (why)
        assert_string_equal(w, why);
}

static void test_healthz_parse(void **state)
{
    (void)state;
    char *t = rli_hz_target("/stream");
    assert_string_equal(t, "/healthz");
    free(t);
    t = rli_hz_target("/core/stream");
    assert_string_equal(t, "/core/healthz");
    free(t);
    t = rli_hz_target("/core/");
    assert_string_equal(t, "/core/healthz");
    free(t);
    t = rli_hz_target("");
    assert_string_equal(t, "/healthz");
    free(t);
    char req[256];
    rli_hz_request(req, sizeof req, "/healthz", "box:8462", "tok");
    assert_string_equal(req, "GET /healthz HTTP/1.1\r\nHost: box:8462\r\nAccept: application/json\r\n"
                             "Authorization: Bearer tok\r\nConnection: close\r\n\r\n");
    assert_int_equal(rli_hz_request(NULL, 0, "/healthz", "b", NULL), strlen("GET /healthz HTTP/1.1\r\nHost: b\r\n"
                                                                            "Accept: application/json\r\nConnection: close\r\n\r\n"));

    const char *body = "{\"oldest\":16,\"latest\":4294967294,\"subscribers\":1}\n";
    char ok[512];
    snprintf(ok, sizeof ok, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length: %zu\r\n\r\n%s",
             strlen(body), body);
    expect_hz(ok, false, RLI_HZ_DONE, 200, 16, 4294967294u, NULL);
    /* every prefix is "more", or a failure once the stream has ended */
    for (size_t k = 0; k < strlen(ok); k++) {
        char pre[512];
        memcpy(pre, ok, k);
        pre[k] = 0;
        expect_hz(pre, false, RLI_HZ_MORE, 0, 0, 0, NULL);
        expect_hz(pre, true, RLI_HZ_FAILED, 0, 0, 0, NULL);
    }
    /* without a length the body runs to the end of the stream */
    expect_hz("HTTP/1.1 200 OK\r\n\r\n{\"latest\": 9, \"oldest\" : 3}", false, RLI_HZ_MORE, 0, 0, 0, NULL);
    expect_hz("HTTP/1.1 200 OK\r\n\r\n{\"latest\": 9, \"oldest\" : 3}", true, RLI_HZ_DONE, 200, 3, 9, NULL);
    expect_hz("HTTP/1.1 200 OK\r\n\r\n{\"oldest\":0,\"latest\":0}", true, RLI_HZ_DONE, 200, 0, 0, NULL);
    /* another status: the body does not matter */
    expect_hz("HTTP/1.1 401 Unauthorized\r\nContent-Length: 100\r\n\r\n", false, RLI_HZ_DONE, 401, 0, 0, NULL);
    /* what is wrong is said */
    expect_hz("HTTP/1.1 200 OK\r\n\r\n{\"oldest\":3}", true, RLI_HZ_FAILED, 0, 0, 0,
              "the answer has no \"oldest\" and \"latest\" numbers");
    expect_hz("HTTP/1.1 200 OK\r\n\r\n{\"oldest\":3,\"latest\":4294967296}", true, RLI_HZ_FAILED, 0, 0, 0, NULL);
    expect_hz("HTTP/1.1 200 OK\r\n\r\n{\"oldest\":-3,\"latest\":4}", true, RLI_HZ_FAILED, 0, 0, 0, NULL);
    expect_hz("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", false, RLI_HZ_FAILED, 0, 0, 0,
              "the answer's Content-Length is unusable");
    expect_hz("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n{}", false, RLI_HZ_FAILED, 0, 0, 0,
              "the answer's Content-Length is unusable");
    expect_hz("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", false, RLI_HZ_FAILED, 0, 0, 0,
              NULL);
    expect_hz("SSH-2.0-OpenSSH\r\n\r\n", true, RLI_HZ_FAILED, 0, 0, 0, "the answer is not HTTP");
    expect_hz("", true, RLI_HZ_FAILED, 0, 0, 0, "the server closed without answering");
    /* the numbers of the first "oldest" key with a colon count; a key inside a string value does not fool it
     * into reading past the body */
    expect_hz("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{\"oldest\":1}{\"latest\":2}", false, RLI_HZ_FAILED, 0, 0,
              0, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endpoint),
        cmocka_unit_test(test_endpoint_scrubs_stale_range_params),
        cmocka_unit_test(test_endpoint_query_encoding),
        cmocka_unit_test(test_endpoint_rejects),
        cmocka_unit_test(test_url_dial_target),
        cmocka_unit_test(test_range_format),
        cmocka_unit_test(test_read_limit_is_chunk_sized),
        cmocka_unit_test(test_healthz_parse),
        cmocka_unit_test(test_rejects_ceiling_range_before_dialing),
        cmocka_unit_test(test_names_and_defaults),
    };
    return RLSUITE_RUN(tests);
}
