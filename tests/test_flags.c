/* SPDX-License-Identifier: Apache-2.0 */
/* Go flag package semantics: syntax, values, error wording, help, and PrintDefaults output.
 * Expected strings were produced by Go's own flag/strconv/time packages. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "common/flags.h"

/* A flag set shaped like corestreamd's, reset to its defaults before every test. */
static struct {
    const char *listen;
    int64_t retention, chunk;
    uint64_t start;
    bool compress, verbose;
    cs_dur window;
} o;

static cs_flag flag_table[] = {
    {"listen", CS_FLAG_STRING, &o.listen, "TCP address"},
    {"retention", CS_FLAG_INT, &o.retention, "ring size"},
    {"chunk-size", CS_FLAG_INT, &o.chunk, "bytes per chunk"},
    {"start-ledger", CS_FLAG_UINT, &o.start, "first ledger"},
    {"compress", CS_FLAG_BOOL, &o.compress, "compress chunks"},
    {"v", CS_FLAG_BOOL, &o.verbose, "verbose"},
    {"emit-window", CS_FLAG_DURATION, &o.window, "pacing window"},
};
static const cs_flagset fset = {"corestreamd", NULL, flag_table,
                                sizeof flag_table / sizeof flag_table[0]};

static int reset(void **state)
{
    (void)state;
    o.listen = ":8462";
    o.retention = 10000;
    o.chunk = 262144;
    o.start = 0;
    o.compress = true;
    o.verbose = false;
    o.window = 15 * CS_MS;
    return 0;
}

/* Parses a NULL-terminated argv (argv[0] included) against fset. */
static int run(char **argv, int *first, cs_err *err)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    *first = -1;
    memset(err, 0, sizeof *err);
    return cs_flags_parse(&fset, argc, argv, first, err);
}

#define ARGV(...) ((char *[]){"corestreamd", __VA_ARGS__, NULL})

/* Asserts that argv fails with exactly the message want. */
#define EXPECT_ERROR(want, ...)                                                                    \
    do {                                                                                           \
        int first_;                                                                                \
        cs_err err_;                                                                               \
        assert_int_equal(run(ARGV(__VA_ARGS__), &first_, &err_), CS_FLAGS_ERROR);                  \
        assert_string_equal(err_.msg, (want));                                                     \
    } while (0)

static void defaults_without_args(void **state)
{
    (void)state;
    int first;
    cs_err err;
    char *argv[] = {"corestreamd", NULL};
    assert_int_equal(run(argv, &first, &err), CS_FLAGS_OK);
    assert_int_equal(first, 1);
    assert_string_equal(o.listen, ":8462");
    assert_int_equal(o.retention, 10000);
    assert_true(o.compress);
    assert_int_equal(o.window, 15 * CS_MS);
}

static void single_and_double_dash(void **state)
{
    (void)state;
    int first;
    cs_err err;
    assert_int_equal(run(ARGV("-retention", "5", "--chunk-size", "4096", "--v"), &first, &err),
                     CS_FLAGS_OK);
    assert_int_equal(o.retention, 5);
    assert_int_equal(o.chunk, 4096);
    assert_true(o.verbose);
    assert_int_equal(first, 6);
}

static void equals_and_separate_value(void **state)
{
    (void)state;
    int first;
    cs_err err;
    assert_int_equal(run(ARGV("-listen=:1", "--retention=7", "-emit-window", "2ms"), &first, &err),
                     CS_FLAGS_OK);
    assert_string_equal(o.listen, ":1");
    assert_int_equal(o.retention, 7);
    assert_int_equal(o.window, 2 * CS_MS);
    /* Only the first '=' splits; an empty value after '=' is a value. */
    assert_int_equal(run(ARGV("-listen=a=b"), &first, &err), CS_FLAGS_OK);
    assert_string_equal(o.listen, "a=b");
    assert_int_equal(run(ARGV("-listen="), &first, &err), CS_FLAGS_OK);
    assert_string_equal(o.listen, "");
    /* The separate value is taken verbatim, even when it looks like a flag. */
    assert_int_equal(run(ARGV("-listen", "-v"), &first, &err), CS_FLAGS_OK);
    assert_string_equal(o.listen, "-v");
    assert_false(o.verbose);
    assert_int_equal(first, 3);
}

static void last_occurrence_wins(void **state)
{
    (void)state;
    int first;
    cs_err err;
    assert_int_equal(run(ARGV("-retention", "1", "--retention=2", "-retention", "3", "-compress=false",
                              "-compress"),
                         &first, &err),
                     CS_FLAGS_OK);
    assert_int_equal(o.retention, 3);
    assert_true(o.compress);
    assert_int_equal(run(ARGV("-compress", "-compress=0"), &first, &err), CS_FLAGS_OK);
    assert_false(o.compress);
}

static void stops_at_first_non_flag(void **state)
{
    (void)state;
    int first;
    cs_err err;
    assert_int_equal(run(ARGV("-retention", "5", "stray", "-retention", "9"), &first, &err),
                     CS_FLAGS_OK);
    assert_int_equal(o.retention, 5);
    assert_int_equal(first, 3);
    /* "-" alone is a positional argument. */
    assert_int_equal(run(ARGV("-v", "-", "-retention", "9"), &first, &err), CS_FLAGS_OK);
    assert_true(o.verbose);
    assert_int_equal(o.retention, 5);
    assert_int_equal(first, 2);
    /* Flags after the first positional are not looked at, even unknown ones. */
    assert_int_equal(run(ARGV("x", "-turbo"), &first, &err), CS_FLAGS_OK);
    assert_int_equal(first, 1);
}

static void double_dash_terminates(void **state)
{
    (void)state;
    int first;
    cs_err err;
    assert_int_equal(run(ARGV("-v", "--", "-retention", "9"), &first, &err), CS_FLAGS_OK);
    assert_int_equal(first, 3); /* "--" itself is consumed */
    assert_int_equal(o.retention, 10000);
    assert_int_equal(run(ARGV("--"), &first, &err), CS_FLAGS_OK);
    assert_int_equal(first, 2);
    /* As the separate value of a non-bool flag, "--" is just a value. */
    assert_int_equal(run(ARGV("-listen", "--", "x"), &first, &err), CS_FLAGS_OK);
    assert_string_equal(o.listen, "--");
    assert_int_equal(first, 3);
}

static void bool_forms(void **state)
{
    (void)state;
    static const char *const yes[] = {"1", "t", "T", "true", "TRUE", "True"};
    static const char *const no[] = {"0", "f", "F", "false", "FALSE", "False"};
    int first;
    cs_err err;
    char arg[32];
    for (size_t i = 0; i < 6; i++) {
        snprintf(arg, sizeof arg, "-compress=%s", no[i]);
        assert_int_equal(run(ARGV(arg), &first, &err), CS_FLAGS_OK);
        assert_false(o.compress);
        snprintf(arg, sizeof arg, "--compress=%s", yes[i]);
        assert_int_equal(run(ARGV(arg), &first, &err), CS_FLAGS_OK);
        assert_true(o.compress);
    }
    /* A bool never consumes the next argument: "false" becomes the first positional. */
    assert_int_equal(run(ARGV("-compress=false", "-compress", "false"), &first, &err), CS_FLAGS_OK);
    assert_true(o.compress);
    assert_int_equal(first, 3);
}

static void bool_invalid(void **state)
{
    (void)state;
    EXPECT_ERROR("invalid boolean value \"yes\" for -compress: parse error", "-compress=yes");
    EXPECT_ERROR("invalid boolean value \"\" for -compress: parse error", "--compress=");
    EXPECT_ERROR("invalid boolean value \"true=1\" for -v: parse error", "-v=true=1");
    EXPECT_ERROR("invalid boolean value \"tRUE\" for -v: parse error", "-v=tRUE");
}

static void unknown_flag(void **state)
{
    (void)state;
    EXPECT_ERROR("flag provided but not defined: -turbo", "--turbo");
    EXPECT_ERROR("flag provided but not defined: -turbo", "-turbo=1");
    EXPECT_ERROR("flag provided but not defined: -Listen", "-Listen", ":1");
    EXPECT_ERROR("flag provided but not defined: -x", "-v", "-x");
}

static void help_requested(void **state)
{
    (void)state;
    int first;
    cs_err err;
    assert_int_equal(run(ARGV("-h"), &first, &err), CS_FLAGS_HELP);
    assert_int_equal(run(ARGV("-help"), &first, &err), CS_FLAGS_HELP);
    assert_int_equal(run(ARGV("--help"), &first, &err), CS_FLAGS_HELP);
    assert_int_equal(run(ARGV("--h"), &first, &err), CS_FLAGS_HELP);
    assert_int_equal(run(ARGV("-h=1"), &first, &err), CS_FLAGS_HELP);
    assert_int_equal(run(ARGV("-v", "-help", "-turbo"), &first, &err), CS_FLAGS_HELP);
    /* An earlier error wins; a help after the flags end is a positional. */
    assert_int_equal(run(ARGV("-turbo", "-h"), &first, &err), CS_FLAGS_ERROR);
    assert_int_equal(run(ARGV("x", "-h"), &first, &err), CS_FLAGS_OK);
    assert_int_equal(run(ARGV("-hh"), &first, &err), CS_FLAGS_ERROR);
    assert_string_equal(err.msg, "flag provided but not defined: -hh");

    /* A flag that is really named "h" is just set. */
    bool h = false;
    cs_flag own[] = {{"h", CS_FLAG_BOOL, &h, "hosts"}};
    const cs_flagset fs = {"p", NULL, own, 1};
    char *argv[] = {"p", "-h", NULL};
    first = -1;
    assert_int_equal(cs_flags_parse(&fs, 2, argv, &first, &err), CS_FLAGS_OK);
    assert_true(h);
    assert_int_equal(first, 2);
}

static void bad_flag_syntax(void **state)
{
    (void)state;
    EXPECT_ERROR("bad flag syntax: ---x", "---x");
    EXPECT_ERROR("bad flag syntax: -=x", "-=x");
    EXPECT_ERROR("bad flag syntax: --=x", "--=x");
    EXPECT_ERROR("bad flag syntax: ---", "-v", "---");
}

static void needs_an_argument(void **state)
{
    (void)state;
    EXPECT_ERROR("flag needs an argument: -listen", "-listen");
    EXPECT_ERROR("flag needs an argument: -retention", "-v", "--retention");
    EXPECT_ERROR("flag needs an argument: -emit-window", "-emit-window");
}

static void integer_values(void **state)
{
    (void)state;
    static const struct {
        const char *arg;
        int64_t want;
    } cases[] = {
        {"0x10", 16}, {"0X10", 16}, {"0o17", 15}, {"0O17", 15}, {"017", 15},  {"1_000", 1000},
        {"0b101", 5}, {"-5", -5},   {"+7", 7},    {"-0x10", -16}, {"0", 0},   {"0x_1F", 31},
    };
    int first;
    cs_err err;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        o.retention = -999;
        if (run(ARGV("-retention", (char *)cases[i].arg), &first, &err) != CS_FLAGS_OK)
            fail_msg("-retention %s: %s", cases[i].arg, err.msg);
        if (o.retention != cases[i].want)
            fail_msg("-retention %s = %lld", cases[i].arg, (long long)o.retention);
    }
    assert_int_equal(run(ARGV("-start-ledger=0x10"), &first, &err), CS_FLAGS_OK);
    assert_int_equal(o.start, 16);
    assert_int_equal(run(ARGV("-start-ledger", "18446744073709551615"), &first, &err), CS_FLAGS_OK);
    assert_true(o.start == UINT64_MAX);
    assert_int_equal(run(ARGV("-retention", "-9223372036854775808"), &first, &err), CS_FLAGS_OK);
    assert_true(o.retention == INT64_MIN);
}

static void duration_values(void **state)
{
    (void)state;
    int first;
    cs_err err;
    assert_int_equal(run(ARGV("-emit-window", "-1ms"), &first, &err), CS_FLAGS_OK);
    assert_int_equal(o.window, -CS_MS);
    assert_int_equal(run(ARGV("-emit-window=0"), &first, &err), CS_FLAGS_OK);
    assert_int_equal(o.window, 0);
    assert_int_equal(run(ARGV("-emit-window=1m30s"), &first, &err), CS_FLAGS_OK);
    assert_int_equal(o.window, 90 * CS_SEC);
    assert_int_equal(run(ARGV("-emit-window=3\xc2\xb5s"), &first, &err), CS_FLAGS_OK);
    assert_int_equal(o.window, 3 * CS_US);
}

static void value_errors(void **state)
{
    (void)state;
    EXPECT_ERROR("invalid value \"x\" for flag -chunk-size: parse error", "-chunk-size", "x");
    EXPECT_ERROR("invalid value \"\" for flag -chunk-size: parse error", "-chunk-size=");
    EXPECT_ERROR("invalid value \"1__0\" for flag -retention: parse error", "-retention=1__0");
    EXPECT_ERROR("invalid value \"9223372036854775808\" for flag -retention: value out of range",
                 "-retention", "9223372036854775808");
    EXPECT_ERROR("invalid value \"-5\" for flag -start-ledger: parse error", "-start-ledger", "-5");
    EXPECT_ERROR("invalid value \"18446744073709551616\" for flag -start-ledger: value out of range",
                 "-start-ledger", "18446744073709551616");
    /* Any duration failure is reported as errParse, not with time's message. */
    EXPECT_ERROR("invalid value \"1q\" for flag -emit-window: parse error", "-emit-window", "1q");
    EXPECT_ERROR("invalid value \"1\" for flag -emit-window: parse error", "-emit-window=1");
    EXPECT_ERROR("invalid value \"9223372036854775808ns\" for flag -emit-window: parse error",
                 "-emit-window", "9223372036854775808ns");
}

static void error_quoting(void **state)
{
    (void)state;
    /* strconv.Quote: escapes for quote, backslash and C escapes; \x for other controls, DEL and
     * invalid UTF-8; printable runes kept; \u and \U for non-printing ones. */
    EXPECT_ERROR("invalid value \"a\\\"b\\\\c\" for flag -retention: parse error", "-retention",
                 "a\"b\\c");
    EXPECT_ERROR("invalid value \"\\a\\b\\f\\n\\r\\t\\v\\x01\\x7f\" for flag -retention: parse error",
                 "-retention", "\a\b\f\n\r\t\v\x01\x7f");
    EXPECT_ERROR("invalid value \"\\xff\\xc0\\xaf\" for flag -retention: parse error", "-retention",
                 "\xff\xc0\xaf");
    EXPECT_ERROR("invalid value \"\xc2\xb5\xf0\x9f\x98\x80\xef\xbf\xbd\" for flag -retention: parse "
                 "error",
                 "-retention", "\xc2\xb5\xf0\x9f\x98\x80\xef\xbf\xbd"); /* µ, 😀, U+FFFD */
    EXPECT_ERROR("invalid value \"\\u00a0\\u0085\\u00ad\\u2028\\ue000\\ufeff\\U0010ffff\" for "
                 "flag -retention: parse error",
                 "-retention",
                 "\xc2\xa0\xc2\x85\xc2\xad\xe2\x80\xa8\xee\x80\x80\xef\xbb\xbf\xf4\x8f\xbf\xbf");
    /* Surrogates and values past U+10FFFF are invalid UTF-8, byte by byte. */
    EXPECT_ERROR("invalid value \"\\xed\\xa0\\x80\\xf4\\x90\\x80\\x80\" for flag -retention: parse "
                 "error",
                 "-retention", "\xed\xa0\x80\xf4\x90\x80\x80");
    EXPECT_ERROR("invalid boolean value \"\\n\" for -v: parse error", "-v=\n");
}

static void string_points_into_argv(void **state)
{
    (void)state;
    int first;
    cs_err err;
    char **argv = ARGV("-listen", "[::]:9", "-listen=:10");
    assert_int_equal(run(argv, &first, &err), CS_FLAGS_OK);
    assert_ptr_equal(o.listen, argv[3] + strlen("-listen="));
    char **two = ARGV("-listen", "[::]:9");
    assert_int_equal(run(two, &first, &err), CS_FLAGS_OK);
    assert_ptr_equal(o.listen, two[2]);
}

static void parse_int64_table(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int rc;
        int64_t v;
    } cases[] = {
        {"0", 0, 0},
        {"-0", 0, 0},
        {"+0", 0, 0},
        {"00", 0, 0},
        {"017", 0, 15},
        {"0_17", 0, 15},
        {"0o17", 0, 15},
        {"0x10", 0, 16},
        {"0X1f", 0, 31},
        {"0b101", 0, 5},
        {"1_000", 0, 1000},
        {"-1_000", 0, -1000},
        {"0x_10", 0, 16},
        {"0b_1_0", 0, 2},
        {"-5", 0, -5},
        {"9223372036854775807", 0, INT64_MAX},
        {"-9223372036854775808", 0, INT64_MIN},
        {"0x7fffffffffffffff", 0, INT64_MAX},
        {"", -1, 0},
        {"-", -1, 0},
        {"+", -1, 0},
        {"--5", -1, 0},
        {"+-5", -1, 0},
        {"08", -1, 0},
        {"0x", -1, 0},
        {"0b", -1, 0},
        {"0xg", -1, 0},
        {"0b2", -1, 0},
        {"1__0", -1, 0},
        {"_1", -1, 0},
        {"1_", -1, 0},
        {"0_x1", -1, 0},
        {"0x1_", -1, 0},
        {" 1", -1, 0},
        {"1 ", -1, 0},
        {"1e3", -1, 0},
        {"9223372036854775808", -2, 0},
        {"-9223372036854775809", -2, 0},
        {"0x8000000000000000", -2, 0},
        /* Overflow is reported before a later syntax error, as Go does. */
        {"99999999999999999999x", -2, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t v = 77;
        int rc = cs_parse_int64(cases[i].s, &v);
        if (rc != cases[i].rc)
            fail_msg("parse_int64(\"%s\") rc %d, want %d", cases[i].s, rc, cases[i].rc);
        if (rc == 0 && v != cases[i].v)
            fail_msg("parse_int64(\"%s\") = %lld", cases[i].s, (long long)v);
    }
}

static void parse_uint64_table(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int rc;
        uint64_t v;
    } cases[] = {
        {"0", 0, 0},
        {"017", 0, 15},
        {"0o17", 0, 15},
        {"0x10", 0, 16},
        {"0b101", 0, 5},
        {"1_000", 0, 1000},
        {"18446744073709551615", 0, UINT64_MAX},
        {"0xFFFF_FFFF_FFFF_FFFF", 0, UINT64_MAX},
        {"-5", -1, 0},
        {"+5", -1, 0},
        {"-0", -1, 0},
        {"", -1, 0},
        {"1__0", -1, 0},
        {"_1", -1, 0},
        {"0x", -1, 0},
        {"09", -1, 0},
        {"18446744073709551616", -2, 0},
        {"0x10000000000000000", -2, 0},
        {"0x1_0000_0000_0000_0000_", -2, 0}, /* range is found before the bad underscore */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t v = 77;
        int rc = cs_parse_uint64(cases[i].s, &v);
        if (rc != cases[i].rc)
            fail_msg("parse_uint64(\"%s\") rc %d, want %d", cases[i].s, rc, cases[i].rc);
        if (rc == 0 && v != cases[i].v)
            fail_msg("parse_uint64(\"%s\") = %llu", cases[i].s, (unsigned long long)v);
    }
}

static char *usage_of(const cs_flagset *fs)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    cs_flags_usage(fs, f);
    fclose(f);
    return text;
}

static void usage_matches_go(void **state)
{
    (void)state;
    const char *listen = ":8462", *core = "", *tag = "a\"b\t\xc2\xb5", *z = "";
    bool compress = true, v = false, q = true, x = false;
    int64_t n = 3, chunk = 262144, offset = -7;
    uint64_t start = 0, count = 100;
    cs_dur window = 15 * CS_MS, cadence = 0, skew = -1500 * CS_MS;
    cs_flag fl[] = {
        {"listen", CS_FLAG_STRING, &listen, "TCP `address` to listen on"},
        {"compress", CS_FLAG_BOOL, &compress, "compress chunks"},
        {"v", CS_FLAG_BOOL, &v, "verbose"},
        {"n", CS_FLAG_INT, &n, "count"},
        {"chunk-size", CS_FLAG_INT, &chunk, "bytes per chunk"},
        {"offset", CS_FLAG_INT, &offset, "signed"},
        {"start-ledger", CS_FLAG_UINT, &start, "first ledger\nsecond line"},
        {"count", CS_FLAG_UINT, &count, "ledgers"},
        {"emit-window", CS_FLAG_DURATION, &window, "pacing window"},
        {"cadence", CS_FLAG_DURATION, &cadence, "grid"},
        {"skew", CS_FLAG_DURATION, &skew, "clock skew"},
        {"core-binary", CS_FLAG_STRING, &core, "path to `stellar-core`"},
        {"tag", CS_FLAG_STRING, &tag, "a lone ` backquote"},
        {"q", CS_FLAG_BOOL, &q, ""},
        {"x", CS_FLAG_BOOL, &x, "enable `mode` x"},
        {"Z", CS_FLAG_STRING, &z, "upper sorts first"},
    };
    const cs_flagset fs = {"corestreamd", NULL, fl, sizeof fl / sizeof fl[0]};
    /* Output of the same set defined with Go's flag package, then FlagSet.Usage(). */
    static const char want[] = "Usage of corestreamd:\n"
                               "  -Z string\n"
                               "    \tupper sorts first\n"
                               "  -cadence duration\n"
                               "    \tgrid\n"
                               "  -chunk-size int\n"
                               "    \tbytes per chunk (default 262144)\n"
                               "  -compress\n"
                               "    \tcompress chunks (default true)\n"
                               "  -core-binary stellar-core\n"
                               "    \tpath to stellar-core\n"
                               "  -count uint\n"
                               "    \tledgers (default 100)\n"
                               "  -emit-window duration\n"
                               "    \tpacing window (default 15ms)\n"
                               "  -listen address\n"
                               "    \tTCP address to listen on (default \":8462\")\n"
                               "  -n int\n"
                               "    \tcount (default 3)\n"
                               "  -offset int\n"
                               "    \tsigned (default -7)\n"
                               "  -q\t (default true)\n"
                               "  -skew duration\n"
                               "    \tclock skew (default -1.5s)\n"
                               "  -start-ledger uint\n"
                               "    \tfirst ledger\n"
                               "    \tsecond line\n"
                               "  -tag string\n"
                               "    \ta lone ` backquote (default \"a\\\"b\\t\xc2\xb5\")\n"
                               "  -v\tverbose\n"
                               "  -x mode\n"
                               "    \tenable mode x\n";
    char *got = usage_of(&fs);
    assert_string_equal(got, want);
    free(got);
}

static void usage_synopsis_and_no_prog(void **state)
{
    (void)state;
    cs_flagset fs = fset;
    fs.synopsis = "corestreamd [flags]\n\nStreams ledgers.";
    char *got = usage_of(&fs);
    const char *head = "Usage of corestreamd:\ncorestreamd [flags]\n\nStreams ledgers.\n  -chunk-size int\n";
    assert_memory_equal(got, head, strlen(head));
    free(got);

    cs_flagset bare = {NULL, NULL, NULL, 0};
    got = usage_of(&bare);
    assert_string_equal(got, "Usage:\n");
    free(got);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup(f, reset)
    const struct CMUnitTest tests[] = {
        T(defaults_without_args),    T(single_and_double_dash), T(equals_and_separate_value),
        T(last_occurrence_wins),     T(stops_at_first_non_flag), T(double_dash_terminates),
        T(bool_forms),               T(bool_invalid),            T(unknown_flag),
        T(help_requested),           T(bad_flag_syntax),         T(needs_an_argument),
        T(integer_values),           T(duration_values),         T(value_errors),
        T(error_quoting),            T(string_points_into_argv), T(parse_int64_table),
        T(parse_uint64_table),       T(usage_matches_go),        T(usage_synopsis_and_no_prog),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
