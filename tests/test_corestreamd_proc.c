/* The corestreamd binary as an operator runs it: flags and their errors, exit codes, logs,
 * signals, and the file source replaying a dump byte-exact. Each test starts the real program on
 * 127.0.0.1 with an ephemeral port. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/synthetic.h"
#include "support/procharness.h"
#include "support/wsclient.h"

#ifndef CORESTREAMD_BIN
#error "CORESTREAMD_BIN must name the binary under test"
#endif
#define WAIT_MS 20000

static char g_dir[PATH_MAX];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static int setup(void **state)
{
    (void)state;
    const char *root = getenv("CS_TEST_TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/proc-XXXXXX", root ? root : "/tmp");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* Runs corestreamd with args (NULL-terminated, after argv[0]) and --data-dir in the scratch dir. */
static void start(cs_proc *p, const char *const *args)
{
    char *argv[40];
    char datadir[PATH_MAX + 32];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/data", g_dir);
    int n = 0;
    argv[n++] = CORESTREAMD_BIN;
    argv[n++] = datadir;
    for (; *args && n < 38; args++)
        argv[n++] = (char *)*args;
    argv[n] = NULL;
    assert_int_equal(cs_proc_start(p, argv), 0);
}

/* Runs to completion and returns the exit status; p->log has everything. */
static int run(cs_proc *p, const char *const *args)
{
    start(p, args);
    return cs_proc_wait_exit(p, WAIT_MS);
}

static void expect_failure(const char *const *args, const char *message)
{
    cs_proc p;
    assert_int_equal(run(&p, args), 1);
    if (!strstr(p.log, message))
        fail_msg("missing %s in:\n%s", message, p.log);
    assert_non_null(strstr(p.log, "corestreamd failed"));
    cs_proc_free(&p);
}

static void test_help_exits_zero(void **state)
{
    (void)state;
    cs_proc p;
    const char *args[] = {"-h", NULL};
    assert_int_equal(run(&p, args), 0);
    assert_non_null(strstr(p.log, "Usage of corestreamd:"));
    assert_non_null(strstr(p.log, "-synthetic-interval duration"));
    cs_proc_free(&p);
}

static void test_flag_errors_are_early_and_exact(void **state)
{
    (void)state;
    const char *turbo[] = {"--turbo", NULL};
    expect_failure(turbo, "ERROR corestreamd failed error=\"flag provided but not defined: -turbo\"");
    const char *chunk[] = {"--chunk-size", "x", NULL};
    expect_failure(chunk, "invalid value \\\"x\\\" for flag -chunk-size: parse error");
    const char *stray[] = {"stray", NULL};
    expect_failure(stray, "unexpected argument \\\"stray\\\"");
    const char *src[] = {"--source", "telepathy", NULL};
    expect_failure(src, "--source must be captive, file, synthetic or pipe, got \\\"telepathy\\\"");
    const char *ceiling[] = {"--start-ledger", "4294967295", NULL};
    expect_failure(ceiling, "the requested range reaches ledger 4294967295");
    const char *window[] = {"--emit-window", "2s", NULL};
    expect_failure(window, "--emit-window 2s does not fit inside --synthetic-interval 1s");
    const char *retention[] = {"--retention", "0", "--listen", "127.0.0.1:0", NULL};
    expect_failure(retention, "store: retention must be positive, got 0");
}

static void test_unbuilt_sources_say_so(void **state)
{
    (void)state;
    const char *captive[] = {"--source", "captive", "--start-ledger", "5", "--core-config", "x.cfg",
                             "--history-archive-urls", "http://127.0.0.1:1", "--listen", "127.0.0.1:0", NULL};
    expect_failure(captive, "--source captive is not implemented yet");
    const char *nopipe[] = {"--source", "pipe", NULL};
    expect_failure(nopipe, "--pipe-cmd is required with --source pipe");
}

static void test_listen_failure_names_the_address(void **state)
{
    (void)state;
    cs_proc a;
    const char *args[] = {"--listen", "127.0.0.1:0", NULL};
    start(&a, args);
    assert_int_equal(cs_proc_wait_listening(&a, WAIT_MS), 0);
    char addr[64], datadir2[PATH_MAX + 32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", a.port);
    snprintf(datadir2, sizeof datadir2, "--data-dir=%s/other", g_dir);
    const char *busy[] = {datadir2, "--listen", addr, NULL};
    char want[128];
    snprintf(want, sizeof want, "listen on %s: bind: Address already in use", addr);
    expect_failure(busy, want);
    assert_int_equal(cs_proc_stop(&a, SIGTERM, WAIT_MS), 0);
    cs_proc_free(&a);
}

static void test_unwritable_data_dir_is_refused(void **state)
{
    (void)state;
    char file[PATH_MAX + 16], datadir[PATH_MAX + 32];
    snprintf(file, sizeof file, "%s/plainfile", g_dir);
    int fd = open(file, O_CREAT | O_WRONLY, 0644);
    assert_true(fd >= 0);
    close(fd);
    snprintf(datadir, sizeof datadir, "--data-dir=%s", file);
    const char *args[] = {datadir, "--listen", "127.0.0.1:0", NULL};
    expect_failure(args, "store: create");
}

/* SIGTERM: subscribers get 1001 `server shutting down`, the process logs and exits 0. */
static void test_sigterm_closes_subscribers_and_exits_zero(void **state)
{
    (void)state;
    cs_proc p;
    const char *args[] = {"--listen", "127.0.0.1:0", "--synthetic-interval", "50ms", NULL};
    start(&p, args);
    assert_int_equal(cs_proc_wait_listening(&p, WAIT_MS), 0);
    assert_non_null(strstr(p.log, "source=synthetic start_ledger=1 retention=10000"));
    cs_ws *ws = cs_ws_connect("127.0.0.1", p.port, "/stream", WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    cs_ledger l;
    assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, NULL, 0), 1);
    cs_ledger_free(&l);
    assert_int_equal(cs_proc_wait_line(&p, "subscriber connected", WAIT_MS), 0);
    kill(p.pid, SIGTERM);
    int r;
    do
        r = cs_ws_read_ledger(ws, &l, WAIT_MS, NULL, 0);
    while (r == 1 && (cs_ledger_free(&l), 1));
    int code;
    char why[128];
    assert_int_equal(cs_ws_last_close(ws, &code, why, sizeof why), 1);
    assert_int_equal(code, 1001);
    assert_string_equal(why, "server shutting down");
    assert_int_equal(cs_proc_wait_exit(&p, WAIT_MS), 0);
    assert_non_null(strstr(p.log, "msg=\"source loop cancelled\""));
    assert_non_null(strstr(p.log, "msg=\"corestreamd stopped\""));
    cs_ws_close(ws);
    cs_proc_free(&p);
}

/* A bounded source ends the process with 0 after the subscribers' close frames went out. */
static void test_bounded_source_flushes_close_frames_then_exits(void **state)
{
    (void)state;
    cs_proc p;
    const char *args[] = {"--listen", "127.0.0.1:0", "--synthetic-interval", "100ms",
                          "--synthetic-count", "4", NULL};
    start(&p, args);
    assert_int_equal(cs_proc_wait_listening(&p, WAIT_MS), 0);
    cs_ws *ws = cs_ws_connect("127.0.0.1", p.port, "/stream?start=1", WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    for (uint32_t seq = 1; seq <= 4; seq++) {
        cs_ledger l;
        assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, NULL, 0), 1);
        assert_int_equal(l.seq, seq);
        cs_ledger_free(&l);
    }
    cs_ledger l;
    assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, NULL, 0), 0);
    int code;
    char why[128];
    assert_int_equal(cs_ws_last_close(ws, &code, why, sizeof why), 1);
    assert_int_equal(code, 1000);
    assert_string_equal(why, "source ended");
    assert_int_equal(cs_proc_wait_exit(&p, WAIT_MS), 0);
    assert_non_null(strstr(p.log, "msg=\"source exhausted\" ledgers=4"));
    cs_ws_close(ws);
    cs_proc_free(&p);
}

static void write_file(const char *path, const uint8_t *data, size_t len)
{
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
}

/* --source file replays a dump renumbered from --start-ledger, cycling, byte-exact. */
static void test_file_source_replays_a_dump(void **state)
{
    (void)state;
    char dump[PATH_MAX + 16], path[PATH_MAX + 64], filedir[PATH_MAX + 32];
    snprintf(dump, sizeof dump, "%s/dump", g_dir);
    assert_int_equal(mkdir(dump, 0755), 0);
    uint8_t rec[3][5000];
    for (int i = 0; i < 3; i++) {
        cs_synthetic_fill(rec[i], sizeof rec[i], (uint32_t)(900 + i), true);
        snprintf(path, sizeof path, "%s/ledger-%d.xdr", dump, 900 + i);
        write_file(path, rec[i], sizeof rec[i]);
    }
    snprintf(filedir, sizeof filedir, "--file-dir=%s", dump);
    const char *args[] = {"--listen", "127.0.0.1:0", "--source", "file", filedir, "--start-ledger", "50",
                          "--file-count", "5", "--cadence", "200ms", "--emit-window", "5ms",
                          "--chunk-size", "4096", NULL};
    cs_proc p;
    start(&p, args);
    assert_int_equal(cs_proc_wait_listening(&p, WAIT_MS), 0);
    assert_non_null(strstr(p.log, "msg=\"replaying dump\""));
    assert_non_null(strstr(p.log, "ledgers=3 emit_window=5ms cadence=200ms"));
    cs_ws *ws = cs_ws_connect("127.0.0.1", p.port, "/stream?start=50&end=54", WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    for (uint32_t seq = 50; seq <= 54; seq++) {
        cs_ledger l;
        char err[256];
        if (cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err) != 1)
            fail_msg("ledger %u: %s", seq, err);
        assert_int_equal(l.seq, seq);
        assert_int_equal(l.len, sizeof rec[0]);
        assert_memory_equal(l.data, rec[(seq - 50) % 3], sizeof rec[0]); /* a,b,c,a,b */
        assert_int_equal(l.chunks, 2);
        cs_ledger_free(&l);
    }
    cs_ws_close(ws);
    assert_int_equal(cs_proc_wait_exit(&p, WAIT_MS), 0);
    cs_proc_free(&p);
}

/* The server's own ring is never a dump to replay: replaying would destroy it. */
static void test_file_source_refuses_the_ring(void **state)
{
    (void)state;
    char datadir[PATH_MAX + 32], filedir[PATH_MAX + 48];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/d", g_dir);
    snprintf(filedir, sizeof filedir, "--file-dir=%s/d/ledgers", g_dir);
    const char *args[] = {datadir, "--source", "file", filedir, NULL};
    expect_failure(args, "is this server's own retention ring");
}

/* A dump record that vanishes mid-run fails the source: exit 1 naming the ledger, ring intact. */
static void test_vanished_dump_file_fails_cleanly(void **state)
{
    (void)state;
    char dump[PATH_MAX + 16], path[PATH_MAX + 64], filedir[PATH_MAX + 32];
    snprintf(dump, sizeof dump, "%s/dump2", g_dir);
    assert_int_equal(mkdir(dump, 0755), 0);
    uint8_t rec[100] = {1, 2, 3};
    for (int i = 1; i <= 2; i++) {
        snprintf(path, sizeof path, "%s/ledger-%d.xdr", dump, i);
        write_file(path, rec, sizeof rec);
    }
    snprintf(filedir, sizeof filedir, "--file-dir=%s", dump);
    const char *args[] = {"--listen", "127.0.0.1:0", "--source", "file", filedir, "--cadence", "100ms",
                          "--emit-window", "0", NULL};
    cs_proc p;
    start(&p, args);
    assert_int_equal(cs_proc_wait_line(&p, "source loop starting", WAIT_MS), 0);
    snprintf(path, sizeof path, "%s/ledger-2.xdr", dump);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(cs_proc_wait_exit(&p, WAIT_MS), 1);
    assert_non_null(strstr(p.log, "source failed at ledger 2"));
    assert_non_null(strstr(p.log, "msg=\"corestreamd failed\""));
    cs_proc_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_help_exits_zero, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flag_errors_are_early_and_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unbuilt_sources_say_so, setup, teardown),
        cmocka_unit_test_setup_teardown(test_listen_failure_names_the_address, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unwritable_data_dir_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigterm_closes_subscribers_and_exits_zero, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounded_source_flushes_close_frames_then_exits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_source_replays_a_dump, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_source_refuses_the_ring, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vanished_dump_file_fails_cleanly, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
