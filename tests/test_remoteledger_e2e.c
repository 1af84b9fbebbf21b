/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger against a real corestreamd process (started from its binary on 127.0.0.1 with
 * an ephemeral port and a scratch data dir), for what only a real process shows: a server paused
 * with SIGSTOP, whose kernel still accepts connections and holds them, but which sends nothing;
 * /healthz for rl_stream_bounds; resume across a server killed and restarted, refused when the
 * restart is another run (a fresh data dir); several sessions served by one poll loop. Also the dial
 * timeout, against a listener whose accept queue is full (its kernel drops SYNs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/synthetic.h"
#include "corestream/remoteledger.h"
#include "support/procharness.h"
#include "support/tmpdir.h"
#include "support/wsclient.h"
#include "support/wait.h"

#ifndef CORESTREAMD_BIN
#error "CORESTREAMD_BIN must name the binary under test"
#endif
#define MS 1000000LL

static cs_tmpdir g_tmp;
static cs_proc g_proc;
static bool g_live;    /* g_proc runs */
static bool g_stopped; /* ...and is SIGSTOPped */

static int setup(void **state)
{
    (void)state;
    return cs_tmpdir_make(&g_tmp, "rle2e");
}

static int teardown(void **state)
{
    (void)state;
    if (g_stopped)
        kill(g_proc.pid, SIGCONT);
    if (g_live)
        cs_proc_free(&g_proc);
    g_live = g_stopped = false;
    cs_tmpdir_remove(&g_tmp);
    return 0;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* corestreamd with a fast synthetic source: a 1000-byte ledger every 20 ms. */
static void start_daemon(void)
{
    char datadir[PATH_MAX + 32];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/data", g_tmp.path);
    char *argv[] = {CORESTREAMD_BIN, datadir, "--listen", "127.0.0.1:0", "--source", "synthetic",
                    "--synthetic-interval", "20ms", "--emit-window", "0", "--synthetic-size", "1000", NULL};
    assert_int_equal(cs_proc_start(&g_proc, argv), 0);
    g_live = true;
    assert_int_equal(cs_proc_wait_listening(&g_proc, WAIT_MS), 0);
}

static void url_of(char *buf, size_t len) { snprintf(buf, len, "ws://127.0.0.1:%d", g_proc.port); }

typedef struct pauser {
    int count;
    int pause_after; /* SIGSTOP the daemon after this many ledgers (0: never) */
    int64_t paused_ms;
} pauser;

static int pause_daemon(const uint8_t *p, size_t n, const rl_ledger_info *info, void *ctx)
{
    (void)p, (void)n, (void)info;
    pauser *z = ctx;
    if (++z->count == z->pause_after) {
        assert_int_equal(kill(g_proc.pid, SIGSTOP), 0);
        g_stopped = true;
        z->paused_ms = mono_ms();
    }
    return 0;
}

/* Paused mid-stream: the idle timeout ends the call; paused before a dial: the kernel accepts,
 * nobody answers the upgrade, and the handshake timeout ends it. Resumed, the same stream works. */
static void test_idle_and_handshake_timeouts_against_sigstop(void **state)
{
    (void)state;
    start_daemon();
    char url[64];
    url_of(url, sizeof url);
    rl_options o;
    rl_options_init(&o);
    o.idle_timeout_ns = 500 * MS;
    o.handshake_timeout_ns = 300 * MS;
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, url, &o), RL_OK);

    pauser z = {.pause_after = 3};
    assert_int_equal(rl_stream_raw_ledgers(s, rl_unbounded_range(0), pause_daemon, &z), RL_ERR_IDLE_TIMEOUT);
    assert_string_equal(rl_stream_error(s), "remoteledger: read: idle timeout: no complete message for 500ms");
    assert_true(z.count >= 3);
    int64_t waited = mono_ms() - z.paused_ms;
    if (waited < 490 || waited > 5000)
        fail_msg("the idle timeout came %lld ms after the pause", (long long)waited);

    int64_t t0 = mono_ms();
    assert_int_equal(rl_stream_raw_ledgers(s, rl_unbounded_range(0), NULL, NULL), RL_ERR_HANDSHAKE_TIMEOUT);
    char want[256];
    snprintf(want, sizeof want, "remoteledger: dial %s/stream?start=0: handshake timeout: no upgrade response within 300ms",
             url);
    assert_string_equal(rl_stream_error(s), want);
    int64_t took = mono_ms() - t0;
    if (took < 290 || took > 5000)
        fail_msg("a 300 ms handshake timeout took %lld ms", (long long)took);

    assert_int_equal(kill(g_proc.pid, SIGCONT), 0);
    g_stopped = false;
    z = (pauser){0};
    assert_int_equal(rl_stream_raw_ledgers(s, rl_bounded_range(1, 5), pause_daemon, &z), RL_OK);
    assert_int_equal(z.count, 5);
    rl_stream_free(s);
    assert_int_equal(cs_proc_stop(&g_proc, SIGTERM, WAIT_MS), 0);
    cs_proc_free(&g_proc);
    g_live = false;
}

static int count_ledger(const uint8_t *p, size_t n, const rl_ledger_info *info, void *ctx)
{
    (void)p, (void)n, (void)info;
    ++*(int *)ctx;
    return 0;
}

/* rl_stream_bounds against the real /healthz: the bounds after a few ledgers, the same numbers
 * the endpoint shows, asked between the pull calls of an open session too; a path whose /healthz
 * does not exist; a token the server requires for /healthz. */
static void test_bounds(void **state)
{
    (void)state;
    char tokens[PATH_MAX + 16];
    snprintf(tokens, sizeof tokens, "%s/tokens", g_tmp.path);
    FILE *f = fopen(tokens, "w");
    assert_non_null(f);
    fputs("rpc-a tokenA-0123456789abcdefghijklmnopqrstuvwxyz\n", f);
    fclose(f);
    char datadir[PATH_MAX + 32], tokflag[PATH_MAX + 32];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/data", g_tmp.path);
    snprintf(tokflag, sizeof tokflag, "--auth-tokens=%s", tokens);
    char *argv[] = {CORESTREAMD_BIN, datadir, "--listen", "127.0.0.1:0", "--source", "synthetic",
                    "--synthetic-interval", "20ms", "--emit-window", "0", "--synthetic-size", "1000",
                    tokflag, "--auth-healthz", NULL};
    assert_int_equal(cs_proc_start(&g_proc, argv), 0);
    g_live = true;
    assert_int_equal(cs_proc_wait_listening(&g_proc, WAIT_MS), 0);
    char url[64];
    url_of(url, sizeof url);

    rl_options o;
    rl_options_init(&o);
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, url, &o), RL_OK);
    uint32_t oldest = 99, latest = 99;
    assert_int_equal(rl_stream_bounds(s, &oldest, &latest), RL_ERR_DIAL);
    char want[256];
    snprintf(want, sizeof want, "remoteledger: dial http://127.0.0.1:%d/healthz: server requires a token (401)",
             g_proc.port);
    assert_string_equal(rl_stream_error(s), want);
    assert_int_equal(oldest, 99); /* untouched on failure */
    rl_stream_free(s);

    o.bearer_token = "tokenA-0123456789abcdefghijklmnopqrstuvwxyz";
    assert_int_equal(rl_stream_new(&s, url, &o), RL_OK);
    int got = 0;
    assert_int_equal(rl_stream_raw_ledgers(s, rl_bounded_range(1, 3), count_ledger, &got), RL_OK);
    assert_int_equal(got, 3);
    /* The ring is written a moment after the live flow (by a low-priority thread): ask until it
     * has caught up with what was streamed, a bounded number of times. */
    int64_t t0 = mono_ms();
    do {
        assert_int_equal(rl_stream_bounds(s, &oldest, &latest), RL_OK);
    } while (latest < 3 && mono_ms() - t0 < WAIT_MS);
    assert_string_equal(rl_stream_error(s), "");
    assert_int_equal(oldest, 1);
    assert_true(latest >= 3);

    /* between the pull calls of an open session, which goes on unharmed */
    assert_int_equal(rl_stream_open(s, rl_unbounded_range(latest + 1)), RL_OK);
    rl_ledger_info info;
    assert_int_equal(rl_stream_next(s, 5000 * MS, NULL, NULL, &info), RL_OK);
    uint32_t first = info.sequence;
    uint32_t o2 = 0, l2 = 0;
    assert_int_equal(rl_stream_bounds(s, &o2, &l2), RL_OK);
    assert_true(l2 >= latest && o2 == 1);
    assert_int_equal(rl_stream_next(s, 5000 * MS, NULL, NULL, &info), RL_OK);
    assert_int_equal(info.sequence, first + 1);
    rl_stream_close(s);
    rl_stream_free(s);

    /* the stream's path decides where /healthz is: here nowhere */
    char deep[96];
    snprintf(deep, sizeof deep, "%s/core/stream", url);
    assert_int_equal(rl_stream_new(&s, deep, &o), RL_OK);
    assert_int_equal(rl_stream_bounds(s, NULL, NULL), RL_ERR_DIAL);
    snprintf(want, sizeof want, "remoteledger: dial http://127.0.0.1:%d/core/healthz: status 404", g_proc.port);
    assert_string_equal(rl_stream_error(s), want);
    rl_stream_free(s);

    assert_int_equal(cs_proc_stop(&g_proc, SIGTERM, WAIT_MS), 0);
    cs_proc_free(&g_proc);
    g_live = false;
}

/* One thread, several sessions, one poll loop over rl_stream_fd: every stream gets every ledger
 * of the range once, in order, each the synthetic source's 1000 bytes (the library has verified
 * the checksum; the bytes are compared here too). The range starts at 1, so it is replayed from
 * the ring and then live, whichever the server is at. */
#define POLL_STREAMS 4
#define POLL_LEDGERS 30
static void test_poll_loop_over_streams(void **state)
{
    (void)state;
    start_daemon();
    char url[64];
    url_of(url, sizeof url);
    rl_stream *s[POLL_STREAMS];
    uint32_t next_seq[POLL_STREAMS];
    bool over[POLL_STREAMS] = {0};
    uint8_t want[1000];
    for (int i = 0; i < POLL_STREAMS; i++) {
        assert_int_equal(rl_stream_new(&s[i], url, NULL), RL_OK);
        assert_int_equal(rl_stream_open(s[i], rl_bounded_range(1, POLL_LEDGERS)), RL_OK);
        assert_true(rl_stream_fd(s[i]) >= 0);
        next_seq[i] = 1;
    }
    int open = POLL_STREAMS;
    int64_t t0 = mono_ms();
    while (open > 0 && mono_ms() - t0 < WAIT_MS) {
        for (int i = 0; i < POLL_STREAMS; i++) {
            if (over[i])
                continue;
            rl_result r;
            const uint8_t *p;
            size_t n;
            rl_ledger_info info;
            while ((r = rl_stream_next(s[i], 0, &p, &n, &info)) == RL_OK) {
                if (info.sequence != next_seq[i])
                    fail_msg("stream %d: ledger %u, want %u", i, info.sequence, next_seq[i]);
                assert_int_equal(n, sizeof want);
                cs_synthetic_fill(want, sizeof want, info.sequence, false);
                assert_memory_equal(p, want, sizeof want);
                next_seq[i]++;
            }
            if (r != RL_AGAIN) {
                if (r != RL_END)
                    fail_msg("stream %d: %s %s", i, rl_result_name(r), rl_stream_error(s[i]));
                assert_int_equal(rl_stream_fd(s[i]), -1);
                over[i] = true;
                open--;
            }
        }
        struct pollfd pf[POLL_STREAMS];
        nfds_t k = 0;
        for (int i = 0; i < POLL_STREAMS; i++)
            if (!over[i])
                pf[k++] = (struct pollfd){.fd = rl_stream_fd(s[i]), .events = POLLIN};
        if (k)
            assert_true(poll(pf, k, 1000) >= 0);
    }
    for (int i = 0; i < POLL_STREAMS; i++) {
        if (!over[i])
            fail_msg("stream %d stopped at ledger %u of %d", i, next_seq[i] - 1, POLL_LEDGERS);
        assert_int_equal(next_seq[i], POLL_LEDGERS + 1);
        rl_stream_close(s[i]);
        assert_int_equal(rl_stream_fd(s[i]), -1);
        rl_stream_free(s[i]);
    }
    assert_int_equal(cs_proc_stop(&g_proc, SIGTERM, WAIT_MS), 0);
    cs_proc_free(&g_proc);
    g_live = false;
}

/* corestreamd on this port with the data dir named by tag ("data" is start_daemon's), the same
 * synthetic source as start_daemon (so the same run identity), numbering from start. */
static void start_daemon_at(int port, const char *tag, uint32_t start)
{
    char datadir[PATH_MAX + 32], listen[32], first[16];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/%s", g_tmp.path, tag);
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    snprintf(first, sizeof first, "%u", start);
    char *argv[] = {CORESTREAMD_BIN, datadir, "--listen", listen, "--source", "synthetic",
                    "--synthetic-interval", "20ms", "--emit-window", "0", "--synthetic-size", "1000",
                    "--start-ledger", first, NULL};
    assert_int_equal(cs_proc_start(&g_proc, argv), 0);
    g_live = true;
    assert_int_equal(cs_proc_wait_listening(&g_proc, WAIT_MS), 0);
}

/* The run token of the running daemon, from its listening line (run=...). */
static void daemon_run(char *buf, size_t len)
{
    const char *line = strstr(g_proc.log, "msg=\"corestreamd listening\"");
    const char *run = line ? strstr(line, " run=") : NULL;
    assert_non_null(run);
    run += 5;
    size_t n = strcspn(run, " \n");
    assert_true(n > 0 && n < len);
    memcpy(buf, run, n);
    buf[n] = '\0';
}

typedef struct restarter {
    rl_stream *probe; /* for the new server's bounds */
    int port;
    int count;
    uint32_t last;
    bool in_order;
    int kill_after;   /* SIGKILL the server after this many ledgers and start another */
    uint32_t ahead;   /* ...then let its ring get this far past the restart point first */
    const char *tag;  /* ...on this data dir */
    char runs[2][64]; /* the run tokens of the first server and of the second */
} restarter;

static int restart_daemon(const uint8_t *p, size_t n, const rl_ledger_info *info, void *ctx)
{
    (void)p, (void)n;
    restarter *z = ctx;
    if (z->count > 0 && info->sequence != z->last + 1)
        z->in_order = false;
    z->last = info->sequence;
    if (++z->count != z->kill_after)
        return 0;
    /* Killed mid-stream (the connection drops wherever the server was, mid-ledger likely). The
     * new one starts numbering at the ledger after this one; the client may have more of the old
     * server's already buffered, and asks for whatever it expects next. */
    daemon_run(z->runs[0], sizeof z->runs[0]);
    assert_int_equal(cs_proc_stop(&g_proc, SIGKILL, WAIT_MS), 128 + SIGKILL);
    cs_proc_free(&g_proc);
    g_live = false;
    start_daemon_at(z->port, z->tag, info->sequence + 1);
    daemon_run(z->runs[1], sizeof z->runs[1]);
    if (z->ahead) {
        uint32_t oldest = 0, latest = 0;
        int64_t t0 = mono_ms();
        while (latest < info->sequence + z->ahead && mono_ms() - t0 < WAIT_MS)
            assert_int_equal(rl_stream_bounds(z->probe, &oldest, &latest), RL_OK);
        assert_true(latest >= info->sequence + z->ahead);
    }
    return 0;
}

/* Streams [1,40] with resume across a SIGKILL after ledger 10 and a restart on the data dir
 * named by tag; returns the call's result, with z and the stream's run filled in. */
static rl_result restart_run(restarter *z, const char *tag, uint32_t ahead, bool allow, char *run, size_t len)
{
    start_daemon();
    char url[64];
    url_of(url, sizeof url);
    rl_options o;
    rl_options_init(&o);
    o.resume_retries = 100;
    o.resume_backoff_ns = 20 * MS;
    o.resume_backoff_max_ns = 200 * MS;
    o.allow_run_change = allow;
    rl_stream *s, *probe;
    assert_int_equal(rl_stream_new(&s, url, &o), RL_OK);
    assert_int_equal(rl_stream_new(&probe, url, NULL), RL_OK);
    *z = (restarter){.probe = probe, .port = g_proc.port, .in_order = true, .kill_after = 10, .ahead = ahead,
                     .tag = tag};
    rl_result r = rl_stream_raw_ledgers(s, rl_bounded_range(1, 40), restart_daemon, z);
    char want[512];
    if (r == RL_ERR_RUN_CHANGED) {
        snprintf(want, sizeof want,
                 "remoteledger: dial %s/stream?end=40&start=%u: run changed: the server is now run %s, the "
                 "session began on run %s",
                 url, z->last + 1, z->runs[1], z->runs[0]);
        assert_string_equal(rl_stream_error(s), want);
    }
    snprintf(run, len, "%s", rl_stream_run(s));
    assert_true(rl_stream_reconnects(s) >= (r == RL_OK ? 1u : 0u));
    /* /healthz names the run as the 101 did */
    char body[1024], field[96];
    assert_int_equal(cs_http_get("127.0.0.1", z->port, "/healthz", WAIT_MS, body, sizeof body, NULL, 0), 200);
    snprintf(field, sizeof field, ",\"run\":\"%s\"}\n", z->runs[1]);
    assert_true(strlen(body) > strlen(field));
    assert_string_equal(body + strlen(body) - strlen(field), field);
    rl_stream_free(s);
    rl_stream_free(probe);
    assert_int_equal(cs_proc_stop(&g_proc, SIGTERM, WAIT_MS), 0);
    cs_proc_free(&g_proc);
    g_live = false;
    return r;
}

/* The server killed and restarted mid-range on its own data dir: the same run (its token is
 * kept), so with resume the caller sees [1,40] whole, once, in order: first with the missed
 * ledgers replayed from the new server's ring (it is let run ahead before the client reconnects),
 * then with the reconnect racing the new server's first ledgers (live, or from the ring when they
 * were quicker). */
static void run_restart(uint32_t ahead)
{
    restarter z;
    char run[64];
    assert_int_equal(restart_run(&z, "data", ahead, false, run, sizeof run), RL_OK);
    assert_int_equal(z.count, 40);
    assert_true(z.in_order);
    assert_int_equal(z.last, 40);
    assert_string_equal(z.runs[1], z.runs[0]);
    assert_string_equal(run, z.runs[0]);
}

static void test_resume_across_restart_with_ring_catch_up(void **state)
{
    (void)state;
    run_restart(8);
}

static void test_resume_across_restart_live(void **state)
{
    (void)state;
    run_restart(0);
}

/* Restarted on a fresh data dir, with the same flags: another run (issue 28: a resume accepted
 * its ledgers after those of the first). The resume is refused with RL_ERR_RUN_CHANGED after the
 * first run's ledgers, naming both tokens; with allow_run_change it goes on, on the new run. */
static void test_resume_refuses_another_run(void **state)
{
    (void)state;
    restarter z;
    char run[64];
    assert_int_equal(restart_run(&z, "fresh", 0, false, run, sizeof run), RL_ERR_RUN_CHANGED);
    assert_string_not_equal(z.runs[1], z.runs[0]);
    assert_true(z.in_order);
    assert_true(z.last >= 10 && z.last < 40);
    assert_int_equal((uint32_t)z.count, z.last);
    assert_string_equal(run, z.runs[0]);

    assert_int_equal(restart_run(&z, "fresh-allowed", 0, true, run, sizeof run), RL_OK);
    assert_string_not_equal(z.runs[1], z.runs[0]);
    assert_int_equal(z.count, 40);
    assert_true(z.in_order);
    assert_string_equal(run, z.runs[1]);
}

/* A loopback listener that never accepts, with a backlog of 0, filled by connections of our own:
 * the kernel then drops further SYNs, so a connect hangs until its timeout. Returns the port;
 * fills fds[0..*n). */
static int full_listener(int *lfd, int *fds, int *n, int max)
{
    *lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(*lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(*lfd, 0), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(*lfd, (struct sockaddr *)&a, &al), 0);
    *n = 0;
    /* Connect until one stays pending for 200 ms: the queue is full from then on. */
    while (*n < max) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        fds[(*n)++] = fd;
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
            continue;
        assert_int_equal(errno, EINPROGRESS);
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        if (poll(&p, 1, 200) == 0)
            return ntohs(a.sin_port);
    }
    fail_msg("the listen queue never filled after %d connections", max);
    return -1;
}

static void test_dial_timeout(void **state)
{
    (void)state;
    int lfd, fds[16], n;
    int port = full_listener(&lfd, fds, &n, 16);
    char url[64];
    snprintf(url, sizeof url, "ws://127.0.0.1:%d", port);
    rl_options o;
    rl_options_init(&o);
    o.dial_timeout_ns = 300 * MS;
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, url, &o), RL_OK);
    int64_t t0 = mono_ms();
    assert_int_equal(rl_stream_raw_ledgers(s, rl_unbounded_range(1), NULL, NULL), RL_ERR_DIAL_TIMEOUT);
    int64_t took = mono_ms() - t0;
    char want[256];
    snprintf(want, sizeof want, "remoteledger: dial %s/stream?start=1: dial timeout: not connected within 300ms", url);
    assert_string_equal(rl_stream_error(s), want);
    if (took < 290 || took > 5000)
        fail_msg("a 300 ms dial timeout took %lld ms", (long long)took);
    assert_string_equal(rl_result_name(RL_ERR_DIAL_TIMEOUT), "RL_ERR_DIAL_TIMEOUT");
    rl_stream_free(s);
    for (int i = 0; i < n; i++)
        close(fds[i]);
    close(lfd);
}

/* corestreamd on the data dir "bound", synthetic 200000-byte ledgers every 20 ms cut at chunk,
 * count of them (0: unbounded). */
static void start_chunked(const char *chunk, const char *count)
{
    char datadir[PATH_MAX + 32];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/bound", g_tmp.path);
    char *argv[] = {CORESTREAMD_BIN, datadir, "--listen", "127.0.0.1:0", "--source", "synthetic",
                    "--synthetic-interval", "20ms", "--emit-window", "0", "--synthetic-size", "200000",
                    "--chunk-size", (char *)chunk, "--synthetic-count", (char *)count, NULL};
    assert_int_equal(cs_proc_start(&g_proc, argv), 0);
    g_live = true;
    assert_int_equal(cs_proc_wait_listening(&g_proc, WAIT_MS), 0);
}

/* A ring keeps ledgers cut at an older, larger --chunk-size (replays cut a ledger where it was cut
 * live): the 101 announces the largest chunk the server may send, ring included, and a client,
 * which holds chunks to that bound, reads old and new ledgers alike. */
static void test_announced_chunk_bound_covers_the_ring(void **state)
{
    (void)state;
    start_chunked("65536", "4");
    assert_int_equal(cs_proc_wait_exit(&g_proc, WAIT_MS), 0);
    cs_proc_free(&g_proc);
    start_chunked("4096", "0"); /* the same run: it continues the ring at 5 */
    char resp[1024];
    int st = cs_http_raw("127.0.0.1", g_proc.port,
                         "GET /stream?start=1&end=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                         "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
                         WAIT_MS, resp, sizeof resp);
    assert_int_equal(st, 101);
    if (!strstr(resp, "\r\nx-corestream-chunk-size: 65536\r\n"))
        fail_msg("101 without the ring's chunk size:\n%s", resp);
    char url[64];
    url_of(url, sizeof url);
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, url, NULL), RL_OK);
    int n = 0;
    if (rl_stream_raw_ledgers(s, rl_bounded_range(1, 8), count_ledger, &n) != RL_OK)
        fail_msg("%s", rl_stream_error(s));
    assert_int_equal(n, 8);
    rl_stream_free(s);
    assert_int_equal(cs_proc_stop(&g_proc, SIGTERM, WAIT_MS), 0);
    cs_proc_free(&g_proc);
    g_live = false;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_idle_and_handshake_timeouts_against_sigstop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_poll_loop_over_streams, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_across_restart_with_ring_catch_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_across_restart_live, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_refuses_another_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_announced_chunk_bound_covers_the_ring, setup, teardown),
        cmocka_unit_test(test_dial_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
