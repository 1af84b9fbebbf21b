/* SPDX-License-Identifier: Apache-2.0 */
/* Issue 25's promise, end to end: corestreamd SIGKILLed at random points and restarted with the
 * same command line 20 times, for each of the synthetic, pipe (FIFO) and captive (stub core)
 * sources, while a subscriber with the library's resume on reads a bounded range: the subscriber
 * gets every ledger once, in order, byte-exact, no 4001, and no run resets the ring (every run
 * after the first says start=continue; no log has `ring reset` or `retention reset`).
 *
 * The subscriber is benchrunner --mode remote --resume --verify for the synthetic source, and an
 * in-process libremoteledger stream (resume on) that compares each ledger with the frame it was
 * written from for the other two. The kills land at uniformly random times within 300 ms of the
 * listening line: with a ledger every 20 ms that puts them in emissions, ring writes, core's start
 * sequence and the subscriber's catch-up after the previous restart alike. The seed is printed;
 * CS_TEST_SEED=<seed> replays a run's kill points, for each test alone too (CS_TEST_FILTER=<name>
 * runs one; ctest has one entry per source). Every run listens on one port, reserved for the test
 * (reserve_port), so a restart never finds it taken. The daemons run with --background-nice 0:
 * the subject here is what a kill leaves behind, not scheduling, and at the default nice 19 each
 * ledger's ring write (done before the next ledger begins) and each catch-up gets about 1.5 % of
 * a core beside busy loops, which made the three sources take 320 s under TSan. The figures each
 * source printed are in bench/results/kill-restart.md. */
#include <stdarg.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "corestream/remoteledger.h"
#include "support/metabuild.h"
#include "support/ringfiles.h"
#include "support/ringfixture.h"
#include "support/wait.h"

#define KILLS 20
#define STOP_MS 20000
#define KILL_WITHIN_MS 300
#define LEDGERS 300   /* what the subscriber reads */
#define FRAMES 400    /* what the stub cores can write */
#define TAIL 6000     /* a frame's bytes after ledgerSeq */
#define REPLAY 20     /* the FIFO's stub core re-sends its last ledgers after a restart */
#define PASSPHRASE "Test SDF Network ; September 2015"

typedef cs_ringfx fixture;

static int g_reserved = -1; /* the socket that reserves the test's port (reserve_port) */

static int setup(void **state)
{
    return cs_ringfx_setup(state, "kill");
}

static int teardown(void **state)
{
    if (g_reserved >= 0)
        close(g_reserved);
    g_reserved = -1;
    return cs_ringfx_teardown(state);
}

/* ---- random kill points ---------------------------------------------------------------------- */

static uint64_t g_seed, g_rng;

static uint32_t rand_below(uint32_t n)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng % n);
}

/* The kill points of the test'th test (0, 1, 2): the seed's sequence from that test's first draw,
 * as a run of every test in order draws them, so a test run alone replays its own points. */
static void seed_test(int test)
{
    g_rng = g_seed;
    for (int i = 0; i < test * KILLS; i++)
        rand_below(1);
}

/* A moment to kill at, not a wait for anything: the daemon is left to run this long. */
static void run_for_ms(uint32_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* The port every run of a test listens on, the same across restarts (the subscriber resumes at
 * the one URL it was given), reserved for the whole test: a socket bound to 127.0.0.1:<port> with
 * SO_REUSEADDR that never listens. The kernel then hands the port to no one else (no bind to
 * port 0 and no outgoing connection gets it, and a bind without SO_REUSEADDR is refused), while
 * each run's corestreamd, which binds with SO_REUSEADDR, listens on it; between runs a dial is
 * refused, as with no process there. Closing a picked port and hoping it stays free would race
 * with every other process on the machine. Closed by the teardown. */
static int reserve_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    int one = 1;
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t n = sizeof sa;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &n), 0);
    g_reserved = fd;
    return ntohs(sa.sin_port);
}

/* ---- the daemon, killed and started again ---------------------------------------------------- */

typedef struct runs {
    const char *argv[40]; /* the command line after the fixture's --listen and --data-dir */
    int port;
    int killed;
    int rejoins;       /* runs whose core re-sent ledgers the ring held, compared and skipped */
    int dropped_alone; /* runs that found a newest ledger a kill had cut, and dropped it alone */
} runs;

static void count_run(fixture *f, runs *r)
{
    r->rejoins += cs_proc_log_count(&f->proc, "msg=\"source re-emitted ledgers the ring holds; skipped them\"") > 0;
    r->dropped_alone += cs_proc_log_count(&f->proc, "msg=\"ring ledger failed its integrity check; dropping it\"") > 0;
}

/* Whether the ring holds a whole ledger: ledger-N.xdr with its record line in its segment's log (a
 * kill between the record's append and the ledger's rename leaves a record alone, which the next
 * open drops). */
static bool ring_has_ledgers(const fixture *f)
{
    DIR *d = opendir(f->ring);
    if (!d)
        return false;
    bool any = false;
    for (struct dirent *de; !any && (de = readdir(d));) {
        unsigned seq;
        char tail[8], rec[1100];
        if (sscanf(de->d_name, "ledger-%u.xd%7s", &seq, tail) != 2 || strcmp(tail, "r") != 0)
            continue;
        any = cs_ringfiles_record(f->ring, seq, rec, sizeof rec, NULL);
    }
    closedir(d);
    return any;
}

static void start_run(fixture *f, runs *r, const char *const *first_only)
{
    bool continues = ring_has_ledgers(f);
    if (continues)
        first_only = NULL; /* given only while the ring is empty, as the package's CORESTREAMD_START */
    const char *argv[48];
    int n = 0;
    for (; first_only && first_only[n]; n++)
        argv[n] = first_only[n];
    for (int i = 0; r->argv[i]; i++)
        argv[n++] = r->argv[i];
    argv[n] = NULL;
    cs_ringfx_start(f, NULL, CORESTREAMD_BIN, argv);
    if (cs_proc_wait_listening(&f->proc, WAIT_MS) != 0 || f->proc.port != r->port) {
        fprintf(stderr, "%s", f->proc.log);
        fail_msg("run %d did not listen on %d", r->killed + 1, r->port);
    }
    if (continues && !strstr(f->proc.log, " start=continue ")) {
        fprintf(stderr, "%s", f->proc.log);
        fail_msg("run %d did not continue the ring", r->killed + 1);
    }
}

/* A SIGKILL may leave the newest ledger without its record, which the next open drops alone
 * (`dropping it`); anything that costs more, or a failure, is a defect. */
static void expect_no_reset(fixture *f, const char *which)
{
    if (strstr(f->proc.log, "ring reset") || strstr(f->proc.log, "retention reset") ||
        strstr(f->proc.log, "every older ledger") || strstr(f->proc.log, "corestreamd failed")) {
        fprintf(stderr, "%s", f->proc.log);
        fail_msg("%s: the log above resets the ring or fails", which);
    }
}

/* KILLS runs, each SIGKILLed at a random moment; then the last run, left running. first_only is
 * what a run is given while the ring is still empty (captive's --start-ledger); after_kill (when
 * not NULL) runs after each kill, before the next start. */
static void kill_many_times(fixture *f, runs *r, const char *const *first_only, void (*after_kill)(void *), void *arg)
{
    for (int k = 0; k < KILLS; k++) {
        start_run(f, r, first_only);
        run_for_ms(rand_below(KILL_WITHIN_MS));
        assert_int_equal(cs_proc_stop(&f->proc, SIGKILL, STOP_MS), 128 + SIGKILL);
        cs_proc_drain(&f->proc);
        expect_no_reset(f, "a killed run");
        count_run(f, r);
        cs_ringfx_free_proc(f);
        r->killed++;
        if (after_kill)
            after_kill(arg);
    }
    start_run(f, r, first_only);
}

static void stop_last(fixture *f, runs *r, const char *which)
{
    assert_int_equal(cs_proc_stop(&f->proc, SIGTERM, STOP_MS), 0);
    expect_no_reset(f, "the last run");
    count_run(f, r);
    printf("%s: runs that skipped re-sent ledgers %d, that dropped a cut newest ledger %d\n", which, r->rejoins,
           r->dropped_alone);
}

/* ---- frames the stub cores write ------------------------------------------------------------- */

static void hash_for(uint32_t seq, uint8_t out[32])
{
    for (int i = 0; i < 32; i++)
        out[i] = (uint8_t)(seq * 7 + (uint32_t)i * 13 + 1);
}

/* Ledger seq's LedgerCloseMeta v1 (ext v0: its hash at 8, previousLedgerHash at 44), chained. */
static void meta_of(uint32_t seq, cs_mb_buf *b)
{
    size_t at = b->n;
    cs_mb_meta m = cs_mb_go_meta(1, seq, false, 0, false, TAIL);
    cs_mb_put_meta(b, &m);
    uint8_t h[32], p[32];
    hash_for(seq, h);
    hash_for(seq - 1, p);
    memcpy(b->p + at + 8, h, 32);
    memcpy(b->p + at + 44, p, 32);
}

/* <dir>/<seq>.frame for 1..FRAMES: each a whole record. */
static void write_frames(const char *dir)
{
    assert_int_equal(mkdir(dir, 0755), 0);
    for (uint32_t s = 1; s <= FRAMES; s++) {
        cs_mb_buf meta = {0}, rec = {0};
        meta_of(s, &meta);
        cs_mb_put_record(&rec, meta.p, meta.n);
        char path[PATH_MAX];
        assert_true((size_t)snprintf(path, sizeof path, "%s/%u.frame", dir, s) < sizeof path);
        FILE *fp = fopen(path, "wb");
        assert_non_null(fp);
        assert_int_equal(fwrite(rec.p, 1, rec.n, fp), rec.n);
        assert_int_equal(fclose(fp), 0);
        cs_mb_free(&meta);
        cs_mb_free(&rec);
    }
}

/* ---- the in-process subscriber ---------------------------------------------------------------- */

typedef struct sub {
    pthread_t th;
    char url[64];
    uint32_t from, to, next;
    rl_stream *s;
    rl_result r;
    char err[512];
    uint64_t reconnects;
    int64_t last_ns, longest_ns;
    atomic_bool done;
} sub;

static int on_ledger(const uint8_t *p, size_t n, const rl_ledger_info *info, void *ctx)
{
    sub *s = ctx;
    int64_t now = cs_mono_ns();
    if (s->last_ns && now - s->last_ns > s->longest_ns)
        s->longest_ns = now - s->last_ns;
    s->last_ns = now;
    cs_mb_buf want = {0};
    meta_of(info->sequence, &want);
    bool same = info->sequence == s->next && n == want.n && memcmp(p, want.p, n) == 0;
    cs_mb_free(&want);
    if (!same) {
        snprintf(s->err, sizeof s->err, "ledger %u (wanted %u, %zu bytes) is not the frame written for it",
                 info->sequence, s->next, n);
        return 1;
    }
    s->next++;
    return 0;
}

static void *sub_main(void *arg)
{
    sub *s = arg;
    s->r = rl_stream_raw_ledgers(s->s, rl_bounded_range(s->from, s->to), on_ledger, s);
    s->reconnects = rl_stream_reconnects(s->s);
    if (s->r != RL_OK && !s->err[0])
        snprintf(s->err, sizeof s->err, "%s", rl_stream_error(s->s));
    atomic_store(&s->done, true);
    return NULL;
}

static void sub_start(sub *s, int port, uint32_t from, uint32_t to)
{
    memset(s, 0, sizeof *s);
    snprintf(s->url, sizeof s->url, "ws://127.0.0.1:%d", port);
    s->from = s->next = from;
    s->to = to;
    rl_options o;
    rl_options_init(&o);
    o.resume_retries = 1000;
    o.resume_backoff_ns = 10 * 1000000LL;
    o.resume_backoff_max_ns = 100 * 1000000LL;
    assert_int_equal(rl_stream_new(&s->s, s->url, &o), RL_OK);
    assert_int_equal(pthread_create(&s->th, NULL, sub_main, s), 0);
}

/* Waits (bounded) for the subscriber to end, and checks it got from..to whole. */
static void sub_finish(sub *s, fixture *f, const char *which)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 120;
    if (pthread_timedjoin_np(s->th, NULL, &until) != 0) {
        rl_stream_cancel(s->s);
        pthread_join(s->th, NULL);
        fprintf(stderr, "%s", f->proc.log);
        fail_msg("%s: the subscriber did not finish (at ledger %u)", which, s->next);
    }
    if (s->r != RL_OK || s->next != s->to + 1) {
        fprintf(stderr, "%s", f->proc.log);
        fail_msg("%s: subscriber ended %s at ledger %u: %s", which, rl_result_name(s->r), s->next, s->err);
    }
    rl_stream_free(s->s);
    printf("%s: restarts %d, ledgers %u, reconnects %" PRIu64 ", longest pause %.0f ms\n", which, KILLS,
           s->to - s->from + 1, s->reconnects, (double)s->longest_ns / 1e6);
}

/* ---- synthetic, with benchrunner --------------------------------------------------------------- */

static void synthetic_survives_twenty_kills(void **state)
{
    fixture *f = *state;
    seed_test(0);
    runs r = {.port = reserve_port()};
    char listen[32], url[64], csv[PATH_MAX], last[16];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", r.port);
    snprintf(url, sizeof url, "ws://%s", listen);
    assert_true((size_t)snprintf(csv, sizeof csv, "%s/bench.csv", f->dir.path) < sizeof csv);
    snprintf(last, sizeof last, "%d", LEDGERS);
    const char *args[] = {"--listen", listen, "--background-nice", "0", "--source", "synthetic", "--synthetic-size", "65536",
                          "--synthetic-interval", "20ms", "--emit-window", "10ms", NULL};
    memcpy(r.argv, args, sizeof args);

    /* The subscriber first: its dials are refused (and retried) until a run listens. */
    cs_proc bench;
    char *argv[] = {BENCHRUNNER_BIN, "--mode", "remote", "--url", url, "--start", "1", "--end", last,
                    "--verify", "--synthetic-size", "65536", "--resume", "--resume-retries", "1000",
                    "--csv", csv, NULL};
    assert_int_equal(cs_proc_start(&bench, argv), 0);
    kill_many_times(f, &r, NULL, NULL, NULL);

    int st = cs_proc_wait_exit(&bench, 120000);
    if (st != 0) {
        fprintf(stderr, "%s\n---\n%s", bench.log, f->proc.log);
        fail_msg("benchrunner exited %d", st);
    }
    char want[64];
    snprintf(want, sizeof want, "\nledgers      %d (1..%d)\n", LEDGERS, LEDGERS);
    if (!strstr(bench.log, want) || strstr(bench.log, "4001"))
        fail_msg("benchrunner:\n%s", bench.log);
    /* The longest pause: the largest inter-arrival in the CSV (column 5). */
    FILE *fp = fopen(csv, "r");
    assert_non_null(fp);
    char line[512];
    long long longest = 0;
    int rows = 0;
    assert_non_null(fgets(line, sizeof line, fp));
    while (fgets(line, sizeof line, fp)) {
        char *c = line;
        for (int i = 0; i < 4 && c; i++)
            c = strchr(c, ',') ? strchr(c, ',') + 1 : NULL;
        if (c && atoll(c) > longest)
            longest = atoll(c);
        rows++;
    }
    fclose(fp);
    assert_int_equal(rows, LEDGERS);
    const char *rc = strstr(bench.log, "\nreconnects   ");
    printf("synthetic: restarts %d, ledgers %d, reconnects %d, longest pause %.0f ms\n", KILLS, LEDGERS,
           rc ? atoi(rc + 14) : -1, (double)longest / 1e6);
    cs_proc_free(&bench);
    stop_last(f, &r, "synthetic");
}

/* ---- pipe (FIFO), with a stub core that restarts -------------------------------------------- */

/* A stellar-core under its own unit, bound to corestreamd's as docs/operations/sources.md sets it up
 * (BindsTo=corestreamd.service): when corestreamd goes, systemd stops core, and core starts again
 * with corestreamd, blocking in open until corestreamd reads. Each start writes from REPLAY ledgers
 * before the last one it wrote (a core whose last closed ledger trails what it wrote), at once,
 * then a new ledger every 20 ms. A write that fails (EPIPE) ends a start too. */
typedef struct fifo_core {
    pthread_t th;
    char dir[PATH_MAX], fifo[PATH_MAX];
    atomic_bool stop;
    uint32_t written; /* the last ledger a write completed */
    int starts;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool holding;   /* the FIFO is open for writing (under mu) */
    atomic_uint gen; /* bumped to stop the current start */
} fifo_core;

/* systemd stopping the bound core after corestreamd went: returns once core has let go of the
 * FIFO, so the next corestreamd reads only what a new start of core writes. */
static void fifo_core_restart(void *arg)
{
    fifo_core *c = arg;
    atomic_fetch_add(&c->gen, 1);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 20;
    pthread_mutex_lock(&c->mu);
    while (c->holding && pthread_cond_timedwait(&c->cv, &c->mu, &until) == 0)
        ;
    bool held = c->holding;
    pthread_mutex_unlock(&c->mu);
    assert_false(held);
}

static void set_holding(fifo_core *c, bool on)
{
    pthread_mutex_lock(&c->mu);
    c->holding = on;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static bool write_frame(int fd, const char *dir, uint32_t seq)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/%u.frame", dir, seq);
    int in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return false;
    char buf[16384];
    ssize_t n;
    bool ok = true;
    while (ok && (n = read(in, buf, sizeof buf)) > 0)
        for (ssize_t off = 0; ok && off < n;) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            ok = w > 0;
            off += w > 0 ? w : 0;
        }
    close(in);
    return ok;
}

static void *fifo_core_main(void *arg)
{
    fifo_core *c = arg;
    while (!atomic_load(&c->stop)) {
        int fd = open(c->fifo, O_WRONLY | O_CLOEXEC); /* waits for a reader, as core's open does */
        if (fd < 0)
            break;
        unsigned gen = atomic_load(&c->gen);
        set_holding(c, true);
        c->starts++;
        uint32_t seq = c->written > REPLAY ? c->written - REPLAY + 1 : 1;
        for (; seq <= FRAMES && !atomic_load(&c->stop) && atomic_load(&c->gen) == gen; seq++) {
            if (!write_frame(fd, c->dir, seq))
                break; /* EPIPE: corestreamd is gone */
            if (seq > c->written) {
                c->written = seq;
                run_for_ms(20); /* a new ledger every 20 ms; the replayed ones at once */
            }
        }
        if (seq > FRAMES)
            while (!atomic_load(&c->stop) && atomic_load(&c->gen) == gen)
                run_for_ms(20); /* all written: idle with the FIFO open, as a synced core */
        close(fd);
        set_holding(c, false);
    }
    return NULL;
}

static void fifo_survives_twenty_kills(void **state)
{
    fixture *f = *state;
    seed_test(1);
    runs r = {.port = reserve_port()};
    char listen[32];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", r.port);
    fifo_core core = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    assert_true((size_t)snprintf(core.dir, sizeof core.dir, "%s/frames", f->dir.path) < sizeof core.dir);
    assert_true((size_t)snprintf(core.fifo, sizeof core.fifo, "%s/meta.fifo", f->dir.path) < sizeof core.fifo);
    write_frames(core.dir);
    assert_int_equal(mkfifo(core.fifo, 0600), 0);
    const char *args[] = {"--listen", listen, "--background-nice", "0", "--source", "pipe", "--pipe-path", core.fifo, NULL};
    memcpy(r.argv, args, sizeof args);
    assert_int_equal(pthread_create(&core.th, NULL, fifo_core_main, &core), 0);

    sub s;
    sub_start(&s, r.port, 1, LEDGERS);
    kill_many_times(f, &r, NULL, fifo_core_restart, &core);
    sub_finish(&s, f, "pipe (FIFO)");

    atomic_store(&core.stop, true);
    stop_last(f, &r, "pipe (FIFO)");
    assert_true(r.rejoins > 0);
    /* The core may be parked in open (no reader now): a reader of our own lets it through. */
    int unblock = open(core.fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    pthread_join(core.th, NULL);
    if (unblock >= 0)
        close(unblock);
    printf("pipe (FIFO): the stub core started %d times\n", core.starts);
}

/* ---- captive, with a stub stellar-core ---------------------------------------------------- */

/* The stub core: `version`, `offline-info` (its LCL from a file beside it), `new-db` (LCL 1),
 * `catchup X/0` (LCL X), and `run`, which writes a ledger every 20 ms from LCL + 1 to fd 3; its
 * LCL trails what it wrote by up to 3 ledgers (a core that commits after it writes), so a restart
 * replays ledgers the ring holds. It exits when fd 3 fails (corestreamd is gone). */
static const char stub_core[] =
    "#!/bin/sh\n"
    "D=$(cd \"$(dirname \"$0\")\" && pwd)\n"
    "if [ \"$1\" = version ]; then\n"
    "  echo \"stellar-core 23.0.1 (stub)\"; echo \"ledger protocol version: 23\"; exit 0\n"
    "fi\n"
    "shift 2; [ \"$1\" = --console ] && shift\n"
    "lcl=$(cat \"$D/lcl\" 2>/dev/null || echo 0)\n"
    "case $1 in\n"
    "offline-info)\n"
    "  [ \"$lcl\" -gt 0 ] || exit 1\n"
    "  echo \"{\\\"info\\\": {\\\"ledger\\\": {\\\"num\\\": $lcl, \\\"hash\\\": \\\"ab\\\"}, \\\"state\\\": \\\"Booting\\\"}}\"\n"
    "  exit 0 ;;\n"
    "new-db) echo 1 > \"$D/lcl\"; exit 0 ;;\n"
    "catchup) echo \"${2%%/*}\" > \"$D/lcl\"; exit 0 ;;\n"
    "run)\n"
    "  seq=$((lcl + 1))\n"
    "  while [ -f \"$D/frames/$seq.frame\" ]; do\n"
    "    cat \"$D/frames/$seq.frame\" >&3 || exit 1\n"
    "    echo $((seq - seq % 4)) > \"$D/lcl\"\n"
    "    seq=$((seq + 1))\n"
    "    sleep 0.02\n"
    "  done\n"
    "  exec sleep 1000 ;;\n"
    "esac\n"
    "exit 2\n";

static void write_text(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static void captive_survives_twenty_kills(void **state)
{
    fixture *f = *state;
    seed_test(2);
    runs r = {.port = reserve_port()};
    char listen[32], bin_dir[PATH_MAX], bin[PATH_MAX], frames[PATH_MAX], toml[PATH_MAX], archive[PATH_MAX],
        has[PATH_MAX], url[PATH_MAX];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", r.port);
    assert_true((size_t)snprintf(bin_dir, sizeof bin_dir, "%s/core", f->dir.path) < sizeof bin_dir);
    assert_int_equal(mkdir(bin_dir, 0755), 0);
    assert_true((size_t)snprintf(bin, sizeof bin, "%s/stellar-core", bin_dir) < sizeof bin);
    write_text(bin, stub_core, 0755);
    assert_true((size_t)snprintf(frames, sizeof frames, "%s/frames", bin_dir) < sizeof frames);
    write_frames(frames);
    assert_true((size_t)snprintf(toml, sizeof toml, "%s/core.toml", f->dir.path) < sizeof toml);
    write_text(toml,
               "NETWORK_PASSPHRASE=\"" PASSPHRASE "\"\n"
               "[[HOME_DOMAINS]]\nHOME_DOMAIN=\"testnet.stellar.org\"\nQUALITY=\"HIGH\"\n"
               "[[VALIDATORS]]\nNAME=\"sdf_testnet_1\"\nHOME_DOMAIN=\"testnet.stellar.org\"\n"
               "PUBLIC_KEY=\"GDKXE2OZMJIPOSLNA6N6F2BVCI3O777I2OOC4BV7VOYUEHYX7RTRYA7Y\"\n"
               "ADDRESS=\"core-testnet1.stellar.org\"\n",
               0644);
    assert_true((size_t)snprintf(archive, sizeof archive, "%s/archive", f->dir.path) < sizeof archive);
    assert_int_equal(mkdir(archive, 0755), 0);
    assert_true((size_t)snprintf(has, sizeof has, "%s/.well-known", archive) < sizeof has);
    assert_int_equal(mkdir(has, 0755), 0);
    assert_true((size_t)snprintf(has, sizeof has, "%s/.well-known/stellar-history.json", archive) < sizeof has);
    write_text(has, "{\"version\": 1, \"server\": \"stub\", \"currentLedger\": 1000000}\n", 0644);
    assert_true((size_t)snprintf(url, sizeof url, "file://%s", archive) < sizeof url);
    const char *args[] = {"--listen", listen, "--background-nice", "0", "--source", "captive", "--core-binary", bin, "--core-config", toml,
                          "--history-archive-urls", url, "--network-passphrase", PASSPHRASE, NULL};
    memcpy(r.argv, args, sizeof args);
    static const char *const first_only[] = {"--start-ledger", "100", NULL};

    sub s;
    sub_start(&s, r.port, 100, 100 + LEDGERS - 1);
    kill_many_times(f, &r, first_only, NULL, NULL);
    sub_finish(&s, f, "captive");
    stop_last(f, &r, "captive");
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(synthetic_survives_twenty_kills, setup, teardown),
        cmocka_unit_test_setup_teardown(fifo_survives_twenty_kills, setup, teardown),
        cmocka_unit_test_setup_teardown(captive_survives_twenty_kills, setup, teardown),
    };
    const char *seed = getenv("CS_TEST_SEED");
    g_seed = seed && *seed ? strtoull(seed, NULL, 10) | 1 : (uint64_t)cs_wall_ns() | 1;
    printf("seed %" PRIu64 " (CS_TEST_SEED=%" PRIu64 " replays these kill points)\n", g_seed, g_seed);
    fflush(stdout);
    const char *only = getenv("CS_TEST_FILTER");
    if (only && *only) {
        cmocka_set_test_filter(only);
        size_t matched = 0;
        for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
            matched += fnmatch(only, tests[i].name, 0) == 0;
        if (!matched) { /* a filter that matches nothing would pass, running nothing */
            fprintf(stderr, "CS_TEST_FILTER=%s names no test of this file\n", only);
            return 1;
        }
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
