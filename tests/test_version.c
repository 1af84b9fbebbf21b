/* SPDX-License-Identifier: Apache-2.0 */
/* Versions (issue 14.5): the build-info text, `--version` on both binaries, and the version in
 * corestreamd's start-up line and /healthz. The binaries are built from the same tree as this
 * test, so their `--version` must be byte for byte what cs_build_print writes here. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ctype.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

#include "common/buildinfo.h"
#include "support/procharness.h"
#include "support/tmpdir.h"
#include "support/wsclient.h"
#include "support/wait.h"

#if !defined(CORESTREAMD_BIN) || !defined(BENCHRUNNER_BIN) || !defined(PROJECT_VERSION) || \
    !defined(BUILD_TYPE)
#error "CORESTREAMD_BIN, BENCHRUNNER_BIN, PROJECT_VERSION and BUILD_TYPE must be defined"
#endif

static char *printed(const char *prog)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(cs_build_print(f, prog), 0);
    fclose(f);
    return text;
}

static bool commit_is_well_formed(const char *c)
{
    if (strcmp(c, "unknown") == 0)
        return true;
    size_t n = 0;
    while (isxdigit((unsigned char)c[n]) && !isupper((unsigned char)c[n]))
        n++;
    return n == 40 && (c[n] == '\0' || strcmp(c + n, "-dirty") == 0);
}

static void test_print_names_every_version(void **state)
{
    (void)state;
    assert_string_equal(cs_build_version(), PROJECT_VERSION);
    assert_string_equal(cs_build_type(), BUILD_TYPE);
    assert_true(commit_is_well_formed(cs_build_commit()));

    unsigned x = XXH_versionNumber();
    char want[1024];
    snprintf(want, sizeof want,
             "prog %s\ncommit: %s\nbuild type: %s\nzstd: %s\nxxhash: %u.%u.%u\nopenssl: %s\n",
             PROJECT_VERSION, cs_build_commit(), BUILD_TYPE, ZSTD_versionString(), x / 10000, x / 100 % 100,
             x % 100, OpenSSL_version(OPENSSL_VERSION_STRING));
    char *got = printed("prog");
    assert_string_equal(got, want);
    free(got);
}

/* Runs bin with args, expects exit 0 and exactly the build-info text on its output. */
static void expect_version(const char *bin, const char *prog, const char *const *args)
{
    char *argv[8];
    int n = 0;
    argv[n++] = (char *)bin;
    for (; *args && n < 7; args++)
        argv[n++] = (char *)*args;
    argv[n] = NULL;
    cs_proc p;
    assert_int_equal(cs_proc_start(&p, argv), 0);
    assert_int_equal(cs_proc_wait_exit(&p, WAIT_MS), 0);
    char *want = printed(prog);
    assert_string_equal(p.log, want);
    free(want);
    cs_proc_free(&p);
}

static void test_corestreamd_version(void **state)
{
    (void)state;
    const char *plain[] = {"--version", NULL};
    expect_version(CORESTREAMD_BIN, "corestreamd", plain);
    const char *single_dash[] = {"-version", NULL};
    expect_version(CORESTREAMD_BIN, "corestreamd", single_dash);
    /* --version answers before the other flags are validated, as -h does. */
    const char *with_bad_source[] = {"--source", "bogus", "--version", NULL};
    expect_version(CORESTREAMD_BIN, "corestreamd", with_bad_source);
}

static void test_benchrunner_version(void **state)
{
    (void)state;
    const char *plain[] = {"--version", NULL};
    expect_version(BENCHRUNNER_BIN, "benchrunner", plain);
    const char *with_bad_mode[] = {"--mode", "bogus", "--version", NULL};
    expect_version(BENCHRUNNER_BIN, "benchrunner", with_bad_mode);
}

static void test_version_false_runs_normally(void **state)
{
    (void)state;
    char *argv[] = {CORESTREAMD_BIN, "--version=false", "--source", "bogus", NULL};
    cs_proc p;
    assert_int_equal(cs_proc_start(&p, argv), 0);
    assert_int_equal(cs_proc_wait_exit(&p, WAIT_MS), 1);
    assert_non_null(strstr(p.log, "--source must be captive, file, synthetic, pipe or jetstream, got \\\"bogus\\\""));
    cs_proc_free(&p);
}

static void test_startup_line_and_healthz_carry_the_version(void **state)
{
    (void)state;
    cs_tmpdir tmp;
    assert_int_equal(cs_tmpdir_make(&tmp, "version"), 0);
    char datadir[PATH_MAX + 16];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/data", tmp.path);
    char *argv[] = {CORESTREAMD_BIN, datadir, "--listen", "127.0.0.1:0", "--synthetic-interval", "0",
                    "--synthetic-count", "3", "--synthetic-size", "4096", NULL};
    cs_proc p;
    assert_int_equal(cs_proc_start(&p, argv), 0);
    assert_int_equal(cs_proc_wait_listening(&p, WAIT_MS), 0);
    char line[1024], want[256];
    cs_proc_line(&p, line, sizeof line);
    snprintf(want, sizeof want, " version=%s commit=%s", PROJECT_VERSION, cs_build_commit());
    if (!strstr(line, want))
        fail_msg("missing %s in: %s", want, line);
    cs_proc_free(&p);

    /* /healthz once the ring holds the run: an endless source keeps the daemon up to ask. */
    char *argv2[] = {CORESTREAMD_BIN, datadir, "--listen", "127.0.0.1:0", "--synthetic-interval", "20ms",
                     "--synthetic-size", "4096", NULL};
    assert_int_equal(cs_proc_start(&p, argv2), 0);
    assert_int_equal(cs_proc_wait_listening(&p, WAIT_MS), 0);
    char body[512], ctype[64];
    assert_int_equal(cs_http_get("127.0.0.1", p.port, "/healthz", WAIT_MS, body, sizeof body, ctype, sizeof ctype),
                     200);
    assert_string_equal(ctype, "application/json");
    /* Right after PORTSPEC's five fields; the ring's health fields follow it. */
    snprintf(want, sizeof want, ",\"raw_fallbacks\":0,\"version\":\"%s\",\"ring_write_failures\":", PROJECT_VERSION);
    if (!strstr(body, want))
        fail_msg("/healthz %s does not carry %s", body, want);
    assert_true(strncmp(body, "{\"oldest\":", 10) == 0);
    assert_int_equal(cs_proc_stop(&p, SIGTERM, WAIT_MS), 0);
    cs_proc_free(&p);
    cs_tmpdir_remove(&tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_print_names_every_version),
        cmocka_unit_test(test_corestreamd_version),
        cmocka_unit_test(test_benchrunner_version),
        cmocka_unit_test(test_version_false_runs_normally),
        cmocka_unit_test(test_startup_line_and_healthz_carry_the_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
