/* SPDX-License-Identifier: Apache-2.0 */
/* strconv.Quote and its UTF-8 / printability primitives (common/goquote). Expected strings are
 * Go's fmt.Sprintf("%q", s). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "common/goquote.h"

static void check_quote(const char *in, const char *want)
{
    char buf[256];
    memset(buf, 'X', sizeof buf);
    size_t n = cs_go_quote(buf, sizeof buf, in);
    assert_string_equal(buf, want);
    assert_int_equal(n, strlen(want));
    /* The length alone, with no buffer. */
    assert_int_equal(cs_go_quote(NULL, 0, in), strlen(want));
}

static void test_quote_ascii(void **state)
{
    (void)state;
    check_quote("", "\"\"");
    check_quote("plain", "\"plain\"");
    check_quote("a b=c", "\"a b=c\"");
    check_quote("a\"b\\", "\"a\\\"b\\\\\"");
    check_quote("\n\t\a\b\f\r\v", "\"\\n\\t\\a\\b\\f\\r\\v\"");
    check_quote("\x01", "\"\\x01\"");
    check_quote("\x1b[0m", "\"\\x1b[0m\"");
    check_quote("\x7f", "\"\\x7f\"");
    check_quote("~ !'`", "\"~ !'`\"");
}

/* The counted form: NULs inside are bytes like any other, and nothing past n is read. */
static void test_quote_n(void **state)
{
    (void)state;
    char buf[64];
    const char in[] = {'a', '\0', 'b', '\xc3', '\xa9', 'Z'};
    size_t n = cs_go_quote_n(buf, sizeof buf, in, 5);
    assert_string_equal(buf, "\"a\\x00b\xc3\xa9\"");
    assert_int_equal(n, strlen(buf));
    /* A rune cut by n is invalid bytes, as Go sees a string ending there. */
    cs_go_quote_n(buf, sizeof buf, in, 4);
    assert_string_equal(buf, "\"a\\x00b\\xc3\"");
    assert_int_equal(cs_go_quote_n(NULL, 0, in, 0), 2);
}

static void test_quote_utf8(void **state)
{
    (void)state;
    check_quote("\xc3\xa9", "\"\xc3\xa9\"");                 /* é kept */
    check_quote("caf\xc3\xa9", "\"caf\xc3\xa9\"");
    check_quote("\xf0\x9f\x98\x80", "\"\xf0\x9f\x98\x80\""); /* U+1F600, 4 bytes, kept */
    check_quote("\xc2\xa0", "\"\\u00a0\"");                  /* NO-BREAK SPACE */
    check_quote("\xc2\x85", "\"\\u0085\"");                  /* NEL */
    check_quote("\xc2\xad", "\"\\u00ad\"");                  /* SOFT HYPHEN */
    check_quote("\xe2\x80\xa8", "\"\\u2028\"");              /* LINE SEPARATOR */
    check_quote("\xe2\x80\x8b", "\"\\u200b\"");              /* ZERO WIDTH SPACE */
    check_quote("\xe3\x80\x80", "\"\\u3000\"");              /* IDEOGRAPHIC SPACE */
    check_quote("\xef\xbb\xbf", "\"\\ufeff\"");              /* BOM */
    check_quote("\xee\x80\x80", "\"\\ue000\"");              /* private use */
    check_quote("\xd8\x80", "\"\\u0600\"");                  /* ARABIC NUMBER SIGN (Cf) */
    check_quote("\xef\xbf\xbe", "\"\\ufffe\"");              /* noncharacter */
    check_quote("\xf0\x9f\xbf\xbf", "\"\\U0001ffff\"");      /* noncharacter, plane 1 */
    check_quote("\xf3\xa0\x80\x81", "\"\\U000e0001\"");      /* LANGUAGE TAG */
    check_quote("\xf4\x8f\xbf\xbf", "\"\\U0010ffff\"");      /* U+10FFFF */
    /* A literal U+FFFD is printable. */
    check_quote("\xef\xbf\xbd", "\"\xef\xbf\xbd\"");
}

static void test_quote_invalid(void **state)
{
    (void)state;
    check_quote("\xff", "\"\\xff\"");
    check_quote("a\xff" "b", "\"a\\xffb\"");
    check_quote("\xe2\x82", "\"\\xe2\\x82\"");                    /* truncated */
    check_quote("\xe2\x82x", "\"\\xe2\\x82x\"");                  /* bad continuation */
    check_quote("\xc0\xaf", "\"\\xc0\\xaf\"");                    /* overlong */
    check_quote("\xe0\x80\x80", "\"\\xe0\\x80\\x80\"");           /* overlong */
    check_quote("\xed\xa0\x80", "\"\\xed\\xa0\\x80\"");           /* surrogate */
    check_quote("\xf4\x90\x80\x80", "\"\\xf4\\x90\\x80\\x80\"");  /* > U+10FFFF */
    check_quote("\x80", "\"\\x80\"");                             /* lone continuation */
    check_quote("\xef\xbf\xbd\xbd", "\"\xef\xbf\xbd\\xbd\"");
}

static void test_quote_truncation(void **state)
{
    (void)state;
    const char *in = "a\"\xc3\xa9\n";
    const char *want = "\"a\\\"\xc3\xa9\\n\""; /* 10 bytes */
    size_t full = strlen(want);
    for (size_t len = 1; len <= full + 2; len++) {
        char buf[16];
        memset(buf, 'X', sizeof buf);
        size_t n = cs_go_quote(buf, len, in);
        assert_int_equal(n, full);
        size_t kept = len - 1 < full ? len - 1 : full;
        /* The first len - 1 bytes, cut anywhere (even inside an escape or a rune), then NUL. */
        assert_memory_equal(buf, want, kept);
        assert_int_equal(buf[kept], '\0');
        /* Nothing written past buf[len - 1]. */
        for (size_t i = len; i < sizeof buf; i++)
            assert_int_equal(buf[i], 'X');
    }
    /* len == 0 touches nothing. */
    char c = 'X';
    assert_int_equal(cs_go_quote(&c, 0, in), full);
    assert_int_equal(c, 'X');
    /* len == 1 is just the NUL. */
    assert_int_equal(cs_go_quote(&c, 1, in), full);
    assert_int_equal(c, '\0');
}

static void test_utf8_decode(void **state)
{
    (void)state;
    uint32_t r;
    assert_int_equal(cs_utf8_decode((const unsigned char *)"A", 1, &r), 1);
    assert_int_equal(r, 'A');
    assert_int_equal(cs_utf8_decode((const unsigned char *)"\xc3\xa9", 2, &r), 2);
    assert_int_equal(r, 0xE9);
    assert_int_equal(cs_utf8_decode((const unsigned char *)"\xe2\x80\xa8", 3, &r), 3);
    assert_int_equal(r, 0x2028);
    assert_int_equal(cs_utf8_decode((const unsigned char *)"\xf0\x9f\x98\x80", 4, &r), 4);
    assert_int_equal(r, 0x1F600);
    assert_int_equal(cs_utf8_decode((const unsigned char *)"\xef\xbf\xbd", 3, &r), 3);
    assert_int_equal(r, CS_RUNE_ERROR);
    /* Invalid: RuneError, width 1. */
    static const char *const bad[] = {"\xff", "\x80", "\xc0\xaf", "\xc1\xbf", "\xe0\x9f\xbf",
                                      "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80",
                                      "\xe2\x82", "\xc3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = 0;
        assert_int_equal(cs_utf8_decode((const unsigned char *)bad[i], strlen(bad[i]), &r), 1);
        assert_int_equal(r, CS_RUNE_ERROR);
    }
    /* A valid sequence cut short by n. */
    assert_int_equal(cs_utf8_decode((const unsigned char *)"\xe2\x80\xa8", 2, &r), 1);
    assert_int_equal(r, CS_RUNE_ERROR);
    assert_int_equal(cs_utf8_decode((const unsigned char *)"", 0, &r), 0);
    assert_int_equal(r, CS_RUNE_ERROR);
}

static void test_rune_is_print(void **state)
{
    (void)state;
    assert_true(cs_rune_is_print(' '));
    assert_true(cs_rune_is_print('~'));
    assert_true(cs_rune_is_print('a'));
    assert_false(cs_rune_is_print('\t'));
    assert_false(cs_rune_is_print(0));
    assert_false(cs_rune_is_print(0x7F));
    assert_false(cs_rune_is_print(0x9F));
    assert_false(cs_rune_is_print(0xA0));
    assert_true(cs_rune_is_print(0xA1));
    assert_true(cs_rune_is_print(0xE9));
    assert_false(cs_rune_is_print(0x2028));
    assert_false(cs_rune_is_print(0xD800));
    assert_false(cs_rune_is_print(0xFFFE));
    assert_true(cs_rune_is_print(0xFFFD));
    assert_true(cs_rune_is_print(0x1F600));
    assert_false(cs_rune_is_print(0x10FFFF));
    assert_false(cs_rune_is_print(0x110000));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quote_ascii),     cmocka_unit_test(test_quote_utf8),
        cmocka_unit_test(test_quote_n),
        cmocka_unit_test(test_quote_invalid),   cmocka_unit_test(test_quote_truncation),
        cmocka_unit_test(test_utf8_decode),     cmocka_unit_test(test_rune_is_print),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
