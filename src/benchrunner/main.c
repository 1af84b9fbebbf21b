/* benchrunner: measures how ledgers arrive from a corestreamd (PORTSPEC 4).
 *
 *   benchrunner --mode loopback                      synthetic server and client in one process
 *   benchrunner --mode remote --url ws://box:8462 --start 55000000 --end 55001000 --csv run.csv
 *
 * Output: a banner (loopback), then the summary of PORTSPEC 4.3 on stdout, and the CSV when asked.
 * Errors print `benchrunner: <err>` on stderr and exit 1. */
#include <errno.h>
#include <ftw.h>
#include <libwebsockets.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
static rl_stream *g_stream; /* the stream being consumed, under g_mu */
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
        if (g_stream)
            rl_stream_cancel(g_stream);
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

/* Publishes s as the stream a signal cancels (NULL to withdraw it). A signal that came before the
 * stream existed cancels it at once. */
static void set_current_stream(rl_stream *s)
{
    pthread_mutex_lock(&g_mu);
    g_stream = s;
    if (s && atomic_load(&g_interrupted))
        rl_stream_cancel(s);
    pthread_mutex_unlock(&g_mu);
}

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

typedef struct consumer {
    br_collector *c;
    progress *prog;
    bool verify;
    bool compressible; /* the synthetic shape --verify regenerates */
    uint64_t size;     /* the length --verify expects of every ledger (--synthetic-size) */
    uint8_t *expected;
    size_t expected_cap;
    bool failed; /* the callback stopped the stream; err says why */
    cs_err *err;
} consumer;

static void on_info(const rl_ledger_info *info, void *ctx)
{
    consumer *k = ctx;
    int64_t now = br_mono_ns();
    br_sample s = {
        .seq = info->sequence,
        .bytes = info->size,
        .chunks = info->chunks,
        .discarded = info->discarded_partials,
    };
    s.has_delivery = rl_info_delivery(info, &s.delivery);
    s.has_pipeline = rl_info_pipeline(info, &s.pipeline);
    s.has_emit = rl_info_emit_window(info, &s.emit);
    if (br_collector_add(k->c, now, &s) != 0 && !k->failed) {
        k->failed = true;
        cs_err_set(k->err, 0, "out of memory recording ledger %u", info->sequence);
    }
    progress_update(k->prog, k->c, now);
}

static int on_ledger(const uint8_t *ledger, size_t len, const rl_ledger_info *info, void *ctx)
{
    consumer *k = ctx;
    if (k->failed)
        return 1;
    if (!k->verify)
        return 0;
    /* The length first: a short, long or empty ledger can match the regenerated prefix. */
    if ((uint64_t)len != k->size) {
        k->failed = true;
        cs_err_set(k->err, 0, "ledger %u is %zu bytes, the synthetic source makes %llu (--synthetic-size)",
                   info->sequence, len, (unsigned long long)k->size);
        return 1;
    }
    if (len > k->expected_cap) {
        uint8_t *grown = realloc(k->expected, len);
        if (!grown) {
            k->failed = true;
            cs_err_set(k->err, 0, "out of memory verifying ledger %u", info->sequence);
            return 1;
        }
        k->expected = grown;
        k->expected_cap = len;
    }
    /* Fill leaves a buffer shorter than 4 bytes alone: compare against a fresh, zeroed one. */
    if (len < 4)
        memset(k->expected, 0, len);
    cs_synthetic_fill(k->expected, len, info->sequence, k->compressible);
    if (len > 0 && memcmp(ledger, k->expected, len) != 0) {
        k->failed = true;
        cs_err_set(k->err, 0, "ledger %u payload does not match the synthetic source", info->sequence);
        return 1;
    }
    return 0;
}

/* The remote flags' TLS and token settings, into opts. The token file's first line (without its
 * line ending) is the token, read into token[len]. Returns 0, or -1 with err. */
static int remote_options(const br_options *o, rl_options *opts, char *token, size_t len, cs_err *err)
{
    if (*o->tls_ca) {
        struct stat st;
        if (stat(o->tls_ca, &st) == 0 && S_ISDIR(st.st_mode))
            opts->tls_ca_dir = o->tls_ca;
        else
            opts->tls_ca_file = o->tls_ca; /* a missing file is the library's error to word */
    }
    opts->tls_server_name = o->tls_server_name;
    opts->tls_cert_file = o->tls_cert;
    opts->tls_key_file = o->tls_key;
    opts->bearer_token = o->token;
    if (!*o->token_file)
        return 0;
    FILE *f = fopen(o->token_file, "r");
    char e[128];
    if (!f)
        return cs_err_set(err, 0, "read token file \"%s\": open %s: %s", o->token_file, o->token_file,
                          cs_go_errno(errno, e, sizeof e));
    bool ok = fgets(token, (int)len, f) != NULL;
    fclose(f);
    token[ok ? strcspn(token, "\r\n") : 0] = '\0';
    if (!*token)
        return cs_err_set(err, 0, "read token file \"%s\": no token in it", o->token_file);
    opts->bearer_token = token;
    return 0;
}

/* The length the synthetic source makes for --synthetic-size: it takes 0 or less as its default. */
static uint64_t verify_size(int64_t synthetic_size)
{
    return synthetic_size > 0 ? (uint64_t)synthetic_size : CS_SYNTHETIC_DEFAULT_SIZE;
}

/* Streams range from url into a new collector (*out; NULL only when it could not be allocated).
 * remote: the flags' TLS and token settings, or NULL for none (loopback). Returns 0, or -1 with
 * err; *res is the stream's result. */
static int consume(const char *label, const char *url, const br_options *remote, rl_range range, bool verify,
                   bool compressible, uint64_t size, progress *prog, br_collector **out, rl_result *res,
                   cs_err *err)
{
    *res = RL_OK;
    *out = br_collector_new(label);
    if (!*out)
        return cs_err_set(err, 0, "out of memory");
    consumer k = {.c = *out, .prog = prog, .verify = verify, .compressible = compressible, .size = size, .err = err};
    rl_options opts;
    rl_options_init(&opts);
    char token[4096];
    if (remote && remote_options(remote, &opts, token, sizeof token, err) != 0) {
        *res = RL_ERR_INVALID;
        return -1;
    }
    opts.observer = on_info;
    opts.observer_ctx = &k;
    rl_stream *s = NULL;
    rl_result r = rl_stream_new(&s, url, &opts);
    if (r == RL_OK) {
        set_current_stream(s);
        r = rl_stream_raw_ledgers(s, range, on_ledger, &k);
        set_current_stream(NULL);
    }
    *res = r;
    int rc = 0;
    if (k.failed) {
        rc = -1; /* err already set by a callback */
    } else if (r != RL_OK) {
        const char *msg = s ? rl_stream_error(s) : "";
        rc = cs_err_set(err, 0, "%s", *msg ? msg : rl_result_name(r));
    }
    rl_stream_free(s);
    free(k.expected);
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

/* A synthetic corestreamd in this process over 127.0.0.1, its source held until the client is
 * subscribed so every ledger is delivered live. */
static int run_loopback(const br_options *o, progress *prog, br_collector **out, cs_err *err)
{
    *out = NULL;
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
                .quiet_listen = true,
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
        rl_result res;
        rc = consume("loopback (remoteledger over 127.0.0.1)", url, NULL, rl_bounded_range(start, last), o->verify,
                     o->compress, verify_size(o->synthetic_size), prog, out, &res, err);
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

int main(int argc, char **argv)
{
    lws_set_log_level(LLL_ERR, NULL);

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
    br_collector *c = NULL;
    cs_err_clear(&err);
    bool remote = strcmp(o.mode, "remote") == 0;
    if (remote) {
        rl_range range = o.end ? rl_bounded_range((uint32_t)o.start, (uint32_t)o.end)
                               : rl_unbounded_range((uint32_t)o.start);
        rl_result res;
        rc = consume("remote (corestreamd over the network)", o.url, &o, range, o.verify, o.remote_compressible,
                     verify_size(o.synthetic_size), &prog, &c, &res, &err);
        /* Ctrl-C is how an unbounded run ends: a clean stop, not a failure. */
        if (rc != 0 && res == RL_ERR_CANCELLED && atomic_load(&g_interrupted) && !range.bounded) {
            rc = 0;
            cs_err_clear(&err);
        }
    } else if (strcmp(o.mode, "loopback") == 0) {
        rc = run_loopback(&o, &prog, &c, &err);
    } else {
        /* local and localtap: no network; a signal ends an unbounded run cleanly. */
        cs_cancel cancel;
        if (cs_cancel_init(&cancel) != 0) {
            rc = cs_err_set(&err, 0, "cannot create an eventfd");
        } else {
            set_current_cancel(&cancel);
            rc = strcmp(o.mode, "local") == 0 ? br_run_local(&o, &cancel, &c, &err)
                                               : br_run_localtap(&o, &cancel, &c, &err);
            set_current_cancel(NULL);
            cs_cancel_destroy(&cancel);
            if (rc != 0 && err.kind == CS_ERR_CANCELLED && atomic_load(&g_interrupted) && !o.end) {
                rc = 0;
                cs_err_clear(&err);
            }
        }
    }
    progress_clear(&prog);

    char msg[2 * CS_ERR_MSG_MAX + 2];
    snprintf(msg, sizeof msg, "%s", rc != 0 ? err.msg : "");
    if (c) {
        char *summary = br_collector_summary(c);
        if (summary) {
            fputs(summary, stdout);
            free(summary);
        }
        if (*o.csv) {
            cs_err werr;
            if (br_write_csv_file(o.csv, c, &werr) != 0) {
                /* errors.Join: one message per line */
                size_t n = strlen(msg);
                snprintf(msg + n, sizeof msg - n, "%s%s", n ? "\n" : "", werr.msg);
                rc = -1;
            } else {
                printf("csv          %s\n", o.csv);
            }
        }
        br_collector_free(c);
    }
    fflush(stdout);
    if (rc != 0) {
        fprintf(stderr, "benchrunner: %s\n", msg);
        return 1;
    }
    return 0;
}
