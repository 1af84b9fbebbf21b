/* SPDX-License-Identifier: Apache-2.0 */
/* The corestreamd binary as an operator runs it: flags and their errors, exit codes, logs,
 * signals, the file source replaying a dump byte-exact, and the pipe source end to end (framed
 * metas from a stub writer, its failures, and shutdown with a writer that will not go away). Each
 * test starts the real program on 127.0.0.1 with an ephemeral port. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/synthetic.h"
#include "support/metabuild.h"
#include "support/procharness.h"
#include "support/wsclient.h"
#include "support/tmpdir.h"
#include "support/wait.h"

#ifndef CORESTREAMD_BIN
#error "CORESTREAMD_BIN must name the binary under test"
#endif
#define SHUTDOWN_MS 5000 /* SIGTERM to exit, and a swept writer to its end */

static cs_tmpdir g_tmp; /* this test's scratch directory */

/* The pipe-source tests keep what they start here, so that teardown can clean up after a failed
 * assertion: the frames, the daemon, its subscriber, the gate the stub writer waits on, and
 * (through the pid files named below) any `sleep 60` the writer left behind. */
static cs_mb_buf g_frames;
static cs_proc g_proc;
static bool g_proc_live;
static cs_ws *g_ws;
static int g_gate = -1;
static const char *const k_pidfiles[] = {"escaped.pid", "ingroup.pid"};

static pid_t read_pid(const char *name);
static void scratch(const char *name, char *out, size_t len);

/* Reads (and drops) ledgers until the stream ends, then checks the close frame it ended with. */
static void expect_close(cs_ws *ws, int want_code, const char *want_reason)
{
    cs_ledger l;
    for (int r = 1; r == 1;) {
        r = cs_ws_read_ledger(ws, &l, WAIT_MS, NULL, 0);
        if (r == 1)
            cs_ledger_free(&l);
    }
    int code;
    char why[128];
    assert_int_equal(cs_ws_last_close(ws, &code, why, sizeof why), 1);
    assert_int_equal(code, want_code);
    assert_string_equal(why, want_reason);
}

static int setup(void **state)
{
    (void)state;
    return cs_tmpdir_make(&g_tmp, "proc");
}

static int teardown(void **state)
{
    (void)state;
    cs_mb_free(&g_frames);
    cs_ws_close(g_ws);
    g_ws = NULL;
    if (g_proc_live)
        cs_proc_free(&g_proc);
    g_proc_live = false;
    if (g_gate >= 0)
        close(g_gate); /* a writer still parked on the gate reads EOF and gives up */
    g_gate = -1;
    for (size_t i = 0; i < sizeof k_pidfiles / sizeof k_pidfiles[0]; i++) {
        pid_t pid = read_pid(k_pidfiles[i]);
        if (pid > 0 && cs_mb_pid_runs(pid, "sleep"))
            kill(pid, SIGKILL); /* only after a failed assertion: the tests end their sleepers */
    }
    cs_tmpdir_remove(&g_tmp);
    return 0;
}

/* Runs corestreamd with args (NULL-terminated, after argv[0]) and --data-dir in the scratch dir. */
static void start(cs_proc *p, const char *const *args)
{
    char *argv[40];
    char datadir[PATH_MAX + 32];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/data", g_tmp.path);
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
    expect_failure(src, "--source must be captive, file, synthetic, pipe or jetstream, got \\\"telepathy\\\"");
    const char *ceiling[] = {"--start-ledger", "4294967295", NULL};
    expect_failure(ceiling, "the requested range reaches ledger 4294967295");
    const char *window[] = {"--emit-window", "2s", NULL};
    expect_failure(window, "--emit-window 2s does not fit inside --synthetic-interval 1s");
    const char *level[] = {"--compress-level", "99", "--listen", "127.0.0.1:0", NULL};
    expect_failure(level, "server: compress level 99 is outside [-131072,22]");
    const char *retention[] = {"--retention", "0", "--listen", "127.0.0.1:0", NULL};
    expect_failure(retention, "store: retention must be positive, got 0");
}

static void test_real_core_sources_validate(void **state)
{
    (void)state;
    const char *captive[] = {"--source", "captive", "--start-ledger", "5", "--core-config", "/nonexistent/x.cfg",
                             "--history-archive-urls", "http://127.0.0.1:1", "--listen", "127.0.0.1:0", NULL};
    expect_failure(captive, "captive: read config \\\"/nonexistent/x.cfg\\\"");
    const char *nopipe[] = {"--source", "pipe", NULL};
    expect_failure(nopipe, "--pipe-cmd or --pipe-path is required with --source pipe");
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
    snprintf(datadir2, sizeof datadir2, "--data-dir=%s/other", g_tmp.path);
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
    snprintf(file, sizeof file, "%s/plainfile", g_tmp.path);
    int fd = open(file, O_CREAT | O_WRONLY, 0644);
    assert_true(fd >= 0);
    close(fd);
    snprintf(datadir, sizeof datadir, "--data-dir=%s", file);
    const char *args[] = {datadir, "--listen", "127.0.0.1:0", NULL};
    expect_failure(args, ": create: Not a directory");
}

/* SIGTERM: subscribers get 1001 `server shutting down`, the process logs and exits 0. */
static void test_sigterm_closes_subscribers_and_exits_zero(void **state)
{
    (void)state;
    cs_proc p;
    const char *args[] = {"--listen", "127.0.0.1:0", "--synthetic-interval", "50ms", NULL};
    start(&p, args);
    assert_int_equal(cs_proc_wait_listening(&p, WAIT_MS), 0);
    assert_non_null(strstr(p.log, "source=synthetic start_ledger=1 start=default retention=10000"));
    cs_ws *ws = cs_ws_connect("127.0.0.1", p.port, "/stream", WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    cs_ledger l;
    assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, NULL, 0), 1);
    cs_ledger_free(&l);
    assert_int_equal(cs_proc_wait_line(&p, "subscriber connected", WAIT_MS), 0);
    kill(p.pid, SIGTERM);
    expect_close(ws, 1001, "server shutting down");
    assert_int_equal(cs_proc_wait_exit(&p, WAIT_MS), 0);
    assert_non_null(strstr(p.log, "msg=\"source loop cancelled\""));
    assert_non_null(strstr(p.log, "msg=\"corestreamd stopped\""));
    cs_ws_close(ws);
    cs_proc_free(&p);
}

/* Requests that declare a body, on the data and the admin listener (with --auth-healthz, whose 401
 * wedged the daemon as well): each is refused with its status, and the daemon still accepts,
 * answers its probes and stops on SIGTERM. */
static void test_request_bodies_never_wedge_the_daemon(void **state)
{
    (void)state;
    char tokens[PATH_MAX + 32];
    scratch("tokens", tokens, sizeof tokens);
    FILE *f = fopen(tokens, "w");
    assert_non_null(f);
    fputs("probe 0123456789abcdef0123456789abcdef\n", f);
    fclose(f);
    cs_proc p;
    const char *args[] = {"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--synthetic-interval", "50ms",
                          "--auth-tokens", tokens, "--auth-healthz", NULL};
    start(&p, args);
    assert_int_equal(cs_proc_wait_listening(&p, WAIT_MS), 0);
    int ports[2] = {p.port, cs_proc_wait_admin_port(&p, WAIT_MS)};
    assert_true(ports[1] > 0);
    static const struct {
        const char *req;
        int status;
    } cases[] = {
        {"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
         "Content-Length: 1\r\n\r\nx", 413},
        {"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 413},
        {"GET /nope HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx", 413},
        {"POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\nabc", 400},
        {"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 401},
    };
    static char resp[8192];
    for (int round = 0; round < 2; round++)
        for (size_t port = 0; port < 2; port++)
            for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                int st = cs_http_raw("127.0.0.1", ports[port], cases[i].req, WAIT_MS, resp, sizeof resp);
                if (st != cases[i].status)
                    fail_msg("port %d, request %zu: status %d\n%s", ports[port], i, st, resp);
            }
    for (size_t port = 0; port < 2; port++)
        assert_int_equal(cs_http_raw("127.0.0.1", ports[port],
                                     "GET /healthz HTTP/1.1\r\nHost: x\r\n"
                                     "Authorization: Bearer 0123456789abcdef0123456789abcdef\r\n\r\n",
                                     WAIT_MS, resp, sizeof resp),
                         200);
    kill(p.pid, SIGTERM);
    assert_int_equal(cs_proc_wait_exit(&p, SHUTDOWN_MS), 0);
    assert_non_null(strstr(p.log, "msg=\"corestreamd stopped\""));
    cs_proc_free(&p);
}

/* Each thread's role shows in `top -H` by name, and what can wait yields (issue 10: a stranger's
 * catch-ups take what the live path and stellar-core leave): the ring writer and the replay
 * encoders run at nice 19, the live encoders and the I/O thread (the main thread) two steps
 * below the daemon (issue 12: they yield to the source), the source at the daemon's own priority.
 * Returns the role's nice value (MIXED_NICE unless every thread of it is alike) and counts its
 * threads. */
#define MIXED_NICE (-100)
static int thread_nice(pid_t pid, const char *role, int *count)
{
    char dirpath[64];
    snprintf(dirpath, sizeof dirpath, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dirpath);
    assert_non_null(d);
    int nice = -100;
    *count = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[384], comm[32] = "", stat[1024] = "";
        snprintf(path, sizeof path, "%s/%s/comm", dirpath, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* the thread ended meanwhile */
        if (!fgets(comm, sizeof comm, f))
            comm[0] = '\0';
        fclose(f);
        comm[strcspn(comm, "\n")] = '\0';
        if (strcmp(comm, role) != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s/stat", dirpath, e->d_name);
        f = fopen(path, "r");
        assert_non_null(f);
        assert_non_null(fgets(stat, sizeof stat, f));
        fclose(f);
        /* After "pid (comm) " come state (field 3) .. nice (field 19). */
        char *c = strrchr(stat, ')');
        assert_non_null(c);
        c += 2;
        for (int field = 3; field < 19; field++) {
            c = strchr(c, ' ');
            assert_non_null(c);
            c++;
        }
        int v = atoi(c);
        if (*count == 0)
            nice = v;
        else if (v != nice)
            nice = MIXED_NICE; /* a thread between its creator's role and its own */
        ++*count;
    }
    closedir(d);
    return nice;
}

/* The main thread's nice value (its tid is the pid; the small signal and notify threads share its
 * name, not its priority). */
static int main_nice(pid_t pid)
{
    char path[64], stat[1024] = "";
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(stat, sizeof stat, f));
    fclose(f);
    char *c = strrchr(stat, ')');
    assert_non_null(c);
    c += 2;
    for (int field = 3; field < 19; field++) {
        c = strchr(c, ' ');
        assert_non_null(c);
        c++;
    }
    return atoi(c);
}

/* background: --background-nice's value, or NULL for its default (19). */

/* The nice values a run's threads should settle at (expect_thread_roles). */
enum { ROLES = 5 };
typedef struct role_want {
    const char *role;
    int nice, count;
} role_want;
typedef struct roles_wanted {
    pid_t pid;
    int live; /* the main thread's */
    role_want want[ROLES];
} roles_wanted;

static bool roles_settled(void *arg)
{
    const roles_wanted *w = arg;
    bool settled = main_nice(w->pid) == w->live;
    for (size_t i = 0; i < ROLES; i++) {
        int n, nice = thread_nice(w->pid, w->want[i].role, &n);
        settled = settled && n == w->want[i].count && nice == w->want[i].nice;
    }
    return settled;
}
static void expect_thread_roles(const char *background)
{
    cs_proc p;
    const char *args[] = {"--listen", "127.0.0.1:0", "--synthetic-interval", "50ms",
                          background ? "--background-nice" : NULL, background, NULL};
    start(&p, args);
    assert_int_equal(cs_proc_wait_listening(&p, WAIT_MS), 0);
    /* A new thread carries its creator's name until its first instruction renames it, so the
     * picture is read until it settles (there is no event to wait for), within WAIT_MS. The
     * daemon inherits this test's nice value (a suite run under `nice` shifts it); the
     * background roles sit at 19 by default whatever it is. */
    errno = 0;
    int own = getpriority(PRIO_PROCESS, 0);
    assert_int_equal(errno, 0);
    int live = own + 2 > 19 ? 19 : own + 2;
    int bg = background ? own + atoi(background) : 19;
    bg = bg > 19 ? 19 : bg;
    roles_wanted w = {.pid = p.pid,
                      .live = live,
                      .want = {{"cs-source", own, 1},
                               {"cs-encode", live, 4 /* --compress-workers' default */},
                               {"cs-replay", bg, 2},
                               {"cs-ring", bg, 1},
                               /* strangers' heads and handshakes yield to the live path */
                               {"cs-heads", own + 5 > 19 ? 19 : own + 5, 1}}};
    const role_want *want = w.want;
    cs_wait_until(roles_settled, &w, WAIT_MS); /* the asserts below say what did not settle */
    assert_int_equal(main_nice(p.pid), live);
    for (size_t i = 0; i < ROLES; i++) {
        int n;
        assert_int_equal(thread_nice(p.pid, want[i].role, &n), want[i].nice);
        assert_int_equal(n, want[i].count);
    }
    assert_int_equal(cs_proc_stop(&p, SIGTERM, WAIT_MS), 0);
    cs_proc_free(&p);
}

static void test_thread_roles_and_priorities(void **state)
{
    (void)state;
    expect_thread_roles(NULL);
}

/* --background-nice moves the work that can wait (ring writes, replays) and nothing else. */
static void test_background_nice_sets_the_background_roles(void **state)
{
    (void)state;
    expect_thread_roles("7");
}

/* SIGHUP reloads and never stops the daemon (issue 10): without --auth-tokens there is nothing to
 * reload; with them, a token dropped from the file closes its subscriber with 1008 while the
 * daemon keeps serving. */
static void test_sighup_reloads_tokens_and_never_stops(void **state)
{
    (void)state;
    static const char tok[] = "op-token-0123456789abcdefghijklmnopqrstuv";
    char tokens[PATH_MAX + 16], flag[PATH_MAX + 32];
    cs_tmpdir_join(&g_tmp, "tokens", tokens, sizeof tokens);
    FILE *f = fopen(tokens, "w");
    assert_non_null(f);
    fprintf(f, "rpc-a %s\n", tok);
    fclose(f);
    snprintf(flag, sizeof flag, "--auth-tokens=%s", tokens);
    cs_proc p;
    const char *args[] = {"--listen", "127.0.0.1:0", "--synthetic-interval", "50ms", flag, NULL};
    start(&p, args);
    assert_int_equal(cs_proc_wait_listening(&p, WAIT_MS), 0);
    cs_ws_opts wo = {.extra_headers = "Authorization: Bearer op-token-0123456789abcdefghijklmnopqrstuv\r\n"};
    cs_ws *ws = cs_ws_connect_opts("127.0.0.1", p.port, "/stream", &wo, WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    assert_int_equal(cs_proc_wait_line(&p, "token=rpc-a", WAIT_MS), 0);
    f = fopen(tokens, "w");
    fprintf(f, "rpc-b other-token-0123456789abcdefghijklmnopqrstuv\n");
    fclose(f);
    kill(p.pid, SIGHUP);
    expect_close(ws, 1008, "token revoked");
    cs_ws_close(ws);
    assert_int_equal(cs_proc_wait_line(&p, "msg=\"reload: auth tokens reloaded\"", WAIT_MS), 0);
    char body[512];
    assert_int_equal(cs_http_get("127.0.0.1", p.port, "/healthz", WAIT_MS, body, sizeof body, NULL, 0), 200);
    assert_int_equal(cs_proc_stop(&p, SIGTERM, WAIT_MS), 0);
    assert_int_equal(cs_proc_log_count(&p, tok), 0); /* the token itself is never logged */
    cs_proc_free(&p);

    const char *plain[] = {"--listen", "127.0.0.1:0", "--synthetic-interval", "50ms", NULL};
    start(&p, plain);
    assert_int_equal(cs_proc_wait_listening(&p, WAIT_MS), 0);
    kill(p.pid, SIGHUP);
    assert_int_equal(cs_proc_wait_line(&p, "msg=\"reload: nothing to reload\"", WAIT_MS), 0);
    assert_int_equal(cs_http_get("127.0.0.1", p.port, "/healthz", WAIT_MS, body, sizeof body, NULL, 0), 200);
    assert_int_equal(cs_proc_stop(&p, SIGTERM, WAIT_MS), 0);
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
    char want[96];
    snprintf(want, sizeof want, "msg=\"source exhausted\" pid=%d ledgers=4", (int)p.pid);
    assert_non_null(strstr(p.log, want));
    cs_ws_close(ws);
    cs_proc_free(&p);
}

/* The lines of p->log with the time value cut out ("time=T" / "\"time\":\"T\""), so whole lines
 * can be compared. Returns how many were stored in lines[] (each malloc'd). */
static size_t untimed_lines(const cs_proc *p, char **lines, size_t max)
{
    size_t n = 0;
    for (const char *l = p->log; *l && n < max;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        char *line = strndup(l, len);
        assert_non_null(line);
        const char *key = strncmp(line, "{\"time\":\"", 9) == 0 ? "{\"time\":\"" : "time=";
        if (strncmp(line, key, strlen(key)) == 0) {
            char *t = line + strlen(key);
            char *end = t + strcspn(t, key[0] == '{' ? "\"" : " ");
            memmove(t, end, strlen(end) + 1);
        }
        lines[n++] = line;
        l = e ? e + 1 : l + len;
    }
    return n;
}

/* Issue 14: pid in every line, --log-format json, and exact lines in both formats. The
 * `corestreamd listening` line carries the descriptor-dependent cap, so only its start is pinned. */
static void test_log_formats_and_pid(void **state)
{
    (void)state;
    static const char *const formats[] = {"logfmt", "json"};
    for (size_t f = 0; f < 2; f++) {
        char fmt[32], datadir[PATH_MAX + 48];
        snprintf(fmt, sizeof fmt, "--log-format=%s", formats[f]);
        /* A ring of its own per run: a second run into the first's ring would log a reset. */
        snprintf(datadir, sizeof datadir, "--data-dir=%s/data-%s", g_tmp.path, formats[f]);
        cs_proc p;
        const char *args[] = {datadir, "--listen", "127.0.0.1:0", "--synthetic-interval", "10ms", "--emit-window", "0",
                              "--synthetic-count", "2", "--synthetic-size", "1000", fmt, NULL};
        assert_int_equal(run(&p, args), 0);
        char *lines[16];
        size_t n = untimed_lines(&p, lines, 16);
        int pid = (int)p.pid;
        char want[4][256];
        if (f == 0) {
            snprintf(want[0], sizeof want[0], "time= level=INFO msg=\"corestreamd listening\" pid=%d addr=127.0.0.1:", pid);
            snprintf(want[1], sizeof want[1],
                     "time= level=INFO msg=\"source loop starting\" pid=%d range=[1,2] chunk_size=262144", pid);
            snprintf(want[2], sizeof want[2], "time= level=INFO msg=\"source exhausted\" pid=%d ledgers=2", pid);
            snprintf(want[3], sizeof want[3], "time= level=INFO msg=\"corestreamd stopped\" pid=%d", pid);
        } else {
            snprintf(want[0], sizeof want[0],
                     "{\"time\":\"\",\"level\":\"INFO\",\"msg\":\"corestreamd listening\",\"pid\":%d,"
                     "\"addr\":\"127.0.0.1:", pid);
            snprintf(want[1], sizeof want[1],
                     "{\"time\":\"\",\"level\":\"INFO\",\"msg\":\"source loop starting\",\"pid\":%d,"
                     "\"range\":\"[1,2]\",\"chunk_size\":262144}", pid);
            snprintf(want[2], sizeof want[2],
                     "{\"time\":\"\",\"level\":\"INFO\",\"msg\":\"source exhausted\",\"pid\":%d,\"ledgers\":2}", pid);
            snprintf(want[3], sizeof want[3],
                     "{\"time\":\"\",\"level\":\"INFO\",\"msg\":\"corestreamd stopped\",\"pid\":%d}", pid);
        }
        if (n != 4)
            fail_msg("%zu lines, want 4:\n%s", n, p.log);
        assert_true(strncmp(lines[0], want[0], strlen(want[0])) == 0);
        for (int i = 1; i < 4; i++)
            assert_string_equal(lines[i], want[i]);
        for (size_t i = 0; i < n; i++)
            free(lines[i]);
        cs_proc_free(&p);
    }
    /* An unknown level or format is refused before anything runs, naming what is accepted. */
    const char *bogus[] = {"--log-level", "bogus", NULL};
    expect_failure(bogus, "ERROR corestreamd failed error=\"--log-level \\\"bogus\\\" is not a level: use debug, info, "
                          "warn or error (case-insensitive, with an optional offset such as info+2)\"");
    const char *xml[] = {"--log-format", "xml", NULL};
    expect_failure(xml, "ERROR corestreamd failed error=\"--log-format must be logfmt or json, got \\\"xml\\\"\"");
}

/* Issue 14: SIGHUP re-reads --log-level-file. A plain GET of /stream is refused with a DEBUG
 * line, which shows whether DEBUG is on; a bad file keeps the level in force. */
static void test_sighup_reloads_the_log_level(void **state)
{
    (void)state;
    char file[PATH_MAX + 16], flag[PATH_MAX + 64];
    cs_tmpdir_join(&g_tmp, "level", file, sizeof file);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("info\n", f);
    fclose(f);
    snprintf(flag, sizeof flag, "--log-level-file=%s", file);
    cs_proc p;
    const char *args[] = {"--listen", "127.0.0.1:0", "--synthetic-interval", "50ms", "--log-level", "error", flag, NULL};
    start(&p, args);
    assert_int_equal(cs_proc_wait_listening(&p, WAIT_MS), 0); /* the file's info wins over --log-level */
    char body[512], want[PATH_MAX + 512];
    assert_int_equal(cs_http_get("127.0.0.1", p.port, "/stream", WAIT_MS, body, sizeof body, NULL, 0), 426);

    f = fopen(file, "w");
    fputs("  DEBUG \n", f);
    fclose(f);
    kill(p.pid, SIGHUP);
    snprintf(want, sizeof want, "msg=\"reload: log level\" pid=%d level=DEBUG file=%s", (int)p.pid, file);
    assert_int_equal(cs_proc_wait_line(&p, want, WAIT_MS), 0);
    assert_int_equal(cs_http_get("127.0.0.1", p.port, "/stream", WAIT_MS, body, sizeof body, NULL, 0), 426);
    assert_int_equal(cs_proc_wait_line(&p, "level=DEBUG msg=\"websocket handshake failed\"", WAIT_MS), 0);
    assert_int_equal(cs_proc_log_count(&p, "websocket handshake failed"), 1); /* not the first, at INFO */

    f = fopen(file, "w");
    fputs("loud\n", f);
    fclose(f);
    kill(p.pid, SIGHUP);
    snprintf(want, sizeof want,
             "level=ERROR msg=\"reload: log level kept\" pid=%d error=\"--log-level-file %s: \\\"loud\\\" is not a level: "
             "use debug, info, warn or error (case-insensitive, with an optional offset such as info+2)\"",
             (int)p.pid, file);
    assert_int_equal(cs_proc_wait_line(&p, want, WAIT_MS), 0);
    assert_int_equal(cs_proc_stop(&p, SIGTERM, WAIT_MS), 0);
    cs_proc_free(&p);

    /* At start a bad file is refused like a bad --log-level. */
    snprintf(want, sizeof want, "--log-level-file %s: \\\"loud\\\" is not a level", file);
    const char *bad[] = {flag, NULL};
    expect_failure(bad, want);
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
    snprintf(dump, sizeof dump, "%s/dump", g_tmp.path);
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
    snprintf(datadir, sizeof datadir, "--data-dir=%s/d", g_tmp.path);
    snprintf(filedir, sizeof filedir, "--file-dir=%s/d/ledgers", g_tmp.path);
    const char *args[] = {datadir, "--source", "file", filedir, NULL};
    expect_failure(args, "is this server's own retention ring");
}

/* A dump record that vanishes mid-run fails the source: exit 1 naming the ledger, ring intact. */
static void test_vanished_dump_file_fails_cleanly(void **state)
{
    (void)state;
    char dump[PATH_MAX + 16], path[PATH_MAX + 64], filedir[PATH_MAX + 32];
    snprintf(dump, sizeof dump, "%s/dump2", g_tmp.path);
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
    int st = cs_proc_wait_exit(&p, WAIT_MS);
    /* The dump is replayed in a loop and the next record is read ahead, so the daemon may read
     * ledger 2 before the unlink: then the failure comes one cycle later, at ledger 4. */
    if (st != 1 || (!strstr(p.log, "source failed at ledger 2: ") && !strstr(p.log, "source failed at ledger 4: ")) ||
        !strstr(p.log, "No such file or directory") || !strstr(p.log, "msg=\"corestreamd failed\""))
        fail_msg("exit %d; log:\n%s", st, p.log);
    cs_proc_free(&p);
}

/* ---- the pipe source ---------------------------------------------------------------------- */

static void scratch(const char *name, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", g_tmp.path, name);
}

/* The pid a command wrote to the scratch file name, or -1. */
static pid_t read_pid(const char *name)
{
    char path[PATH_MAX + 32];
    scratch(name, path, sizeof path);
    return cs_mb_read_pid(path);
}

/* A pidfd for a process that is not our child, so its end can be awaited; -1 when it is already
 * gone. Fails the test when the kernel has no pidfd_open. */
static int pidfd_of(pid_t pid)
{
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0 && errno != ESRCH)
        fail_msg("pidfd_open(%d): %s", (int)pid, strerror(errno));
    return fd;
}

/* Waits up to ms for the process behind pidfd (from pidfd_of) to end; closes the pidfd. */
static bool ended_within(int pidfd, int ms)
{
    if (pidfd < 0)
        return true;
    struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
    int r;
    while ((r = poll(&pfd, 1, ms)) < 0 && errno == EINTR)
        ;
    close(pidfd);
    return r > 0;
}

/* Appends to g_frames the frames of n metas, seqs first.. (the Go fixture's shapes, tails[i]
 * bytes after each prefix), and writes g_frames to the scratch file name. off[i] and len[i] say
 * where frame i's body, the ledger as a subscriber must receive it, lies in g_frames. */
static void write_frames(const char *name, uint32_t first, const size_t *tails, size_t n, size_t *off,
                         size_t *len)
{
    for (size_t i = 0; i < n; i++) {
        cs_mb_meta m = cs_mb_go_meta(1, first + (uint32_t)i, i % 2 == 0, (uint32_t)i, true, tails[i]);
        off[i] = cs_mb_put_frame(&g_frames, &m);
        len[i] = g_frames.n - off[i];
    }
    char path[PATH_MAX + 32];
    scratch(name, path, sizeof path);
    write_file(path, g_frames.p, g_frames.n);
}

/* Starts corestreamd on the pipe source running cmd, in g_proc, and waits for it to listen. */
static void start_pipe(const char *cmd)
{
    const char *args[] = {"--listen", "127.0.0.1:0", "--source", "pipe", "--pipe-cmd", cmd,
                          "--chunk-size", "65536", NULL};
    start(&g_proc, args);
    g_proc_live = true;
    assert_int_equal(cs_proc_wait_listening(&g_proc, WAIT_MS), 0);
}

/* Subscribes g_ws to path and waits until the server has logged the subscriber. */
static void subscribe(const char *path)
{
    char body[256] = "";
    g_ws = cs_ws_connect("127.0.0.1", g_proc.port, path, WAIT_MS, NULL, body, sizeof body);
    if (!g_ws)
        fail_msg("subscribe %s: %s", path, body);
    assert_int_equal(cs_proc_wait_line(&g_proc, "subscriber connected", WAIT_MS), 0);
}

/* Reads one ledger from g_ws and checks it is seq with exactly want's len bytes. */
static void expect_ledger(uint32_t seq, const uint8_t *want, size_t len)
{
    cs_ledger l;
    char err[256];
    if (cs_ws_read_ledger(g_ws, &l, WAIT_MS, err, sizeof err) != 1)
        fail_msg("ledger %u: %s\n%s", seq, err, g_proc.log);
    assert_int_equal(l.seq, seq);
    assert_int_equal(l.len, len);
    assert_memory_equal(l.data, want, len);
    assert_int_equal(l.chunks, (len + 65535) / 65536);
    cs_ledger_free(&l);
}

/* A stub writer (`cat frames >&3`, held back by a gate until the subscriber is in) streams three
 * metas of a few hundred KiB: each arrives byte-exact, the whole frame body, in several 64 KiB
 * chunks; the writer's EOF and exit 0 end the source and the process exits 0. */
static void test_pipe_source_streams_a_stub_writer(void **state)
{
    (void)state;
    const size_t tails[3] = {300000, 370001, 450002};
    size_t off[3], len[3];
    write_frames("frames.bin", 101, tails, 3, off, len);
    char frames[PATH_MAX + 32], gate[PATH_MAX + 32], cmd[3 * PATH_MAX];
    scratch("frames.bin", frames, sizeof frames);
    scratch("gate", gate, sizeof gate);
    assert_int_equal(mkfifo(gate, 0600), 0);
    g_gate = open(gate, O_RDWR | O_CLOEXEC); /* never blocks; closing it unparks the writer */
    assert_true(g_gate >= 0);
    snprintf(cmd, sizeof cmd, "read go < '%s' && cat '%s' >&3", gate, frames);

    start_pipe(cmd);
    subscribe("/stream?start=101&end=103");
    assert_int_equal(write(g_gate, "go\n", 3), 3);
    for (uint32_t i = 0; i < 3; i++) {
        assert_true(len[i] > 4 * 65536);
        expect_ledger(101 + i, g_frames.p + off[i], len[i]);
    }
    cs_ledger l;
    assert_int_equal(cs_ws_read_ledger(g_ws, &l, WAIT_MS, NULL, 0), 0); /* the range is done */
    int code;
    assert_int_equal(cs_ws_last_close(g_ws, &code, NULL, 0), 1);
    assert_int_equal(code, 1000);
    if (cs_proc_wait_exit(&g_proc, WAIT_MS) != 0)
        fail_msg("corestreamd did not exit 0 after the source ended:\n%s", g_proc.log);
    char want[96];
    snprintf(want, sizeof want, "msg=\"source exhausted\" pid=%d ledgers=3", (int)g_proc.pid);
    assert_non_null(strstr(g_proc.log, want));
    assert_non_null(strstr(g_proc.log, "msg=\"corestreamd stopped\""));
    assert_null(strstr(g_proc.log, "ERROR"));
}

/* A command that fails is the source failing: exit 1 with its exit status in the error. */
static void test_pipe_command_failure_exits_one(void **state)
{
    (void)state;
    const char *args[] = {"--listen", "127.0.0.1:0", "--source", "pipe", "--pipe-cmd", "exit 7", NULL};
    expect_failure(args, "pipe source: \\\"exit 7\\\" exited: exit status 7");
}

/* A frame whose marker declares more than the writer writes fails the source: exit 1. */
static void test_pipe_truncated_frame_exits_one(void **state)
{
    (void)state;
    cs_mb_buf m = {0};
    cs_mb_meta spec = cs_mb_go_meta(1, 55, false, 0, false, 8192);
    cs_mb_put_meta(&m, &spec);
    cs_mb_put_marker(&g_frames, (uint32_t)(m.n + 4096));
    cs_mb_put(&g_frames, m.p, m.n);
    cs_mb_free(&m);
    char path[PATH_MAX + 32], cmd[PATH_MAX + 64];
    scratch("truncated.bin", path, sizeof path);
    write_file(path, g_frames.p, g_frames.n);
    snprintf(cmd, sizeof cmd, "cat '%s' >&3", path);
    const char *args[] = {"--listen", "127.0.0.1:0", "--source", "pipe", "--pipe-cmd", cmd, NULL};
    expect_failure(args, "source failed emitting ledger 55: pipe source: frame truncated 4096 bytes short");
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs a writer that reports its pid in a pid file, writes one frame (ledger 101) and then holds
 * fd 3 open in `sleep 60`: escaped from the command's process group (setsid, the command itself
 * exiting 0 at once), or inside it (the command waiting for it). Once ledger 101 has arrived (so
 * the pid is written: it came first), SIGTERMs corestreamd with the pipe still open and expects
 * the subscriber told 1001 and exit 0, all within SHUTDOWN_MS; then that no `sleep 60` survives.
 * corestreamd's group teardown must end the writer inside the group; the escaped one is outside
 * what it sweeps, by design, so the test ends that one itself. */
static void sigterm_with_a_parked_writer(bool escaped)
{
    const size_t tail = 100000;
    size_t off, len;
    write_frames("one.bin", 101, &tail, 1, &off, &len);
    const char *pidfile = escaped ? "escaped.pid" : "ingroup.pid";
    char frames[PATH_MAX + 32], pidpath[PATH_MAX + 32], cmd[3 * PATH_MAX];
    scratch("one.bin", frames, sizeof frames);
    scratch(pidfile, pidpath, sizeof pidpath);
    snprintf(cmd, sizeof cmd,
             "%ssh -c 'echo $$ > \"$0\"; cat \"$1\" >&3; exec sleep 60' '%s' '%s' >/dev/null 2>&1 & %s",
             escaped ? "setsid " : "", pidpath, frames, escaped ? "exit 0" : "wait");
    start_pipe(cmd);
    subscribe("/stream?start=101");
    expect_ledger(101, g_frames.p + off, len);
    pid_t pid = read_pid(pidfile);
    assert_true(pid > 0);
    assert_true(cs_mb_pid_runs(pid, "sh") || cs_mb_pid_runs(pid, "sleep"));
    int pidfd = pidfd_of(pid);
    assert_true(pidfd >= 0); /* alive while corestreamd runs */

    int64_t deadline = mono_ms() + SHUTDOWN_MS;
    assert_int_equal(kill(g_proc.pid, SIGTERM), 0);
    cs_ledger l;
    char err[256] = "";
    if (cs_ws_read_ledger(g_ws, &l, SHUTDOWN_MS, err, sizeof err) != 0)
        fail_msg("no close after SIGTERM: %s", err); /* reading answers the close, too */
    int code;
    assert_int_equal(cs_ws_last_close(g_ws, &code, NULL, 0), 1);
    assert_int_equal(code, 1001);
    int left = (int)(deadline - mono_ms());
    int st = cs_proc_wait_exit(&g_proc, left > 0 ? left : 0);
    if (st != 0)
        fail_msg("SIGTERM: exit status %d within %d ms (-1: still running):\n%s", st, SHUTDOWN_MS,
                 g_proc.log);
    char want[96];
    snprintf(want, sizeof want, "msg=\"source loop cancelled\" pid=%d ledgers=1", (int)g_proc.pid);
    assert_non_null(strstr(g_proc.log, want));
    assert_non_null(strstr(g_proc.log, "msg=\"corestreamd stopped\""));

    if (escaped)
        kill(pid, SIGKILL);
    if (!ended_within(pidfd, SHUTDOWN_MS))
        fail_msg("the writer's sleep %d survived corestreamd", (int)pid);
}

/* A grandchild that escaped the command's process group keeps fd 3 open after the command exited
 * 0, so the pipe never reaches EOF: SIGTERM still ends the process at once, with 0. */
static void test_pipe_sigterm_with_an_escaped_writer(void **state)
{
    (void)state;
    sigterm_with_a_parked_writer(true);
}

/* A writer in the command's group parked on fd 3: SIGTERM ends the process at once with 0, and
 * the group teardown ends the writer. */
static void test_pipe_sigterm_sweeps_a_parked_writer(void **state)
{
    (void)state;
    sigterm_with_a_parked_writer(false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_help_exits_zero, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flag_errors_are_early_and_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_real_core_sources_validate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_listen_failure_names_the_address, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unwritable_data_dir_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_bodies_never_wedge_the_daemon, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigterm_closes_subscribers_and_exits_zero, setup, teardown),
        cmocka_unit_test_setup_teardown(test_thread_roles_and_priorities, setup, teardown),
        cmocka_unit_test_setup_teardown(test_background_nice_sets_the_background_roles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sighup_reloads_tokens_and_never_stops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounded_source_flushes_close_frames_then_exits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_formats_and_pid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sighup_reloads_the_log_level, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_source_replays_a_dump, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_source_refuses_the_ring, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vanished_dump_file_fails_cleanly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipe_source_streams_a_stub_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipe_command_failure_exits_one, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipe_truncated_frame_exits_one, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipe_sigterm_with_an_escaped_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipe_sigterm_sweeps_a_parked_writer, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
