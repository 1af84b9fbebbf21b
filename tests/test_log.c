/* SPDX-License-Identifier: Apache-2.0 */
/* Logger: slog TextHandler line shapes, strconv.Quote quoting, levels, and locked output. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

/* 2026-08-22T12:00:39.123456789Z */
#define T0 INT64_C(1787400039123456789)

static void set_tz(const char *tz)
{
    setenv("TZ", tz, 1);
    tzset();
}

static const char *fmt_line(char *buf, size_t len, int64_t t, int level, const char *msg, size_t n,
                            const cs_kv *kvs)
{
    cs_log_record r = {.unix_nano = t, .pid = 4242, .level = level, .msg = msg, .n = n, .kvs = kvs};
    size_t need = cs_log_format(buf, len, CS_LOG_FMT_LOGFMT, &r);
    assert_true(need < len);
    assert_int_equal(strlen(buf), need);
    return buf;
}

/* Runs first: before cs_log_init the logger is at INFO. */
static void test_default_level_is_info(void **state)
{
    (void)state;
    assert_true(cs_log_enabled(CS_LOG_INFO));
    assert_true(cs_log_enabled(CS_LOG_ERROR));
    assert_false(cs_log_enabled(CS_LOG_DEBUG));
    assert_false(cs_log_enabled(CS_LOG_INFO - 1));
}

static void test_line_shape_utc(void **state)
{
    (void)state;
    set_tz("UTC");
    char buf[512];
    cs_kv kvs[] = {KV_S("addr", "[::]:8462"), KV_S("source", "synthetic"),
                   KV_U("start_ledger", 1), KV_I("retention", 10000)};
    assert_string_equal(fmt_line(buf, sizeof buf, T0, CS_LOG_INFO, "corestreamd listening", 4, kvs),
                        "time=2026-08-22T12:00:39.123Z level=INFO msg=\"corestreamd listening\" pid=4242 "
                        "addr=[::]:8462 source=synthetic start_ledger=1 retention=10000");
}

static void test_line_shape_zones(void **state)
{
    (void)state;
    char buf[256];
    set_tz("XXX-1"); /* POSIX: one hour east of UTC */
    assert_string_equal(fmt_line(buf, sizeof buf, T0, CS_LOG_WARN, "hi", 0, NULL),
                        "time=2026-08-22T13:00:39.123+01:00 level=WARN msg=hi pid=4242");
    set_tz("YYY+5:30");
    assert_string_equal(fmt_line(buf, sizeof buf, T0, CS_LOG_ERROR, "hi", 0, NULL),
                        "time=2026-08-22T06:30:39.123-05:30 level=ERROR msg=hi pid=4242");
    set_tz("UTC");
}

/* slog truncates to the millisecond rather than rounding, also before 1970. */
static void test_time_truncates_millis(void **state)
{
    (void)state;
    set_tz("UTC");
    char buf[128];
    assert_string_equal(
        fmt_line(buf, sizeof buf, INT64_C(1787400039999999999), CS_LOG_INFO, "m", 0, NULL),
        "time=2026-08-22T12:00:39.999Z level=INFO msg=m pid=4242");
    assert_string_equal(fmt_line(buf, sizeof buf, INT64_C(0), CS_LOG_INFO, "m", 0, NULL),
                        "time=1970-01-01T00:00:00.000Z level=INFO msg=m pid=4242");
    assert_string_equal(fmt_line(buf, sizeof buf, INT64_C(-1), CS_LOG_INFO, "m", 0, NULL),
                        "time=1969-12-31T23:59:59.999Z level=INFO msg=m pid=4242");
}

static void check_quote(const char *in, const char *want)
{
    char buf[128];
    size_t n = cs_log_quote(buf, sizeof buf, in);
    assert_string_equal(buf, want);
    assert_int_equal(n, strlen(want));
}

static void test_quoting(void **state)
{
    (void)state;
    check_quote("plain", "plain");
    check_quote("[::]:8462", "[::]:8462");
    check_quote("", "\"\"");
    check_quote("a b", "\"a b\"");
    check_quote("a=b", "\"a=b\"");
    check_quote("a\"b", "\"a\\\"b\"");
    check_quote("a\nb", "\"a\\nb\"");
    check_quote("a\tb", "\"a\\tb\"");
    check_quote("\x01", "\"\\x01\"");
    check_quote("\x1b[0m", "\"\\x1b[0m\"");
    check_quote("\a\b\f\r\v", "\"\\a\\b\\f\\r\\v\"");
    /* A backslash alone does not force quotes; once quoted it is escaped. */
    check_quote("a\\b", "a\\b");
    check_quote("a\\ b", "\"a\\\\ b\"");
    /* DEL is JSON-safe, so slog leaves it bare; strconv.Quote escapes it when quoting anyway. */
    check_quote("a\x7f" "b", "a\x7f" "b");
    check_quote("a \x7f", "\"a \\x7f\"");
}

static void test_quoting_utf8(void **state)
{
    (void)state;
    check_quote("\xc3\xa9", "\xc3\xa9");                 /* é */
    check_quote("caf\xc3\xa9 au lait", "\"caf\xc3\xa9 au lait\"");
    check_quote("\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"); /* U+1F600 */
    check_quote("\xc2\xa0", "\"\\u00a0\"");              /* NO-BREAK SPACE */
    check_quote("\xc2\x85", "\"\\u0085\"");              /* NEL */
    check_quote("\xe2\x80\xa8", "\"\\u2028\"");          /* LINE SEPARATOR */
    check_quote("\xe3\x80\x80", "\"\\u3000\"");          /* IDEOGRAPHIC SPACE */
    check_quote("\xef\xbb\xbfx", "\"\\ufeffx\"");        /* BOM */
    /* Invalid UTF-8: quoted, each bad byte as \xNN. */
    check_quote("\xff", "\"\\xff\"");
    check_quote("a\xff" "b", "\"a\\xffb\"");
    check_quote("\xe2\x82", "\"\\xe2\\x82\"");         /* truncated */
    check_quote("\xc0\xaf", "\"\\xc0\\xaf\"");         /* overlong */
    check_quote("\xed\xa0\x80", "\"\\xed\\xa0\\x80\""); /* surrogate */
    check_quote("\xf4\x90\x80\x80", "\"\\xf4\\x90\\x80\\x80\""); /* > U+10FFFF */
    /* A literal U+FFFD is utf8.RuneError: quoted, but printable so kept as is. */
    check_quote("\xef\xbf\xbd", "\"\xef\xbf\xbd\"");
}

static void test_quote_snprintf_rule(void **state)
{
    (void)state;
    set_tz("UTC");
    char buf[4];
    memset(buf, 'z', sizeof buf);
    assert_int_equal(cs_log_quote(buf, sizeof buf, "a b"), 5);
    assert_string_equal(buf, "\"a ");
    assert_int_equal(cs_log_quote(NULL, 0, "a b"), 5);
    cs_log_record r = {.unix_nano = T0, .pid = 7, .level = CS_LOG_INFO, .msg = "m"};
    assert_int_equal(cs_log_format(NULL, 0, CS_LOG_FMT_LOGFMT, &r),
                     strlen("time=2026-08-22T12:00:39.123Z level=INFO msg=m pid=7"));
    assert_int_equal(cs_log_format(NULL, 0, CS_LOG_FMT_JSON, &r),
                     strlen("{\"time\":\"2026-08-22T12:00:39.123Z\",\"level\":\"INFO\",\"msg\":\"m\",\"pid\":7}"));
}

static void test_kv_types(void **state)
{
    (void)state;
    set_tz("UTC");
    char buf[512];
    cs_kv kvs[] = {
        KV_S("s", "x y"),
        KV_S("empty", ""),
        KV_I("neg", INT64_MIN),
        KV_U("max", UINT64_MAX),
        KV_D("emit_window", 15 * CS_MS),
        KV_D("zero", 0),
        KV_D("cadence", 90 * CS_SEC),
        KV_B("yes", true),
        KV_B("no", false),
        KV_S("a key", "v"),
        KV_S("k=", "v"),
    };
    assert_string_equal(
        fmt_line(buf, sizeof buf, T0, CS_LOG_INFO, "", sizeof kvs / sizeof kvs[0], kvs),
        "time=2026-08-22T12:00:39.123Z level=INFO msg=\"\" pid=4242 s=\"x y\" empty=\"\" "
        "neg=-9223372036854775808 max=18446744073709551615 emit_window=15ms zero=0s "
        "cadence=1m30s yes=true no=false \"a key\"=v \"k=\"=v");
}

static void test_macros(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    cs_log_init(f, CS_LOG_DEBUG);
    CS_LOG(CS_LOG_INFO, "replaying dump", KV_S("dir", "/d"), KV_U("ledgers", 3),
           KV_D("emit_window", 15 * CS_MS), KV_D("cadence", 600 * CS_MS));
    CS_LOG0(CS_LOG_DEBUG, "close handshake did not complete");
    rewind(f);
    char *line = NULL;
    size_t cap = 0;
    assert_true(getline(&line, &cap, f) > 0);
    char want[256];
    snprintf(want, sizeof want, " level=INFO msg=\"replaying dump\" pid=%ld dir=/d ledgers=3 "
             "emit_window=15ms cadence=600ms\n", (long)getpid());
    assert_non_null(strstr(line, want));
    assert_true(getline(&line, &cap, f) > 0);
    snprintf(want, sizeof want, " level=DEBUG msg=\"close handshake did not complete\" pid=%ld\n", (long)getpid());
    assert_non_null(strstr(line, want));
    assert_int_equal(getline(&line, &cap, f), -1);
    free(line);
    cs_log_init(NULL, CS_LOG_INFO);
    fclose(f);
}

static void test_level_names(void **state)
{
    (void)state;
    static const struct {
        int level;
        const char *name;
    } cases[] = {{-8, "DEBUG-4"}, {-5, "DEBUG-1"}, {-4, "DEBUG"}, {-3, "DEBUG+1"},
                 {-1, "DEBUG+3"}, {0, "INFO"},    {2, "INFO+2"},  {3, "INFO+3"},
                 {4, "WARN"},     {7, "WARN+3"},  {8, "ERROR"},   {11, "ERROR+3"}};
    char buf[32];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_string_equal(cs_log_level_name(cases[i].level, buf, sizeof buf), cases[i].name);

    set_tz("UTC");
    char line[128];
    assert_string_equal(fmt_line(line, sizeof line, T0, CS_LOG_INFO + 2, "m", 0, NULL),
                        "time=2026-08-22T12:00:39.123Z level=INFO+2 msg=m pid=4242");
    assert_string_equal(fmt_line(line, sizeof line, T0, CS_LOG_DEBUG - 1, "m", 0, NULL),
                        "time=2026-08-22T12:00:39.123Z level=DEBUG-1 msg=m pid=4242");
}

static void test_parse_level(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int level;
    } good[] = {{"debug", -4},  {"DEBUG", -4},  {"info", 0},     {"INFO", 0},
                {"Warn", 4},    {"error", 8},   {"info+2", 2},   {"ERROR-3", 5},
                {"debug-1", -5}, {"warn+0", 4}, {"info+02", 2},  {"iNfO-10", -10}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int level = 99;
        assert_int_equal(cs_log_parse_level(good[i].s, &level), 0);
        assert_int_equal(level, good[i].level);
    }
    static const char *bad[] = {"",        "nonsense", "inf",      "information", "info+",
                                "info-",   "+2",       "info+x",   "info+2x",     "info +2",
                                " info",   "info+ 2",  "info+2-1", "info++2",     "warning",
                                "info+99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int level = 99;
        assert_int_equal(cs_log_parse_level(bad[i], &level), -1);
        assert_int_equal(level, 99);
    }
    int level = 99;
    assert_int_equal(cs_log_parse_level(NULL, &level), -1);
}

static void test_min_level_filters(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    cs_log_init(f, CS_LOG_WARN);
    assert_false(cs_log_enabled(CS_LOG_INFO));
    assert_true(cs_log_enabled(CS_LOG_WARN));
    CS_LOG0(CS_LOG_INFO, "dropped");
    CS_LOG0(CS_LOG_WARN + 1, "kept");
    rewind(f);
    char *line = NULL;
    size_t cap = 0;
    assert_true(getline(&line, &cap, f) > 0);
    char want[64];
    snprintf(want, sizeof want, " level=WARN+1 msg=kept pid=%ld\n", (long)getpid());
    assert_non_null(strstr(line, want));
    assert_int_equal(getline(&line, &cap, f), -1);
    free(line);
    cs_log_init(NULL, CS_LOG_INFO);
    fclose(f);
}

/* Lines longer than the stack buffer take the heap path and still come out whole. */
static void test_long_line(void **state)
{
    (void)state;
    enum { BIG = 20000 };
    char *val = malloc(BIG + 1);
    assert_non_null(val);
    memset(val, 'x', BIG);
    val[BIG] = '\0';
    FILE *f = tmpfile();
    assert_non_null(f);
    cs_log_init(f, CS_LOG_INFO);
    CS_LOG(CS_LOG_INFO, "long", KV_S("v", val), KV_B("end", true));
    rewind(f);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, f);
    assert_true(n > BIG);
    char want[64];
    snprintf(want, sizeof want, " msg=long pid=%ld v=", (long)getpid());
    const char *v = strstr(line, want);
    assert_non_null(v);
    v += strlen(want);
    assert_memory_equal(v, val, BIG);
    assert_string_equal(v + BIG, " end=true\n");
    free(line);
    free(val);
    cs_log_init(NULL, CS_LOG_INFO);
    fclose(f);
}

/* stderr redirected into a fresh temporary file (returned); *saved is the real one, for
 * stderr_restore. */
static FILE *stderr_to_file(int *saved)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    fflush(stderr);
    *saved = dup(STDERR_FILENO);
    assert_true(*saved >= 0);
    assert_true(dup2(fileno(f), STDERR_FILENO) >= 0);
    return f;
}

static void stderr_restore(int saved)
{
    fflush(stderr);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
}

static void test_early_error(void **state)
{
    (void)state;
    set_tz("UTC");
    int saved;
    FILE *f = stderr_to_file(&saved);
    time_t before = time(NULL);
    cs_log_early_error("corestreamd failed", "flag provided but not defined: -turbo");
    time_t after = time(NULL);
    stderr_restore(saved);

    rewind(f);
    char line[256];
    assert_non_null(fgets(line, sizeof line, f));
    const char *rest = " ERROR corestreamd failed error=\"flag provided but not defined: -turbo\"\n";
    assert_int_equal(strlen(line), 19 + strlen(rest));
    assert_string_equal(line + 19, rest);
    /* The stamp is the local time of the call, in Go's log layout. */
    char stamp[2][32];
    time_t t[2] = {before, after};
    for (int i = 0; i < 2; i++) {
        struct tm tm;
        localtime_r(&t[i], &tm);
        strftime(stamp[i], sizeof stamp[i], "%Y/%m/%d %H:%M:%S", &tm);
    }
    assert_true(strncmp(line, stamp[0], 19) == 0 || strncmp(line, stamp[1], 19) == 0);
    assert_null(fgets(line, sizeof line, f));
    fclose(f);
}

/* ---- the journal ---- */

/* JOURNAL_STREAM set to f's device and inode, as systemd sets it for the stream it connected. */
static void fake_journal_stream(FILE *f)
{
    struct stat st;
    assert_int_equal(fstat(fileno(f), &st), 0);
    char v[64];
    snprintf(v, sizeof v, "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
    assert_int_equal(setenv("JOURNAL_STREAM", v, 1), 0);
}

/* Each line's priority in front, as journald reads it: <3> ERROR, <4> WARN, <6> INFO, <7> DEBUG. */
static void test_journal_stream_lines_carry_priorities(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    fake_journal_stream(f);
    cs_log_init(f, CS_LOG_DEBUG);
    CS_LOG0(CS_LOG_ERROR, "e");
    CS_LOG0(CS_LOG_WARN, "w");
    CS_LOG0(CS_LOG_INFO + 2, "i");
    CS_LOG0(CS_LOG_DEBUG, "d");
    cs_log_set_format(CS_LOG_FMT_JSON);
    CS_LOG0(CS_LOG_ERROR, "j");
    cs_log_set_format(CS_LOG_FMT_LOGFMT);
    rewind(f);
    static const char *const want[][2] = {
        {"<3>time=", " level=ERROR msg=e "}, {"<4>time=", " level=WARN msg=w "}, {"<6>time=", " level=INFO+2 msg=i "},
        {"<7>time=", " level=DEBUG msg=d "}, {"<3>{\"time\":", "\"level\":\"ERROR\",\"msg\":\"j\""}};
    char line[256];
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_non_null(fgets(line, sizeof line, f));
        assert_memory_equal(line, want[i][0], strlen(want[i][0]));
        assert_non_null(strstr(line, want[i][1]));
    }
    assert_null(fgets(line, sizeof line, f));
    unsetenv("JOURNAL_STREAM");
    cs_log_init(NULL, CS_LOG_INFO);
    fclose(f);
}

/* Under systemd but to another file (a redirect, a pipe of its own): no prefix. And a malformed
 * JOURNAL_STREAM is no journal. */
static void test_other_streams_stay_plain(void **state)
{
    (void)state;
    FILE *journal = tmpfile(), *f = tmpfile();
    assert_non_null(journal);
    assert_non_null(f);
    fake_journal_stream(journal);
    cs_log_init(f, CS_LOG_INFO);
    CS_LOG0(CS_LOG_ERROR, "a");
    assert_int_equal(setenv("JOURNAL_STREAM", "garbage", 1), 0);
    cs_log_init(f, CS_LOG_INFO);
    CS_LOG0(CS_LOG_ERROR, "b");
    rewind(f);
    char line[256];
    for (int i = 0; i < 2; i++) {
        assert_non_null(fgets(line, sizeof line, f));
        assert_memory_equal(line, "time=", 5);
    }
    unsetenv("JOURNAL_STREAM");
    cs_log_init(NULL, CS_LOG_INFO);
    fclose(f);
    fclose(journal);
}

/* The early error (before the logger exists) goes to stderr: prefixed when stderr is the journal. */
static void test_early_error_to_the_journal(void **state)
{
    (void)state;
    int saved;
    FILE *f = stderr_to_file(&saved);
    fake_journal_stream(f);
    cs_log_early_error("corestreamd failed", "x");
    unsetenv("JOURNAL_STREAM");
    stderr_restore(saved);
    rewind(f);
    char line[256];
    assert_non_null(fgets(line, sizeof line, f));
    assert_memory_equal(line, "<3>", 3);
    assert_non_null(strstr(line, " ERROR corestreamd failed error=x\n"));
    fclose(f);
}

/* ---- JSON ---- */

static const char *fmt_json(char *buf, size_t len, int level, const char *msg, size_t n, const cs_kv *kvs)
{
    cs_log_record r = {.unix_nano = T0, .pid = 4242, .level = level, .msg = msg, .n = n, .kvs = kvs};
    size_t need = cs_log_format(buf, len, CS_LOG_FMT_JSON, &r);
    assert_true(need < len);
    assert_int_equal(strlen(buf), need);
    return buf;
}

static void test_json_line_shape(void **state)
{
    (void)state;
    set_tz("UTC");
    char buf[512];
    cs_kv kvs[] = {KV_S("addr", "[::]:8462"), KV_U("start_ledger", 1), KV_I("retention", -3),
                   KV_D("emit_window", 15 * CS_MS), KV_B("bounded", false), KV_S("empty", "")};
    assert_string_equal(fmt_json(buf, sizeof buf, CS_LOG_INFO, "corestreamd listening", 6, kvs),
                        "{\"time\":\"2026-08-22T12:00:39.123Z\",\"level\":\"INFO\","
                        "\"msg\":\"corestreamd listening\",\"pid\":4242,\"addr\":\"[::]:8462\","
                        "\"start_ledger\":1,\"retention\":-3,\"emit_window\":15000000,"
                        "\"bounded\":false,\"empty\":\"\"}");
    set_tz("XXX-1");
    assert_string_equal(fmt_json(buf, sizeof buf, CS_LOG_WARN + 2, "hi", 0, NULL),
                        "{\"time\":\"2026-08-22T13:00:39.123+01:00\",\"level\":\"WARN+2\",\"msg\":\"hi\","
                        "\"pid\":4242}");
    set_tz("UTC");
}

/* slog's JSON escaping: quotes, backslashes, \n \r \t, other controls as \u00XX, no HTML
 * escaping, invalid UTF-8 as U+FFFD, U+2028/2029 escaped, other UTF-8 kept. Keys too. */
static void test_json_escaping(void **state)
{
    (void)state;
    set_tz("UTC");
    char buf[512];
    cs_kv kvs[] = {KV_S("q", "a\"b\\c"), KV_S("ws", "\n\r\t"), KV_S("ctl", "\x01\x1f\x7f"),
                   KV_S("html", "<&>"),     KV_S("bad", "a\xff" "b"), KV_S("ls", "\xe2\x80\xa8\xe2\x80\xa9"),
                   KV_S("utf8", "caf\xc3\xa9"), KV_S("k\"", "v"), KV_S("null", NULL)};
    assert_string_equal(fmt_json(buf, sizeof buf, CS_LOG_ERROR, "m\n", 9, kvs),
                        "{\"time\":\"2026-08-22T12:00:39.123Z\",\"level\":\"ERROR\",\"msg\":\"m\\n\","
                        "\"pid\":4242,\"q\":\"a\\\"b\\\\c\",\"ws\":\"\\n\\r\\t\","
                        "\"ctl\":\"\\u0001\\u001f\x7f\",\"html\":\"<&>\",\"bad\":\"a\\ufffdb\","
                        "\"ls\":\"\\u2028\\u2029\",\"utf8\":\"caf\xc3\xa9\",\"k\\\"\":\"v\","
                        "\"null\":\"\"}");
}

/* The format switch reaches the process logger; cs_log_set_level moves the threshold. */
static void test_json_output_and_level_switch(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    cs_log_init(f, CS_LOG_INFO);
    cs_log_set_format(CS_LOG_FMT_JSON);
    CS_LOG(CS_LOG_INFO, "one", KV_U("n", 1));
    CS_LOG0(CS_LOG_DEBUG, "dropped");
    cs_log_set_level(CS_LOG_DEBUG);
    CS_LOG0(CS_LOG_DEBUG, "two");
    cs_log_set_format(CS_LOG_FMT_LOGFMT);
    CS_LOG0(CS_LOG_DEBUG, "three");
    cs_log_init(NULL, CS_LOG_INFO);
    rewind(f);
    char *line = NULL, want[128];
    size_t cap = 0;
    assert_true(getline(&line, &cap, f) > 0);
    snprintf(want, sizeof want, "\",\"level\":\"INFO\",\"msg\":\"one\",\"pid\":%ld,\"n\":1}\n", (long)getpid());
    assert_true(strncmp(line, "{\"time\":\"", 9) == 0);
    assert_non_null(strstr(line, want));
    assert_true(getline(&line, &cap, f) > 0);
    snprintf(want, sizeof want, "\",\"level\":\"DEBUG\",\"msg\":\"two\",\"pid\":%ld}\n", (long)getpid());
    assert_non_null(strstr(line, want));
    assert_true(getline(&line, &cap, f) > 0);
    snprintf(want, sizeof want, " level=DEBUG msg=three pid=%ld\n", (long)getpid());
    assert_non_null(strstr(line, want));
    assert_int_equal(getline(&line, &cap, f), -1);
    free(line);
    fclose(f);
}

static void test_parse_format(void **state)
{
    (void)state;
    cs_log_fmt fmt = CS_LOG_FMT_JSON;
    assert_int_equal(cs_log_parse_format("logfmt", &fmt), 0);
    assert_int_equal(fmt, CS_LOG_FMT_LOGFMT);
    assert_int_equal(cs_log_parse_format("json", &fmt), 0);
    assert_int_equal(fmt, CS_LOG_FMT_JSON);
    static const char *bad[] = {"", "JSON", "text", "logfmt ", "xml"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(cs_log_parse_format(bad[i], &fmt), -1);
    assert_int_equal(cs_log_parse_format(NULL, &fmt), -1);
}

/* ---- concurrency: whole lines, never interleaved ---- */

enum { THREADS = 4, LINES_PER_THREAD = 500 };

static void *writer(void *arg)
{
    int64_t id = (int64_t)(intptr_t)arg;
    char pad[6001];
    for (int i = 0; i < LINES_PER_THREAD; i++) {
        /* Varying lengths, some past the stack buffer. */
        size_t n = (size_t)(i % 7) * 1000;
        memset(pad, 'a' + (int)id, n);
        pad[n] = '\0';
        CS_LOG(CS_LOG_INFO, "thread line", KV_I("thread", id), KV_I("i", i), KV_S("pad", pad));
    }
    return NULL;
}

static void test_threads_lines_intact(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    cs_log_init(f, CS_LOG_INFO);
    pthread_t th[THREADS];
    for (intptr_t t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, writer, (void *)t), 0);
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_join(th[t], NULL), 0);
    cs_log_init(NULL, CS_LOG_INFO);

    rewind(f);
    int next[THREADS] = {0};
    int lines = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        lines++;
        assert_int_equal(line[len - 1], '\n');
        assert_true(strncmp(line, "time=", 5) == 0);
        const char *p = strstr(line, " level=INFO msg=\"thread line\" pid=");
        assert_non_null(p);
        int id, i, off = 0;
        long pid = 0;
        assert_int_equal(sscanf(p, " level=INFO msg=\"thread line\" pid=%ld thread=%d i=%d pad=%n", &pid,
                                &id, &i, &off),
                         3);
        assert_int_equal(pid, (long)getpid());
        assert_true(off > 0);
        assert_in_range(id, 0, THREADS - 1);
        assert_int_equal(i, next[id]);
        next[id]++;
        size_t n = (size_t)(i % 7) * 1000;
        const char *pad = p + off;
        if (n == 0) {
            assert_string_equal(pad, "\"\"\n");
        } else {
            for (size_t k = 0; k < n; k++)
                assert_int_equal(pad[k], 'a' + id);
            assert_string_equal(pad + n, "\n");
        }
    }
    free(line);
    fclose(f);
    assert_int_equal(lines, THREADS * LINES_PER_THREAD);
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(next[t], LINES_PER_THREAD);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_level_is_info),
        cmocka_unit_test(test_line_shape_utc),
        cmocka_unit_test(test_line_shape_zones),
        cmocka_unit_test(test_time_truncates_millis),
        cmocka_unit_test(test_quoting),
        cmocka_unit_test(test_quoting_utf8),
        cmocka_unit_test(test_quote_snprintf_rule),
        cmocka_unit_test(test_kv_types),
        cmocka_unit_test(test_macros),
        cmocka_unit_test(test_journal_stream_lines_carry_priorities),
        cmocka_unit_test(test_other_streams_stay_plain),
        cmocka_unit_test(test_early_error_to_the_journal),
        cmocka_unit_test(test_level_names),
        cmocka_unit_test(test_parse_level),
        cmocka_unit_test(test_min_level_filters),
        cmocka_unit_test(test_long_line),
        cmocka_unit_test(test_early_error),
        cmocka_unit_test(test_json_line_shape),
        cmocka_unit_test(test_json_escaping),
        cmocka_unit_test(test_json_output_and_level_switch),
        cmocka_unit_test(test_parse_format),
        cmocka_unit_test(test_threads_lines_intact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
