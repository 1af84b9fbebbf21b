/* SPDX-License-Identifier: Apache-2.0 */
/* benchrunner's command line (PORTSPEC 4.1; catalogue cases 14-16): defaults, every validation
 * message verbatim, and the order in which they are checked (the first failure wins). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchrunner/options.h"

/* Parses a NULL-terminated argv (argv[0] included). usage receives what would go to stderr. */
static int parse(char **argv, br_options *o, cs_err *err, char **usage)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    memset(err, 0, sizeof *err);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    int rc = br_options_parse(o, argc, argv, out, err);
    fclose(out);
    if (usage)
        *usage = text;
    else
        free(text);
    return rc;
}

#define ARGV(...) ((char *[]){"benchrunner", __VA_ARGS__, NULL})

/* Asserts that argv fails validation with exactly the message want. */
#define EXPECT_ERROR(want, ...)                                                                    \
    do {                                                                                           \
        br_options o_;                                                                             \
        cs_err err_;                                                                               \
        assert_int_equal(parse(ARGV(__VA_ARGS__), &o_, &err_, NULL), -1);                          \
        assert_string_equal(err_.msg, (want));                                                     \
    } while (0)

#define EXPECT_OK(...)                                                                             \
    do {                                                                                           \
        br_options o_;                                                                             \
        cs_err err_;                                                                               \
        int rc_ = parse(ARGV(__VA_ARGS__), &o_, &err_, NULL);                                      \
        if (rc_ != 0)                                                                              \
            fail_msg("unexpected error: %s", err_.msg);                                            \
    } while (0)

/* ---- case 14: TestParseFlagsDefaults, and every other default -------------------------------- */

static void defaults(void **state)
{
    (void)state;
    br_options o;
    cs_err err;
    char *argv[] = {"benchrunner", NULL};
    assert_int_equal(parse(argv, &o, &err, NULL), 0);
    assert_string_equal(o.mode, "loopback");
    assert_true(o.count > 0);
    assert_int_equal(o.count, 100);
    assert_string_equal(o.url, "ws://127.0.0.1:8462");
    assert_int_equal(o.start, 0);
    assert_int_equal(o.end, 0);
    assert_string_equal(o.csv, "");
    assert_int_equal(o.synthetic_size, 204800);
    assert_int_equal(o.synthetic_interval, 10 * CS_MS);
    assert_int_equal(o.chunk_size, 262144);
    assert_false(o.compress);
    assert_false(o.remote_compressible);
    assert_string_equal(o.compress_level_text, "auto");
    assert_int_equal(o.compress_level, 0); /* auto */
    assert_false(o.verify);
    assert_string_equal(o.pipe_cmd, "");
    assert_int_equal(o.pipe_size, 1048576);
    assert_string_equal(o.core_binary, "");
    assert_string_equal(o.core_config, "");
    assert_string_equal(o.history_archive_urls, "");
    assert_string_equal(o.storage_dir, "");
    assert_string_equal(o.network_passphrase, "");
    assert_false(o.quiet); /* the progress line is on where stderr is a terminal */
    assert_int_equal(parse(ARGV("--quiet"), &o, &err, NULL), 0);
    assert_true(o.quiet);
}

/* ---- case 16: TestParseFlagsPacingDefaults --------------------------------------------------- */

static void pacing_defaults(void **state)
{
    (void)state;
    br_options o;
    cs_err err;
    char *argv[] = {"benchrunner", NULL};
    assert_int_equal(parse(argv, &o, &err, NULL), 0);
    assert_int_equal(o.emit_window, 5 * CS_MS);
    assert_true(o.emit_window <= o.synthetic_interval);
}

/* ---- case 15: TestParseFlagsRejects, each message verbatim ----------------------------------- */

static void rejects(void **state)
{
    (void)state;
    EXPECT_ERROR("--mode must be loopback, remote, local, localtap or lake, got \"carrier-pigeon\"", "--mode",
                 "carrier-pigeon");
    EXPECT_ERROR("--end 4 is before --start 9", "--mode", "remote", "--start", "9", "--end", "4");
    EXPECT_ERROR("--count must be positive in loopback mode", "--mode", "loopback", "--count", "0");
    EXPECT_ERROR("--start is required in local mode: captive core replays a known range", "--mode", "local",
                 "--core-config", "x", "--history-archive-urls", "y");
    EXPECT_ERROR("--core-config is required in local mode", "--mode", "local", "--start", "5",
                 "--history-archive-urls", "y");
    EXPECT_ERROR("--history-archive-urls is required in local mode", "--mode", "local", "--start", "5",
                 "--core-config", "x");
    EXPECT_ERROR("--start and --end are required in lake mode: a lake holds a known range", "--mode", "lake",
                 "--url", "http://127.0.0.1:1/lake", "--start", "5");
    EXPECT_ERROR("--url must name a lake in lake mode (http(s)://host:8462/lake or a directory), got "
                 "\"ws://127.0.0.1:8462\"",
                 "--mode", "lake", "--start", "5", "--end", "6");
    EXPECT_ERROR("--subscribers applies to the remote and loopback modes, not \"lake\"", "--mode", "lake", "--url",
                 "/tmp/lake", "--start", "5", "--end", "6", "--subscribers", "2");
    EXPECT_ERROR("--start, --end and --count must fit in a ledger sequence", "--mode", "remote", "--start",
                 "4294967296");
    EXPECT_ERROR("unexpected argument \"extra\"", "--mode", "remote", "extra");
    EXPECT_ERROR("flag provided but not defined: -turbo", "--turbo");
    EXPECT_ERROR("--chunk-size: chunk size 1024 is outside [4096,8388608]", "--chunk-size", "1024");
    EXPECT_ERROR("--chunk-size: chunk size 16777216 is outside [4096,8388608]", "--chunk-size", "16777216");
    EXPECT_ERROR("--emit-window -1ms is negative", "--emit-window", "-1ms");
    EXPECT_ERROR("--emit-window 20ms does not fit inside --synthetic-interval 10ms", "--emit-window", "20ms",
                 "--synthetic-interval", "10ms");
    EXPECT_ERROR("--pipe-cmd is required in localtap mode", "--mode", "localtap");
    EXPECT_ERROR("--compress-level \"fast\" is not auto or an integer", "--compress-level", "fast");
    EXPECT_ERROR("--compress-level 0 is not a level: use auto, or a zstd level other than 0", "--compress-level",
                 "0");
}

static void rejects_more(void **state)
{
    (void)state;
    EXPECT_ERROR("--start, --end and --count must fit in a ledger sequence", "--end", "4294967296");
    EXPECT_ERROR("--start, --end and --count must fit in a ledger sequence", "--count", "4294967296");
    EXPECT_ERROR("--start, --end and --count must fit in a ledger sequence", "--mode", "remote", "--count",
                 "18446744073709551615");
    EXPECT_ERROR("invalid value \"18446744073709551616\" for flag -start: value out of range", "--start",
                 "18446744073709551616");
    EXPECT_ERROR("invalid value \"-1\" for flag -count: parse error", "--count", "-1");
    EXPECT_ERROR("invalid value \"10\" for flag -emit-window: parse error", "--emit-window", "10");
    EXPECT_ERROR("flag needs an argument: -mode", "--mode");
    EXPECT_ERROR("--mode must be loopback, remote, local, localtap or lake, got \"\"", "--mode", "");
    EXPECT_ERROR("--mode must be loopback, remote, local, localtap or lake, got \"LOOPBACK\"", "--mode", "LOOPBACK");
    EXPECT_ERROR("--mode must be loopback, remote, local, localtap or lake, got \"a\\\"b\\n\"", "--mode", "a\"b\n");
    EXPECT_ERROR("unexpected argument \"caf\xc3\xa9 \\x01\"", "caf\xc3\xa9 \x01");
    EXPECT_ERROR("--chunk-size: chunk size 4095 is outside [4096,8388608]", "--chunk-size", "4095");
    EXPECT_ERROR("--chunk-size: chunk size -1 is outside [4096,8388608]", "-chunk-size=-1");
    EXPECT_ERROR("--emit-window 1h0m0.5s does not fit inside --synthetic-interval 1h0m0s", "--emit-window",
                 "3600.5s", "--synthetic-interval", "1h");
    EXPECT_ERROR("--end 1 is before --start 4294967295", "--mode", "remote", "--start", "4294967295", "--end",
                 "1");
}

static void accepts(void **state)
{
    (void)state;
    EXPECT_OK("--mode", "remote");
    EXPECT_OK("--mode", "remote", "--start", "9");                  /* end 0: unbounded */
    EXPECT_OK("--mode", "remote", "--start", "9", "--end", "9");    /* a single ledger */
    EXPECT_OK("--mode", "remote", "--count", "0");                  /* count is loopback's */
    EXPECT_OK("--mode", "remote", "--emit-window", "20ms");         /* window vs interval: loopback only */
    EXPECT_OK("--synthetic-interval", "0", "--emit-window", "20ms"); /* no cadence: anything fits */
    EXPECT_OK("--synthetic-interval", "-1ms", "--emit-window", "20ms");
    EXPECT_OK("--emit-window", "10ms");                              /* equal fits */
    EXPECT_OK("--emit-window", "0");
    EXPECT_OK("--chunk-size", "4096");
    EXPECT_OK("--chunk-size", "8388608");
    EXPECT_OK("--chunk-size", "0x1000");
    EXPECT_OK("--start", "4294967295", "--mode", "remote");
    EXPECT_OK("--mode", "local", "--start", "5", "--core-config", "x", "--history-archive-urls", "y");
    EXPECT_OK("--mode", "localtap", "--pipe-cmd", "true");
    EXPECT_OK("--mode", "localtap", "--pipe-cmd", "true", "--start", "0");
    EXPECT_OK("--mode", "remote", "--");                           /* `--` ends the flags */

    br_options o;
    cs_err err;
    assert_int_equal(parse(ARGV("--compress-level", "3"), &o, &err, NULL), 0);
    assert_int_equal(o.compress_level, 3);
    assert_int_equal(parse(ARGV("--compress-level", "-5"), &o, &err, NULL), 0);
    assert_int_equal(o.compress_level, -5);
    assert_int_equal(parse(ARGV("--compress-level", "auto"), &o, &err, NULL), 0);
    assert_int_equal(o.compress_level, 0);
}

/* Everything after `--` is positional. */
static void double_dash_then_argument(void **state)
{
    (void)state;
    EXPECT_ERROR("unexpected argument \"--mode\"", "--", "--mode");
}

/* ---- the order of the checks -------------------------------------------------------------------- */

static void validation_order(void **state)
{
    (void)state;
    /* 1. flag parse errors, then a stray argument */
    EXPECT_ERROR("flag provided but not defined: -turbo", "--mode", "x", "--start", "4294967296", "--turbo",
                 "extra");
    EXPECT_ERROR("unexpected argument \"extra\"", "--mode", "x", "--start", "4294967296", "--chunk-size", "1",
                 "extra");
    /* 2. sequences */
    EXPECT_ERROR("--start, --end and --count must fit in a ledger sequence", "--mode", "x", "--start",
                 "4294967296", "--end", "1", "--chunk-size", "1", "--emit-window", "-1ms");
    /* 3. end before start */
    EXPECT_ERROR("--end 4 is before --start 9", "--mode", "x", "--start", "9", "--end", "4", "--chunk-size", "1",
                 "--emit-window", "-1ms");
    /* 4. chunk size */
    EXPECT_ERROR("--chunk-size: chunk size 1 is outside [4096,8388608]", "--mode", "x", "--chunk-size", "1",
                 "--emit-window", "-1ms", "--count", "0");
    /* 5. negative window (before the window/interval check) */
    EXPECT_ERROR("--emit-window -1ms is negative", "--mode", "x", "--emit-window", "-1ms",
                 "--synthetic-interval", "-5ms");
    /* 6. window inside the interval, loopback only, before the count check */
    EXPECT_ERROR("--emit-window 20ms does not fit inside --synthetic-interval 10ms", "--emit-window", "20ms",
                 "--count", "0");
    /* 7. per mode */
    EXPECT_ERROR("--mode must be loopback, remote, local, localtap or lake, got \"x\"", "--mode", "x", "--count", "0",
                 "--emit-window", "20ms");
    EXPECT_ERROR("--start is required in local mode: captive core replays a known range", "--mode", "local");
    EXPECT_ERROR("--core-config is required in local mode", "--mode", "local", "--start", "1");
    EXPECT_ERROR("--history-archive-urls is required in local mode", "--mode", "local", "--start", "1",
                 "--core-config", "c");
    /* The last occurrence of a flag wins. */
    EXPECT_ERROR("--count must be positive in loopback mode", "--mode", "remote", "--mode", "loopback", "--count",
                 "0");
}

/* ---- Go flag syntax --------------------------------------------------------------------------- */

static void go_flag_syntax(void **state)
{
    (void)state;
    br_options o;
    cs_err err;
    assert_int_equal(parse(ARGV("-mode=remote", "--url", "ws://box:8462/stream?token=a", "-start", "0x10", "--end=1_000",
                                "-csv", "out.csv", "--verify", "-remote-compressible=true", "--compress=false"),
                           &o, &err, NULL),
                     0);
    assert_string_equal(o.mode, "remote");
    assert_string_equal(o.url, "ws://box:8462/stream?token=a");
    assert_int_equal(o.start, 16);
    assert_int_equal(o.end, 1000);
    assert_string_equal(o.csv, "out.csv");
    assert_true(o.verify);
    assert_true(o.remote_compressible);
    assert_false(o.compress);

    assert_int_equal(parse(ARGV("--count", "8", "--synthetic-size", "65536", "--synthetic-interval", "10ms",
                                "--emit-window", "5ms", "--verify", "--compress", "--chunk-size", "65536"),
                           &o, &err, NULL),
                     0);
    assert_string_equal(o.mode, "loopback");
    assert_int_equal(o.count, 8);
    assert_int_equal(o.synthetic_size, 65536);
    assert_int_equal(o.synthetic_interval, 10 * CS_MS);
    assert_int_equal(o.emit_window, 5 * CS_MS);
    assert_int_equal(o.chunk_size, 65536);
    assert_true(o.verify);
    assert_true(o.compress);

    assert_int_equal(parse(ARGV("--mode", "localtap", "--pipe-cmd", "stellar-core run", "--pipe-size", "2097152",
                                "--emit-window", "7500us"),
                           &o, &err, NULL),
                     0);
    assert_string_equal(o.pipe_cmd, "stellar-core run");
    assert_int_equal(o.pipe_size, 2097152);
    assert_int_equal(o.emit_window, 7500 * CS_US);

    assert_int_equal(parse(ARGV("--mode", "local", "--start", "55000000", "--core-binary", "/bin/core",
                                "--core-config", "c.cfg", "--history-archive-urls", "https://a,https://b",
                                "--storage-dir", "/data", "--network-passphrase", "Test SDF Network"),
                           &o, &err, NULL),
                     0);
    assert_string_equal(o.core_binary, "/bin/core");
    assert_string_equal(o.core_config, "c.cfg");
    assert_string_equal(o.history_archive_urls, "https://a,https://b");
    assert_string_equal(o.storage_dir, "/data");
    assert_string_equal(o.network_passphrase, "Test SDF Network");
}

/* ---- help and usage ----------------------------------------------------------------------------- */

static void help_prints_usage(void **state)
{
    (void)state;
    static const char *const forms[] = {"-h", "--help", "-help"};
    for (size_t i = 0; i < 3; i++) {
        br_options o;
        cs_err err;
        char *usage = NULL;
        char *argv[] = {"benchrunner", (char *)forms[i], NULL};
        assert_int_equal(parse(argv, &o, &err, &usage), 1);
        assert_non_null(usage);
        assert_true(strncmp(usage, "Usage of benchrunner:\n", 22) == 0);
        /* what it is for, an example, where the progress goes and the exit codes, before the flags */
        const char *flags = strstr(usage, "\n  -");
        const char *lines[] = {"\nMeasures how ledgers arrive from a corestreamd: ", "\nExample: benchrunner --mode ",
                               "progress line is redrawn each second on standard error (not with --quiet)",
                               "2 --csv cannot be created, 128+N stopped by\nsignal N"};
        for (size_t k = 0; k < 4; k++) {
            const char *at = strstr(usage, lines[k]);
            if (!at || !flags || at > flags)
                fail_msg("usage lacks \"%s\" before its flags:\n%s", lines[k], usage);
        }
        free(usage);
    }
}

/* --version wins over validation, as -h does; --version=false is the ordinary path. */
static void version_is_reported_before_validation(void **state)
{
    (void)state;
    br_options o;
    cs_err err;
    assert_int_equal(parse(ARGV("--version"), &o, &err, NULL), BR_OPTIONS_VERSION);
    assert_int_equal(parse(ARGV("--mode", "bogus", "-version"), &o, &err, NULL), BR_OPTIONS_VERSION);
    assert_int_equal(parse(ARGV("--version=false", "--mode", "bogus"), &o, &err, NULL), -1);
    assert_string_equal(err.msg, "--mode must be loopback, remote, local, localtap or lake, got \"bogus\"");
}

static void usage_lists_every_flag_with_its_default(void **state)
{
    (void)state;
    br_options o;
    cs_err err;
    char *usage = NULL;
    assert_int_equal(parse(ARGV("-h"), &o, &err, &usage), 1);
    static const char *const want[] = {
        "\n  -chunk-size int\n",
        "(default 262144)\n",
        "\n  -compress\n",
        "\n  -compress-level level\n",
        "(default \"auto\")\n",
        "\n  -core-binary string\n",
        "\n  -core-config string\n",
        "\n  -count uint\n",
        "(default 100)\n",
        "\n  -csv string\n",
        "\n  -emit-window duration\n",
        "(default 5ms)\n",
        "\n  -end uint\n",
        "\n  -history-archive-urls string\n",
        "\n  -mode string\n    \tloopback|remote|local|localtap|lake (default \"loopback\")\n",
        "\n  -network-passphrase string\n",
        "\n  -pipe-cmd string\n",
        "\n  -pipe-size int\n",
        "\n  -quiet\n    \tno progress line (by default one is redrawn each second on standard error when it is a "
        "terminal)\n",
        "(default 1048576)\n",
        "\n  -remote-compressible\n",
        "\n  -start uint\n",
        "\n  -storage-dir string\n",
        "\n  -synthetic-interval duration\n",
        "(default 10ms)\n",
        "\n  -synthetic-size int\n",
        "(default 204800)\n",
        "\n  -url string\n",
        "(default \"ws://127.0.0.1:8462\")\n",
        "\n  -verify\n",
        "\n  -version\n    \tprint the version, commit, build type and library versions, then exit\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(usage, want[i]))
            fail_msg("usage is missing \"%s\":\n%s", want[i], usage);
    /* Sorted by name. */
    assert_true(strstr(usage, "-chunk-size") < strstr(usage, "-compress"));
    assert_true(strstr(usage, "-url") < strstr(usage, "-verify"));
    free(usage);
}

/* A flag error prints the error and the usage, and the usage shows the defaults, not the values
 * parsed before the error. */
static void flag_error_prints_error_then_usage_with_defaults(void **state)
{
    (void)state;
    br_options o;
    cs_err err;
    char *usage = NULL;
    assert_int_equal(parse(ARGV("--mode", "remote", "--count", "7", "--turbo"), &o, &err, &usage), -1);
    assert_string_equal(err.msg, "flag provided but not defined: -turbo");
    assert_true(strncmp(usage, "flag provided but not defined: -turbo\nUsage of benchrunner:\n", 59) == 0);
    assert_non_null(strstr(usage, "(default \"loopback\")"));
    assert_non_null(strstr(usage, "(default 100)"));
    free(usage);

    /* Validation errors print nothing: the caller reports them. */
    usage = NULL;
    assert_int_equal(parse(ARGV("--count", "0"), &o, &err, &usage), -1);
    assert_string_equal(usage, "");
    free(usage);
}

/* br_options_validate alone, on a struct built by hand. */
static void validate_directly(void **state)
{
    (void)state;
    br_options o;
    cs_err err;
    br_options_defaults(&o);
    assert_int_equal(br_options_validate(&o, &err), 0);
    o.mode = "remote";
    o.end = 3;
    o.start = 4;
    assert_int_equal(br_options_validate(&o, &err), -1);
    assert_string_equal(err.msg, "--end 3 is before --start 4");
    o.end = 0;
    assert_int_equal(br_options_validate(&o, &err), 0);
    o.mode = "localtap";
    assert_int_equal(br_options_validate(&o, &err), -1);
    assert_string_equal(err.msg, "--pipe-cmd is required in localtap mode");
}

/* ---- remote over wss:// and tokens ------------------------------------------------------------ */

static void tls_and_token_flags(void **state)
{
    (void)state;
    br_options o;
    cs_err err;
    assert_int_equal(parse(ARGV("--mode", "remote"), &o, &err, NULL), 0);
    assert_string_equal(o.tls_ca, "");
    assert_string_equal(o.tls_server_name, "");
    assert_string_equal(o.tls_cert, "");
    assert_string_equal(o.tls_key, "");
    assert_string_equal(o.token, "");
    assert_string_equal(o.token_file, "");

    assert_int_equal(parse(ARGV("--mode", "remote", "--url", "wss://box:8462", "-tls-ca", "/etc/ca.pem",
                                "-tls-server-name=core.example", "--tls-cert", "c.pem", "-tls-key", "k.pem",
                                "-token", "s3cret"),
                           &o, &err, NULL),
                     0);
    assert_string_equal(o.tls_ca, "/etc/ca.pem");
    assert_string_equal(o.tls_server_name, "core.example");
    assert_string_equal(o.tls_cert, "c.pem");
    assert_string_equal(o.tls_key, "k.pem");
    assert_string_equal(o.token, "s3cret");
    EXPECT_OK("--mode", "remote", "-token-file", "/run/token");
    EXPECT_OK("--mode", "remote", "-tls-cert", "both.pem"); /* the key may live in the same file */

    EXPECT_ERROR("--tls-key needs --tls-cert", "--mode", "remote", "-tls-key", "k.pem");
    EXPECT_ERROR("--token and --token-file cannot both be given", "--mode", "remote", "-token", "a", "-token-file",
                 "f");
    /* the mode's own checks come first */
    EXPECT_ERROR("--mode must be loopback, remote, local, localtap or lake, got \"x\"", "--mode", "x", "-tls-key", "k");

    char *usage = NULL;
    assert_int_equal(parse(ARGV("-h"), &o, &err, &usage), 1);
    static const char *const want[] = {"\n  -tls-ca string\n", "\n  -tls-cert string\n", "\n  -tls-key string\n",
                                       "\n  -tls-server-name string\n", "\n  -token string\n",
                                       "\n  -token-file string\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(usage, want[i]))
            fail_msg("usage is missing \"%s\":\n%s", want[i], usage);
    assert_true(strstr(usage, "-tls-server-name") < strstr(usage, "-token "));
    free(usage);
}

/* --subscribers, --resume and --resume-retries: defaults, where they apply, their bounds. */
static void subscribers_and_resume_flags(void **state)
{
    (void)state;
    br_options o;
    cs_err err;
    assert_int_equal(parse(ARGV("--mode", "remote"), &o, &err, NULL), 0);
    assert_int_equal(o.subscribers, 1);
    assert_false(o.resume);
    assert_int_equal(o.resume_retries, 10);

    assert_int_equal(parse(ARGV("--mode", "remote", "--subscribers", "128", "--resume", "--resume-retries", "-1"),
                           &o, &err, NULL),
                     0);
    assert_int_equal(o.subscribers, 128);
    assert_true(o.resume);
    assert_int_equal(o.resume_retries, -1);
    EXPECT_OK("--mode", "loopback", "-subscribers", "4", "-resume");
    EXPECT_OK("--mode", "remote", "-subscribers", "1024");
    EXPECT_OK("--mode", "local", "--start", "2", "--core-config", "c.toml", "--history-archive-urls", "h",
              "-subscribers", "1");
    /* --resume-retries alone changes nothing and is accepted, as a default would be */
    EXPECT_OK("--mode", "remote", "-resume-retries", "0");

    EXPECT_ERROR("--subscribers must be 1 to 1024, got 0", "--mode", "remote", "--subscribers", "0");
    EXPECT_ERROR("--subscribers must be 1 to 1024, got 1025", "--mode", "remote", "--subscribers", "1025");
    EXPECT_ERROR("--subscribers must be 1 to 1024, got -3", "--subscribers", "-3");
    EXPECT_ERROR("--subscribers applies to the remote and loopback modes, not \"localtap\"", "--mode", "localtap",
                 "--pipe-cmd", "x", "--subscribers", "2");
    EXPECT_ERROR("--resume applies to the remote and loopback modes, not \"localtap\"", "--mode", "localtap",
                 "--pipe-cmd", "x", "--resume");
    EXPECT_ERROR("--resume-retries 0 would never reconnect: give a positive budget, or a negative one for no limit",
                 "--mode", "remote", "--resume", "--resume-retries", "0");
    /* the mode's own checks come first */
    EXPECT_ERROR("--pipe-cmd is required in localtap mode", "--mode", "localtap", "--subscribers", "2");

    char *usage = NULL;
    assert_int_equal(parse(ARGV("-h"), &o, &err, &usage), 1);
    static const char *const want[] = {
        "\n  -subscribers int\n    \tremote and loopback: K subscribers in this process, served by one thread "
        "(1..1024) (default 1)\n",
        "\n  -resume\n    \tremote and loopback: reconnect when a connection is lost and go on from the next "
        "ledger\n",
        "\n  -resume-retries int\n    \twith -resume: attempts in a row without a ledger before giving up "
        "(negative = no limit) (default 10)\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(usage, want[i]))
            fail_msg("usage is missing \"%s\":\n%s", want[i], usage);
    free(usage);
}

/* --busy-poll-us: off by default, microseconds into rl_options.busy_poll_ns, one subscriber only. */
static void busy_poll_flag(void **state)
{
    (void)state;
    br_options o;
    cs_err err;
    assert_int_equal(parse(ARGV("--mode", "remote"), &o, &err, NULL), 0);
    assert_int_equal(o.busy_poll_us, 0);
    assert_int_equal(parse(ARGV("--mode", "remote", "--busy-poll-us", "50"), &o, &err, NULL), 0);
    assert_int_equal(o.busy_poll_us, 50);
    EXPECT_OK("--mode", "loopback", "-busy-poll-us", "1000000");
    EXPECT_OK("--mode", "remote", "--subscribers", "8", "--busy-poll-us", "0");
    EXPECT_ERROR("--busy-poll-us must be 0 to 1000000, got -1", "--mode", "remote", "--busy-poll-us", "-1");
    EXPECT_ERROR("--busy-poll-us must be 0 to 1000000, got 1000001", "--busy-poll-us", "1000001");
    EXPECT_ERROR("--busy-poll-us applies to the remote and loopback modes, not \"localtap\"", "--mode", "localtap",
                 "--pipe-cmd", "x", "--busy-poll-us", "10");
    EXPECT_ERROR("--busy-poll-us applies to one subscriber: --subscribers 4 polls its sessions without blocking in "
                 "any one of them",
                 "--mode", "remote", "--subscribers", "4", "--busy-poll-us", "10");
    char *usage = NULL;
    assert_int_equal(parse(ARGV("-h"), &o, &err, &usage), 1);
    const char *want = "\n  -busy-poll-us int\n    \tremote and loopback, one subscriber: busy-poll the socket this "
                       "many microseconds before blocking (0 = off); loopback: the in-process server's stream I/O "
                       "threads too\n  -chunk-size int\n";
    if (!strstr(usage, want))
        fail_msg("usage is missing \"%s\":\n%s", want, usage);
    free(usage);
}

/* --verify-dir: remote mode only, its path kept as given; the usage names its argument. */
static void verify_dir_flag(void **state)
{
    (void)state;
    br_options o;
    cs_err err;
    assert_int_equal(parse(ARGV("--mode", "remote", "--end", "5"), &o, &err, NULL), 0);
    assert_string_equal(o.verify_dir, "");
    assert_int_equal(parse(ARGV("--mode", "remote", "--verify-dir", "/srv/dump/"), &o, &err, NULL), 0);
    assert_string_equal(o.verify_dir, "/srv/dump/");
    assert_false(o.verify); /* implied at run time, not set here */
    EXPECT_ERROR("--verify-dir applies to the remote and lake modes, not \"loopback\"", "--verify-dir", "d");
    EXPECT_ERROR("--verify-dir applies to the remote and lake modes, not \"localtap\"", "--mode", "localtap", "--pipe-cmd",
                 "x", "--verify-dir", "d");
    char *usage = NULL;
    assert_int_equal(parse(ARGV("-h"), &o, &err, &usage), 1);
    const char *want = "\n  -verify-dir directory\n    \tremote: check every payload against the dump directory "
                       "instead: ledger N is its record (N-1) mod records, in ledger-<seq>.xdr order, as "
                       "corestreamd's file source serves it without --start-ledger\n  -version\n";
    if (!strstr(usage, want))
        fail_msg("usage is missing \"%s\":\n%s", want, usage);
    free(usage);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults),
        cmocka_unit_test(pacing_defaults),
        cmocka_unit_test(rejects),
        cmocka_unit_test(rejects_more),
        cmocka_unit_test(accepts),
        cmocka_unit_test(double_dash_then_argument),
        cmocka_unit_test(validation_order),
        cmocka_unit_test(go_flag_syntax),
        cmocka_unit_test(help_prints_usage),
        cmocka_unit_test(version_is_reported_before_validation),
        cmocka_unit_test(usage_lists_every_flag_with_its_default),
        cmocka_unit_test(flag_error_prints_error_then_usage_with_defaults),
        cmocka_unit_test(validate_directly),
        cmocka_unit_test(tls_and_token_flags),
        cmocka_unit_test(subscribers_and_resume_flags),
        cmocka_unit_test(busy_poll_flag),
        cmocka_unit_test(verify_dir_flag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
