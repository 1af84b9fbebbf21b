/* SPDX-License-Identifier: Apache-2.0 */
/* corestreamd's command line (PORTSPEC 1.1, 1.2; catalogue 1-9): defaults, every validation
 * message of 1.2 word for word, and their order (the first failure wins). Usage output goes to an
 * in-memory stream so it can be checked. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/godur.h"
#include "corestreamd/config.h"

#define NARGS(a) (sizeof(a) / sizeof((a)[0]))

/* One parse: the result code, the config, the error and everything written as usage. */
typedef struct parsed {
    int rc;
    cs_daemon_config cfg;
    cs_err err;
    char *out;
    size_t outlen;
} parsed;

static void parse_into(parsed *p, const char *const *args, size_t n)
{
    char *argv[64];
    assert_true(n + 1 < NARGS(argv));
    argv[0] = "corestreamd";
    for (size_t i = 0; i < n; i++)
        argv[i + 1] = (char *)args[i];
    argv[n + 1] = NULL;
    memset(p, 0, sizeof *p);
    FILE *f = open_memstream(&p->out, &p->outlen);
    assert_non_null(f);
    p->rc = cs_daemon_config_parse(&p->cfg, (int)n + 1, argv, f, &p->err);
    assert_int_equal(fclose(f), 0);
}

static void parsed_free(parsed *p)
{
    cs_daemon_config_free(&p->cfg);
    free(p->out);
    p->out = NULL;
}

static const char *describe(const char *const *args, size_t n, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? " " : "", args[i]);
    return buf;
}

/* Expects success and no usage output; the caller inspects p and frees it. */
static void expect_ok_into(parsed *p, const char *const *args, size_t n)
{
    char d[512];
    parse_into(p, args, n);
    if (p->rc != 0)
        fail_msg("[%s] rc %d, want 0: %s", describe(args, n, d, sizeof d), p->rc, p->err.msg);
    if (p->outlen != 0)
        fail_msg("[%s] printed usage on success: %s", describe(args, n, d, sizeof d), p->out);
}

static void expect_ok(const char *const *args, size_t n)
{
    parsed p;
    expect_ok_into(&p, args, n);
    parsed_free(&p);
}

/* Expects a validation error with exactly this message. Validation errors print nothing (the
 * caller logs them); only flag syntax errors print usage. */
static void expect_err(const char *const *args, size_t n, const char *want)
{
    char d[512];
    parsed p;
    parse_into(&p, args, n);
    if (p.rc != -1)
        fail_msg("[%s] rc %d, want -1 with: %s", describe(args, n, d, sizeof d), p.rc, want);
    if (strcmp(p.err.msg, want) != 0)
        fail_msg("[%s] error\n  %s\nwant\n  %s", describe(args, n, d, sizeof d), p.err.msg, want);
    if (p.outlen != 0)
        fail_msg("[%s] printed usage for a validation error: %s", describe(args, n, d, sizeof d), p.out);
    parsed_free(&p);
}

/* Expects a flag syntax error: the message, then printed as its own line followed by usage. */
static void expect_flag_err(const char *const *args, size_t n, const char *want)
{
    char d[512], line[600];
    parsed p;
    parse_into(&p, args, n);
    if (p.rc != -1)
        fail_msg("[%s] rc %d, want -1 with: %s", describe(args, n, d, sizeof d), p.rc, want);
    if (strcmp(p.err.msg, want) != 0)
        fail_msg("[%s] error\n  %s\nwant\n  %s", describe(args, n, d, sizeof d), p.err.msg, want);
    snprintf(line, sizeof line, "%s\nUsage of corestreamd:\n", want);
    if (!p.out || strncmp(p.out, line, strlen(line)) != 0)
        fail_msg("[%s] output does not start with the error then usage: %s", describe(args, n, d, sizeof d),
                 p.out ? p.out : "(null)");
    parsed_free(&p);
}

#define OK(...)                                                                                    \
    do {                                                                                           \
        const char *a_[] = {__VA_ARGS__};                                                          \
        expect_ok(a_, NARGS(a_));                                                                  \
    } while (0)

#define ERR(want, ...)                                                                             \
    do {                                                                                           \
        const char *a_[] = {__VA_ARGS__};                                                          \
        expect_err(a_, NARGS(a_), (want));                                                         \
    } while (0)

#define FLAG_ERR(want, ...)                                                                        \
    do {                                                                                           \
        const char *a_[] = {__VA_ARGS__};                                                          \
        expect_flag_err(a_, NARGS(a_), (want));                                                    \
    } while (0)

#define CEILING                                                                                    \
    "the requested range reaches ledger 4294967295, the last representable sequence, which is "    \
    "not streamable; lower --start-ledger or --synthetic-count"
#define SOURCE_ERR(s) "--source must be captive, file, synthetic, pipe or jetstream, got \"" s "\""

/* ---- 1: defaults ---- */

static void test_defaults(void **state)
{
    (void)state;
    parsed p;
    expect_ok_into(&p, NULL, 0);
    const cs_daemon_config *c = &p.cfg;
    assert_string_equal(c->listen, ":8462");
    assert_string_equal(c->source, "synthetic");
    assert_int_equal(c->retention, 10000);
    assert_true(c->ring_direct);
    assert_int_equal(c->synthetic_interval, CS_SEC);
    assert_int_equal(c->chunk_size, 262144);
    assert_int_equal(c->emit_window, 15 * CS_MS);
    assert_int_equal(c->cadence, 600 * CS_MS);
    /* The rest of the 1.1 table. */
    assert_int_equal(c->start_ledger, 0);
    assert_int_equal(c->pipe_size, 1048576);
    assert_string_equal(c->data_dir, "corestreamd-data");
    assert_string_equal(c->log_level, "info");
    assert_int_equal(c->log_level_value, 0);
    assert_string_equal(c->log_format, "logfmt");
    assert_int_equal(c->log_format_value, 0);
    assert_true(c->compress);
    assert_int_equal(c->compress_workers, 0);
    assert_string_equal(c->compress_level_text, "auto");
    assert_int_equal(c->compress_level, 0); /* auto */
    assert_string_equal(c->core_binary, "");
    assert_string_equal(c->core_config, "");
    assert_string_equal(c->history_archive_urls, "");
    assert_string_equal(c->storage_dir, "");
    assert_string_equal(c->network_passphrase, "");
    assert_string_equal(c->file_dir, "");
    assert_string_equal(c->pipe_cmd, "");
    assert_int_equal(c->file_count, 0);
    assert_int_equal(c->synthetic_size, 204800);
    assert_false(c->synthetic_compressible);
    assert_int_equal(c->synthetic_count, 0);
    assert_int_equal(c->nurls, 0);
    assert_int_equal(c->max_connections, 4096);
    assert_int_equal(c->max_connections_per_ip, 256);
    assert_int_equal(c->max_replays, 8);
    assert_int_equal(c->max_replays_per_ip, 2);
    assert_int_equal(c->busy_poll_us, 0); /* off */
    parsed_free(&p);
}

/* Every flag lands in its field, in Go flag syntax. */
static void test_every_flag_is_parsed(void **state)
{
    (void)state;
    parsed p;
    const char *args[] = {
        "--listen", "127.0.0.1:9000", "-source=captive", "--retention=5", "-start-ledger", "0x10",
        "--pipe-size", "-1", "--data-dir", "/d", "--log-level", "debug", "--chunk-size", "1_048_576",
        "--compress=false", "--compress-workers", "8", "--emit-window", "1m30s", "--cadence", "0",
        "--core-binary", "/bin/core", "--core-config", "c.toml", "--history-archive-urls",
        "https://a, https://b", "--storage-dir", "/s", "--network-passphrase", "Test SDF Network",
        "--file-dir", "/f", "--pipe-cmd", "echo", "--file-count", "0o17", "--synthetic-size", "64",
        "--synthetic-compressible", "--synthetic-interval", "-1s", "--synthetic-count", "3",
    };
    expect_ok_into(&p, args, NARGS(args));
    const cs_daemon_config *c = &p.cfg;
    assert_string_equal(c->listen, "127.0.0.1:9000");
    assert_string_equal(c->source, "captive");
    assert_int_equal(c->retention, 5);
    assert_int_equal(c->start_ledger, 16);
    assert_int_equal(c->pipe_size, -1);
    assert_string_equal(c->data_dir, "/d");
    assert_string_equal(c->log_level, "debug");
    assert_int_equal(c->chunk_size, 1048576);
    assert_false(c->compress);
    assert_int_equal(c->compress_workers, 8);
    assert_int_equal(c->emit_window, 90 * CS_SEC);
    assert_int_equal(c->cadence, 0);
    assert_string_equal(c->core_binary, "/bin/core");
    assert_string_equal(c->core_config, "c.toml");
    assert_string_equal(c->history_archive_urls, "https://a, https://b");
    assert_int_equal(c->nurls, 2);
    assert_string_equal(c->urls[0], "https://a");
    assert_string_equal(c->urls[1], "https://b");
    assert_string_equal(c->storage_dir, "/s");
    assert_string_equal(c->network_passphrase, "Test SDF Network");
    assert_string_equal(c->file_dir, "/f");
    assert_string_equal(c->pipe_cmd, "echo");
    assert_int_equal(c->file_count, 15);
    assert_int_equal(c->synthetic_size, 64);
    assert_true(c->synthetic_compressible);
    assert_int_equal(c->synthetic_interval, -CS_SEC);
    assert_int_equal(c->synthetic_count, 3);
    parsed_free(&p);

    /* The last occurrence wins; "--" ends the flags. */
    const char *again[] = {"--retention", "1", "--retention", "2", "--"};
    expect_ok_into(&p, again, NARGS(again));
    assert_int_equal(p.cfg.retention, 2);
    parsed_free(&p);
}

/* ---- 2: the file source ---- */

static void test_file_source(void **state)
{
    (void)state;
    ERR("--file-dir is required with --source file", "--source", "file");
    ERR("--file-dir is required with --source file", "--source", "file", "--file-dir", "");

    parsed p;
    const char *args[] = {"--source", "file", "--file-dir", "/data/dump"};
    expect_ok_into(&p, args, NARGS(args));
    assert_string_equal(p.cfg.file_dir, "/data/dump");
    assert_int_equal(p.cfg.file_count, 0);
    parsed_free(&p);

    /* A bounded file replay is subject to the sequence ceiling like any range. */
    ERR(CEILING, "--source", "file", "--file-dir", "d", "--start-ledger", "4294967290", "--file-count", "10");
    OK("--source", "file", "--file-dir", "d", "--start-ledger", "4294967290", "--file-count", "5");
    /* --synthetic-count does not bound a file source, and --file-count not a synthetic one. */
    OK("--source", "file", "--file-dir", "d", "--start-ledger", "4294967290", "--synthetic-count", "10");
    OK("--start-ledger", "4294967290", "--file-count", "10");
}

/* ---- 1.2 item 13: the pipe source ---- */

static void test_pipe_source(void **state)
{
    (void)state;
    ERR("--pipe-cmd or --pipe-path is required with --source pipe", "--source", "pipe");
    ERR("--pipe-cmd or --pipe-path is required with --source pipe", "--source", "pipe", "--pipe-cmd=");
    OK("--source", "pipe", "--pipe-cmd", "cat ledgers.xdr >&3");
    OK("--source", "pipe", "--pipe-path", "/run/corestreamd/meta.fifo");
    ERR("--pipe-cmd and --pipe-path cannot be used together: the pipe source runs core itself or reads the FIFO of "
        "a core that runs on its own",
        "--source", "pipe", "--pipe-cmd", "x", "--pipe-path", "/run/corestreamd/meta.fifo");
    /* --file-dir is not asked of the pipe source, nor --pipe-cmd of the file source. */
    OK("--source", "pipe", "--pipe-cmd", "x", "--file-dir", "");
    ERR("--file-dir is required with --source file", "--source", "file", "--pipe-cmd", "x");
    /* Pipe ignores the pacing fit and its count is unbounded (last = start). */
    OK("--source", "pipe", "--pipe-cmd", "x", "--emit-window", "5s", "--cadence", "1s",
       "--synthetic-interval", "1s");
    OK("--source", "pipe", "--pipe-cmd", "x", "--start-ledger", "4294967294", "--file-count", "9",
       "--synthetic-count", "9");
    ERR(CEILING, "--source", "pipe", "--pipe-cmd", "x", "--start-ledger", "4294967295");
}

/* ---- 3: pacing and chunk bounds ---- */

/* --compress-level: auto (the default, 0 to the server) or an integer in the flags' syntax; the
 * server checks the integer against zstd's range (test_corestreamd_proc). */
static int64_t level_of(const char *text)
{
    parsed p;
    const char *args[] = {"--compress-level", text};
    expect_ok_into(&p, args, NARGS(args));
    int64_t v = p.cfg.compress_level;
    parsed_free(&p);
    return v;
}

static void test_compress_level(void **state)
{
    (void)state;
    assert_int_equal(level_of("auto"), 0);
    assert_int_equal(level_of("3"), 3);
    assert_int_equal(level_of("-7"), -7);
    assert_int_equal(level_of("0x2"), 2);
    assert_int_equal(level_of("99"), 99); /* the server names the range */
    ERR("--compress-level \"fast\" is not auto or an integer", "--compress-level", "fast");
    ERR("--compress-level \"AUTO\" is not auto or an integer", "--compress-level", "AUTO");
    ERR("--compress-level \"1.5\" is not auto or an integer", "--compress-level", "1.5");
    ERR("--compress-level \"\" is not auto or an integer", "--compress-level", "");
    ERR("--compress-level 0 is not a level: use auto, or a zstd level other than 0", "--compress-level", "0");
    ERR("--compress-level 0 is not a level: use auto, or a zstd level other than 0", "--compress-level=-0");
}

static void test_pacing_and_chunk_bounds(void **state)
{
    (void)state;
    ERR("--chunk-size: chunk size 1024 is outside [4096,8388608]", "--chunk-size", "1024");
    ERR("--chunk-size: chunk size 16777216 is outside [4096,8388608]", "--chunk-size", "16777216");
    ERR("--chunk-size: chunk size 4095 is outside [4096,8388608]", "--chunk-size", "4095");
    ERR("--chunk-size: chunk size 8388609 is outside [4096,8388608]", "--chunk-size", "8388609");
    ERR("--chunk-size: chunk size 0 is outside [4096,8388608]", "--chunk-size", "0");
    ERR("--chunk-size: chunk size -1 is outside [4096,8388608]", "--chunk-size", "-1");
    OK("--chunk-size", "4096");
    OK("--chunk-size", "8388608");
    ERR("--emit-window -1ms is negative", "--emit-window", "-1ms");
    ERR("--cadence -1ms is negative", "--cadence", "-1ms");
    OK("--chunk-size", "65536", "--emit-window", "0", "--cadence", "0");
    OK("--ring-direct=false");

    /* The window must fit inside the grid it paces: the cadence for file... */
    ERR("--emit-window 1s does not fit inside --cadence 600ms", "--source", "file", "--file-dir", "d",
        "--emit-window", "1s");
    OK("--source", "file", "--file-dir", "d", "--emit-window", "600ms"); /* equal fits */
    OK("--source", "file", "--file-dir", "d", "--emit-window", "1s", "--cadence", "0");
    /* ...and the synthetic interval for synthetic. */
    ERR("--emit-window 2s does not fit inside --synthetic-interval 1s", "--emit-window", "2s");
    OK("--emit-window", "1s");
    OK("--emit-window", "2s", "--synthetic-interval", "0");
    OK("--emit-window", "2s", "--synthetic-interval", "-1s"); /* negative: unpaced, not rejected */
    /* Each source checks only its own grid. */
    OK("--emit-window", "1s", "--cadence", "10ms"); /* synthetic ignores --cadence */
    OK("--source", "file", "--file-dir", "d", "--emit-window", "500ms", "--synthetic-interval", "1ms");
    OK("--source", "captive", "--start-ledger", "5", "--core-config", "c", "--history-archive-urls", "u",
       "--emit-window", "1h", "--cadence", "1ms", "--synthetic-interval", "1ms");
}

/* Durations are printed in Go's Duration.String form. */
static void test_durations_in_go_form(void **state)
{
    (void)state;
    ERR("--emit-window -1m30s is negative", "--emit-window", "-90s");
    ERR("--emit-window -1.5µs is negative", "--emit-window", "-1500ns");
    ERR("--emit-window -1ns is negative", "--emit-window", "-1ns");
    ERR("--cadence -2h0m0s is negative", "--cadence", "-120m");
    ERR("--cadence -500µs is negative", "--cadence", "-500us");
    ERR("--emit-window 1.5s does not fit inside --synthetic-interval 1s", "--emit-window", "1500ms");
    ERR("--emit-window 1m0s does not fit inside --synthetic-interval 59.999999999s", "--emit-window",
        "1m", "--synthetic-interval", "59999999999ns");
    ERR("--emit-window 700ms does not fit inside --cadence 600ms", "--source", "file", "--file-dir",
        "d", "--emit-window", "0.7s");
    ERR("--emit-window 1h0m0.001s does not fit inside --cadence 1h0m0s", "--source", "file",
        "--file-dir", "d", "--emit-window", "3600001ms", "--cadence", "1h");
}

/* ---- 4 lives with the file source (validateFileDir); 5: captive requirements ---- */

static void test_captive_requirements(void **state)
{
    (void)state;
    /* --start-ledger is not required here: without it the run continues the ring, and only an
     * empty ring fails, at start (test_start). */
    OK("--source", "captive", "--core-config", "c", "--history-archive-urls", "u");
    ERR("--core-config is required with --source captive", "--source", "captive", "--start-ledger", "5",
        "--history-archive-urls", "u");
    ERR("--history-archive-urls is required with --source captive", "--source", "captive",
        "--start-ledger", "5", "--core-config", "c");
    /* In order: config, then archives. */
    ERR("--core-config is required with --source captive", "--source", "captive");
    ERR("--core-config is required with --source captive", "--source", "captive", "--start-ledger", "5");
    ERR(SOURCE_ERR("telepathy"), "--source", "telepathy");
    ERR(SOURCE_ERR(""), "--source", "");
    ERR(SOURCE_ERR("Synthetic"), "--source", "Synthetic");
    ERR("unexpected argument \"extra\"", "extra");
    FLAG_ERR("flag provided but not defined: -turbo", "--turbo");

    parsed p;
    const char *full[] = {"--source", "captive", "--start-ledger", "55000000", "--core-config",
                          "captive-core.cfg", "--history-archive-urls", "https://a,https://b"};
    expect_ok_into(&p, full, NARGS(full));
    assert_int_equal(p.cfg.start_ledger, 55000000);
    assert_int_equal(p.cfg.nurls, 2);
    assert_string_equal(p.cfg.urls[0], "https://a");
    assert_string_equal(p.cfg.urls[1], "https://b");
    parsed_free(&p);
}

/* Go quotes the offending source and argument with %q. */
static void test_quoted_arguments(void **state)
{
    (void)state;
    ERR("unexpected argument \"x\"", "x");
    ERR("unexpected argument \"x y\"", "x y");
    ERR("unexpected argument \"\"", "");
    ERR("unexpected argument \"a\\\"b\"", "a\"b");
    ERR("unexpected argument \"tab\\there\"", "tab\there");
    ERR(SOURCE_ERR("tele\\\"pathy"), "--source", "tele\"pathy");
    ERR(SOURCE_ERR("line\\n"), "--source", "line\n");
}

/* ---- 6: oversized sequences ---- */

static void test_oversized_sequences(void **state)
{
    (void)state;
    ERR("--start-ledger 4294967296 does not fit in a ledger sequence", "--start-ledger", "4294967296");
    ERR("--start-ledger 18446744073709551615 does not fit in a ledger sequence", "--start-ledger",
        "18446744073709551615");
    ERR("--synthetic-count 4294967296 is too large", "--synthetic-count", "4294967296");
    ERR("--file-count 4294967296 is too large", "--file-count", "4294967296");
    /* Checked for every source, even where the count does not apply. */
    ERR("--file-count 4294967296 is too large", "--file-count", "4294967296", "--source", "pipe",
        "--pipe-cmd", "x");
    ERR("--synthetic-count 4294967296 is too large", "--source", "file", "--file-dir", "d",
        "--synthetic-count", "4294967296");
    /* Values too big for a uint64 are flag syntax errors. */
    FLAG_ERR("invalid value \"18446744073709551616\" for flag -start-ledger: value out of range",
             "--start-ledger", "18446744073709551616");
    FLAG_ERR("invalid value \"-1\" for flag -start-ledger: parse error", "--start-ledger", "-1");
}

/* ---- 7: ranges reaching the ceiling ---- */

static void test_ranges_reaching_the_ceiling(void **state)
{
    (void)state;
    ERR(CEILING, "--start-ledger", "4294967295");
    ERR(CEILING, "--start-ledger", "4294967293", "--synthetic-count", "3");
    ERR(CEILING, "--start-ledger", "4294967290", "--synthetic-count", "10");
    ERR(CEILING, "--source", "captive", "--start-ledger", "4294967295", "--core-config", "c",
        "--history-archive-urls", "u");
    OK("--start-ledger", "4294967290", "--synthetic-count", "5"); /* ends at 4294967294 */
    OK("--start-ledger", "4294967294");
    OK("--start-ledger", "4294967294", "--synthetic-count", "1");
    /* Start 0 means 1: a count of MaxU32 reaches the ceiling, one less does not. */
    ERR(CEILING, "--synthetic-count", "4294967295");
    OK("--synthetic-count", "4294967294");
    ERR(CEILING, "--start-ledger", "0", "--source", "file", "--file-dir", "d", "--file-count", "4294967295");
    /* The sum is computed in 64 bits, so it cannot wrap below the ceiling. */
    ERR(CEILING, "--start-ledger", "4294967295", "--synthetic-count", "4294967295");
    ERR(CEILING, "--start-ledger", "2", "--synthetic-count", "4294967295");
}

/* ---- 8: oversized synthetic ledgers ---- */

static void test_oversized_synthetic_ledgers(void **state)
{
    (void)state;
    ERR("--synthetic-size 268435457 exceeds the 268435456-byte protocol payload cap", "--synthetic-size",
        "268435457");
    OK("--synthetic-size", "268435456");
    OK("--synthetic-size", "0");  /* ≤0 is defaulted by the source, not rejected */
    OK("--synthetic-size", "-5");
    /* Checked for every source. */
    ERR("--synthetic-size 268435457 exceeds the 268435456-byte protocol payload cap", "--source", "file",
        "--file-dir", "d", "--synthetic-size", "268435457");
    ERR("--synthetic-size 9223372036854775807 exceeds the 268435456-byte protocol payload cap",
        "--source", "captive", "--start-ledger", "5", "--core-config", "c", "--history-archive-urls", "u",
        "--synthetic-size", "9223372036854775807");
}

/* Admission caps (issue 10): negative means no cap, 0 would refuse everyone (or, for replays, leave
 * everyone waiting). */
static void test_connection_caps(void **state)
{
    (void)state;
    parsed p;
    const char *a[] = {"--max-connections", "100", "--max-connections-per-ip=-1"};
    expect_ok_into(&p, a, NARGS(a));
    assert_int_equal(p.cfg.max_connections, 100);
    assert_int_equal(p.cfg.max_connections_per_ip, -1);
    parsed_free(&p);
    ERR("--max-connections 0 would refuse every connection; use a negative value for no cap",
        "--max-connections", "0");
    ERR("--max-connections-per-ip 0 would refuse every connection; use a negative value for no cap",
        "--max-connections-per-ip", "0");
    const char *r[] = {"--max-replays", "3", "--max-replays-per-ip=-1"};
    expect_ok_into(&p, r, NARGS(r));
    assert_int_equal(p.cfg.max_replays, 3);
    assert_int_equal(p.cfg.max_replays_per_ip, -1);
    parsed_free(&p);
    ERR("--max-replays 0 would leave every replay waiting; use a negative value for no cap", "--max-replays",
        "0");
    ERR("--max-replays-per-ip 0 would leave every replay waiting; use a negative value for no cap",
        "--max-replays-per-ip", "0");
    const char *bp[] = {"--busy-poll-us", "50"};
    expect_ok_into(&p, bp, NARGS(bp));
    assert_int_equal(p.cfg.busy_poll_us, 50);
    parsed_free(&p);
    ERR("--busy-poll-us -1 is outside [0, 100000]", "--busy-poll-us=-1");
    ERR("--busy-poll-us 100001 is outside [0, 100000]", "--busy-poll-us", "100001");
    ERR("--auth-healthz needs --auth-tokens", "--auth-healthz");
    OK("--auth-tokens", "/etc/corestream/tokens", "--auth-healthz");
}

/* Issue 14: a level that does not parse is refused, naming the accepted ones (the prototype
 * silently took info); --log-format is logfmt or json. */
static void test_log_flags(void **state)
{
    (void)state;
    parsed p;
    const char *a[] = {"--log-level", "WARN+1", "--log-format", "json"};
    expect_ok_into(&p, a, NARGS(a));
    assert_int_equal(p.cfg.log_level_value, 5);
    assert_int_equal(p.cfg.log_format_value, 1);
    parsed_free(&p);
    OK("--log-level=debug", "--log-format=logfmt");
    ERR("--log-level \"bogus\" is not a level: use debug, info, warn or error (case-insensitive, with an "
        "optional offset such as info+2)",
        "--log-level", "bogus");
    ERR("--log-level \"\" is not a level: use debug, info, warn or error (case-insensitive, with an "
        "optional offset such as info+2)",
        "--log-level=");
    ERR("--log-format must be logfmt or json, got \"text\"", "--log-format", "text");
    ERR("--log-format must be logfmt or json, got \"JSON\"", "--log-format", "JSON");
}

/* ---- 9: splitURLs ---- */

static void test_split_urls(void **state)
{
    (void)state;
    const char *out[8];
    char list[] = " a , b ,, c ";
    size_t n = cs_split_urls(list, out, 8);
    assert_int_equal(n, 3);
    assert_string_equal(out[0], "a");
    assert_string_equal(out[1], "b");
    assert_string_equal(out[2], "c");

    char empty[] = "";
    assert_int_equal(cs_split_urls(empty, out, 8), 0);
    char blanks[] = " , ,\t, ";
    assert_int_equal(cs_split_urls(blanks, out, 8), 0);
    char one[] = "https://h/x";
    assert_int_equal(cs_split_urls(one, out, 8), 1);
    assert_string_equal(out[0], "https://h/x");
    char inner[] = "a b,c";
    assert_int_equal(cs_split_urls(inner, out, 8), 2);
    assert_string_equal(out[0], "a b"); /* only the ends are trimmed */
    assert_string_equal(out[1], "c");

    /* Through the flag: the raw text is kept, the split list is derived. */
    parsed p;
    const char *args[] = {"--history-archive-urls", " a , b ,, c "};
    expect_ok_into(&p, args, NARGS(args));
    assert_string_equal(p.cfg.history_archive_urls, " a , b ,, c ");
    assert_int_equal(p.cfg.nurls, 3);
    assert_string_equal(p.cfg.urls[0], "a");
    assert_string_equal(p.cfg.urls[1], "b");
    assert_string_equal(p.cfg.urls[2], "c");
    parsed_free(&p);
}

/* ---- help and flag syntax errors ---- */

/* --version wins over validation (the caller prints it); --version=false is the ordinary path. */
static void test_version(void **state)
{
    (void)state;
    parsed p;
    const char *a[] = {"--version"};
    parse_into(&p, a, 1);
    assert_int_equal(p.rc, CS_CONFIG_VERSION);
    assert_int_equal(p.outlen, 0);
    parsed_free(&p);
    const char *b[] = {"--source", "bogus", "-version"};
    parse_into(&p, b, 3);
    assert_int_equal(p.rc, CS_CONFIG_VERSION);
    parsed_free(&p);
    const char *c[] = {"--version=false", "--source", "bogus"};
    parse_into(&p, c, 3);
    assert_int_equal(p.rc, -1);
    assert_string_equal(p.err.msg, "--source must be captive, file, synthetic, pipe or jetstream, got \"bogus\"");
    parsed_free(&p);
}

static void test_help(void **state)
{
    (void)state;
    static const char *const forms[] = {"-h", "--h", "-help", "--help"};
    for (size_t i = 0; i < NARGS(forms); i++) {
        parsed p;
        const char *args[] = {forms[i]};
        parse_into(&p, args, 1);
        if (p.rc != 1)
            fail_msg("%s: rc %d, want 1 (%s)", forms[i], p.rc, p.err.msg);
        assert_non_null(p.out);
        if (strncmp(p.out, "Usage of corestreamd:\n", 22) != 0)
            fail_msg("%s: usage starts %.40s", forms[i], p.out);
        /* Every flag is listed. */
        static const char *const names[] = {
            "-listen", "-source", "-retention", "-start-ledger", "-pipe-size", "-data-dir",
            "-log-level", "-log-format", "-chunk-size", "-compress", "-compress-workers", "-emit-window", "-cadence",
            "-core-binary", "-core-config", "-history-archive-urls", "-storage-dir",
            "-network-passphrase", "-file-dir", "-pipe-cmd", "-file-count", "-synthetic-size",
            "-synthetic-compressible", "-synthetic-interval", "-synthetic-count",
        };
        for (size_t k = 0; k < NARGS(names); k++) {
            char want[64];
            snprintf(want, sizeof want, "\n  %s ", names[k]);
            char want_bool[64];
            snprintf(want_bool, sizeof want_bool, "\n  %s\n", names[k]);
            if (!strstr(p.out, want) && !strstr(p.out, want_bool))
                fail_msg("%s: usage does not list %s", forms[i], names[k]);
        }
        parsed_free(&p);
    }
    /* Help wins over what follows it, but not over an earlier syntax error. */
    parsed p;
    const char *later[] = {"-h", "--turbo"};
    parse_into(&p, later, 2);
    assert_int_equal(p.rc, 1);
    parsed_free(&p);
    FLAG_ERR("flag provided but not defined: -turbo", "--turbo", "-h");
}

static void test_flag_syntax_errors(void **state)
{
    (void)state;
    FLAG_ERR("flag provided but not defined: -turbo", "--turbo");
    FLAG_ERR("flag provided but not defined: -turbo", "-turbo=1");
    FLAG_ERR("invalid value \"x\" for flag -chunk-size: parse error", "--chunk-size", "x");
    FLAG_ERR("invalid value \"5\" for flag -emit-window: parse error", "--emit-window", "5");
    FLAG_ERR("flag needs an argument: -listen", "--listen");
    FLAG_ERR("invalid boolean value \"x\" for -compress: parse error", "--compress=x");
    /* A flag error beats every validation failure in the same argv. */
    FLAG_ERR("flag provided but not defined: -turbo", "--source", "telepathy", "--chunk-size", "1",
             "--turbo", "extra");
}

/* ---- the order of 1.2: the first failure wins ---- */

static void test_validation_order(void **state)
{
    (void)state;
    /* 1 before 2: the flag error, though a stray argument follows. */
    FLAG_ERR("flag provided but not defined: -turbo", "--turbo", "extra");
    /* Parsing stops at the first non-flag, so a later unknown flag is just another argument. */
    ERR("unexpected argument \"extra\"", "extra", "--turbo");
    /* 2 before 3. */
    ERR("unexpected argument \"extra\"", "--source", "telepathy", "extra");
    ERR("unexpected argument \"--turbo\"", "--", "--turbo");
    /* 3 before 4. */
    ERR(SOURCE_ERR("telepathy"), "--source", "telepathy", "--start-ledger", "4294967296");
    /* 4 before 5. */
    ERR("--start-ledger 4294967296 does not fit in a ledger sequence", "--start-ledger", "4294967296",
        "--synthetic-count", "4294967296", "--file-count", "4294967296");
    /* 5: synthetic count before file count. */
    ERR("--synthetic-count 4294967296 is too large", "--file-count", "4294967296", "--synthetic-count",
        "4294967296");
    /* 5 before 6. */
    ERR("--file-count 4294967296 is too large", "--file-count", "4294967296", "--chunk-size", "1");
    /* 6 before 7. */
    ERR("--chunk-size: chunk size 1 is outside [4096,8388608]", "--chunk-size", "1", "--emit-window",
        "-1ms", "--cadence", "-1ms");
    /* 7: window before cadence. */
    ERR("--emit-window -1ms is negative", "--cadence", "-2ms", "--emit-window", "-1ms");
    /* 6 before 8, 7 before 8 (a negative cadence never meets the fit check). */
    ERR("--chunk-size: chunk size 1 is outside [4096,8388608]", "--source", "file", "--file-dir", "d",
        "--chunk-size", "1", "--emit-window", "1s");
    ERR("--cadence -1s is negative", "--source", "file", "--file-dir", "d", "--emit-window", "1s",
        "--cadence", "-1s");
    /* 8 before 10; 9 before 10. */
    ERR("--emit-window 1s does not fit inside --cadence 600ms", "--source", "file", "--file-dir", "d",
        "--emit-window", "1s", "--start-ledger", "4294967295");
    ERR("--emit-window 2s does not fit inside --synthetic-interval 1s", "--emit-window", "2s",
        "--start-ledger", "4294967295");
    /* 10 before 11. */
    ERR(CEILING, "--start-ledger", "4294967295", "--synthetic-size", "268435457");
    /* 10 before 12: start = MaxU32 is refused for captive before the captive checks. */
    ERR(CEILING, "--source", "captive", "--start-ledger", "4294967295");
    /* 11 before 12 and 13. */
    ERR("--synthetic-size 268435457 exceeds the 268435456-byte protocol payload cap", "--source",
        "captive", "--synthetic-size", "268435457");
    ERR("--synthetic-size 268435457 exceeds the 268435456-byte protocol payload cap", "--source", "file",
        "--synthetic-size", "268435457");
    ERR("--synthetic-size 268435457 exceeds the 268435456-byte protocol payload cap", "--source", "pipe",
        "--synthetic-size", "268435457");
    /* 10 before 13. */
    ERR(CEILING, "--source", "file", "--start-ledger", "4294967295");
    ERR(CEILING, "--source", "pipe", "--start-ledger", "4294967295");
}

/* Freeing twice, or after a failed parse, is safe. */
static void test_free_is_safe(void **state)
{
    (void)state;
    parsed p;
    const char *bad[] = {"--turbo"};
    parse_into(&p, bad, 1);
    assert_int_equal(p.rc, -1);
    cs_daemon_config_free(&p.cfg);
    parsed_free(&p);
    const char *ok[] = {"--history-archive-urls", "a,b"};
    parse_into(&p, ok, 2);
    assert_int_equal(p.rc, 0);
    cs_daemon_config_free(&p.cfg);
    assert_null(p.cfg.urls_buf);
    parsed_free(&p);
}

/* --source jetstream: the edge's flags, defaults and refusals, each naming the bad input. */
/* The lake's flags: the layout, the readers, and --lake-dir and --lake-url (one of them), which need
 * the network they name. */
static void test_lake_flags(void **state)
{
    (void)state;
    parsed p;
    const char *args[] = {"--network-passphrase", "Test SDF Network ; September 2015", "--lake-dir", "/srv/lake",
                          "--lake-ledgers-per-batch", "64", "--lake-batches-per-partition", "1000"};
    expect_ok_into(&p, args, NARGS(args));
    assert_string_equal(p.cfg.lake_dir, "/srv/lake");
    assert_int_equal(p.cfg.lake_ledgers_per_batch, 64);
    assert_int_equal(p.cfg.lake_batches_per_partition, 1000);
    parsed_free(&p);
    ERR("--lake-dir needs --network-passphrase: the lake's config names its network", "--lake-dir", "/srv/lake");
    const char *s3[] = {"--network-passphrase", "Test SDF Network ; September 2015", "--lake-url", "s3://lake/pubnet"};
    expect_ok_into(&p, s3, NARGS(s3));
    assert_string_equal(p.cfg.lake_url, "s3://lake/pubnet");
    assert_string_equal(p.cfg.lake_dir, "");
    parsed_free(&p);
    ERR("--lake-url needs --network-passphrase: the lake's config names its network", "--lake-url", "s3://lake/x");
    ERR("--lake-url http://lake/x: not s3://bucket[/prefix]", "--network-passphrase", "n", "--lake-url",
        "http://lake/x");
    ERR("--lake-url and --lake-dir cannot be combined: a corestreamd exports to one lake", "--network-passphrase", "n",
        "--lake-url", "s3://lake", "--lake-dir", "/srv/lake");
    ERR("--lake-ledgers-per-batch 4294967296 does not fit in 32 bits", "--lake-ledgers-per-batch", "4294967296");
    ERR("--lake-readers 0 is outside [1,64]", "--lake-readers", "0");
}

static void test_edge_flags(void **state)
{
    (void)state;
    parsed p;
    const char *args[] = {"--source=jetstream", "--jetstream-source-url", "nats://a:4222,nats://b:4222",
                          "--jetstream-run", "synthetic-0123456789abcdef", "--jetstream-stream", "LEDGERS"};
    expect_ok_into(&p, args, NARGS(args));
    assert_string_equal(p.cfg.source, "jetstream");
    assert_string_equal(p.cfg.jetstream_source_url, "nats://a:4222,nats://b:4222");
    assert_string_equal(p.cfg.jetstream_run, "synthetic-0123456789abcdef");
    assert_string_equal(p.cfg.jetstream_stream, "LEDGERS");
    parsed_free(&p);
    /* Defaults: no URL, the newest run. */
    expect_ok_into(&p, NULL, 0);
    assert_string_equal(p.cfg.jetstream_source_url, "");
    assert_string_equal(p.cfg.jetstream_run, "");
    parsed_free(&p);
    OK("--source=jetstream", "--jetstream-source-url=nats://a:4222");

    ERR("--jetstream-source-url is required with --source jetstream", "--source=jetstream");
    ERR("--jetstream-url cannot be combined with --source jetstream: an edge serves a stream, it does not publish one",
        "--source=jetstream", "--jetstream-source-url=nats://a:4222", "--jetstream-url=nats://a:4222");
    ERR("--jetstream-stream \"a.b\" must be 1 to 32 characters of A-Z a-z 0-9 _ -", "--source=jetstream",
        "--jetstream-source-url=nats://a:4222", "--jetstream-stream=a.b");
    ERR("--jetstream-run \"x.y\" must be a run token (A-Z a-z 0-9 _ -, under 64 characters), as the core logs it "
        "in `jetstream publisher ready`",
        "--source=jetstream", "--jetstream-source-url=nats://a:4222", "--jetstream-run=x.y");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_every_flag_is_parsed),
        cmocka_unit_test(test_file_source),
        cmocka_unit_test(test_pipe_source),
        cmocka_unit_test(test_pacing_and_chunk_bounds),
        cmocka_unit_test(test_compress_level),
        cmocka_unit_test(test_durations_in_go_form),
        cmocka_unit_test(test_captive_requirements),
        cmocka_unit_test(test_quoted_arguments),
        cmocka_unit_test(test_oversized_sequences),
        cmocka_unit_test(test_ranges_reaching_the_ceiling),
        cmocka_unit_test(test_oversized_synthetic_ledgers),
        cmocka_unit_test(test_connection_caps),
        cmocka_unit_test(test_log_flags),
        cmocka_unit_test(test_split_urls),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_flag_syntax_errors),
        cmocka_unit_test(test_validation_order),
        cmocka_unit_test(test_free_is_safe),
        cmocka_unit_test(test_edge_flags),
        cmocka_unit_test(test_lake_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
