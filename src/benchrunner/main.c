/* SPDX-License-Identifier: Apache-2.0 */
/* benchrunner: measures how ledgers arrive from a corestreamd (benchrunner(1)).
 *
 *   benchrunner --mode loopback                      synthetic server and client in one process
 *   benchrunner --mode remote --url ws://box:8462 --start 55000000 --end 55001000 --csv run.csv
 *   benchrunner --mode remote --url ws://box:8462 --start S --end E --subscribers 128 --resume
 *
 * The streaming itself (the pull API, one session or K on one thread) is consume.c's. Output: a
 * banner (loopback), then the summary of benchrunner(1) on stdout, and the CSV when asked; on a
 * terminal, a progress line on stderr meanwhile (progress.c). Errors print `benchrunner: <err>` on
 * stderr and exit 1; a --csv that cannot be created exits 2 before anything runs; a signal that
 * cuts a range short exits 128 + its number, after the summary and the CSV. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "benchrunner/consume.h"
#include "benchrunner/lake.h"
#include "benchrunner/local.h"
#include "benchrunner/options.h"
#include "benchrunner/progress.h"
#include "benchrunner/stats.h"
#include "common/buildinfo.h"
#include "common/log.h"
#include "common/synthetic.h"
#include "corestream/remoteledger.h"
#include "common/cancel.h"
#include "corestreamd/sources/pace.h"
#include "corestreamd/server/server.h"
#include "corestreamd/sources/synthetic.h"
#include "store/ring.h"

/* ---- interruption ---------------------------------------------------------------------------- */

/* SIGINT/SIGTERM are blocked in every thread and taken by sigwait on a dedicated one, which cancels
 * the stream being consumed. The first signal counts; later ones are swallowed (as with Go's
 * signal.NotifyContext), and every shutdown path is bounded. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static rl_stream *const *g_streams; /* the streams being consumed, under g_mu */
static size_t g_nstreams;
static cs_cancel *g_cancel; /* the local modes' run, under g_mu */
static atomic_bool g_interrupted;
static atomic_int g_signal; /* the signal that interrupted the run */

static void *signal_main(void *arg)
{
    sigset_t *set = arg;
    for (;;) {
        int sig;
        if (sigwait(set, &sig) != 0 || atomic_load(&g_interrupted))
            continue;
        pthread_mutex_lock(&g_mu);
        atomic_store(&g_signal, sig);
        atomic_store(&g_interrupted, true);
        for (size_t i = 0; i < g_nstreams; i++)
            if (g_streams[i])
                rl_stream_cancel(g_streams[i]);
        if (g_cancel)
            cs_cancel_fire(g_cancel);
        pthread_mutex_unlock(&g_mu);
    }
    return NULL;
}

static void start_signal_thread(void)
{
    static sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    pthread_t t;
    if (pthread_create(&t, NULL, signal_main, &set) == 0)
        pthread_detach(t);
}

/* Publishes the streams a signal cancels (NULL, 0 to withdraw them). A signal that came before
 * they existed cancels them at once. */
static void set_current_streams(rl_stream *const *s, size_t n)
{
    pthread_mutex_lock(&g_mu);
    g_streams = s;
    g_nstreams = n;
    if (atomic_load(&g_interrupted))
        for (size_t i = 0; i < n; i++)
            if (s[i])
                rl_stream_cancel(s[i]);
    pthread_mutex_unlock(&g_mu);
}

static bool interrupted(void) { return atomic_load(&g_interrupted); }

/* The same for the local modes' cancellation. */
static void set_current_cancel(cs_cancel *c)
{
    pthread_mutex_lock(&g_mu);
    g_cancel = c;
    if (c && atomic_load(&g_interrupted))
        cs_cancel_fire(c);
    pthread_mutex_unlock(&g_mu);
}

/* ---- progress line (stderr, terminals only) --------------------------------------------------- */

/* The progress line over the range start..end (0: the tip; 0: unbounded) for K subscribers, or
 * NULL: --quiet, stderr not a terminal, or no memory for it. */
static br_progress *progress_begin(const br_options *o, uint64_t start, uint64_t end, bool stamped)
{
    if (o->quiet || isatty(STDERR_FILENO) != 1)
        return NULL;
    fflush(stdout);
    br_progress_spec ps = {.fd = STDERR_FILENO, .period_ns = CS_SEC, .subscribers = (size_t)o->subscribers,
                           .start = start, .end = end, .stamped = stamped};
    return br_progress_start(&ps);
}

static void on_progress(size_t sub, const br_sample *s, void *ctx) { br_progress_note(ctx, sub, s); }

/* ---- consume (loopback and remote) ----------------------------------------------------------- */

/* The length the synthetic source makes for --synthetic-size: it takes 0 or less as its default. */
static uint64_t verify_size(int64_t synthetic_size)
{
    return synthetic_size > 0 ? (uint64_t)synthetic_size : CS_SYNTHETIC_DEFAULT_SIZE;
}

/* What a run measured: one subscriber, or --subscribers K of them. */
typedef struct run_out {
    br_subscriber *subs;
    size_t n;
    char title[256]; /* the summary's, for several subscribers */
} run_out;

/* Streams range from url, as the flags say (subscribers, resume, verify; remote: the TLS and
 * token flags, or NULL for loopback), into *out. Returns 0, or -1 with err. */
static int consume(const char *label, const char *url, const br_options *o, bool remote, rl_range range,
                   bool compressible, run_out *out, cs_err *err)
{
    char *title = out->title;
    if (o->subscribers > 1)
        snprintf(title, sizeof out->title, "%s, %lld subscribers in one process", label, (long long)o->subscribers);
    else
        snprintf(title, sizeof out->title, "%s", label);
    br_consume_spec spec = {
        .label = title,
        .url = url,
        .remote = remote ? o : NULL,
        .range = range,
        .verify = o->verify || *o->verify_dir,
        .verify_dir = o->verify_dir,
        .compressible = compressible,
        .size = verify_size(o->synthetic_size),
        .subscribers = (size_t)o->subscribers,
        .resume = o->resume,
        .resume_retries = o->resume_retries,
        .busy_poll_us = o->busy_poll_us,
        .publish = set_current_streams,
        .progress = on_progress,
        .interrupted = interrupted,
    };
    out->n = spec.subscribers;
    br_progress *prog = progress_begin(o, range.from, range.bounded ? range.to : 0, true);
    spec.progress_ctx = prog;
    int rc = br_consume(&spec, &out->subs, err);
    br_progress_stop(prog);
    return rc;
}

/* ---- loopback --------------------------------------------------------------------------------- */

static const char *fmt_bytes(int64_t n, char *buf, size_t len)
{
    if (n >= (1 << 20) && n % (1 << 20) == 0)
        snprintf(buf, len, "%lldMiB", (long long)(n >> 20));
    else if (n >= (1 << 10) && n % (1 << 10) == 0)
        snprintf(buf, len, "%lldKiB", (long long)(n >> 10));
    else
        snprintf(buf, len, "%lldB", (long long)n);
    return buf;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void remove_all(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

typedef struct server_thread {
    cs_server *server;
    int rc;
    cs_err err;
} server_thread;

static void *server_main(void *arg)
{
    server_thread *t = arg;
    t->rc = cs_server_run(t->server, &t->err);
    return NULL;
}

/* The in-process server of the loopback mode: a ring in ring_dir and a paced synthetic source,
 * held until the client subscribes. *server owns both from here, even when this fails. */
static int loopback_server_new(const br_options *o, const char *ring_dir, cs_cancel *cancel, cs_server **server,
                               cs_err *err)
{
    *server = NULL;
    cs_ring *ring = NULL;
    if (cs_ring_open(&ring, ring_dir, (int64_t)o->count + 1, err) != 0)
        return -1;
    /* The synthetic interval is the ledger cadence: PacedSource owns the schedule, and the emit
     * window nests inside it. */
    cs_range range = cs_counted_range(o->start ? (uint32_t)o->start : 1, (uint32_t)o->count);
    cs_ledger_stream *ls = cs_synthetic_stream_new(o->synthetic_size, o->compress, cancel);
    /* The paced source owns ls, even when it fails (and passes a NULL ls through). */
    cs_source *src = cs_paced_source_new(ls, range, o->emit_window, o->synthetic_interval, cancel);
    if (!src) {
        cs_ring_close(ring);
        return cs_err_set(err, 0, "out of memory");
    }
    cs_server_config sc = {
        .listen = "127.0.0.1:0",
        .source_name = "synthetic",
        .source = src,
        .range = range,
        .ring = ring,
        .cancel = cancel,
        .chunk_size = o->chunk_size,
        .compress = o->compress,
        .compress_level = o->compress_level,
        .hold_until_subscriber = true,
        .retention = (int64_t)o->count + 1,
        .busy_poll_us = o->busy_poll_us, /* loopback: the server's I/O threads poll too */
    };
    if (cs_server_new(server, &sc, err) != 0) /* owns src and ring from here, even on failure */
        return -1;
    return cs_server_listen(*server, err);
}

/* The loopback client: announces the server, then streams the whole range from it. */
static int loopback_consume(const br_options *o, cs_server *server, run_out *out, cs_err *err)
{
    char ibuf[CS_DUR_STR_MAX], wbuf[CS_DUR_STR_MAX], cbuf[32], url[128];
    const char *addr = cs_server_addr(server);
    printf("loopback server on %s: %llu ledgers of %lld bytes every %s, emitted over %s, %s chunks\n", addr,
           (unsigned long long)o->count, (long long)o->synthetic_size,
           cs_dur_format(o->synthetic_interval, ibuf, sizeof ibuf), cs_dur_format(o->emit_window, wbuf, sizeof wbuf),
           fmt_bytes(o->chunk_size, cbuf, sizeof cbuf));
    fflush(stdout);
    snprintf(url, sizeof url, "ws://%s", addr);
    /* No overflow check, as in the prototype: a range past the ceiling wraps and is refused. */
    uint32_t start = o->start ? (uint32_t)o->start : 1;
    uint32_t last = start + (uint32_t)o->count - 1;
    int rc = consume("loopback (remoteledger over 127.0.0.1)", url, o, false, rl_bounded_range(start, last),
                     o->compress, out, err);
    uint64_t raw = cs_server_raw_fallbacks(server);
    if (raw > 0) {
        printf("raw fallbacks %llu chunks shipped uncompressed (every encoder busy)\n", (unsigned long long)raw);
        fflush(stdout);
    }
    return rc;
}

/* A synthetic corestreamd in this process over 127.0.0.1, its source held until the client is
 * subscribed so every ledger is delivered live. */
static int run_loopback(const br_options *o, run_out *out, cs_err *err)
{
    *out = (run_out){0};
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    char dir[PATH_MAX], ring_dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/benchrunner-loopback-XXXXXX", tmp);
    if (!mkdtemp(dir)) {
        int e = errno;
        char why[128];
        snprintf(dir, sizeof dir, "%s/benchrunner-loopback-*", tmp);
        return cs_err_set(err, 0, "mkdirtemp %s: %s", dir, cs_go_errno(e, why, sizeof why));
    }
    snprintf(ring_dir, sizeof ring_dir, "%s/ledgers", dir);

    cs_cancel cancel;
    if (cs_cancel_init(&cancel) != 0) {
        int rc = cs_err_set(err, 0, "cannot create the cancellation eventfd: %s", strerror(errno));
        remove_all(dir);
        return rc;
    }
    cs_server *server = NULL;
    int rc = loopback_server_new(o, ring_dir, &cancel, &server, err);
    server_thread st = {.server = server};
    bool running = false;
    pthread_t tid;
    if (rc == 0) {
        if (pthread_create(&tid, NULL, server_main, &st) != 0)
            rc = cs_err_set(err, 0, "cannot start the server thread");
        else
            running = true;
    }
    if (rc == 0)
        rc = loopback_consume(o, server, out, err);
    if (running) {
        cs_server_stop(server);
        pthread_join(tid, NULL);
        /* The client's failure, if any, is the run's; otherwise the server's result is. */
        if (rc == 0 && st.rc != 0) {
            *err = st.err;
            rc = -1;
        }
    }
    cs_server_free(server);
    cs_cancel_destroy(&cancel);
    remove_all(dir);
    return rc;
}

/* ---- main ------------------------------------------------------------------------------------ */

/* local and localtap: the whole path in this process, no network; lake: history read from a lake.
 * A signal ends an unbounded run cleanly. */
static int run_offline(const br_options *o, run_out *run, cs_err *err)
{
    cs_cancel cancel;
    br_collector *c = NULL;
    int rc;
    if (cs_cancel_init(&cancel) != 0) {
        rc = cs_err_set(err, 0, "cannot create an eventfd");
    } else {
        set_current_cancel(&cancel);
        bool local = strcmp(o->mode, "local") == 0, lake = strcmp(o->mode, "lake") == 0;
        br_progress *prog = progress_begin(o, local || lake ? o->start : 0, o->end, false);
        rc = lake    ? br_run_lake(o, &cancel, prog, &c, err)
             : local ? br_run_local(o, &cancel, prog, &c, err)
                     : br_run_localtap(o, &cancel, prog, &c, err);
        br_progress_stop(prog);
        set_current_cancel(NULL);
        cs_cancel_destroy(&cancel);
        if (rc != 0 && err->kind == CS_ERR_CANCELLED && atomic_load(&g_interrupted) && !o->end) {
            rc = 0;
            cs_err_clear(err);
        }
    }
    if (c) {
        run->subs = calloc(1, sizeof *run->subs);
        if (run->subs) {
            run->subs->c = c;
            run->n = 1;
        } else {
            br_collector_free(c);
        }
    }
    return rc;
}

/* The summary on stdout and the CSVs of what the run collected; a CSV that cannot be written adds
 * its error to msg (one per line, as errors.Join) and returns -1. Frees the run's subscribers. */
static int report(const br_options *o, run_out *run, char *msg, size_t mlen)
{
    int rc = 0;
    char *summary = NULL;
    if (run->n == 1) {
        summary = br_collector_summary(run->subs[0].c);
    } else {
        br_subscriber_result *res = calloc(run->n, sizeof *res);
        for (size_t i = 0; res && i < run->n; i++)
            res[i] = (br_subscriber_result){run->subs[i].c, run->subs[i].failed ? run->subs[i].err.msg : "ok"};
        summary = res ? br_fanout_summary(run->title, res, run->n, o->resume) : NULL;
        free(res);
    }
    if (summary) {
        fputs(summary, stdout);
        free(summary);
    }
    for (size_t i = 0; *o->csv && i < run->n; i++) {
        char path[PATH_MAX];
        if (run->n == 1)
            snprintf(path, sizeof path, "%s", o->csv);
        else
            br_subscriber_csv_path(o->csv, i, path, sizeof path);
        cs_err werr;
        if (br_write_csv_file(path, run->subs[i].c, &werr) != 0) {
            size_t n = strlen(msg);
            snprintf(msg + n, mlen - n, "%s%s", n ? "\n" : "", werr.msg);
            rc = -1;
            break;
        }
        if (run->n == 1)
            printf("csv          %s\n", path);
        else if (i == run->n - 1) {
            char first[PATH_MAX];
            br_subscriber_csv_path(o->csv, 0, first, sizeof first);
            printf("csv          %s .. %s (one per subscriber)\n", first, path);
        }
    }
    br_consume_free(run->subs, run->n);
    run->subs = NULL;
    run->n = 0;
    return rc;
}

/* --csv: every file the run will write is created now, before the first connection, so a path
 * that cannot be written fails at once instead of after the run (an existing file is kept as it
 * is until the rows replace it). Returns 0, or -1 with err naming the path and the system's
 * error. */
static int csv_precreate(const br_options *o, cs_err *err)
{
    for (size_t i = 0; *o->csv && i < (size_t)o->subscribers; i++) {
        char path[PATH_MAX];
        if (o->subscribers == 1)
            snprintf(path, sizeof path, "%s", o->csv);
        else
            br_subscriber_csv_path(o->csv, i, path, sizeof path);
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666); /* emptied only when the rows are written */
        if (fd < 0 && o->subscribers == 1)
            return cs_err_set(err, 0, "--csv %s: %s", o->csv, strerror(errno));
        if (fd < 0)
            return cs_err_set(err, 0, "--csv %s: %s: %s", o->csv, path, strerror(errno));
        close(fd);
    }
    return 0;
}

/* Whether the run failed only because a signal cut it short: every subscriber that failed ended
 * cancelled (a verification failure is a failure of its own), or the local source was. */
static bool cut_by_signal(const br_options *o, const run_out *run, const cs_err *err)
{
    if (!interrupted())
        return false;
    if (strcmp(o->mode, "local") == 0 || strcmp(o->mode, "localtap") == 0 || strcmp(o->mode, "lake") == 0)
        return err->kind == CS_ERR_CANCELLED;
    for (size_t i = 0; run->subs && i < run->n; i++)
        if (run->subs[i].failed && run->subs[i].r != RL_ERR_CANCELLED)
            return false;
    return run->subs != NULL;
}

/* Runs the mode the options name into *run. Returns 0, or -1 with err. */
static int run_mode(const br_options *o, run_out *run, cs_err *err)
{
    if (strcmp(o->mode, "remote") == 0) {
        rl_range range = o->end ? rl_bounded_range((uint32_t)o->start, (uint32_t)o->end)
                                : rl_unbounded_range((uint32_t)o->start);
        /* (Ctrl-C ending an unbounded run is a clean stop: br_consume says so.) */
        return consume("remote (corestreamd over the network)", o->url, o, true, range, o->remote_compressible, run,
                       err);
    }
    if (strcmp(o->mode, "loopback") == 0)
        return run_loopback(o, run, err);
    return run_offline(o, run, err);
}

int main(int argc, char **argv)
{
    br_options o;
    cs_err err;
    int rc = br_options_parse(&o, argc, argv, stderr, &err);
    if (rc == BR_OPTIONS_VERSION)
        return cs_build_print(stdout, "benchrunner") == 0 ? 0 : 1;
    if (rc > 0)
        return 0;
    if (rc < 0) {
        fprintf(stderr, "benchrunner: %s\n", err.msg);
        return 1;
    }
    if (csv_precreate(&o, &err) != 0) {
        fprintf(stderr, "benchrunner: %s\n", err.msg);
        return 2;
    }

    /* The in-process server's narration is not the measurement. */
    FILE *devnull = fopen("/dev/null", "w");
    cs_log_init(devnull ? devnull : stderr, devnull ? CS_LOG_ERROR : CS_LOG_ERROR + 1000);
    signal(SIGPIPE, SIG_IGN);
    start_signal_thread();

    run_out run = {0};
    cs_err_clear(&err);
    rc = run_mode(&o, &run, &err);
    int status = rc == 0 ? 0 : 1;
    char msg[2 * CS_ERR_MSG_MAX + 2];
    snprintf(msg, sizeof msg, "%s", rc != 0 ? err.msg : "");
    if (rc != 0 && cut_by_signal(&o, &run, &err)) {
        int sig = atomic_load(&g_signal);
        status = 128 + sig;
        snprintf(msg, sizeof msg, "interrupted by %s before the end of the range: %s what was received",
                 sig == SIGINT ? "SIGINT" : "SIGTERM", *o.csv ? "the summary and the CSV hold" : "the summary holds");
    }
    if (run.subs && report(&o, &run, msg, sizeof msg) != 0)
        status = 1; /* rows lost: an error whatever else happened */
    fflush(stdout);
    if (status != 0)
        fprintf(stderr, "benchrunner: %s\n", msg);
    return status;
}
