/* The retention ring under disk faults, end to end: the real corestreamd over 127.0.0.1, its log
 * read line by line, subscribers reading verified ledgers. A data dir that cannot be written is
 * refused before listening; a ring write that fails mid-run (a directory in the next ledger's
 * place, a full file system) costs the ring, never the live flow.
 *
 * Read-only and full file systems are tmpfs mounts made in a private mount namespace
 * (`unshare -rm`, which needs no privilege where user namespaces are enabled); where that is not
 * possible the case is skipped with a message. CORESTREAMD_BIN is the daemon's absolute path. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/procharness.h"
#include "support/tmpdir.h"
#include "support/wsclient.h"

#ifndef CORESTREAMD_BIN
#error "CORESTREAMD_BIN must name the corestreamd binary"
#endif

#define WAIT_MS 20000
#define STOP_MS 10000

typedef struct fixture {
    cs_tmpdir dir;
    char data[700]; /* <dir>/data, the --data-dir */
    char ring[720]; /* <data>/ledgers */
    cs_proc proc;
    bool started;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || cs_tmpdir_make(&f->dir, "ringfaults") != 0) {
        free(f);
        return -1;
    }
    snprintf(f->data, sizeof f->data, "%s/data", f->dir.path);
    snprintf(f->ring, sizeof f->ring, "%s/ledgers", f->data);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f->started)
        cs_proc_free(&f->proc);
    /* A case may leave the ring unwritable to its owner. */
    chmod(f->ring, 0755);
    cs_tmpdir_remove(&f->dir);
    free(f);
    return 0;
}

/* Whether `unshare -rm` can make a private mount namespace with tmpfs mounts here. */
static bool can_mount_tmpfs(void)
{
    static int known = -1;
    if (known < 0) {
        int st = system("unshare -rm sh -c 'mount -t tmpfs tmpfs /mnt' >/dev/null 2>&1");
        known = st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    return known == 1;
}

/* Starts corestreamd with args (NULL-terminated) after the common ones. With mount_script, the
 * daemon runs inside `unshare -rm sh -c '<mount_script> && exec "$0" "$@"'`: the same process
 * (unshare and sh exec), so the harness's PID is the daemon's. */
static void start_daemon(fixture *f, const char *mount_script, const char *const *args)
{
    const char *argv[64];
    int n = 0;
    if (mount_script) {
        argv[n++] = "/usr/bin/unshare";
        argv[n++] = "-rm";
        argv[n++] = "/bin/sh";
        argv[n++] = "-c";
        static char script[4200];
        snprintf(script, sizeof script, "%s && exec \"$0\" \"$@\"", mount_script);
        argv[n++] = script;
    }
    argv[n++] = CORESTREAMD_BIN;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--data-dir";
    argv[n++] = f->data;
    while (*args)
        argv[n++] = *args++;
    argv[n] = NULL;
    assert_int_equal(cs_proc_start(&f->proc, (char *const *)argv), 0);
    f->started = true;
}

static void wait_line(fixture *f, const char *needle)
{
    if (cs_proc_wait_line(&f->proc, needle, WAIT_MS) != 0)
        fail_msg("no log line with %s; log:\n%s", needle, f->proc.log);
}

static void healthz(fixture *f, char *body, size_t len)
{
    assert_int_equal(cs_http_get("127.0.0.1", f->proc.port, "/healthz", WAIT_MS, body, len, NULL, 0), 200);
}

/* Reads ledgers from ws until seq `last`, asserting that each is the one after the previous (the
 * first may be anything); returns the first. */
static uint32_t read_through(cs_ws *ws, uint32_t last)
{
    uint32_t first = 0, prev = 0;
    for (int i = 0; i < 100000; i++) {
        cs_ledger l;
        char err[256];
        int rc = cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err);
        if (rc != 1)
            fail_msg("reading ledgers after %u: %d %s", prev, rc, err);
        if (prev && l.seq != prev + 1)
            fail_msg("ledger %u after %u", l.seq, prev);
        if (!first)
            first = l.seq;
        prev = l.seq;
        cs_ledger_free(&l);
        if (prev >= last)
            return first;
    }
    fail_msg("ledger %u never came", last);
    return 0;
}

static const char *const k_synthetic[] = {"--source", "synthetic", "--synthetic-size", "65536",
                                          "--synthetic-interval", "50ms", "--emit-window", "0", NULL};

/* A data dir on a read-only file system is refused before listening, naming it. */
static void readonly_dir_refused_at_start(void **state)
{
    fixture *f = *state;
    char script[4096];
    if (can_mount_tmpfs()) {
        assert_int_equal(mkdir(f->data, 0755), 0);
        snprintf(script, sizeof script,
                 "mount -t tmpfs tmpfs '%s' && mkdir '%s' && mount -o remount,ro '%s'", f->data, f->ring, f->data);
        start_daemon(f, script, k_synthetic);
    } else if (geteuid() != 0) {
        /* Without mounts, permission bits do as well for anyone but root. */
        assert_int_equal(mkdir(f->data, 0755), 0);
        assert_int_equal(mkdir(f->ring, 0555), 0);
        start_daemon(f, NULL, k_synthetic);
    } else {
        print_message("skipped: cannot mount a read-only tmpfs here, and root ignores permission bits\n");
        skip();
    }
    int st = cs_proc_wait_exit(&f->proc, WAIT_MS);
    cs_proc_drain(&f->proc);
    if (st != 1)
        fail_msg("exit %d; log:\n%s", st, f->proc.log);
    char want[4096];
    snprintf(want, sizeof want,
             "level=ERROR msg=\"corestreamd failed\" error=\"store: \\\"%s\\\" cannot be written: create "
             "write-probe.tmp: %s\"",
             f->ring, can_mount_tmpfs() ? "Read-only file system" : "Permission denied");
    if (!strstr(f->proc.log, want))
        fail_msg("wanted %s in:\n%s", want, f->proc.log);
    assert_null(strstr(f->proc.log, "corestreamd listening"));
}

/* A directory where the next ledger goes fails that one ring write: logged once at ERROR with the
 * cause, counted in /healthz; the live subscriber gets every ledger; the next write works, resets
 * the ring past the gap and logs the recovery. */
static void directory_in_place_degrades_then_recovers(void **state)
{
    fixture *f = *state;
    start_daemon(f, NULL, k_synthetic);
    if (cs_proc_wait_listening(&f->proc, WAIT_MS) != 0)
        fail_msg("not listening:\n%s", f->proc.log);
    cs_ws *ws = cs_ws_connect("127.0.0.1", f->proc.port, "/stream", WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    cs_ledger l;
    char err[256];
    assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err), 1);
    uint32_t s0 = l.seq, bad = s0 + 6;
    cs_ledger_free(&l);
    /* Ledger `bad` is at least 250 ms away; a non-empty directory cannot be renamed over. */
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/ledger-%u.xdr", f->ring, bad);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/ledger-%u.xdr/keep", f->ring, bad);
    FILE *fp = fopen(p, "w");
    assert_non_null(fp);
    fclose(fp);

    read_through(ws, bad + 4);
    char want[512];
    snprintf(want, sizeof want,
             "level=ERROR msg=\"ring write failed; live streaming continues, the ring keeps its range until a "
             "write works\" ledger=%u error=\"retain ledger %u: store: publish ledger %u: Is a directory\"",
             bad, bad, bad);
    wait_line(f, want);
    snprintf(want, sizeof want, "level=WARN msg=\"retention reset: ledger does not continue the retained range\" ledger=%u",
             bad + 1);
    wait_line(f, want);
    snprintf(want, sizeof want, "level=INFO msg=\"ring write recovered\" ledger=%u ledgers_not_retained=1", bad + 1);
    wait_line(f, want);
    assert_int_equal(cs_proc_log_count(&f->proc, "ring write failed"), 1);

    char body[512];
    healthz(f, body, sizeof body);
    snprintf(want, sizeof want, "{\"oldest\":%u,", bad + 1);
    if (strncmp(body, want, strlen(want)) != 0 || !strstr(body, ",\"ring_write_failures\":1,\"ring_degraded\":false,\"ring_dropped\":0}"))
        fail_msg("healthz: %s", body);
    /* The ring serves from past the gap: a subscriber asking for the failed ledger is refused. */
    char q[64];
    snprintf(q, sizeof q, "/stream?start=%u", bad);
    cs_ws *old = cs_ws_connect("127.0.0.1", f->proc.port, q, WAIT_MS, NULL, NULL, 0);
    assert_non_null(old);
    assert_int_equal(cs_ws_read_ledger(old, &l, WAIT_MS, err, sizeof err), 0);
    int code = 0;
    char reason[128];
    assert_int_equal(cs_ws_last_close(old, &code, reason, sizeof reason), 1);
    assert_int_equal(code, 4001);
    assert_non_null(strstr(reason, "too far behind: oldest="));
    cs_ws_close(old);
    cs_ws_close(ws);
    assert_int_equal(cs_proc_stop(&f->proc, SIGTERM, STOP_MS), 0);
}

/* A full file system fails every ring write from some ledger on: one ERROR, the failures counted,
 * the ring degraded and frozen at what it holds, and the live subscriber unaffected. */
static void full_disk_degrades_live_carries_on(void **state)
{
    fixture *f = *state;
    if (!can_mount_tmpfs()) {
        print_message("skipped: cannot mount a small tmpfs here (unshare -rm failed)\n");
        skip();
    }
    assert_int_equal(mkdir(f->data, 0755), 0);
    char script[4096];
    /* 256 KiB hold three 64 KiB ledgers and part of a fourth. */
    snprintf(script, sizeof script, "mount -t tmpfs -o size=256k tmpfs '%s'", f->data);
    start_daemon(f, script, k_synthetic);
    if (cs_proc_wait_listening(&f->proc, WAIT_MS) != 0)
        fail_msg("not listening:\n%s", f->proc.log);
    cs_ws *ws = cs_ws_connect("127.0.0.1", f->proc.port, "/stream", WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    wait_line(f, "level=ERROR msg=\"ring write failed; live streaming continues");
    char line[1024];
    cs_proc_line(&f->proc, line, sizeof line);
    assert_non_null(strstr(line, ": No space left on device\""));
    uint32_t first = read_through(ws, 0);
    read_through(ws, first + 8);
    cs_proc_drain(&f->proc);
    assert_int_equal(cs_proc_log_count(&f->proc, "ring write failed"), 1);
    assert_int_equal(cs_proc_log_count(&f->proc, "ring write recovered"), 0);
    char body[512];
    healthz(f, body, sizeof body);
    if (!strstr(body, ",\"ring_degraded\":true,") || strstr(body, "\"ring_write_failures\":0,"))
        fail_msg("healthz: %s", body);
    cs_ws_close(ws);
    assert_int_equal(cs_proc_stop(&f->proc, SIGTERM, STOP_MS), 0);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(readonly_dir_refused_at_start, setup, teardown),
        cmocka_unit_test_setup_teardown(directory_in_place_degrades_then_recovers, setup, teardown),
        cmocka_unit_test_setup_teardown(full_disk_degrades_live_carries_on, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
