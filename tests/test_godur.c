/* SPDX-License-Identifier: Apache-2.0 */
/* Go time.ParseDuration and Duration.String, checked against values and messages Go produces. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "common/godur.h"

static void check_ok(const char *s, cs_dur want)
{
    cs_err err = {0};
    cs_dur got = 12345; /* a value no case expects, so a silent no-op shows up */
    if (cs_dur_parse(s, &got, &err) != 0)
        fail_msg("parse(\"%s\") failed: %s", s, err.msg);
    if (got != want)
        fail_msg("parse(\"%s\") = %lld, want %lld", s, (long long)got, (long long)want);
}

static void check_err(const char *s, const char *want)
{
    cs_err err = {0};
    cs_dur got = 0;
    assert_int_equal(cs_dur_parse(s, &got, &err), -1);
    assert_string_equal(err.msg, want);
}

static void parse_good(void **state)
{
    (void)state;
    check_ok("7500us", 7500 * CS_US);
    check_ok("1m30s", 90 * CS_SEC);
    check_ok("1.5h", 5400 * CS_SEC);
    check_ok("-1.5h", -5400 * CS_SEC);
    check_ok("+5s", 5 * CS_SEC);
    check_ok("-1ms", -CS_MS);
    check_ok("1h2m3.5s", 3723 * CS_SEC + 500 * CS_MS);
    check_ok("3\xc2\xb5s", 3 * CS_US); /* U+00B5 micro sign */
    check_ok("3\xce\xbcs", 3 * CS_US); /* U+03BC Greek mu */
    check_ok("15ns", 15);
    check_ok("0", 0);
    check_ok("+0", 0);
    check_ok("-0", 0);
    check_ok("0s", 0);
    check_ok(".5s", 500 * CS_MS);
    check_ok("1.s", CS_SEC);
    check_ok("1.001us", 1001);
    check_ok("2s1ms", 2 * CS_SEC + CS_MS);
    check_ok("1s1s", 2 * CS_SEC);                 /* units may repeat */
    check_ok("1.123456789123s", 1123456789);      /* sub-ns digits are truncated */
    check_ok("0.0000000001s", 0);                 /* below a nanosecond */
    check_ok("1.00000000000000000000000001s", CS_SEC);  /* 26 fraction digits */
    check_ok("0.12345678950000000000000s", 123456789); /* precision stops past 19 digits */
    check_ok("9223372036854775807ns", INT64_MAX);
    check_ok("-9223372036854775808ns", INT64_MIN);
    check_ok("2562047h47m16.854775807s", INT64_MAX);
}

static void parse_bad(void **state)
{
    (void)state;
    check_err("", "time: invalid duration \"\"");
    check_err("1", "time: missing unit in duration \"1\"");
    check_err("abc", "time: invalid duration \"abc\"");
    check_err("1q", "time: unknown unit \"q\" in duration \"1q\"");
    check_err("--1s", "time: invalid duration \"--1s\"");
    check_err(".", "time: invalid duration \".\"");
    check_err(".s", "time: invalid duration \".s\"");
    check_err("-", "time: invalid duration \"-\"");
    check_err("+", "time: invalid duration \"+\"");
    check_err("00", "time: missing unit in duration \"00\"");
    check_err("1s2", "time: missing unit in duration \"1s2\"");
    check_err("1.5.5s", "time: missing unit in duration \"1.5.5s\"");
    check_err(" 1s", "time: invalid duration \" 1s\"");
    check_err("1 s", "time: unknown unit \" s\" in duration \"1 s\"");
    check_err("1S", "time: unknown unit \"S\" in duration \"1S\"");
    check_err("1sec", "time: unknown unit \"sec\" in duration \"1sec\"");
    /* time's own quoting: every byte of a non-ASCII or control character becomes \xNN. */
    check_err("3\xc2\xb5q", "time: unknown unit \"\\xc2\\xb5q\" in duration \"3\\xc2\\xb5q\"");
    check_err("1s\"", "time: unknown unit \"s\\\"\" in duration \"1s\\\"\"");
    check_err("x\\\t", "time: invalid duration \"x\\\\\\x09\"");
    check_err("1\xffs", "time: unknown unit \"\\xffs\" in duration \"1\\xffs\"");
    /* Overflow, in each place Go checks it. */
    check_err("9223372036854775808ns", "time: invalid duration \"9223372036854775808ns\"");
    check_err("99999999999999999999ns", "time: invalid duration \"99999999999999999999ns\"");
    check_err("2562048h", "time: invalid duration \"2562048h\"");
    check_err("2562047h47m16.854775808s", "time: invalid duration \"2562047h47m16.854775808s\"");
    check_err("-9223372036854775809ns", "time: invalid duration \"-9223372036854775809ns\"");
    check_err("9223372036854775807ns1ns", "time: invalid duration \"9223372036854775807ns1ns\"");
}

static void parse_error_leaves_output(void **state)
{
    (void)state;
    cs_dur d = 42;
    assert_int_equal(cs_dur_parse("1q", &d, NULL), -1); /* a NULL err is allowed */
    assert_int_equal(d, 42);
}

static void check_fmt(cs_dur d, const char *want)
{
    char buf[CS_DUR_STR_MAX];
    memset(buf, 'X', sizeof buf);
    char *got = cs_dur_format(d, buf, sizeof buf);
    assert_ptr_equal(got, buf);
    if (strcmp(got, want) != 0)
        fail_msg("format(%lld) = \"%s\", want \"%s\"", (long long)d, got, want);
}

static void format_table(void **state)
{
    (void)state;
    check_fmt(0, "0s");
    check_fmt(1, "1ns");
    check_fmt(999, "999ns");
    check_fmt(1000, "1\xc2\xb5s");
    check_fmt(1500, "1.5\xc2\xb5s");
    check_fmt(1001, "1.001\xc2\xb5s");
    check_fmt(2 * CS_MS, "2ms");
    check_fmt(7500 * CS_US, "7.5ms");
    check_fmt(15 * CS_MS, "15ms");
    check_fmt(1000001, "1.000001ms");
    check_fmt(999999999, "999.999999ms");
    check_fmt(CS_SEC, "1s");
    check_fmt(1500 * CS_MS, "1.5s");
    check_fmt(CS_SEC + 1, "1.000000001s");
    check_fmt(60 * CS_SEC, "1m0s");
    check_fmt(90 * CS_SEC, "1m30s");
    check_fmt(3600 * CS_SEC, "1h0m0s");
    check_fmt(3661 * CS_SEC, "1h1m1s");
    check_fmt(3723 * CS_SEC + 500 * CS_MS, "1h2m3.5s");
    check_fmt(-1, "-1ns");
    check_fmt(-2500 * CS_MS, "-2.5s");
    check_fmt(-1500, "-1.5\xc2\xb5s");
    check_fmt(INT64_MAX, "2562047h47m16.854775807s");
    check_fmt(INT64_MIN, "-2562047h47m16.854775808s");
}

static void format_truncates(void **state)
{
    (void)state;
    char buf[5];
    assert_string_equal(cs_dur_format(3600 * CS_SEC, buf, sizeof buf), "1h0m");
    char one = 'X';
    cs_dur_format(CS_SEC, &one, 1);
    assert_int_equal(one, '\0');
    one = 'X';
    cs_dur_format(CS_SEC, &one, 0); /* nothing written */
    assert_int_equal(one, 'X');
}

static void round_trip_one(cs_dur d)
{
    char buf[CS_DUR_STR_MAX];
    cs_dur back = d == 0 ? 1 : 0;
    cs_err err = {0};
    cs_dur_format(d, buf, sizeof buf);
    if (cs_dur_parse(buf, &back, &err) != 0)
        fail_msg("parse(format(%lld) = \"%s\"): %s", (long long)d, buf, err.msg);
    if (back != d)
        fail_msg("round trip %lld -> \"%s\" -> %lld", (long long)d, buf, (long long)back);
}

static void round_trips(void **state)
{
    (void)state;
    static const cs_dur fixed[] = {0,         1,         -1,        999,       1000,
                                   1001,      CS_MS - 1, CS_MS,     CS_SEC - 1, CS_SEC,
                                   CS_SEC + 1, 59 * CS_SEC, 3600 * CS_SEC, INT64_MAX, INT64_MIN,
                                   INT64_MIN + 1};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        round_trip_one(fixed[i]);
    /* A spread over every magnitude: xorshift values shifted down by 0..63 bits. */
    uint64_t x = 0x9E3779B97F4A7C15u;
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t u = x >> (i % 64);
        round_trip_one((cs_dur)(i % 2 ? 0 - u : u));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_good),
        cmocka_unit_test(parse_bad),
        cmocka_unit_test(parse_error_leaves_output),
        cmocka_unit_test(format_table),
        cmocka_unit_test(format_truncates),
        cmocka_unit_test(round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
