/* SPDX-License-Identifier: Apache-2.0 */
/* systemd's Type=notify protocol as corestreamd speaks it (notify.h), checked against a fake
 * NOTIFY_SOCKET: a unix datagram socket in a scratch directory that this test binds and reads,
 * as systemd would. The real binary runs on 127.0.0.1 with the socket in its environment, and
 * the test asserts every datagram, in order: READY=1 once listening with the source started,
 * throttled STATUS lines with the latest ledger, STOPPING=1 on the way out, and WATCHDOG=1 only
 * while the source makes progress. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "support/procharness.h"
#include "support/tmpdir.h"
#include "support/wait.h"

#ifndef CORESTREAMD_BIN
#error "CORESTREAMD_BIN must name the binary under test"
#endif
#define NOTHING_MORE_MS 300 /* how long "no further datagram" is looked for once the daemon exited */

extern char **environ;

typedef struct fixture {
    cs_tmpdir dir;
    int sock;                /* the fake systemd end */
    char sock_path[PATH_MAX];
    char *env[512];          /* the daemon's environment */
    char env_socket[PATH_MAX + 16], env_watchdog[64];
    cs_proc proc;
    bool proc_live;
} fixture;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || cs_tmpdir_make(&f->dir, "notify") != 0)
        return -1;
    cs_tmpdir_join(&f->dir, "notify.sock", f->sock_path, sizeof f->sock_path);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(f->sock_path) >= sizeof sa.sun_path)
        return -1;
    strcpy(sa.sun_path, f->sock_path);
    f->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (f->sock < 0 || bind(f->sock, (struct sockaddr *)&sa, sizeof sa) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f->proc_live)
        cs_proc_free(&f->proc);
    close(f->sock);
    cs_tmpdir_remove(&f->dir);
    free(f);
    return 0;
}

/* Starts corestreamd with args (NULL-terminated), NOTIFY_SOCKET set to the fake and, when
 * watchdog_usec > 0, WATCHDOG_USEC; whatever systemd variables the test itself inherited are
 * dropped. */
static void start(fixture *f, long watchdog_usec, const char *const *args)
{
    size_t n = 0;
    for (char **e = environ; *e && n < 500; e++)
        if (strncmp(*e, "NOTIFY_SOCKET=", 14) != 0 && strncmp(*e, "WATCHDOG_", 9) != 0)
            f->env[n++] = *e;
    snprintf(f->env_socket, sizeof f->env_socket, "NOTIFY_SOCKET=%s", f->sock_path);
    f->env[n++] = f->env_socket;
    if (watchdog_usec > 0) {
        snprintf(f->env_watchdog, sizeof f->env_watchdog, "WATCHDOG_USEC=%ld", watchdog_usec);
        f->env[n++] = f->env_watchdog;
    }
    f->env[n] = NULL;

    char datadir[PATH_MAX + 32];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/data", f->dir.path);
    char *argv[32];
    size_t a = 0;
    argv[a++] = CORESTREAMD_BIN;
    argv[a++] = datadir;
    argv[a++] = "--listen";
    argv[a++] = "127.0.0.1:0";
    for (; *args && a < 31; args++)
        argv[a++] = (char *)*args;
    argv[a] = NULL;
    assert_int_equal(cs_proc_start_env(&f->proc, argv, f->env), 0);
    f->proc_live = true;
    assert_int_equal(cs_proc_wait_listening(&f->proc, WAIT_MS), 0);
}

/* The next datagram, NUL-terminated, within timeout_ms: its length, or -1 on timeout. */
static int next_msg(fixture *f, char *buf, size_t len, int timeout_ms)
{
    struct pollfd p = {.fd = f->sock, .events = POLLIN};
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        int left = (int)(deadline - now_ms());
        int r = poll(&p, 1, left > 0 ? left : 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        ssize_t got = recv(f->sock, buf, len - 1, 0);
        if (got < 0 && errno == EINTR)
            continue;
        assert_true(got >= 0);
        buf[got] = '\0';
        return (int)got;
    }
}

static void expect_msg(fixture *f, const char *want)
{
    char got[512];
    if (next_msg(f, got, sizeof got, WAIT_MS) < 0)
        fail_msg("no datagram; wanted \"%s\"", want);
    if (strcmp(got, want) != 0)
        fail_msg("datagram \"%s\", wanted \"%s\"", got, want);
}

static void expect_ready(fixture *f)
{
    char want[256];
    snprintf(want, sizeof want, "READY=1\nSTATUS=listening on %s; waiting for the first ledger", f->proc.addr);
    expect_msg(f, want);
}

static uint32_t status_ledger(const char *msg)
{
    unsigned seq;
    char tail;
    if (sscanf(msg, "STATUS=streaming; latest ledger %u%c", &seq, &tail) != 1)
        return 0;
    return seq;
}

/* After the daemon exited: nothing more was sent. */
static void expect_silence(fixture *f)
{
    char got[512];
    if (next_msg(f, got, sizeof got, NOTHING_MORE_MS) >= 0)
        fail_msg("unexpected datagram after the end: \"%s\"", got);
}

/* A bounded source: every ledger's status (they are further apart than the status period), then
 * the stop, then the exit. */
static void test_bounded_run_notifies_in_order(void **state)
{
    fixture *f = *state;
    const char *args[] = {"--synthetic-interval", "1100ms", "--emit-window", "0", "--synthetic-count", "2",
                          "--synthetic-size", "4096", NULL};
    start(f, 0, args);
    expect_ready(f);
    expect_msg(f, "STATUS=streaming; latest ledger 1");
    expect_msg(f, "STATUS=streaming; latest ledger 2");
    expect_msg(f, "STOPPING=1\nSTATUS=source ended; shutting down");
    assert_int_equal(cs_proc_wait_exit(&f->proc, WAIT_MS), 0);
    expect_silence(f);
}

/* Ledgers faster than the period: statuses at most once a period, ascending, the latest one
 * flushed before STOPPING on SIGTERM. */
static void test_status_is_throttled_and_sigterm_stops(void **state)
{
    fixture *f = *state;
    const char *args[] = {"--synthetic-interval", "20ms", "--emit-window", "0", "--synthetic-size", "4096", NULL};
    start(f, 0, args);
    expect_ready(f);
    char m[512];
    assert_true(next_msg(f, m, sizeof m, WAIT_MS) > 0);
    uint32_t first = status_ledger(m);
    if (first == 0)
        fail_msg("wanted a status, got \"%s\"", m);
    int64_t t1 = now_ms();
    assert_true(next_msg(f, m, sizeof m, WAIT_MS) > 0);
    int64_t t2 = now_ms();
    uint32_t second = status_ledger(m);
    if (second <= first + 1)
        fail_msg("second status \"%s\" after ledger %u: wanted ledgers skipped by the throttle", m, first);
    if (t2 - t1 < 800)
        fail_msg("two statuses %lld ms apart, within the 1 s period", (long long)(t2 - t1));

    assert_int_equal(kill(f->proc.pid, SIGTERM), 0);
    uint32_t last = second;
    for (;;) {
        assert_true(next_msg(f, m, sizeof m, WAIT_MS) > 0);
        uint32_t seq = status_ledger(m);
        if (seq == 0)
            break;
        assert_true(seq > last);
        last = seq;
    }
    assert_string_equal(m, "STOPPING=1\nSTATUS=shutting down on SIGTERM");
    assert_int_equal(cs_proc_wait_exit(&f->proc, WAIT_MS), 0);
    expect_silence(f);
}

/* WATCHDOG_USEC=600 ms: pings every 300 ms while ledgers come; none once the source has made no
 * progress for 600 ms (here it waits 3 s between ledgers); pings again with the next ledger. */
static void test_watchdog_follows_source_progress(void **state)
{
    fixture *f = *state;
    const char *args[] = {"--synthetic-interval", "3s", "--emit-window", "0", "--synthetic-size", "4096", NULL};
    start(f, 600000, args);
    char m[512];
    /* Pings may come before READY (the watchdog runs from the start). */
    for (;;) {
        assert_true(next_msg(f, m, sizeof m, WAIT_MS) > 0);
        if (strcmp(m, "WATCHDOG=1") != 0)
            break;
    }
    char want[256];
    snprintf(want, sizeof want, "READY=1\nSTATUS=listening on %s; waiting for the first ledger", f->proc.addr);
    assert_string_equal(m, want);
    for (;;) {
        assert_true(next_msg(f, m, sizeof m, WAIT_MS) > 0);
        if (strcmp(m, "WATCHDOG=1") != 0)
            break;
    }
    assert_string_equal(m, "STATUS=streaming; latest ledger 1");
    int64_t t1 = now_ms();
    int pings_fresh = 0, pings_stalled = 0;
    for (;;) {
        assert_true(next_msg(f, m, sizeof m, WAIT_MS) > 0);
        if (strcmp(m, "WATCHDOG=1") != 0)
            break;
        int64_t since = now_ms() - t1;
        if (since <= 1000)
            pings_fresh++;
        else if (since > 1300)
            pings_stalled++; /* the last allowed ping is due by 600 ms after ledger 1 */
    }
    assert_string_equal(m, "STATUS=streaming; latest ledger 2");
    int64_t t2 = now_ms();
    assert_true(t2 - t1 > 2000); /* the stall really lasted */
    assert_true(pings_fresh >= 1);
    assert_int_equal(pings_stalled, 0);
    /* Progress again: the watchdog is fed again within a ping period (300 ms, with slack). */
    assert_true(next_msg(f, m, sizeof m, 1500) > 0);
    assert_string_equal(m, "WATCHDOG=1");
    assert_int_equal(cs_proc_stop(&f->proc, SIGTERM, WAIT_MS), 0);
}

/* A start-up failure still tells systemd why, as the final STATUS. */
static void test_startup_failure_is_the_last_status(void **state)
{
    fixture *f = *state;
    /* The first daemon holds a port; the second cannot bind it. */
    const char *args[] = {"--synthetic-interval", "1s", "--emit-window", "0", "--synthetic-size", "4096", NULL};
    start(f, 0, args);
    expect_ready(f);
    char listen[128], datadir[PATH_MAX + 32];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", f->proc.port);
    snprintf(datadir, sizeof datadir, "--data-dir=%s/data2", f->dir.path);
    char *argv[] = {CORESTREAMD_BIN, datadir, "--listen", listen, NULL};
    cs_proc second;
    assert_int_equal(cs_proc_start_env(&second, argv, f->env), 0);
    assert_int_equal(cs_proc_wait_exit(&second, WAIT_MS), 1);
    char m[512];
    for (;;) {
        assert_true(next_msg(f, m, sizeof m, WAIT_MS) > 0);
        if (strncmp(m, "STOPPING=1\n", 11) == 0)
            break;
        assert_true(status_ledger(m) > 0); /* the first daemon's statuses */
    }
    char want[256];
    snprintf(want, sizeof want, "STOPPING=1\nSTATUS=failed: listen on %s: ", listen);
    if (strncmp(m, want, strlen(want)) != 0)
        fail_msg("datagram \"%s\", wanted it to start \"%s\"", m, want);
    cs_proc_free(&second);
    assert_int_equal(cs_proc_stop(&f->proc, SIGTERM, WAIT_MS), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bounded_run_notifies_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_is_throttled_and_sigterm_stops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watchdog_follows_source_progress, setup, teardown),
        cmocka_unit_test_setup_teardown(test_startup_failure_is_the_last_status, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
