/* benchrunner: measures how ledgers arrive from a corestreamd (benchrunner(1)).
 *
 *   benchrunner --mode loopback                      synthetic server and client in one process
 *   benchrunner --mode remote --url ws://box:8462 --start 55000000 --end 55001000 --csv run.csv
 *   benchrunner --mode remote --url ws://box:8462 --start S --end E --subscribers 128 --resume
 *
  * The streaming itself (the pull API, one session or K on one thread) is consume.c's. Output: a
  * banner (loopback), then the summary of benchrunner(1) on stdout, and the CSV when asked. Errors
  * print `benchrunner: <err>` on stderr and exit 1. */
#include <errno.h>
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
#include "benchrunner/local.h"
#include "benchrunner/options.h"
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

static void *signal_main(void *arg)
{
    sigset_t *set = arg;
    for (;;) {
        int sig;
        if (sigwait(set, &sig) != 0 || atomic_load(&g_interrupted))
            continue;
        pthread_mutex_lock(&g_mu);
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

typedef struct progress {
    bool enabled;
    bool drawn;
    int64_t last_draw_ns;
} progress;

static void progress_clear(progress *p)
{
    if (p->enabled && p->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        p->drawn = false;
    }
}

/* Redraws at most four times a second: ledgers so far, their rate, the last delivery. */
static void progress_update(progress *p, const br_collector *c, int64_t now_ns)
{
    if (!p->enabled || (p->drawn && now_ns - p->last_draw_ns < 250 * CS_MS))
        return;
    size_t n = br_collector_len(c);
    if (n == 0)
        return;
    const br_sample *last = br_collector_sample(c, n - 1);
    int64_t elapsed = br_collector_elapsed(c);
    char rate[48] = "-", dbuf[BR_DUR_STR_MAX] = "-";
    if (elapsed > 0)
        snprintf(rate, sizeof rate, "%.1f", (double)(n - 1) / ((double)elapsed / 1e9));
    if (last->has_delivery)
        br_fmt_dur(last->delivery, dbuf, sizeof dbuf);
    fflush(stdout);
    fprintf(stderr, "\r\033[K%zu ledgers (last %u)  %s ledgers/s  last delivery %s", n, last->seq, rate, dbuf);
    fflush(stderr);
    p->drawn = true;
    p->last_draw_ns = now_ns;
}

/* ---- consume (loopback and remote) ----------------------------------------------------------- */

static void on_progress(const br_collector *c, void *ctx) { progress_update(ctx, c, br_mono_ns()); }

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
                   bool compressible, progress *prog, run_out *out, cs_err *err)
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
        .progress_ctx = prog,
        .interrupted = interrupted,
    };
    out->n = spec.subscribers;
    return br_consume(&spec, &out->subs, err);
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

/* A synthetic corestreamd in this process over 127.0.0.1, its source held until the client is
 * subscribed so every ledger is delivered live. */
static int run_loopback(const br_options *o, progress *prog, run_out *out, cs_err *err)
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

    int rc = 0;
    cs_cancel cancel;
    bool cancel_ok = cs_cancel_init(&cancel) == 0;
    cs_ring *ring = NULL;
    cs_server *server = NULL;
    if (!cancel_ok)
        rc = cs_err_set(err, 0, "cannot create the cancellation eventfd: %s", strerror(errno));
    if (rc == 0)
        rc = cs_ring_open(&ring, ring_dir, (int64_t)o->count + 1, err);

    uint32_t start = o->start ? (uint32_t)o->start : 1;
    uint32_t count = (uint32_t)o->count;
    if (rc == 0) {
        /* The synthetic interval is the ledger cadence: PacedSource owns the schedule, and the emit
         * window nests inside it. */
        cs_range range = cs_counted_range(start, count);
        cs_ledger_stream *ls = cs_synthetic_stream_new(o->synthetic_size, o->compress, &cancel);
        /* The paced source owns ls, even when it fails (and passes a NULL ls through). */
        cs_source *src = cs_paced_source_new(ls, range, o->emit_window, o->synthetic_interval, &cancel);
        if (!src) {
            cs_ring_close(ring);
            rc = cs_err_set(err, 0, "out of memory");
        } else {
            cs_server_config sc = {
                .listen = "127.0.0.1:0",
                .source_name = "synthetic",
                .source = src,
                .range = range,
                .ring = ring,
                .cancel = &cancel,
                .chunk_size = o->chunk_size,
                .compress = o->compress,
                .compress_level = o->compress_level,
                .hold_until_subscriber = true,
                .retention = (int64_t)o->count + 1,
                .busy_poll_us = o->busy_poll_us, /* loopback: the server's I/O threads poll too */
            };
            rc = cs_server_new(&server, &sc, err); /* owns src and ring from here, even on failure */
        }
        ring = NULL;
    }
    if (rc == 0)
        rc = cs_server_listen(server, err);

    server_thread st = {.server = server};
    bool running = false;
    pthread_t tid;
    if (rc == 0) {
        if (pthread_create(&tid, NULL, server_main, &st) != 0)
            rc = cs_err_set(err, 0, "cannot start the server thread");
        else
            running = true;
    }
    if (rc == 0) {
        char ibuf[CS_DUR_STR_MAX], wbuf[CS_DUR_STR_MAX], cbuf[32], url[128];
        const char *addr = cs_server_addr(server);
        printf("loopback server on %s: %llu ledgers of %lld bytes every %s, emitted over %s, %s chunks\n", addr,
               (unsigned long long)o->count, (long long)o->synthetic_size,
               cs_dur_format(o->synthetic_interval, ibuf, sizeof ibuf), cs_dur_format(o->emit_window, wbuf, sizeof wbuf),
               fmt_bytes(o->chunk_size, cbuf, sizeof cbuf));
        fflush(stdout);
        snprintf(url, sizeof url, "ws://%s", addr);

        /* No overflow check, as in the prototype: a range past the ceiling wraps and is refused. */
        uint32_t last = start + count - 1;
        rc = consume("loopback (remoteledger over 127.0.0.1)", url, o, false, rl_bounded_range(start, last),
                     o->compress, prog, out, err);
        uint64_t raw = cs_server_raw_fallbacks(server);
        if (raw > 0) {
            progress_clear(prog);
            printf("raw fallbacks %llu chunks shipped uncompressed (every encoder busy)\n", (unsigned long long)raw);
            fflush(stdout);
        }
    }
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
    cs_ring_close(ring);
    if (cancel_ok)
        cs_cancel_destroy(&cancel);
    remove_all(dir);
    return rc;
}

/* ---- main ------------------------------------------------------------------------------------ */

/* local and localtap: the whole path in this process, no network; a signal ends an unbounded run
 * cleanly. */
static int run_offline(const br_options *o, run_out *run, cs_err *err)
{
    cs_cancel cancel;
    br_collector *c = NULL;
    int rc;
    if (cs_cancel_init(&cancel) != 0) {
        rc = cs_err_set(err, 0, "cannot create an eventfd");
    } else {
        set_current_cancel(&cancel);
        rc = strcmp(o->mode, "local") == 0 ? br_run_local(o, &cancel, &c, err) : br_run_localtap(o, &cancel, &c, err);
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

    /* The in-process server's narration is not the measurement. */
    FILE *devnull = fopen("/dev/null", "w");
    cs_log_init(devnull ? devnull : stderr, devnull ? CS_LOG_ERROR : CS_LOG_ERROR + 1000);
    signal(SIGPIPE, SIG_IGN);
    start_signal_thread();

    progress prog = {.enabled = isatty(STDERR_FILENO) == 1};
    run_out run = {0};
    cs_err_clear(&err);
    if (strcmp(o.mode, "remote") == 0) {
        rl_range range = o.end ? rl_bounded_range((uint32_t)o.start, (uint32_t)o.end)
                               : rl_unbounded_range((uint32_t)o.start);
        /* (Ctrl-C ending an unbounded run is a clean stop: br_consume says so.) */
        rc = consume("remote (corestreamd over the network)", o.url, &o, true, range, o.remote_compressible, &prog,
                     &run, &err);
    } else if (strcmp(o.mode, "loopback") == 0) {
        rc = run_loopback(&o, &prog, &run, &err);
    } else {
        rc = run_offline(&o, &run, &err);
    }
    progress_clear(&prog);

    char msg[2 * CS_ERR_MSG_MAX + 2];
    snprintf(msg, sizeof msg, "%s", rc != 0 ? err.msg : "");
    if (run.subs && report(&o, &run, msg, sizeof msg) != 0)
        rc = -1;
    fflush(stdout);
    if (rc != 0) {
        fprintf(stderr, "benchrunner: %s\n", msg);
        return 1;
    }
    return 0;
}
