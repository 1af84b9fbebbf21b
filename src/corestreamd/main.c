/* SPDX-License-Identifier: Apache-2.0 */
/* corestreamd: owns one ledger source and streams it to any number of WebSocket subscribers. */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "common/thread.h"
#include "common/buildinfo.h"
#include "common/datadir.h"
#include "common/log.h"
#include "corestreamd/config.h"
#include "corestreamd/jetstream/naming.h"
#include "corestreamd/jetstream/publisher.h"
#include "corestreamd/lake/lakeexport.h"
#include "corestreamd/notify.h"
#include "corestreamd/sources/pace.h"
#include "corestreamd/stream/compress.h"
#include "corestreamd/stream/replay.h"
#include "corestreamd/server/server.h"
#include "corestreamd/sources/captive/captive.h"
#include "corestreamd/sources/file.h"
#include "corestreamd/sources/jetstream.h"
#include "corestreamd/sources/pipe/fifo.h"
#include "corestreamd/sources/pipe/pipe.h"
#include "corestreamd/sources/rejoin.h"
#if CS_WITH_CAPTIVE
#include "corestreamd/lake/lakes3.h"
#include "corestreamd/sources/backfill.h"
#endif
#include "corestreamd/sources/synthetic.h"
#include "corestreamd/start.h"

static pthread_mutex_t g_server_mu = PTHREAD_MUTEX_INITIALIZER;
static const cs_daemon_config *g_cfg; /* read-only once the signal thread runs */
static cs_server *g_server;
/* --signing-key, reloaded by the signal thread: set and cleared under g_server_mu. */
static cs_signing *g_signing;
static cs_cancel *g_cancel;
/* A SIGHUP between the listening line and the hand-over of the server below is kept for it: an
 * operator who saw the daemon listen and reloaded must not find the reload dropped. */
static bool g_reload_pending;
static cs_notify *g_notify; /* under g_server_mu for the signal thread */

/* The server's progress hook: systemd hears READY=1 when the source loop starts, then each
 * ledger (notify.h throttles them). addr is filled in once the listener is bound, before the
 * source thread exists. */
typedef struct notify_hook {
    cs_notify *notify;
    char addr[128];
} notify_hook;

static void on_progress(void *arg, uint32_t seq)
{
    notify_hook *h = arg;
    if (seq == 0)
        cs_notify_ready(h->notify, h->addr);
    else
        cs_notify_ledger(h->notify, seq);
}

/* SIGHUP: the log level from --log-level-file, then the server's files (tokens, certificate). */
static void reload(const cs_daemon_config *c)
{
    bool level_file = *c->log_level_file, server_files = *c->auth_tokens || *c->tls_cert;
    pthread_mutex_lock(&g_server_mu);
    bool signing = g_signing != NULL;
    if (signing)
        cs_signing_reload(g_signing);
    pthread_mutex_unlock(&g_server_mu);
    if (level_file) {
        int level;
        cs_err err;
        char name[24];
        if (cs_log_level_file_read(c->log_level_file, &level, &err) != 0) {
            CS_LOG(CS_LOG_ERROR, "reload: log level kept", KV_S("error", err.msg));
        } else {
            /* An INFO line, written under the lower of the old and new levels: raising the level
             * to warn still says so, once. */
            bool lowering = level <= CS_LOG_INFO;
            if (lowering)
                cs_log_set_level(level);
            CS_LOG(CS_LOG_INFO, "reload: log level", KV_S("level", cs_log_level_name(level, name, sizeof name)),
                   KV_S("file", c->log_level_file));
            if (!lowering)
                cs_log_set_level(level);
        }
    }
    if (!server_files) {
        if (!level_file && !signing)
            CS_LOG0(CS_LOG_INFO, "reload: nothing to reload");
        return;
    }
    pthread_mutex_lock(&g_server_mu);
    if (g_server)
        cs_server_reload(g_server);
    else
        g_reload_pending = true;
    pthread_mutex_unlock(&g_server_mu);
}

/* SIGINT/SIGTERM/SIGHUP arrive here, not as asynchronous handlers. SIGHUP reloads what can be
 * reloaded and never stops the daemon. The first SIGINT/SIGTERM asks the server to shut down;
 * later ones are swallowed so a second Ctrl-C cannot cut the close frames short. */
static void *signal_main(void *arg)
{
    sigset_t *set = arg;
    bool seen = false;
    for (;;) {
        int sig;
        if (sigwait(set, &sig) != 0)
            continue;
        if (sig == SIGHUP) {
            reload(g_cfg);
            continue;
        }
        if (seen)
            continue;
        seen = true;
        pthread_mutex_lock(&g_server_mu);
        cs_notify_stopping(g_notify, sig == SIGTERM ? "shutting down on SIGTERM" : "shutting down on SIGINT");
        if (g_server)
            cs_server_stop(g_server);
        else if (g_cancel)
            cs_cancel_fire(g_cancel);
        pthread_mutex_unlock(&g_server_mu);
    }
    return NULL;
}

/* The first ledger the ring holds when this run keeps it (it continues the ring, so the claim
 * will not reset it), else 0: captive core's replay from there on is compared with the ring. */
static uint32_t kept_oldest(cs_ring *ring, const char *identity, uint32_t start)
{
    uint32_t oldest, latest;
    if (!cs_ring_continues(ring, identity, &latest) || latest + 1 != start || !cs_ring_bounds(ring, &oldest, &latest))
        return 0;
    return oldest;
}

/* A core's source (pipe, captive): what it re-emits is compared with the ring (rejoin.h), and
 * with --backfill-from a gap past the ring is filled from a lake or a peer (backfill.h). Takes core. */
static int wrap_core(const cs_daemon_config *c, cs_cancel *cancel, cs_ring *ring, cs_source *core, cs_source **src,
                     cs_err *err)
{
    if (cs_rejoin_source_new(src, core, ring, err) != 0 || !*c->backfill_from)
        return *src ? 0 : -1;
#if CS_WITH_CAPTIVE
    cs_source *rejoin = *src;
    cs_backfill_opts o = {.url = c->backfill_from,
                          .token_file = c->backfill_token_file,
                          .ca_file = c->backfill_ca,
                          .trusted_keys = c->trusted_keys,
                          .cancel = cancel};
    return cs_backfill_source_new(src, rejoin, ring, &o, err);
#else
    (void)cancel; /* config.c refuses --backfill-from in this build */
    return 0;
#endif
}

static int build_source(const cs_daemon_config *c, cs_cancel *cancel, cs_ring *ring, const char *identity,
                        uint32_t start, cs_source **src, cs_range *range, cs_err *err)
{
    if (strcmp(c->source, "jetstream") == 0) {
        /* The edge: the stream paces it; the range only names the first ledger, for the logs. */
        *range = cs_counted_range(start, 0);
        cs_js_auth auth;
        cs_daemon_nats_auth(c, &auth);
        cs_js_source_config jc = {.url = c->jetstream_source_url,
                                  .stream = c->jetstream_stream,
                                  .run = c->jetstream_run,
                                  .start = (uint32_t)c->start_ledger,
                                  .auth = &auth,
                                  .trusted_keys = c->trusted_keys,
                                  .gap_wait_ns = c->jetstream_gap_wait};
        return cs_js_source_new(src, &jc, ring, cancel, err);
    }
    if (strcmp(c->source, "synthetic") == 0) {
        *range = cs_counted_range(start, (uint32_t)c->synthetic_count);
        cs_ledger_stream *ls = cs_synthetic_stream_new(c->synthetic_size, c->synthetic_compressible, cancel);
        *src = cs_paced_source_new(ls, *range, c->emit_window, c->synthetic_interval, cancel);
    } else if (strcmp(c->source, "file") == 0) {
        if (cs_file_dir_validate(c->file_dir, c->data_dir, err) != 0)
            return -1;
        cs_ledger_stream *ls;
        size_t records;
        /* Record (N - base) mod records is ledger N's, base being --start-ledger or 1: a run that
         * continues the ring replays what the run before it would have. */
        uint64_t base = c->start_ledger ? c->start_ledger : 1;
        if (cs_file_stream_new(&ls, c->file_dir, cancel, start - base, &records, err) != 0)
            return -1;
        CS_LOG(CS_LOG_INFO, "replaying dump", KV_S("dir", c->file_dir), KV_U("ledgers", records),
               KV_D("emit_window", c->emit_window), KV_D("cadence", c->cadence));
        *range = cs_counted_range(start, (uint32_t)c->file_count);
        *src = cs_paced_source_new(ls, *range, c->emit_window, c->cadence, cancel);
    } else if (strcmp(c->source, "pipe") == 0) {
        /* Core paces itself: the range only names the first ledger, for the logs. */
        *range = cs_counted_range(start, 0);
        cs_source *pipe;
        int prc = *c->pipe_path ? cs_fifo_source_new(&pipe, c->pipe_path, ring, cancel, err)
                                : cs_pipe_source_new(&pipe, c->pipe_cmd, c->pipe_size, cancel, err);
        if (prc != 0)
            return -1;
        return wrap_core(c, cancel, ring, pipe, src, err);
    } else {
        /* Captive: core paces itself; the range is unbounded from --start-ledger. */
        *range = cs_counted_range(start, 0);
        char storage[PATH_MAX];
        const char *sd = c->storage_dir;
        if (!*sd) {
            snprintf(storage, sizeof storage, "%s/captive-core", c->data_dir);
            sd = storage;
        }
        cs_captive_config cc = {.core_binary = c->core_binary,
                                .core_config = c->core_config,
                                .storage_dir = sd,
                                .network_passphrase = c->network_passphrase,
                                .urls = c->urls,
                                .nurls = c->nurls,
                                .start = start};
        /* Core replays from its last closed ledger: what the ring holds of that is compared. */
        cc.emit_from = kept_oldest(ring, identity, start);
        cs_source *core;
        if (cs_captive_source_new(&core, &cc, cancel, err) != 0)
            return -1;
        return wrap_core(c, cancel, ring, core, src, err);
    }
    if (!*src)
        return cs_err_set(err, 0, "source: out of memory");
    return 0;
}

/* Descriptors a NATS client may hold at once: its connection, the one replacing it on a
 * reconnect, a name lookup's socket and a TLS file being read, with room for nats.c's own. */
#define NATS_FDS 8

/* Descriptors the run's own parts may open at once while it serves, beyond those open at listen
 * (cs_server_config.fd_reserve): the source's (a dump's ledger file 1; a pipe command's or FIFO's
 * pipe and the one replacing it 2; captive core's pipes to stellar-core and their spares, its
 * log reader's eventfd and a history archive download 16; an edge's NATS client), a JetStream
 * publisher's (its NATS client, its replay worker and the ledger that replay holds) and the lake
 * exporter's (CS_LAKE_EXPORT_FDS). */
static uint32_t run_fd_reserve(const cs_daemon_config *c)
{
    uint32_t source = strcmp(c->source, "file") == 0       ? 1
                      : strcmp(c->source, "pipe") == 0     ? 2
                      : strcmp(c->source, "captive") == 0  ? 16
                      : strcmp(c->source, "jetstream") == 0 ? NATS_FDS
                                                            : 0;
    uint32_t publisher = *c->jetstream_url ? NATS_FDS + CS_REPLAY_WORKER_FDS + CS_REPLAY_HELD_FDS : 0;
    uint32_t lake = *c->lake_dir || *c->lake_url ? CS_LAKE_EXPORT_FDS : 0;
    return source + publisher + lake;
}

/* The soft descriptor limit up to the hard one (systemd's default soft limit is 1024): the
 * server keeps its connection cap under whatever this leaves. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == rl.rlim_max)
        return;
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
        CS_LOG(CS_LOG_DEBUG, "descriptor limit raised", KV_U("from", (uint64_t)was), KV_U("to", (uint64_t)rl.rlim_max));
}

/* The last thing systemd hears: why the daemon stops (a signal already said so: first wins). */
static void notify_done(const char *why)
{
    pthread_mutex_lock(&g_server_mu);
    cs_notify *n = g_notify;
    cs_notify_stopping(n, why);
    g_notify = NULL;
    pthread_mutex_unlock(&g_server_mu);
    cs_notify_free(n);
}

/* --jetstream-url: the publisher beside the WebSocket cursors, following the server's flows. */
static int jetstream_new(const cs_daemon_config *c, cs_server *server, cs_ring *ring, cs_js_publisher **out,
                         cs_err *err)
{
    *out = NULL;
    if (!*c->jetstream_url)
        return 0;
    char defined_by[PATH_MAX + 128], run[CS_JS_NAME_MAX];
    cs_daemon_run_definition(c, defined_by, sizeof defined_by);
    cs_js_run_id(run, sizeof run, c->source, defined_by);
    cs_js_auth auth;
    cs_daemon_nats_auth(c, &auth);
    cs_js_config jc = {.url = c->jetstream_url,
                       .auth = &auth,
                       .stream = c->jetstream_stream,
                       .run = run,
                       .run_desc = defined_by,
                       .data_dir = c->data_dir,
                       .max_age_ns = c->jetstream_max_age,
                       .max_bytes = c->jetstream_max_bytes,
                       .replicas = c->jetstream_replicas,
                       .max_pending = c->jetstream_max_pending,
                       .chunk_size = (size_t)c->chunk_size,
                       .compress = c->compress,
                       /* Its encoders read the ring, which no source waits for: auto's adaptation
                        * is for live chunks only. */
                       .compress_level = c->compress_level ? (int)c->compress_level : CS_DEFAULT_COMPRESS_LEVEL};
    return cs_js_publisher_new(out, &jc, cs_server_broadcaster(server), ring, err);
}

/* /metrics: the publisher's counters, copied at each scrape. */
static void jetstream_stats(void *arg, cs_metrics_jetstream *out)
{
    cs_js_stats st;
    cs_js_publisher_stats(arg, &st);
    *out = (cs_metrics_jetstream){.published = st.published,
                                  .acked = st.acked,
                                  .duplicates = st.duplicates,
                                  .ack_failures = st.ack_failures,
                                  .stalls = st.stalls,
                                  .ledgers = st.ledgers,
                                  .ring_ledgers = st.ring_ledgers,
                                  .gaps = st.gaps,
                                  .behind_episodes = st.behind_episodes,
                                  .resyncs = st.resyncs,
                                  .foreign_duplicates = st.foreign_duplicates,
                                  .republishes = st.republishes,
                                  .behind = st.behind,
                                  .connected = st.connected};
}

/* --lake-dir or --lake-url: the exporter of the ring to a lake directory or an S3-compatible bucket.
 * Its store is opened (a directory made, the configs in place checked, a directory's newest object
 * found) now, before the ring is claimed; its thread starts once the claim is made. */
static int lake_export_new(const cs_daemon_config *c, cs_ring *ring, cs_lake_export **out, cs_err *err)
{
    *out = NULL;
    if (!*c->lake_dir && !*c->lake_url)
        return 0;
    cs_lake_export_config lc = {
        .layout = {(uint32_t)c->lake_ledgers_per_batch, (uint32_t)c->lake_batches_per_partition},
        .ring = ring,
    };
    int rc = -1;
    if (*c->lake_dir)
        rc = cs_lake_dir_store_open(&lc.store, c->lake_dir, cs_ring_dir(ring), c->network_passphrase, &lc.layout,
                                    err);
#if CS_WITH_CAPTIVE
    else
        rc = cs_lake_s3_store_open(&lc.store, c->lake_url, c->network_passphrase, &lc.layout, err);
#endif
    return rc == 0 ? cs_lake_export_new(out, &lc, err) : -1;
}

/* /metrics: the lake exporter's counters, copied at each scrape. */
static void lake_export_stats(void *arg, cs_metrics_lake_export *out)
{
    cs_lake_export_stats st;
    cs_lake_export_stats_get(arg, &st);
    *out = (cs_metrics_lake_export){.objects = st.objects,
                                    .signatures = st.signatures,
                                    .bytes = st.bytes,
                                    .io_errors = st.io_errors,
                                    .conflicts = st.conflicts,
                                    .lost = st.lost,
                                    .lag = st.lag};
}

/* /metrics: an edge's skipped messages, copied at each scrape. */
static void edge_stats(void *arg, cs_metrics_edge *out)
{
    cs_js_source_stats_t st;
    cs_js_source_stats(arg, &st);
    out->names = cs_js_skip_names;
    out->nreasons = CS_JS_SKIP_REASONS;
    for (size_t i = 0; i < CS_JS_SKIP_REASONS && i < CS_M_EDGE_REASONS_MAX; i++)
        out->skipped[i] = st.skipped[i];
    out->waiting_for = st.waiting_for;
    out->gaps = st.gaps;
    out->gap_ledgers = st.gap_ledgers;
    out->ledgers_live = st.ledgers_live;
    out->ledgers_stream = st.ledgers_stream;
    out->stream_moves = st.stream_moves;
}

static int fail(const char *msg)
{
    char why[CS_ERR_MSG_MAX + 16];
    snprintf(why, sizeof why, "failed: %s", msg);
    notify_done(why);
    CS_LOG(CS_LOG_ERROR, "corestreamd failed", KV_S("error", msg));
    return 1;
}

/* What one run is made of, in the order it is built. Until cs_server_new the source and the ring
 * are main's (open_run frees them when it fails); from then on they are the server's. */
typedef struct run_parts {
    cs_ring *ring;
    cs_source *src;
    cs_range range;
    cs_run_start start;
    char identity[PATH_MAX + 128];
    char run[CS_RUN_TOKEN_MAX]; /* the run token, once the ring is claimed (cs_run_token) */
    bool edge;
    cs_signing *signing; /* --signing-key; main's, freed after the server */
    cs_server *server;
    cs_js_publisher *jetstream;
    cs_lake_export *lake; /* --lake-dir, --lake-url; reads the ring: stopped before the server is freed */
} run_parts;

/* SIGINT/SIGTERM/SIGHUP blocked here and taken by the signal thread; systemd's notifier first (it
 * reads the environment before any other thread exists). Returns 0, or -1 with why in msg. */
static int start_signals(sigset_t *set, notify_hook *hook, char *msg, size_t len)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, set, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* After the mask (its thread inherits it, so the signals still reach only sigwait) and
     * before the other threads (it reads the environment). */
    cs_err err;
    if (cs_notify_new(&hook->notify, &err) != 0) {
        snprintf(msg, len, "%s", err.msg);
        return -1;
    }
    g_notify = hook->notify;
    pthread_t sig_thread;
    int perr = pthread_create(&sig_thread, NULL, signal_main, set);
    if (perr != 0) {
        /* Without it SIGINT, SIGTERM and SIGHUP would stay blocked: only SIGKILL would stop us. */
        char why[128];
        snprintf(msg, len, "cannot start the signal thread: %s", cs_go_errno(perr, why, sizeof why));
        return -1;
    }
    pthread_detach(sig_thread);
    return 0;
}

/* The ring, where the run starts, and the source. On failure nothing is left open. */
static int open_run(const cs_daemon_config *cfg, cs_cancel *cancel, run_parts *p, cs_err *err)
{
    char ring_dir[PATH_MAX];
    snprintf(ring_dir, sizeof ring_dir, "%s/ledgers", cfg->data_dir);
    /* The ring first: where the run starts follows from it, and the edge's source reads where it
     * ends (at its first ledger, after the claim). */
    int rc = cs_ring_open(&p->ring, ring_dir, cfg->retention, err);
    if (rc == 0)
        cs_ring_set_direct(p->ring, cfg->ring_direct);
    /* The edge's identity is the run it follows in the stream: known once its source is built. */
    p->edge = strcmp(cfg->source, "jetstream") == 0;
    if (rc == 0 && !p->edge) {
        cs_run_identity(cfg, NULL, p->identity, sizeof p->identity);
        rc = cs_run_start_decide(cfg, p->ring, p->identity, &p->start, err);
    }
    if (rc == 0)
        rc = build_source(cfg, cancel, p->ring, p->identity, p->edge ? 1 : p->start.first, &p->src, &p->range,
                          err);
    if (rc == 0 && p->edge) {
        cs_run_identity(cfg, p->src, p->identity, sizeof p->identity);
        if ((rc = cs_run_start_decide(cfg, p->ring, p->identity, &p->start, err)) == 0)
            p->range.from = p->start.first; /* a label: the edge's source finds its first ledger itself */
    }
    if (rc != 0) {
        if (p->src)
            p->src->ops->destroy(p->src);
        p->src = NULL;
        cs_ring_close(p->ring);
        p->ring = NULL;
    }
    return rc;
}

static int new_server(const cs_daemon_config *cfg, cs_cancel *cancel, notify_hook *hook, run_parts *p, cs_err *err)
{
    cs_thread_set_background_nice((int)cfg->background_nice); /* before any thread takes its role */
    cs_server_config sc = {
        .listen = cfg->listen,
        .source_name = cfg->source,
        .source = p->src,
        .range = p->range,
        .start_mode = cs_start_mode_name(p->start.mode),
        .start_ring_latest = p->start.ring_latest,
        .ring = p->ring,
        .cancel = cancel,
        .chunk_size = cfg->chunk_size,
        .compress = cfg->compress,
        .compress_workers = cfg->compress_workers,
        .compress_level = cfg->compress_level,
        .retention = cfg->retention,
        .max_connections = cfg->max_connections,
        .fd_reserve = run_fd_reserve(cfg),
        .max_connections_per_ip = cfg->max_connections_per_ip,
        .max_replays = cfg->max_replays,
        .max_replays_per_ip = cfg->max_replays_per_ip,
        .busy_poll_us = cfg->busy_poll_us,
        .auth_tokens = cfg->auth_tokens,
        .auth_healthz = cfg->auth_healthz,
        .tls_cert = cfg->tls_cert,
        .tls_key = cfg->tls_key,
        .tls_client_ca = cfg->tls_client_ca,
        .on_progress = on_progress,
        .progress_arg = hook,
        .admin_listen = cfg->admin_listen,
        .signing = p->signing,
        .lake_passphrase = cfg->network_passphrase,
        .lake_ledgers_per_batch = (uint32_t)cfg->lake_ledgers_per_batch,
        .lake_batches_per_partition = (uint32_t)cfg->lake_batches_per_partition,
        .lake_readers = cfg->lake_readers,
    };
    return cs_server_new(&p->server, &sc, err);
}

/* The server, the publisher, the binds, then the claim: every check that can fail at start comes
 * before the ring is repaired or reset. On success the signal thread has the server. */
static int start_serving(const cs_daemon_config *cfg, cs_cancel *cancel, notify_hook *hook, run_parts *p,
                         cs_err *err)
{
    int rc = new_server(cfg, cancel, hook, p, err);
    if (rc == 0)
        rc = jetstream_new(cfg, p->server, p->ring, &p->jetstream, err);
    if (rc == 0 && p->jetstream)
        cs_server_set_jetstream_stats(p->server, jetstream_stats, p->jetstream);
    if (rc == 0 && p->edge)
        cs_server_set_edge_stats(p->server, edge_stats, p->src);
    if (rc == 0)
        rc = lake_export_new(cfg, p->ring, &p->lake, err);
    if (rc == 0 && p->lake)
        cs_server_set_lake_export_stats(p->server, lake_export_stats, p->lake);
    /* The signal thread sees the server only once listen has set it up; a signal before that
     * fires the cancellation instead, and the run below does not start. */
    if (rc == 0)
        rc = cs_server_listen(p->server, err);
    if (rc == 0) {
        /* Everything that can fail at start has passed (flags, files, TLS material, tokens, NATS,
         * the binds): only now is what the ring's open found repaired, and may the ring be reset,
         * for another run's ledgers or a given --start-ledger that does not continue it, and still
         * before anyone is served from it (accept starts in cs_server_run). The pipe's first
         * ledger is core's, the edge's the stream's: only the source knows it. */
        bool source_knows = strcmp(cfg->source, "pipe") == 0 || p->edge;
        rc = cs_ring_claim(p->ring, p->identity, source_knows ? 0 : p->range.from, err);
    }
    if (rc != 0)
        return rc;
    /* The claim kept or drew the ring's run nonce: the token the 101 and /healthz carry. */
    cs_run_token(cfg, p->identity, cs_ring_run_nonce(p->ring), p->run, sizeof p->run);
    cs_server_set_run(p->server, p->run);
    if (p->signing)
        cs_signing_set_run(p->signing, p->run);
    cs_server_log_listening(p->server);
    pthread_mutex_lock(&g_server_mu);
    g_server = p->server;
    if (g_reload_pending)
        cs_server_reload(p->server);
    g_reload_pending = false;
    pthread_mutex_unlock(&g_server_mu);
    snprintf(hook->addr, sizeof hook->addr, "%s", cs_server_addr(p->server));
    return 0;
}

int main(int argc, char **argv)
{
    cs_daemon_config cfg;
    cs_err err;
    int rc = cs_daemon_config_parse(&cfg, argc, argv, stderr, &err);
    if (rc != 0) {
        cs_daemon_config_free(&cfg);
        if (rc == CS_CONFIG_VERSION)
            return cs_build_print(stdout, "corestreamd") == 0 ? 0 : 1;
        if (rc > 0)
            return 0;
        cs_log_early_error("corestreamd failed", err.msg);
        return 1;
    }
    cs_log_init(stdout, cfg.log_level_value);
    g_cfg = &cfg;
    cs_log_set_format((cs_log_fmt)cfg.log_format_value);
    raise_nofile();

    sigset_t set;
    notify_hook hook = {0};
    char msg[CS_ERR_MSG_MAX];
    if (start_signals(&set, &hook, msg, sizeof msg) != 0) {
        cs_daemon_config_free(&cfg);
        return fail(msg);
    }
    cs_cancel cancel;
    if (cs_cancel_init(&cancel) != 0) {
        cs_daemon_config_free(&cfg);
        return fail("cannot create the cancellation eventfd");
    }
    pthread_mutex_lock(&g_server_mu);
    g_cancel = &cancel;
    pthread_mutex_unlock(&g_server_mu);

    run_parts run = {0};
    /* The data directory has one owner: taken before anything in it is read, held until exit. */
    int lock_fd = cs_datadir_lock(cfg.data_dir, &err);
    rc = lock_fd < 0 ? -1 : 0;
    /* The signing key is read before the ring is opened: a bad key changes nothing on disk. */
    cs_signing *signing = NULL;
    if (rc == 0)
        rc = *cfg.signing_key ? cs_signing_new(&signing, cfg.signing_key, &err) : 0;
    pthread_mutex_lock(&g_server_mu);
    g_signing = run.signing = signing;
    pthread_mutex_unlock(&g_server_mu);
    if (rc == 0)
        rc = open_run(&cfg, &cancel, &run, &err);
    /* A signal while the start waited (an edge waiting for JetStream to answer) is a clean stop. */
    bool stopped_early = rc != 0 && err.kind == CS_ERR_CANCELLED && cs_cancel_is_set(&cancel);
    if (stopped_early)
        rc = 0;
    if (rc == 0 && !stopped_early)
        rc = start_serving(&cfg, &cancel, &hook, &run, &err);
    bool ran = false;
    if (rc == 0 && run.jetstream)
        rc = cs_js_publisher_start(run.jetstream, &err);
    if (rc == 0 && run.lake)
        rc = cs_lake_export_start(run.lake, &err);
    if (rc == 0 && !cs_cancel_is_set(&cancel)) {
        ran = true;
        rc = cs_server_run(run.server, &err);
    }
    /* The source is over: what is left of the last flow goes out, within the drain bound. */
    cs_js_publisher_stop(run.jetstream, 5 * CS_SEC);
    cs_js_publisher_free(run.jetstream);
    /* What the ring holds whole goes to the lake, within the same bound; the next start resumes
     * after the newest object either way. */
    cs_lake_export_stop(run.lake, 5 * CS_SEC);

    pthread_mutex_lock(&g_server_mu);
    g_server = NULL;
    g_cancel = NULL;
    g_signing = NULL;
    pthread_mutex_unlock(&g_server_mu);
    cs_server_free(run.server);
    cs_lake_export_free(run.lake); /* after the server: /metrics reads its counters until then */
    cs_signing_free(signing);
    cs_daemon_config_free(&cfg);
    cs_cancel_destroy(&cancel);
    if (lock_fd >= 0)
        close(lock_fd);
    if (rc != 0) {
        if (ran)
            CS_LOG(CS_LOG_ERROR, "corestreamd stopping on failure", KV_S("error", err.msg));
        return fail(err.msg);
    }
    notify_done("source ended; shutting down");
    CS_LOG0(CS_LOG_INFO, "corestreamd stopped");
    return 0;
}
