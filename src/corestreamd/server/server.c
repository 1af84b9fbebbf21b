/* SPDX-License-Identifier: Apache-2.0 */
/* The server's life cycle and wiring: the streaming core (broadcaster, encoder pool, replays,
 * stored-frames fill, the source thread) and the network layer (the accept loop, the head reader,
 * the stream I/O threads), built in cs_server_new and cs_server_listen, run by cs_server_run and
 * torn down by cs_server_free. The network layer's files: accept.c (accept and admission),
 * headreader.c (TLS and heads, on cs-heads), routes.c (what each request is answered), wsio.c and
 * subscriber.c (the stream I/O threads and what a subscriber is). */
#include "corestreamd/server/server.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buildinfo.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/thread.h"
#include "corestreamd/net/listener.h"
#include "corestreamd/server/server_internal.h"
#include "corestreamd/stream/sourceloop.h"
#include "transport/xport.h"
#include "wire/wire.h"

/* Request-head limits (headreader.h): 414 past URI_MAX, 431 past HEAD_MAX bytes or
 * HEAD_FIELDS_MAX header lines, 400 `too many query parameters` past HEAD_PAIRS_MAX. */
#define URI_MAX 4096
#define HEAD_MAX 16384
#define HEAD_FIELDS_MAX 48
#define HEAD_PAIRS_MAX CS_HTTP_PAIRS_MAX
/* Requests one kept-alive connection may make (probes, scrapes); the next is answered and closed. */
#define KEEPALIVE_MAX 100

/* ---- wakes ---------------------------------------------------------------------------------- */

/* A publish (the broadcaster's wake): the stream I/O threads that hold a subscriber. */
static void server_wake(void *arg)
{
    cs_server *s = arg;
    int n = cs_wsio_bulk_thread(s->wsio);
    for (int i = 0; i <= n; i++)
        if (atomic_load_explicit(&s->tw[i].nsubs, memory_order_relaxed) > 0)
            cs_wsio_wake(s->wsio, i);
}

/* Messages of one replay are ready (the replay pool's wake, on a replay worker): only the thread
 * whose subscriber reads it (the cursor's stepper). A subscriber moves thread only outside a
 * replay, so a replay's index stays right. */
static void replay_wake(void *arg, int thread)
{
    cs_server *s = arg;
    cs_wsio_wake(s->wsio, thread);
}

/* Any thread: the accept loop and every stream I/O thread. */
static void wake_all(cs_server *s)
{
    srv_wake_loop(s);
    cs_wsio_wake(s->wsio, -1);
}

static void publish_chunk(void *ctx, cs_msg *chunk)
{
    cs_server *s = ctx;
    cs_err e;
    /* Several encoder threads publish in turn: shared counters, relaxed. */
    cs_m_add(chunk->data[10] == CS_CODEC_ZSTD ? &s->metrics->chunks_zstd : &s->metrics->chunks_raw, 1);
    cs_m_add(&s->metrics->bytes_chunks_wire, chunk->len);
    chunk->published_ns = cs_mono_ns();
    if (cs_broadcast_chunk(s->bc, chunk, &e) != 0) {
        CS_LOG(CS_LOG_ERROR, "corestreamd internal error", KV_S("error", e.msg));
        abort();
    }
}

/* ---- the source thread ---------------------------------------------------------------------- */

static void *source_main(void *arg)
{
    cs_server *s = arg;
    cs_thread_role("cs-source", 0);
    /* Loopback benchmarks hold the source until the subscriber is connected, so every ledger is
     * delivered live. */
    while (s->cfg.hold_until_subscriber && atomic_load(&s->subscribers) < 1 &&
           cs_cancel_sleep_until(s->cfg.cancel, cs_mono_ns() + 200 * CS_US) == 0)
        ;
    cs_source_loop loop = {
        .src = s->cfg.source,
        .range = s->cfg.range,
        .chunk_size = s->chunk_size,
        .max_payload = s->cfg.max_payload,
        .pipeline = s->pipeline,
        .bc = s->bc,
        .ring = s->cfg.ring,
        .cancel = s->cfg.cancel,
        .subscribers = &s->subscribers,
        .on_progress = s->cfg.on_progress,
        .progress_arg = s->cfg.progress_arg,
        .metrics = s->metrics,
        .signing = s->cfg.signing,
    };
    s->source_rc = cs_source_loop_run(&loop, &s->source_err);
    /* Pending chunks still go into the open flow before the stream is declared over. */
    cs_pipeline_flush(s->pipeline);
    atomic_store(&s->source_done, true);
    cs_broadcast_finish(s->bc, s->source_rc != 0);
    wake_all(s);
    return NULL;
}

/* A configured replay cap as the slot table takes it: 0 → the default, negative → none (0). */
static uint32_t replay_cap(int64_t configured, uint32_t dflt)
{
    if (configured == 0)
        return dflt;
    if (configured < 0)
        return 0;
    return configured > UINT32_MAX ? UINT32_MAX : (uint32_t)configured;
}

int cs_server_new(cs_server **out, const cs_server_config *cfg, cs_err *err)
{
    *out = NULL;
    cs_server *s = calloc(1, sizeof *s);
    if (!s) {
        if (cfg->source)
            cfg->source->ops->destroy(cfg->source);
        cs_ring_close(cfg->ring);
        return cs_err_set(err, 0, "server: out of memory");
    }
    s->cfg = *cfg;
    s->listen_fd = -1;
    s->admin_fd = -1;
    pthread_mutex_init(&s->released_mu, NULL);
    pthread_rwlock_init(&s->tokens_rw, NULL);
    if (!s->cfg.max_payload)
        s->cfg.max_payload = CS_MAX_PAYLOAD_SIZE;
    s->write_timeout_ns = (cfg->write_timeout_s > 0 ? cfg->write_timeout_s : CS_DEFAULT_WRITE_TIMEOUT_S) * CS_SEC;
    int rc = 0;
    if (!cfg->source)
        rc = cs_err_set(err, 0, "server: a source is required");
    else if (!cfg->ring)
        rc = cs_err_set(err, 0, "server: a store is required");
    else if (cfg->range.from == 0)
        rc = cs_err_set(err, 0, "server: source range must start at a concrete ledger, not 0");
    else if (cfg->range.bounded && cfg->range.to < cfg->range.from)
        rc = cs_err_set(err, 0, "server: source range [%u,%u] ends before it starts", cfg->range.from,
                        cfg->range.to);
    if (rc == 0) {
        s->chunk_size = cfg->chunk_size ? (size_t)cfg->chunk_size : CS_DEFAULT_CHUNK_SIZE;
        if (cfg->chunk_size && cs_wire_validate_chunk_size(cfg->chunk_size, err) != 0)
            rc = cs_err_prefix(err, "server: ");
    }
    if (rc == 0)
        rc = cs_compress_workers_resolve(cfg->compress_workers, &s->workers, err);
    if (rc == 0 && cfg->auth_tokens && *cfg->auth_tokens) {
        rc = cs_tokens_load(&s->tokens, cfg->auth_tokens, err);
        s->auth_on = true;
    }
    if (rc == 0 && cfg->tls_cert && *cfg->tls_cert) {
        if (!cfg->tls_key || !*cfg->tls_key) {
            rc = cs_err_set(err, 0, "server: --tls-key is required with --tls-cert");
        } else {
            s->tls_on = true;
            s->tls_store_ready = true;
            rc = cs_tls_store_init(&s->tls, cfg->tls_cert, cfg->tls_key, cfg->tls_client_ca, err);
            const char *why;
            bool kernel = cs_xport_ktls_probe(&why);
            if (rc == 0)
                CS_LOG(CS_LOG_INFO, "tls records", KV_S("sealed_by", kernel ? "kernel" : "openssl"), KV_S("why", why));
        }
    }
    /* 0 is auto: the live chunks' level adapts; ring replays, which no source waits for, keep
     * the default level. */
    int64_t level = cfg->compress_level ? cfg->compress_level : CS_DEFAULT_COMPRESS_LEVEL;
    int live_level = cfg->compress_level ? (int)level : CS_COMPRESS_LEVEL_AUTO;
    if (rc == 0)
        rc = cs_compress_level_validate(level, err);
    if (rc == 0 && !(s->metrics = cs_metrics_new()))
        rc = cs_err_set(err, 0, "server: out of memory");
    if (rc == 0 && !(s->bc = cs_broadcaster_new(server_wake, s)))
        rc = cs_err_set(err, 0, "server: out of memory");
    if (rc == 0)
        rc = cs_pipeline_new(&s->pipeline, s->workers, cfg->compress, live_level, s->chunk_size, publish_chunk, s, err);
    if (rc == 0 && !(s->replays = cs_replay_pool_new(CS_REPLAY_WORKERS, cfg->ring, cfg->compress, (int)level,
                                                     s->chunk_size, replay_wake, s, err)))
        rc = -1;
    s->max_replays = replay_cap(cfg->max_replays, CS_DEFAULT_MAX_REPLAYS);
    if (rc == 0 && !(s->replay_slots = cs_replay_slots_new(s->max_replays,
                                                           replay_cap(cfg->max_replays_per_ip,
                                                                      CS_DEFAULT_MAX_REPLAYS_PER_IP))))
        rc = cs_err_set(err, 0, "server: out of memory");
    if (rc != 0) {
        cs_server_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

/* One stream I/O thread per core beyond the accept loop's, at least 1, at most CS_WSIO_MAX_THREADS. */
static int io_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN) - 1;
    return n < 1 ? 1 : n > CS_WSIO_MAX_THREADS ? CS_WSIO_MAX_THREADS : (int)n;
}

/* cs-heads: the context in force for a new connection. */
static SSL_CTX *tls_ctx_now(void *ctx)
{
    cs_server *s = ctx;
    return cs_tls_store_get(&s->tls);
}

/* cs-heads: the 101 could not be written; the head reader still owns the tag. */
static void heads_discard(void *ctx, void *arg)
{
    (void)ctx;
    free(arg);
}

/* cs-heads: tags wait in its drain. */
static void heads_ready(void *ctx)
{
    srv_wake_loop(ctx);
}

/* A write to a connection the peer closed is an error to handle, not a signal: OpenSSL writes TLS
 * records with write(2), which raises SIGPIPE. An embedder's own handler is left alone. */
static void ignore_sigpipe(void)
{
    struct sigaction old;
    if (sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO)) {
        struct sigaction ign = {.sa_handler = SIG_IGN};
        sigemptyset(&ign.sa_mask);
        sigaction(SIGPIPE, &ign, NULL);
    }
}

void cs_server_log_listening(const cs_server *s)
{
    cs_kv kv[12];
    size_t n = 0;
    kv[n++] = KV_S("addr", s->addr);
    kv[n++] = KV_S("source", s->cfg.source_name ? s->cfg.source_name : "");
    kv[n++] = KV_U("start_ledger", s->cfg.range.from);
    if (s->cfg.start_mode) {
        kv[n++] = KV_S("start", s->cfg.start_mode);
        if (strcmp(s->cfg.start_mode, "continue") == 0)
            kv[n++] = KV_U("latest", s->cfg.start_ring_latest);
    }
    kv[n++] = KV_I("retention", s->cfg.retention);
    kv[n++] = KV_U("max_connections", s->max_conns);
    kv[n++] = KV_U("max_connections_per_ip", s->max_conns_per_addr);
    kv[n++] = KV_S("version", cs_build_version());
    kv[n++] = KV_S("commit", cs_build_commit());
    if (*s->run)
        kv[n++] = KV_S("run", s->run);
    cs_log_kvs(CS_LOG_INFO, "corestreamd listening", n, kv);
    if (*s->admin_addr)
        CS_LOG(CS_LOG_INFO, "admin endpoints listening", KV_S("addr", s->admin_addr),
               KV_S("paths", "/healthz /readyz /metrics"));
}

int cs_server_listen(cs_server *s, cs_err *err)
{
    ignore_sigpipe();
    if (cs_listen_tcp(s->cfg.listen, &s->listen_fd, s->addr, sizeof s->addr, err) != 0)
        return -1;
    bool admin = s->cfg.admin_listen && *s->cfg.admin_listen;
    if (admin && cs_listen_tcp(s->cfg.admin_listen, &s->admin_fd, s->admin_addr, sizeof s->admin_addr, err) != 0)
        return cs_err_prefix(err, "--admin-listen: ");
    if (srv_accept_setup(s, err) != 0)
        return -1;
    cs_wsio_hooks hooks;
    srv_io_hooks(s, &hooks);
    if (cs_wsio_start(&s->wsio, io_threads(), s->cfg.busy_poll_us * CS_US, &hooks, err) != 0)
        return -1;
    int64_t timeout_s = s->cfg.header_timeout_s > 0 ? s->cfg.header_timeout_s : CS_DEFAULT_HEADER_TIMEOUT_S;
    cs_headreader_config hc = {
        .limits = {.uri_max = URI_MAX, .head_max = HEAD_MAX, .fields_max = HEAD_FIELDS_MAX,
                   .pairs_max = HEAD_PAIRS_MAX},
        .tls = s->tls_on,
        .keepalive_max = KEEPALIVE_MAX,
        .tls_ctx = tls_ctx_now,
        .judge = srv_judge_head,
        .upgraded = srv_upgraded,
        .discard = heads_discard,
        .later = srv_lake_later,
        .timeout_ns = timeout_s * CS_SEC,
        .ready = heads_ready,
        .ctx = s,
    };
    if (cs_headreader_start(&s->heads, &hc, err) != 0)
        return -1;
    if (s->cfg.lake_passphrase && *s->cfg.lake_passphrase && srv_lake_start(&s->lake, &s->cfg, s->heads, err) != 0)
        return -1;
    return srv_admission_setup(s, err);
}

void cs_server_set_jetstream_stats(cs_server *s, void (*fn)(void *arg, cs_metrics_jetstream *out), void *arg)
{
    s->jetstream_stats = fn;
    s->jetstream_arg = arg;
}

void cs_server_set_edge_stats(cs_server *s, void (*fn)(void *arg, cs_metrics_edge *out), void *arg)
{
    s->edge_stats = fn;
    s->edge_arg = arg;
}

void cs_server_set_lake_export_stats(cs_server *s, void (*fn)(void *arg, cs_metrics_lake_export *out), void *arg)
{
    s->lake_export_stats = fn;
    s->lake_export_arg = arg;
}

void cs_server_set_run(cs_server *s, const char *run)
{
    size_t n = strlen(run);
    bool ok = n < sizeof s->run;
    for (size_t i = 0; ok && i < n; i++) /* nothing a header or a JSON string would need escaped */
        ok = (run[i] >= 'a' && run[i] <= 'z') || (run[i] >= 'A' && run[i] <= 'Z') ||
             (run[i] >= '0' && run[i] <= '9') || strchr("._:-", run[i]);
    snprintf(s->run, sizeof s->run, "%s", ok ? run : "");
}

const char *cs_server_addr(const cs_server *s)
{
    return s->addr;
}

const char *cs_server_admin_addr(const cs_server *s)
{
    return s->admin_addr;
}

int cs_server_run(cs_server *s, cs_err *err)
{
    /* Only now: nothing writes the data dir before the run starts (a start that fails earlier
     * leaves it as it was), and the ring has been claimed by then. */
    int64_t level = s->cfg.compress_level ? s->cfg.compress_level : CS_DEFAULT_COMPRESS_LEVEL;
    if (cs_frames_fill_start(&s->frames_fill, s->cfg.ring, s->cfg.compress, (int)level, s->chunk_size, err) != 0)
        return -1;
    if (pthread_create(&s->source_thread, NULL, source_main, s) != 0)
        return cs_err_set(err, 0, "server: cannot start the source thread");
    s->source_started = true;
    /* Only now: a thread inherits its creator's priority, and the source keeps the daemon's. */
    cs_thread_nice(CS_NICE_LIVE);
    srv_accept_run(s);
    cs_cancel_fire(s->cfg.cancel);
    pthread_join(s->source_thread, NULL);
    s->source_started = false;
    if (s->source_rc != 0) {
        if (err)
            *err = s->source_err;
        return -1;
    }
    return 0;
}

void cs_server_reload(cs_server *s)
{
    bool tokens = s->cfg.auth_tokens && *s->cfg.auth_tokens;
    bool tls = s->cfg.tls_cert && *s->cfg.tls_cert;
    if (!tokens && !tls) {
        CS_LOG0(CS_LOG_INFO, "reload: nothing to reload");
        return;
    }
    cs_err err;
    if (tls) {
        /* A fresh context for new connections; the open ones keep theirs. */
        SSL_CTX *fresh = cs_tls_ctx_new(s->cfg.tls_cert, s->cfg.tls_key, s->cfg.tls_client_ca, &err);
        if (!fresh) {
            CS_LOG(CS_LOG_ERROR, "reload: TLS certificate kept", KV_S("error", err.msg));
        } else {
            cs_tls_store_swap(&s->tls, fresh);
            char subject[256];
            cs_tls_subject(s->cfg.tls_cert, subject, sizeof subject);
            CS_LOG(CS_LOG_INFO, "reload: TLS certificate reloaded", KV_S("cert", s->cfg.tls_cert),
                   KV_S("subject", subject));
        }
    }
    if (!tokens)
        return;
    cs_tokens *fresh;
    if (cs_tokens_load(&fresh, s->cfg.auth_tokens, &err) != 0) {
        CS_LOG(CS_LOG_ERROR, "reload: auth tokens kept", KV_S("error", err.msg));
        return;
    }
    size_t n = cs_tokens_count(fresh);
    pthread_rwlock_wrlock(&s->tokens_rw);
    cs_tokens *old = s->tokens;
    s->tokens = fresh;
    pthread_rwlock_unlock(&s->tokens_rw);
    cs_tokens_free(old);
    CS_LOG(CS_LOG_INFO, "reload: auth tokens reloaded", KV_S("file", s->cfg.auth_tokens), KV_U("tokens", n));
    atomic_fetch_add(&s->tokens_gen, 1);
    cs_wsio_wake(s->wsio, -1); /* each stream I/O thread closes its subscribers whose token is gone */
}

void cs_server_stop(cs_server *s)
{
    atomic_store(&s->stop_requested, true);
    /* Before the cancel: the source it ends would otherwise reach a stream I/O thread as the end
     * of the stream (1000) before the stop (1001). */
    atomic_store(&s->stopping, true);
    cs_cancel_fire(s->cfg.cancel);
    wake_all(s);
}

bool cs_server_wait_retained(cs_server *s, uint32_t seq, int64_t timeout_ns)
{
    int64_t deadline = cs_mono_ns() + timeout_ns;
    for (;;) {
        cs_snap snap;
        cs_broadcast_watch(s->bc, &snap);
        cs_snap_release(&snap);
        uint32_t oldest, latest;
        /* Put(N) completes before BEGIN(N+1) and before the stream is finished, so either event
         * is the moment to look at the ring again. */
        if (cs_ring_bounds(s->cfg.ring, &oldest, &latest) && latest >= seq && oldest <= seq)
            return true;
        int64_t left = deadline - cs_mono_ns();
        if (snap.ended || left <= 0)
            return false;
        cs_broadcast_wait(s->bc, snap.gen, left);
    }
}

int cs_server_subscribers(const cs_server *s)
{
    return atomic_load(&((cs_server *)s)->subscribers);
}

int cs_server_connections(const cs_server *s)
{
    return atomic_load(&((cs_server *)s)->connections);
}

uint32_t cs_server_max_connections(const cs_server *s)
{
    return s->max_conns;
}

uint32_t cs_server_max_connections_per_ip(const cs_server *s)
{
    return s->max_conns_per_addr;
}

uint64_t cs_server_refused_total(const cs_server *s)
{
    return atomic_load(&((cs_server *)s)->refused_total);
}

uint64_t cs_server_refused_per_ip(const cs_server *s)
{
    return atomic_load(&((cs_server *)s)->refused_per_ip);
}

uint64_t cs_server_accept_pauses(const cs_server *s)
{
    return atomic_load(&((cs_server *)s)->accept_pauses);
}

uint64_t cs_server_live_abandons(const cs_server *s)
{
    return atomic_load(&((cs_server *)s)->live_abandons);
}

uint32_t cs_server_replays_running(const cs_server *s)
{
    return cs_replay_slots_running(s->replay_slots);
}

uint32_t cs_server_replays_waiting(const cs_server *s)
{
    return cs_replay_slots_waiting(s->replay_slots);
}

struct cs_broadcaster *cs_server_broadcaster(cs_server *s)
{
    return s->bc;
}

uint64_t cs_server_raw_fallbacks(const cs_server *s)
{
    return s->pipeline ? cs_pipeline_raw_fallbacks(s->pipeline) : 0;
}

/* A connection the head reader still held at the end. */
static void head_released(void *ctx, void *tag)
{
    srv_release_tag(ctx, tag);
}

void cs_server_free(cs_server *s)
{
    if (!s)
        return;
    if (s->source_started) {
        cs_cancel_fire(s->cfg.cancel);
        pthread_join(s->source_thread, NULL);
    }
    if (s->loop) /* the accept loop's state is this thread's from now on */
        cs_owner_bind(&s->loop->owner);
    /* The head reader first: its connections' tags come back here; then the stream I/O threads,
     * whose subscribers end (their cursors give their flows and replay slots back) and post
     * their tags. */
    srv_lake_stop(s->lake); /* its requests are the head reader's connections */
    if (s->heads)
        cs_headreader_free(s->heads, head_released, s);
    s->heads = NULL;
    cs_wsio_stop(s->wsio);
    if (s->loop)
        srv_take_released(s);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (s->admin_fd >= 0)
        close(s->admin_fd);
    srv_accept_free(s);
    cs_admission_free(s->conns);
    cs_admission_free(s->admin_conns);
    cs_tokens_free(s->tokens);
    srv_lake_free(s->lake);
    cs_replay_slots_free(s->replay_slots);
    cs_frames_fill_stop(s->frames_fill);
    cs_replay_pool_free(s->replays); /* no wake after this: the replays are gone */
    cs_pipeline_destroy(s->pipeline);
    cs_wsio_free(s->wsio); /* after every thread that wakes it */
    if (s->tls_store_ready)
        cs_tls_store_destroy(&s->tls);
    pthread_mutex_destroy(&s->released_mu);
    pthread_rwlock_destroy(&s->tokens_rw);
    cs_broadcaster_free(s->bc);
    cs_metrics_free(s->metrics);
    if (s->cfg.source)
        s->cfg.source->ops->destroy(s->cfg.source);
    cs_ring_close(s->cfg.ring);
    free(s);
}
