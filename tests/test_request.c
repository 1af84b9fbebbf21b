/* SPDX-License-Identifier: Apache-2.0 */
/* The /stream query rules (PORTSPEC 1.5; catalogue 117): the parsed subscription and the exact 400
 * bodies, in the prototype's order of checks. The parser takes the decoded query pairs in order,
 * as "name=value" strings. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "corestream/wire.h"
#include "common/tokenlist.h"
#include "corestreamd/net/request.h"

#define NARGS(a) (sizeof(a) / sizeof((a)[0]))

/* Parses the pairs and expects success with the given request. */
static bool has_token(const char *list, const char *token)
{
    return cs_list_has_token(list, strlen(list), token);
}

static void expect_ok(const char *const *args, size_t n, uint32_t start, uint32_t end, bool bounded)
{
    cs_stream_request r;
    memset(&r, 0xa5, sizeof r);
    cs_stream_error err = {{0}};
    int rc = cs_stream_request_parse(args, n, &r, &err);
    if (rc != 0)
        fail_msg("parse of %zu pair(s) starting %s failed: %s", n, n ? args[0] : "(none)", err.body);
    if (r.start != start || r.end != end || r.bounded != bounded)
        fail_msg("parse of %zu pair(s) starting %s = {%u,%u,%d}, want {%u,%u,%d}", n,
                 n ? args[0] : "(none)", r.start, r.end, r.bounded, start, end, bounded);
}

/* Parses the pairs and expects the exact 400 body (without its trailing newline). */
static void expect_err(const char *const *args, size_t n, const char *want)
{
    cs_stream_request r;
    cs_stream_error err = {{0}};
    int rc = cs_stream_request_parse(args, n, &r, &err);
    if (rc != -1)
        fail_msg("parse of %zu pair(s) starting %s returned %d, want -1 with %s", n, args[0], rc, want);
    if (strcmp(err.body, want) != 0)
        fail_msg("parse of %zu pair(s) starting %s: error\n  %s\nwant\n  %s", n, args[0], err.body, want);
    /* A NULL err is allowed and still fails. */
    assert_int_equal(cs_stream_request_parse(args, n, &r, NULL), -1);
}

#define OK(start, end, bounded, ...)                                                               \
    do {                                                                                           \
        const char *a_[] = {__VA_ARGS__};                                                          \
        expect_ok(a_, NARGS(a_), (start), (end), (bounded));                                       \
    } while (0)

#define ERR(want, ...)                                                                             \
    do {                                                                                           \
        const char *a_[] = {__VA_ARGS__};                                                          \
        expect_err(a_, NARGS(a_), (want));                                                         \
    } while (0)

#define CEILING "ledger 4294967295 is the last representable sequence and is not streamable"

/* ---- 117: TestParseStreamRequest ---- */

static void test_parse_stream_request(void **state)
{
    (void)state;
    expect_ok(NULL, 0, 0, 0, false); /* empty → tip */
    OK(7, 0, false, "start=7");
    OK(7, 9, true, "start=7", "end=9");
    OK(0, 9, true, "end=9"); /* end alone: a bounded tip subscription */
    OK(0, 0, false, "start=", "end="); /* blank values → tip */

    ERR("end 4 is before start 9", "start=9", "end=4");
    ERR("invalid end parameter: 0", "end=0");
    ERR("invalid start parameter \"x\"", "start=x");
    ERR("invalid end parameter \"x\"", "end=x");
    ERR("invalid start parameter \"4294967296\"", "start=4294967296");
    ERR("invalid end parameter \"4294967296\"", "end=4294967296");
    ERR(CEILING, "start=4294967295");
    ERR(CEILING, "end=4294967295");
}

/* sig=1 asks for signed ledgers' SIG messages; 0 or blank does not; anything else is a 400 after
 * the range's checks. */
static void test_sig_parameter(void **state)
{
    (void)state;
    const char *on[] = {"start=7", "sig=1"}, *off[] = {"sig=0"}, *blank[] = {"sig="}, *first[] = {"sig=1", "sig=x"};
    cs_stream_request r;
    assert_int_equal(cs_stream_request_parse(on, 2, &r, NULL), 0);
    assert_true(r.sig && r.start == 7);
    assert_int_equal(cs_stream_request_parse(off, 1, &r, NULL), 0);
    assert_false(r.sig);
    assert_int_equal(cs_stream_request_parse(blank, 1, &r, NULL), 0);
    assert_false(r.sig);
    assert_int_equal(cs_stream_request_parse(first, 2, &r, NULL), 0);
    assert_true(r.sig);
    expect_ok(off, 1, 0, 0, false);
    ERR("invalid sig parameter \"yes\"", "sig=yes");
    ERR("invalid start parameter \"x\"", "sig=yes", "start=x");
}

/* ---- the 400 bodies of PORTSPEC 1.5, in order ---- */

static void test_the_five_messages(void **state)
{
    (void)state;
    ERR("invalid start parameter \"abc\"", "start=abc");
    ERR("invalid end parameter \"xyz\"", "end=xyz");
    ERR("invalid end parameter: 0", "end=0");
    ERR(CEILING, "start=4294967295");
    ERR(CEILING, "end=4294967295");
    ERR(CEILING, "start=4294967295", "end=4294967295");
    ERR("end 4 is before start 9", "start=9", "end=4");
}

static void test_order_of_checks(void **state)
{
    (void)state;
    /* 1 before 2, whichever pair comes first in the query. */
    ERR("invalid start parameter \"abc\"", "start=abc", "end=xyz");
    ERR("invalid start parameter \"abc\"", "end=xyz", "start=abc");
    /* 1 before 3. */
    ERR("invalid start parameter \"abc\"", "start=abc", "end=0");
    ERR("invalid start parameter \"abc\"", "end=0", "start=abc");
    /* 1 before 4 (an unparseable start with the ceiling as end). */
    ERR("invalid start parameter \"abc\"", "start=abc", "end=4294967295");
    /* 2 before 4. */
    ERR("invalid end parameter \"xyz\"", "start=4294967295", "end=xyz");
    ERR("invalid end parameter \"4294967296\"", "start=4294967295", "end=4294967296");
    /* 3 before 4. */
    ERR("invalid end parameter: 0", "start=4294967295", "end=0");
    ERR("invalid end parameter: 0", "end=0", "start=4294967295");
    /* 4 before 5: the ceiling is reported rather than end < start. */
    ERR(CEILING, "start=4294967295", "end=3");
    ERR(CEILING, "end=3", "start=4294967295");
    /* 3 with a start of 0 is still 3 (end=0 is never "before" anything). */
    ERR("invalid end parameter: 0", "start=0", "end=0");
    ERR("invalid end parameter: 0", "start=5", "end=0");
}

static void test_bounds(void **state)
{
    (void)state;
    OK(4294967294u, 0, false, "start=4294967294");
    OK(0, 4294967294u, true, "end=4294967294");
    OK(4294967294u, 4294967294u, true, "start=4294967294", "end=4294967294");
    OK(1, 4294967294u, true, "start=1", "end=4294967294");
    OK(9, 9, true, "start=9", "end=9"); /* a single ledger */
    OK(1, 1, true, "start=1", "end=1");
    OK(0, 1, true, "end=1");
    OK(0, 5, true, "start=0", "end=5"); /* start 0 with an end is allowed */
    OK(0, 0, false, "start=0");        /* start 0 is the tip */
    ERR("end 8 is before start 9", "start=9", "end=8");
    ERR("end 1 is before start 4294967294", "start=4294967294", "end=1");
}

static void test_first_value_wins(void **state)
{
    (void)state;
    OK(5, 0, false, "start=5", "start=abc");
    ERR("invalid start parameter \"abc\"", "start=abc", "start=5");
    OK(0, 9, true, "end=9", "end=0");
    ERR("invalid end parameter: 0", "end=0", "end=9");
    OK(3, 9, true, "start=3", "end=9", "start=12", "end=1");
    /* An empty first value means absent, even with a later value (Go's Query().Get). */
    OK(0, 0, false, "start=", "start=5");
    OK(0, 0, false, "end=", "end=0");
    OK(0, 0, false, "end=", "end=xyz");
    /* A bare name is an empty value. */
    OK(0, 0, false, "start", "end");
    OK(0, 0, false, "start", "start=7");
    OK(7, 0, false, "start=7", "start");
}

static void test_other_parameters_are_ignored(void **state)
{
    (void)state;
    OK(0, 0, false, "token=abc");
    OK(7, 0, false, "token=abc", "start=7", "x=");
    OK(0, 0, false, "startx=abc", "xstart=abc", "Start=abc", "START=1", "ends=0", "en=0");
    OK(0, 0, false, "=start", "=");
    OK(4, 6, true, "start_=1", "start=4", "end=6", "end_=0");
}

static void test_value_syntax(void **state)
{
    (void)state;
    /* Leading zeros are fine. */
    OK(7, 0, false, "start=007");
    OK(0, 9, true, "end=0009");
    OK(0, 0, false, "start=0000");
    OK(10, 12, true, "start=00000000000000000010", "end=012");
    OK(4294967294u, 0, false, "start=0004294967294");
    ERR(CEILING, "start=04294967295");
    ERR("invalid end parameter: 0", "end=000");

    /* Base-10 digits only: no sign, no spaces, no hex, no separators, no overflow. */
    static const char *const bad[] = {
        "+5", " 5", "5 ", "0x10", "-1", "-0", "4294967296", "99999999999999999999", "1_000", "1e3",
        "5.0", "٣", "5\t", "0b1", "0o7", "\x01",
    };
    static const char *const want[] = {
        "\"+5\"", "\" 5\"", "\"5 \"", "\"0x10\"", "\"-1\"", "\"-0\"", "\"4294967296\"",
        "\"99999999999999999999\"", "\"1_000\"", "\"1e3\"", "\"5.0\"", "\"٣\"", "\"5\\t\"", "\"0b1\"",
        "\"0o7\"", "\"\\x01\"",
    };
    _Static_assert(NARGS(bad) == NARGS(want), "one message per value");
    for (size_t i = 0; i < NARGS(bad); i++) {
        char pair[64], msg[128];
        snprintf(pair, sizeof pair, "start=%s", bad[i]);
        snprintf(msg, sizeof msg, "invalid start parameter %s", want[i]);
        const char *a1[] = {pair};
        expect_err(a1, 1, msg);
        snprintf(pair, sizeof pair, "end=%s", bad[i]);
        snprintf(msg, sizeof msg, "invalid end parameter %s", want[i]);
        const char *a2[] = {pair};
        expect_err(a2, 1, msg);
    }
    /* The value is everything after the first '=', quoted like Go's %q. */
    ERR("invalid start parameter \"5=6\"", "start=5=6");
    ERR("invalid end parameter \"a\\\"b\\\\c\"", "end=a\"b\\c");
    ERR("invalid start parameter \"\\n\"", "start=\n");
    ERR("invalid start parameter \"\\xff\"", "start=\xff");
}

/* The 400 body carries the whole offending value, however long. */
static void test_long_values_are_quoted_whole(void **state)
{
    (void)state;
    char value[601], pair[700], want[700];
    memset(value, '9', sizeof value - 1);
    value[sizeof value - 1] = '\0';
    snprintf(pair, sizeof pair, "start=%s", value);
    snprintf(want, sizeof want, "invalid start parameter \"%s\"", value);
    const char *a[] = {pair};
    expect_err(a, 1, want);
}

/* Regression (fuzz_request): past 1 KiB of quoted value the body used to be cut, mid-escape, at
 * cs_err's message size. A whole query of control bytes quotes to four times its length. */
static void test_values_past_the_error_cap_are_quoted_whole(void **state)
{
    (void)state;
    enum { N = CS_QUERY_MAX - 7 }; /* "start=" and the NUL fill the rest of the query */
    static char pair[CS_QUERY_MAX], want[CS_STREAM_BODY_MAX];
    memcpy(pair, "start=", 6);
    memset(pair + 6, 0x01, N);
    pair[6 + N] = '\0';
    int k = snprintf(want, sizeof want, "invalid start parameter \"");
    for (int i = 0; i < N; i++)
        k += snprintf(want + k, sizeof want - (size_t)k, "\\x01");
    snprintf(want + k, sizeof want - (size_t)k, "\"");
    const char *a[] = {pair};
    expect_err(a, 1, want);
}

/* ---- Origin against Host (403) ---- */

static void expect_origin(const char *origin, const char *host, const char *want)
{
    char msg[1024];
    int rc = cs_check_origin(origin, host, msg, sizeof msg);
    if (!want) {
        assert_int_equal(rc, 0);
        return;
    }
    assert_int_equal(rc, -1);
    assert_string_equal(msg, want);
}

static void test_origin_must_match_host(void **state)
{
    (void)state;
    expect_origin("", "localhost:8462", NULL); /* no Origin: not a browser */
    expect_origin("http://localhost:8462", "localhost:8462", NULL);
    expect_origin("https://LocalHost:8462/some/page", "localhost:8462", NULL);
    expect_origin("http://evil.example", "localhost:8462",
                  "request Origin \"http://evil.example\" is not authorized for Host \"localhost:8462\"");
    expect_origin("http://localhost:8462.evil", "localhost:8462",
                  "request Origin \"http://localhost:8462.evil\" is not authorized for Host \"localhost:8462\"");
    expect_origin("evil.example", "localhost",
                  "request Origin \"evil.example\" is not a valid URL with a host");
    /* Cut like snprintf when msg is short. */
    char small[9];
    assert_int_equal(cs_check_origin("null", "h", small, sizeof small), -1);
    assert_string_equal(small, "request ");
}

/* The handshake rules (issue 10), first failure wins, in coder/websocket's order. */
static void expect_refusal(const char *method, const char *version, const char *conn, const char *upg,
                           const char *wsv, const char *const *keys, size_t nkeys, unsigned status,
                           const char *body)
{
    cs_upgrade_request r = {method, version, conn, upg, wsv, keys, nkeys};
    cs_upgrade_refusal out;
    if (cs_upgrade_check(&r, &out) != -1)
        fail_msg("accepted; want %u %s", status, body);
    assert_int_equal(out.status, status);
    assert_string_equal(out.body, body);
}

static void test_upgrade_rules(void **state)
{
    (void)state;
    const char *good[] = {"dGhlIHNhbXBsZSBub25jZQ=="}, *two[] = {good[0], good[0]}, *bad[] = {" abc\t"};
    cs_upgrade_request ok = {"GET", "HTTP/1.1", "keep-alive, Upgrade", "WebSocket", "13", good, 1};
    cs_upgrade_refusal out;
    assert_int_equal(cs_upgrade_check(&ok, &out), 0);
    expect_refusal("POST", "HTTP/1.0", "", "", "", NULL, 0, 426,
                   "WebSocket protocol violation: handshake request must be at least HTTP/1.1: \"HTTP/1.0\"");
    expect_refusal("POST", "HTTP/1.1", "close", "", "", NULL, 0, 426,
                   "WebSocket protocol violation: Connection header \"close\" does not contain Upgrade");
    expect_refusal("POST", "HTTP/1.1", "upgrade", "h2c", "", NULL, 0, 426,
                   "WebSocket protocol violation: Upgrade header \"h2c\" does not contain websocket");
    expect_refusal("POST", "HTTP/1.1", "upgrade", "websocket", "", NULL, 0, 405,
                   "WebSocket protocol violation: handshake request method is not GET but \"POST\"");
    expect_refusal("GET", "HTTP/1.1", "upgrade", "websocket", "8", NULL, 0, 400,
                   "unsupported WebSocket protocol version (only 13 is supported): \"8\"");
    expect_refusal("GET", "HTTP/1.1", "upgrade", "websocket", "13", NULL, 0, 400,
                   "WebSocket protocol violation: missing Sec-WebSocket-Key");
    expect_refusal("GET", "HTTP/1.1", "upgrade", "websocket", "13", two, 2, 400,
                   "WebSocket protocol violation: multiple Sec-WebSocket-Key headers");
    expect_refusal("GET", "HTTP/1.1", "upgrade", "websocket", "13", bad, 1, 400,
                   "WebSocket protocol violation: invalid Sec-WebSocket-Key \"abc\", must be a 16 byte base64 "
                   "encoded string");
    /* Offered headers: Connection/Upgrade with the 426s for a missing token, 13 with the version. */
    cs_upgrade_request v8 = {"GET", "HTTP/1.1", "Upgrade", "websocket", "8", good, 1};
    assert_int_equal(cs_upgrade_check(&v8, &out), -1);
    assert_true(out.offer_version && !out.offer_upgrade);
    cs_upgrade_request noconn = {"GET", "HTTP/1.1", "", "websocket", "13", good, 1};
    assert_int_equal(cs_upgrade_check(&noconn, &out), -1);
    assert_true(out.offer_upgrade && !out.offer_version);
}

static void test_header_tokens(void **state)
{
    (void)state;
    assert_true(has_token("Upgrade", "upgrade"));
    assert_true(has_token("keep-alive,  UPGRADE ", "upgrade"));
    assert_true(has_token(",,upgrade", "upgrade"));
    assert_false(has_token("upgraded", "upgrade"));
    assert_false(has_token("", "upgrade"));
    assert_false(has_token("up grade", "upgrade"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_stream_request),
        cmocka_unit_test(test_sig_parameter),
        cmocka_unit_test(test_the_five_messages),
        cmocka_unit_test(test_order_of_checks),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_first_value_wins),
        cmocka_unit_test(test_other_parameters_are_ignored),
        cmocka_unit_test(test_value_syntax),
        cmocka_unit_test(test_long_values_are_quoted_whole),
        cmocka_unit_test(test_values_past_the_error_cap_are_quoted_whole),
        cmocka_unit_test(test_origin_must_match_host),
        cmocka_unit_test(test_upgrade_rules),
        cmocka_unit_test(test_header_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
