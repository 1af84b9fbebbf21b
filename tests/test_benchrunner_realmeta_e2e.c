/* SPDX-License-Identifier: Apache-2.0 */
/* benchrunner --verify-dir end to end: the real binary in remote mode against a real corestreamd
 * whose file source serves five public-network ledgers stellar-core wrote (../shared/realmeta,
 * read in place through symlinks and never copied into the project; the cases that need it skip,
 * saying so, where it is absent):
 *   - the dump verified against itself passes, across the dump's cycle (ledgers 6..10 are
 *     records 1..5 again, as the file source renumbers);
 *   - an expectation with one byte changed, or one byte short, fails the run naming the ledger,
 *     the file and the offset or both lengths;
 *   - a --verify-dir that cannot be scanned fails before any connection.
 * Every wait is bounded. BENCHRUNNER_BIN, CORESTREAMD_BIN and CS_REALMETA_DIR are absolute. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/procharness.h"
#include "support/tmpdir.h"

#ifndef BENCHRUNNER_BIN
#error "BENCHRUNNER_BIN must name the benchrunner binary"
#endif
#ifndef CORESTREAMD_BIN
#error "CORESTREAMD_BIN must name the corestreamd binary"
#endif
#ifndef CS_REALMETA_DIR
#error "CS_REALMETA_DIR must name ../shared/realmeta"
#endif

#define RUN_MS 60000   /* bound for a whole benchrunner run */
#define START_MS 15000 /* bound for corestreamd to start listening */

static const char *const k_pubnet[] = {"pubnet-ledger-6154623.xdr", "pubnet-ledger-16154623.xdr",
                                       "pubnet-ledger-26154623.xdr", "pubnet-ledger-36154623.xdr",
                                       "pubnet-ledger-46154623.xdr"};
#define PUBNET_N (sizeof k_pubnet / sizeof k_pubnet[0])

static cs_tmpdir g_tmp;
static cs_proc g_srv;
static bool g_srv_live;
static char g_url[64];

static int setup(void **state)
{
    (void)state;
    return cs_tmpdir_make(&g_tmp, "benchreal");
}

static int teardown(void **state)
{
    (void)state;
    if (g_srv_live) {
        cs_proc_stop(&g_srv, SIGTERM, 15000);
        cs_proc_free(&g_srv);
    }
    g_srv_live = false;
    cs_tmpdir_remove(&g_tmp);
    return 0;
}

static bool realmeta_present(void)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/SHA256SUMS", CS_REALMETA_DIR);
    if (access(path, R_OK) == 0)
        return true;
    fprintf(stderr, "SKIP: %s is absent: the real-ledger cases need it\n", CS_REALMETA_DIR);
    return false;
}

/* tmp/name: a directory of symlinks ledger-1..5.xdr to the public-network ledgers, in order. */
static void make_dump(const char *name, char *dir, size_t len)
{
    cs_tmpdir_join(&g_tmp, name, dir, len);
    assert_int_equal(mkdir(dir, 0700), 0);
    for (size_t i = 0; i < PUBNET_N; i++) {
        char src[PATH_MAX], dst[2 * PATH_MAX];
        snprintf(src, sizeof src, "%s/%s", CS_REALMETA_DIR, k_pubnet[i]);
        snprintf(dst, sizeof dst, "%s/ledger-%zu.xdr", dir, i + 1);
        assert_int_equal(symlink(src, dst), 0);
    }
}

/* Replaces dir/ledger-<n>.xdr (a symlink) by a copy of its target, one byte changed at flip, or
 * cut one byte short when flip is SIZE_MAX. Returns the target's length. */
static size_t corrupt(const char *dir, size_t n, size_t flip)
{
    char src[PATH_MAX], dst[2 * PATH_MAX];
    snprintf(src, sizeof src, "%s/%s", CS_REALMETA_DIR, k_pubnet[n - 1]);
    snprintf(dst, sizeof dst, "%s/ledger-%zu.xdr", dir, n);
    FILE *f = fopen(src, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    size_t len = (size_t)ftell(f);
    rewind(f);
    unsigned char *b = malloc(len);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, len, f), len);
    fclose(f);
    if (flip != SIZE_MAX)
        b[flip] ^= 0x01;
    assert_int_equal(unlink(dst), 0);
    f = fopen(dst, "wb");
    assert_non_null(f);
    size_t keep = flip == SIZE_MAX ? len - 1 : len;
    assert_int_equal(fwrite(b, 1, keep, f), keep);
    assert_int_equal(fclose(f), 0);
    free(b);
    return len;
}

/* corestreamd's file source over dump, endless (the dump cycles), a ledger every 50 ms. Endless
 * rather than --file-count: a bounded run is over and the daemon gone about 250 ms after it
 * listens, which a benchrunner started after it could miss on a loaded machine. */
static void start_server(const char *dump)
{
    char data_dir[PATH_MAX + 32];
    cs_tmpdir_join(&g_tmp, "corestreamd-data", data_dir, sizeof data_dir);
    char *argv[] = {CORESTREAMD_BIN, "--listen", "127.0.0.1:0", "--source", "file", "--file-dir", (char *)dump,
                    "--cadence", "50ms", "--data-dir", data_dir, NULL};
    assert_int_equal(cs_proc_start(&g_srv, argv), 0);
    g_srv_live = true;
    if (cs_proc_wait_listening(&g_srv, START_MS) != 0)
        fail_msg("corestreamd did not start listening:\n%s", g_srv.log);
    snprintf(g_url, sizeof g_url, "ws://127.0.0.1:%d", g_srv.port);
}

/* benchrunner --mode remote over [1, end] with --verify-dir expect; returns its exit status, its
 * output in *p (free with cs_proc_free). */
static int run_verify(cs_proc *p, const char *url, const char *end, const char *expect)
{
    char *argv[] = {BENCHRUNNER_BIN, "--mode", "remote", "--url", (char *)url, "--start", "1",
                    "--end", (char *)end, "--verify-dir", (char *)expect, NULL};
    assert_int_equal(cs_proc_start(p, argv), 0);
    int st = cs_proc_wait_exit(p, RUN_MS);
    if (st < 0)
        fail_msg("benchrunner did not finish within %d ms:\n%s", RUN_MS, p->log);
    return st;
}

static void assert_has(const cs_proc *p, const char *needle)
{
    if (!strstr(p->log, needle))
        fail_msg("output is missing \"%s\":\n%s", needle, p->log);
}

/* The served dump, verified against a directory of the same files: ten ledgers pass, the second
 * five being the dump again. */
static void verify_dir_passes_over_public_network_ledgers(void **state)
{
    (void)state;
    if (!realmeta_present())
        skip();
    char dump[PATH_MAX + 32], expect[PATH_MAX + 32];
    make_dump("dump", dump, sizeof dump);
    make_dump("expect", expect, sizeof expect);
    start_server(dump);
    cs_proc p;
    int st = run_verify(&p, g_url, "10", expect);
    if (st != 0)
        fail_msg("exit %d:\n%s\nserver:\n%s", st, p.log, g_srv.log);
    assert_has(&p, "\nledgers      10 (1..10)\n");
    cs_proc_free(&p);
}

/* One byte of ledger 3's expectation changed: the run fails there, naming the file and the
 * offset; one byte short: naming both lengths (ledger 4 is 307180 bytes). */
static void verify_dir_names_a_corrupted_expectation(void **state)
{
    (void)state;
    if (!realmeta_present())
        skip();
    char dump[PATH_MAX + 32], expect[PATH_MAX + 32], want[3 * PATH_MAX];
    make_dump("dump", dump, sizeof dump);
    make_dump("expect", expect, sizeof expect);
    assert_int_equal(corrupt(expect, 3, 20000), 41552);
    start_server(dump);

    cs_proc p;
    assert_int_equal(run_verify(&p, g_url, "5", expect), 1);
    snprintf(want, sizeof want,
             "benchrunner: ledger 3 payload does not match %s/ledger-3.xdr (first difference at byte 20000)\n", expect);
    assert_has(&p, want);
    cs_proc_free(&p);

    /* Ledgers 1 and 2 alone pass: the corruption is in 3's record only. */
    assert_int_equal(run_verify(&p, g_url, "2", expect), 0);
    cs_proc_free(&p);

    assert_int_equal(corrupt(expect, 3, 0), 41552); /* a fresh copy of 3, changed at byte 0 */
    assert_int_equal(corrupt(expect, 4, SIZE_MAX), 307180);
    assert_int_equal(run_verify(&p, g_url, "5", expect), 1);
    snprintf(want, sizeof want,
             "benchrunner: ledger 3 payload does not match %s/ledger-3.xdr (first difference at byte 0)\n", expect);
    assert_has(&p, want);
    cs_proc_free(&p);

    /* Past the cycle: ledger 9 is record 4 again, and 4's expectation is one byte short. */
    char *argv[] = {BENCHRUNNER_BIN, "--mode", "remote", "--url", g_url, "--start", "9", "--end", "9",
                    "--verify-dir", expect, NULL};
    assert_int_equal(cs_proc_start(&p, argv), 0);
    assert_int_equal(cs_proc_wait_exit(&p, RUN_MS), 1);
    snprintf(want, sizeof want, "benchrunner: ledger 9 is 307180 bytes, %s/ledger-4.xdr holds 307179 (--verify-dir)\n",
             expect);
    assert_has(&p, want);
    cs_proc_free(&p);
}

/* A --verify-dir that is missing or holds no ledgers fails at once, before any connection: the
 * URL names a port nothing listens on, and its refusal is not the error. Needs no real data. */
static void verify_dir_is_checked_before_connecting(void **state)
{
    (void)state;
    char missing[PATH_MAX + 32], empty[PATH_MAX + 32], want[3 * PATH_MAX];
    cs_tmpdir_join(&g_tmp, "missing", missing, sizeof missing);
    cs_tmpdir_join(&g_tmp, "empty", empty, sizeof empty);
    assert_int_equal(mkdir(empty, 0700), 0);
    cs_proc p;
    assert_int_equal(run_verify(&p, "ws://127.0.0.1:1", "5", missing), 1);
    snprintf(want, sizeof want, "benchrunner: --verify-dir: scan \"%s\": No such file or directory\n", missing);
    assert_has(&p, want);
    cs_proc_free(&p);
    assert_int_equal(run_verify(&p, "ws://127.0.0.1:1", "5", empty), 1);
    snprintf(want, sizeof want, "benchrunner: --verify-dir: \"%s\" holds no ledger-<seq>.xdr files\n", empty);
    assert_has(&p, want);
    cs_proc_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(verify_dir_passes_over_public_network_ledgers, setup, teardown),
        cmocka_unit_test_setup_teardown(verify_dir_names_a_corrupted_expectation, setup, teardown),
        cmocka_unit_test_setup_teardown(verify_dir_is_checked_before_connecting, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
