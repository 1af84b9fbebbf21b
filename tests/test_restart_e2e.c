/* SPDX-License-Identifier: Apache-2.0 */
/* corestreamd restarted over its own data dir with an unchanged command line (no --start-ledger):
 * the run continues the ring at its latest + 1 and says so (`start=continue latest=L` on the
 * listening line, "start":"continue" in /healthz); the ledgers before and after the restart are one
 * contiguous, byte-exact sequence. Another run's ring is still reset, but only once every check
 * that can fail at start has passed; captive with an empty ring needs --start-ledger. */
#include <stdarg.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/synthetic.h"
#include "support/metabuild.h"
#include "support/ringfiles.h"
#include "support/ringfixture.h"
#include "support/wsclient.h"
#include "support/wait.h"

#define STOP_MS 20000

typedef cs_ringfx fixture;

static int setup(void **state)
{
    return cs_ringfx_setup(state, "restart");
}

static int teardown(void **state)
{
    return cs_ringfx_teardown(state);
}

static void run_to_exit(fixture *f, const char *const *args)
{
    cs_ringfx_run_to_exit(f, CORESTREAMD_BIN, args, 60000);
}

static void start_listening(fixture *f, const char *const *args)
{
    cs_ringfx_start(f, NULL, CORESTREAMD_BIN, args);
    if (cs_proc_wait_listening(&f->proc, WAIT_MS) != 0)
        fail_msg("not listening:\n%s", f->proc.log);
}

static void free_proc(fixture *f)
{
    cs_ringfx_free_proc(f);
}

static void expect_in_log(const fixture *f, const char *needle)
{
    if (!strstr(f->proc.log, cs_ringfx_with_pid(f, needle)))
        fail_msg("no %s in:\n%s", needle, f->proc.log);
}

static void expect_healthz_has(fixture *f, const char *needle)
{
    char body[512];
    assert_int_equal(cs_http_get("127.0.0.1", f->proc.port, "/healthz", WAIT_MS, body, sizeof body, NULL, 0), 200);
    if (!strstr(body, needle))
        fail_msg("no %s in /healthz: %s", needle, body);
}

/* The run token on the listening line (its last field, run=...) into run. */
static void listening_run(const fixture *f, char *run, size_t len)
{
    const char *line = strstr(f->proc.log, "msg=\"corestreamd listening\"");
    const char *r = line ? strstr(line, " run=") : NULL;
    if (!r)
        fail_msg("no run= on the listening line:\n%s", f->proc.log);
    r += 5;
    size_t n = strcspn(r, " \n");
    assert_true(n > 0 && n < len);
    memcpy(run, r, n);
    run[n] = '\0';
}

/* Reads ledgers from..to and hands each to check (with arg), asserting the sequence is whole. */
static void read_range(fixture *f, uint32_t from, uint32_t to, void (*check)(const cs_ledger *l, void *arg), void *arg)
{
    char path[96];
    snprintf(path, sizeof path, "/stream?start=%u&end=%u", from, to);
    cs_ws *ws = cs_ws_connect("127.0.0.1", f->proc.port, path, WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    for (uint32_t want = from; want <= to; want++) {
        cs_ledger l;
        char err[256];
        int rc = cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err);
        if (rc != 1)
            fail_msg("ledger %u: %d %s\n%s", want, rc, err, f->proc.log);
        assert_int_equal(l.seq, want);
        check(&l, arg);
        cs_ledger_free(&l);
    }
    cs_ws_close(ws);
}

/* ---- synthetic ------------------------------------------------------------------------------ */

#define SYN_SIZE 4096

static void check_synthetic(const cs_ledger *l, void *arg)
{
    (void)arg;
    uint8_t want[SYN_SIZE];
    cs_synthetic_fill(want, sizeof want, l->seq, false);
    assert_int_equal(l->len, SYN_SIZE);
    assert_memory_equal(l->data, want, SYN_SIZE);
}

/* Five 4096-byte synthetic ledgers as fast as they can go, then exit: one run of a ring's owner. */
static const char *const k_five_ledgers[] = {"--source", "synthetic", "--synthetic-size", "4096",
                                             "--synthetic-interval=-1ns", "--emit-window", "0",
                                             "--synthetic-count", "5", NULL};

/* Two runs of the same command line make ledgers 1-5 and 6-10; a third, still running, serves all
 * ten from the ring, byte-exact, and says it continued. All three are one run: one run token. */
static void synthetic_restart_continues_the_ring(void **state)
{
    fixture *f = *state;
    char run[64], again[64];
    run_to_exit(f, k_five_ledgers);
    expect_in_log(f, "msg=\"corestreamd listening\" addr=");
    if (!strstr(f->proc.log, " start_ledger=1 start=default retention="))
        fail_msg("first run:\n%s", f->proc.log);
    listening_run(f, run, sizeof run);
    free_proc(f);

    run_to_exit(f, k_five_ledgers);
    listening_run(f, again, sizeof again);
    assert_string_equal(again, run);
    if (!strstr(f->proc.log, " start_ledger=6 start=continue latest=5 retention=") ||
        !strstr(f->proc.log, "range=[6,10]") || strstr(f->proc.log, "ring reset"))
        fail_msg("second run:\n%s", f->proc.log);
    free_proc(f);

    static const char *const serve[] = {"--source", "synthetic", "--synthetic-size", "4096",
                                        "--synthetic-interval", "1h", "--emit-window", "0", NULL};
    start_listening(f, serve);
    if (!strstr(f->proc.log, " start_ledger=11 start=continue latest=10 retention="))
        fail_msg("third run:\n%s", f->proc.log);
    expect_healthz_has(f, "{\"oldest\":1,");
    char tail[128];
    snprintf(tail, sizeof tail, ",\"start\":\"continue\",\"start_ledger\":11,\"run\":\"%s\"}\n", run);
    expect_healthz_has(f, tail);
    read_range(f, 1, 11, check_synthetic, NULL);
    assert_int_equal(cs_proc_log_count(&f->proc, "level=WARN"), 0);
    assert_int_equal(cs_proc_log_count(&f->proc, "level=ERROR"), 0);
    assert_int_equal(cs_proc_stop(&f->proc, SIGTERM, STOP_MS), 0);
}

/* Another run's ring (another size) is not continued: the run starts at 1, the ring is reset, and
 * the run token is another. */
static void another_run_is_not_continued(void **state)
{
    fixture *f = *state;
    char run[64], other_run[64];
    static const char *const first[] = {"--source", "synthetic", "--synthetic-size", "4096",
                                        "--synthetic-interval=-1ns", "--emit-window", "0", "--synthetic-count",
                                        "3", NULL};
    run_to_exit(f, first);
    listening_run(f, run, sizeof run);
    free_proc(f);
    static const char *const other[] = {"--source", "synthetic", "--synthetic-size", "8192",
                                        "--synthetic-interval=-1ns", "--emit-window", "0", "--synthetic-count",
                                        "2", NULL};
    run_to_exit(f, other);
    if (!strstr(f->proc.log, " start_ledger=1 start=default retention=") ||
        !strstr(f->proc.log, "reason=\"written by another run\""))
        fail_msg("log:\n%s", f->proc.log);
    listening_run(f, other_run, sizeof other_run);
    assert_string_not_equal(other_run, run);
}

/* ---- file ----------------------------------------------------------------------------------- */

typedef struct dump {
    char dir[PATH_MAX + 8];
    uint8_t rec[3][64];
} dump;

static void make_dump(fixture *f, dump *d)
{
    snprintf(d->dir, sizeof d->dir, "%s/dump", f->dir.path);
    assert_int_equal(mkdir(d->dir, 0755), 0);
    for (int i = 0; i < 3; i++) {
        memset(d->rec[i], 'a' + i, sizeof d->rec[i]);
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/ledger-%d.xdr", d->dir, 100 + i);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, d->rec[i], sizeof d->rec[i]), (ssize_t)sizeof d->rec[i]);
        close(fd);
    }
}

static void check_file(const cs_ledger *l, void *arg)
{
    const dump *d = arg;
    const uint8_t *want = d->rec[(l->seq - 1) % 3]; /* record (N - 1) mod 3 is ledger N's */
    assert_int_equal(l->len, sizeof d->rec[0]);
    assert_memory_equal(l->data, want, sizeof d->rec[0]);
}

/* A file run of 4 (records a b c a) continued by another: ledger 5 is record b, as one run of 5
 * would have made it. */
static void file_restart_continues_the_dump(void **state)
{
    fixture *f = *state;
    dump d;
    make_dump(f, &d);
    const char *const run[] = {"--source", "file", "--file-dir", d.dir, "--cadence", "0", "--emit-window", "0",
                               "--file-count", "4", NULL};
    run_to_exit(f, run);
    free_proc(f);
    const char *const serve[] = {"--source", "file", "--file-dir", d.dir, "--cadence", "1h", "--emit-window", "0",
                                 NULL};
    start_listening(f, serve);
    if (!strstr(f->proc.log, " start_ledger=5 start=continue latest=4 retention="))
        fail_msg("log:\n%s", f->proc.log);
    read_range(f, 1, 5, check_file, &d);
    assert_int_equal(cs_proc_stop(&f->proc, SIGTERM, STOP_MS), 0);
}

/* ---- a start that fails ---------------------------------------------------------------------- */

static void write_at(const char *dir, const char *name, const void *bytes, size_t len)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, bytes, len), (ssize_t)len);
    close(fd);
}

static bool exists_in(const char *dir, const char *name)
{
    char path[PATH_MAX + 64];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return lstat(path, &st) == 0;
}

/* A run that would reset the ring (another size) but fails at start, after the ring is open, over
 * a ring with something to repair (an empty newest ledger, as a power cut leaves it, a leftover
 * temporary file, a record without its ledger): the data directory is byte for byte what it was,
 * for each way of failing. The next start that works repairs it: the empty ledger costs only itself, and
 * the run continues after the good ones. */
static void failing_start_leaves_the_ring_alone(void **state)
{
    fixture *f = *state;
    run_to_exit(f, k_five_ledgers);
    free_proc(f);
    write_at(f->ring, "ledger-5.xdr", "", 0);
    write_at(f->ring, "ledger-3.xdr.tmp", "cut", 3);
    /* A record line of ledger 20, which has no ledger, appended to its segment's log. */
    char log[PATH_MAX + 64];
    cs_ringfiles_log_path(log, sizeof log, f->ring, 20);
    FILE *lf = fopen(log, "a");
    assert_non_null(lf);
    assert_true(fputs("corestream-ring-record 5 seq=20 orphan\n", lf) >= 0);
    assert_int_equal(fclose(lf), 0);
    uint64_t before = cs_ringfx_dir_digest(f->data);

    /* A port already taken: the bind fails. */
    int taken = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(taken, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(taken, 1), 0);
    socklen_t sl = sizeof sa;
    assert_int_equal(getsockname(taken, (struct sockaddr *)&sa, &sl), 0);
    char admin[64];
    snprintf(admin, sizeof admin, "127.0.0.1:%d", ntohs(sa.sin_port));

    const char *const failing[][12] = {
        {"--synthetic-size", "8192", "--admin-listen", admin, NULL},
        {"--synthetic-size", "8192", "--jetstream-url", "nats://127.0.0.1:1", NULL},
        {"--synthetic-size", "8192", "--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem", NULL},
        {"--synthetic-size", "8192", "--auth-tokens", "/nonexistent/tokens", NULL},
        {"--synthetic-size", "8192", "--jetstream-url", "nats//bad url", NULL},
        {"--source", "file", "--file-dir", "/nonexistent/dump", NULL},
    };
    for (size_t i = 0; i < sizeof failing / sizeof failing[0]; i++) {
        cs_ringfx_start(f, NULL, CORESTREAMD_BIN, failing[i]);
        int st = cs_proc_wait_exit(&f->proc, 60000);
        cs_proc_drain(&f->proc);
        if (st != 1 || !strstr(f->proc.log, "level=ERROR msg=\"corestreamd failed\"") ||
            strstr(f->proc.log, "ring reset") || strstr(f->proc.log, "corestreamd listening"))
            fail_msg("case %zu: exit %d:\n%s", i, st, f->proc.log);
        if (cs_ringfx_dir_digest(f->data) != before)
            fail_msg("case %zu changed the data directory:\n%s", i, f->proc.log);
        free_proc(f);
    }
    close(taken);

    run_to_exit(f, k_five_ledgers);
    char want[PATH_MAX + 256];
    snprintf(want, sizeof want,
             "level=ERROR msg=\"ring ledger is bad; quarantined, the ledgers around it stay\" file=%s/ledger-5.xdr "
             "problem=\"is 0 bytes, its record says 4096\" record_xxh64=- actual_xxh64=- quarantine=%s/quarantine/ledger-5-",
             f->ring, f->data);
    expect_in_log(f, want);
    /* A record whose ledger is missing is logged, counted and kept for a person to look at. */
    snprintf(want, sizeof want,
             "level=ERROR msg=\"ring ledger is bad; quarantined, the ledgers around it stay\" file=%s/ledger-20.xdr "
             "problem=\"is missing (its record is there)\"",
             f->ring);
    expect_in_log(f, want);
    if (!strstr(f->proc.log, " start_ledger=5 start=continue latest=4 retention=") || strstr(f->proc.log, "ring reset"))
        fail_msg("log:\n%s", f->proc.log);
    assert_false(exists_in(f->ring, "ledger-3.xdr.tmp"));
    char line[1100];
    assert_false(cs_ringfiles_record(f->ring, 20, line, sizeof line, NULL)); /* taken out by a gone line */
    free_proc(f);
    static const char *const serve[] = {"--source", "synthetic", "--synthetic-size", "4096",
                                        "--synthetic-interval", "1h", "--emit-window", "0", NULL};
    start_listening(f, serve);
    read_range(f, 1, 10, check_synthetic, NULL);
    assert_int_equal(cs_proc_stop(&f->proc, SIGTERM, STOP_MS), 0);
}

/* Two daemons on one --data-dir (docs/RING.md, failure table: "a second daemon"): the second exits
 * 1 before it reads anything, naming the directory and the first one's PID; the first goes on
 * serving every ledger, and its data directory is unchanged by the attempt. */
static void second_daemon_on_one_data_dir_exits(void **state)
{
    fixture *f = *state;
    static const char *const serve[] = {"--source", "synthetic", "--synthetic-size", "4096",
                                        "--synthetic-interval", "1h", "--emit-window", "0", NULL};
    start_listening(f, serve);
    read_range(f, 1, 1, check_synthetic, NULL);
    char body[512] = "";
    for (int i = 0; i < 4000 && !strstr(body, "\"latest\":1,"); i++) { /* ledger 1 in the ring */
        if (i)
            usleep(5000);
        assert_int_equal(cs_http_get("127.0.0.1", f->proc.port, "/healthz", WAIT_MS, body, sizeof body, NULL, 0), 200);
    }
    uint64_t before = cs_ringfx_dir_digest(f->data);
    cs_proc second = {0};
    char *const argv[] = {(char *)CORESTREAMD_BIN, "--listen", "127.0.0.1:0", "--data-dir", f->data,
                          "--source", "synthetic", "--synthetic-size", "4096", NULL};
    assert_int_equal(cs_proc_start(&second, argv), 0);
    int st = cs_proc_wait_exit(&second, 60000);
    cs_proc_drain(&second);
    char want[PATH_MAX + 200];
    snprintf(want, sizeof want,
             "data directory \\\"%s\\\" is in use by another corestreamd (pid %d): stop it, or give this one another "
             "--data-dir",
             f->data, (int)f->proc.pid);
    if (st != 1 || !strstr(second.log, "level=ERROR msg=\"corestreamd failed\"") || !strstr(second.log, want))
        fail_msg("second daemon: exit %d:\n%s", st, second.log);
    cs_proc_free(&second);
    assert_true(cs_ringfx_dir_digest(f->data) == before);
    read_range(f, 1, 1, check_synthetic, NULL);
    assert_int_equal(cs_proc_stop(&f->proc, SIGTERM, STOP_MS), 0);
}

/* ---- pipe: core re-emits what the ring holds ---------------------------------------------- */

#define PIPE_TAIL 6000

/* Frames of ledgers from..to into <scratch>/name; ledger odd (if any) gets a longer body. */
static void write_frames(fixture *f, const char *name, uint32_t from, uint32_t to, uint32_t odd, char *path,
                         size_t plen)
{
    cs_mb_buf b = {0};
    for (uint32_t s = from; s <= to; s++) {
        cs_mb_meta m = cs_mb_go_meta(1, s, false, 0, false, s == odd ? PIPE_TAIL + 1 : PIPE_TAIL);
        cs_mb_put_frame(&b, &m);
    }
    assert_true((size_t)snprintf(path, plen, "%s/%s", f->dir.path, name) < plen);
    write_at(f->dir.path, name, b.p, b.n);
    cs_mb_free(&b);
}

static void check_meta(const cs_ledger *l, void *arg)
{
    (void)arg;
    cs_mb_buf b = {0};
    cs_mb_meta m = cs_mb_go_meta(1, l->seq, false, 0, false, PIPE_TAIL);
    cs_mb_put_meta(&b, &m);
    assert_int_equal(l->len, b.n);
    assert_memory_equal(l->data, b.p, b.n);
    cs_mb_free(&b);
}

/* A pipe command that re-emits ledgers the ring holds (core restarted from an older ledger): the
 * same bytes are skipped with one INFO line and the run carries on after them; different bytes
 * stop the run with an ERROR naming the ledger, and the ring is left as it was. */
static void pipe_replay_is_compared_with_the_ring(void **state)
{
    fixture *f = *state;
    char path[PATH_MAX], cmd[PATH_MAX + 32];
    write_frames(f, "one.bin", 1, 5, 0, path, sizeof path);
    snprintf(cmd, sizeof cmd, "cat '%s' >&3", path);
    const char *const run[] = {"--source", "pipe", "--pipe-cmd", cmd, NULL};
    run_to_exit(f, run);
    free_proc(f);

    write_frames(f, "two.bin", 3, 8, 0, path, sizeof path);
    snprintf(cmd, sizeof cmd, "cat '%s' >&3", path);
    run_to_exit(f, run);
    expect_in_log(f, "level=INFO msg=\"source re-emitted ledgers the ring holds; skipped them\" first=3 last=5 "
                     "ledgers=3");
    expect_in_log(f, "level=INFO msg=\"source exhausted\" ledgers=3");
    if (strstr(f->proc.log, "reset"))
        fail_msg("second run:\n%s", f->proc.log);
    free_proc(f);

    uint64_t before = cs_ringfx_dir_digest(f->ring);
    write_frames(f, "three.bin", 6, 9, 7, path, sizeof path);
    snprintf(cmd, sizeof cmd, "cat '%s' >&3", path);
    cs_ringfx_start(f, NULL, CORESTREAMD_BIN, run);
    int st = cs_proc_wait_exit(&f->proc, 60000);
    cs_proc_drain(&f->proc);
    assert_int_equal(st, 1);
    if (!strstr(f->proc.log, "error=\"source failed at ledger 7: ledger 7 differs from the ring's: the source sent "))
        fail_msg("third run:\n%s", f->proc.log);
    assert_true(cs_ringfx_dir_digest(f->ring) == before);
    free_proc(f);

    const char *const serve[] = {"--source", "pipe", "--pipe-cmd", "exec sleep 600", NULL};
    start_listening(f, serve);
    read_range(f, 1, 8, check_meta, NULL);
    assert_int_equal(cs_proc_stop(&f->proc, SIGTERM, STOP_MS), 0);
}

/* ---- captive -------------------------------------------------------------------------------- */

/* Captive without --start-ledger and nothing to continue: refused before core is looked for. */
static void captive_with_empty_ring_needs_start_ledger(void **state)
{
    fixture *f = *state;
    static const char *const args[] = {"--source", "captive", "--core-config", "/nonexistent/core.cfg",
                                       "--history-archive-urls", "http://127.0.0.1:1", NULL};
    cs_ringfx_start(f, NULL, CORESTREAMD_BIN, args);
    int st = cs_proc_wait_exit(&f->proc, 60000);
    cs_proc_drain(&f->proc);
    assert_int_equal(st, 1);
    char want[1024];
    snprintf(want, sizeof want,
             "level=ERROR msg=\"corestreamd failed\" error=\"--start-ledger is required with --source captive: the "
             "ring \\\"%s\\\" holds no ledgers of this run to continue\"",
             f->ring);
    expect_in_log(f, want);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(synthetic_restart_continues_the_ring, setup, teardown),
        cmocka_unit_test_setup_teardown(another_run_is_not_continued, setup, teardown),
        cmocka_unit_test_setup_teardown(file_restart_continues_the_dump, setup, teardown),
        cmocka_unit_test_setup_teardown(failing_start_leaves_the_ring_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(second_daemon_on_one_data_dir_exits, setup, teardown),
        cmocka_unit_test_setup_teardown(pipe_replay_is_compared_with_the_ring, setup, teardown),
        cmocka_unit_test_setup_teardown(captive_with_empty_ring_needs_start_ledger, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
