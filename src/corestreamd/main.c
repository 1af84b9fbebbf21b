/* corestreamd: owns one ledger source and streams it to any number of WebSocket subscribers. */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "common/log.h"
#include "corestreamd/config.h"
#include "corestreamd/sources/pace.h"
#include "corestreamd/server/server.h"
#include "corestreamd/sources/captive/captive.h"
#include "corestreamd/sources/file.h"
#include "corestreamd/sources/pipe/pipe.h"
#include "corestreamd/sources/synthetic.h"
#include "common/synthetic.h"

static pthread_mutex_t g_server_mu = PTHREAD_MUTEX_INITIALIZER;
static cs_server *g_server;
static cs_cancel *g_cancel;

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
            pthread_mutex_lock(&g_server_mu);
            if (g_server)
                cs_server_reload(g_server);
            else
                CS_LOG0(CS_LOG_INFO, "reload: not serving yet; nothing reloaded");
            pthread_mutex_unlock(&g_server_mu);
            continue;
        }
        if (seen)
            continue;
        seen = true;
        pthread_mutex_lock(&g_server_mu);
        if (g_server)
            cs_server_stop(g_server);
        else if (g_cancel)
            cs_cancel_fire(g_cancel);
        pthread_mutex_unlock(&g_server_mu);
    }
    return NULL;
}

/* What defines this run's byte stream, for the ring's run identity (docs/RING.md): the source
 * kind and the parameters its bytes follow from. */
static void run_identity(const cs_daemon_config *c, char *buf, size_t len)
{
    if (strcmp(c->source, "synthetic") == 0) {
        long long size = c->synthetic_size > 0 ? (long long)c->synthetic_size : CS_SYNTHETIC_DEFAULT_SIZE;
        snprintf(buf, len, "source=synthetic size=%lld compressible=%s", size,
                 c->synthetic_compressible ? "true" : "false");
    } else if (strcmp(c->source, "file") == 0) {
        char real[PATH_MAX];
        snprintf(buf, len, "source=file dir=%s", realpath(c->file_dir, real) ? real : c->file_dir);
    } else {
        /* pipe and captive: one network's ledgers are one chain, whichever core produced them. */
        snprintf(buf, len, "source=%s network=%s", c->source, c->network_passphrase);
    }
}

static int build_source(const cs_daemon_config *c, cs_cancel *cancel, cs_source **src, cs_range *range,
                        cs_err *err)
{
    uint32_t start = c->start_ledger ? (uint32_t)c->start_ledger : 1;
    if (strcmp(c->source, "synthetic") == 0) {
        *range = cs_counted_range(start, (uint32_t)c->synthetic_count);
        cs_ledger_stream *ls = cs_synthetic_stream_new(c->synthetic_size, c->synthetic_compressible, cancel);
        *src = cs_paced_source_new(ls, *range, c->emit_window, c->synthetic_interval, cancel);
    } else if (strcmp(c->source, "file") == 0) {
        if (cs_file_dir_validate(c->file_dir, c->data_dir, err) != 0)
            return -1;
        cs_ledger_stream *ls;
        size_t records;
        if (cs_file_stream_new(&ls, c->file_dir, cancel, &records, err) != 0)
            return -1;
        CS_LOG(CS_LOG_INFO, "replaying dump", KV_S("dir", c->file_dir), KV_U("ledgers", records),
               KV_D("emit_window", c->emit_window), KV_D("cadence", c->cadence));
        *range = cs_counted_range(start, (uint32_t)c->file_count);
        *src = cs_paced_source_new(ls, *range, c->emit_window, c->cadence, cancel);
    } else if (strcmp(c->source, "pipe") == 0) {
        /* Core paces itself: the range only names the first ledger, for the logs. */
        *range = cs_counted_range(start, 0);
        return cs_pipe_source_new(src, c->pipe_cmd, c->pipe_size, cancel, err);
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
        return cs_captive_source_new(src, &cc, cancel, err);
    }
    if (!*src)
        return cs_err_set(err, 0, "source: out of memory");
    return 0;
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

static int fail(const char *msg)
{
    CS_LOG(CS_LOG_ERROR, "corestreamd failed", KV_S("error", msg));
    return 1;
}

int main(int argc, char **argv)
{
    cs_daemon_config cfg;
    cs_err err;
    int rc = cs_daemon_config_parse(&cfg, argc, argv, stderr, &err);
    if (rc != 0) {
        cs_daemon_config_free(&cfg);
        if (rc > 0)
            return 0;
        cs_log_early_error("corestreamd failed", err.msg);
        return 1;
    }
    int level;
    if (cs_log_parse_level(cfg.log_level, &level) != 0)
        level = CS_LOG_INFO;
    cs_log_init(stdout, level);
    raise_nofile();

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    pthread_t sig_thread;
    pthread_create(&sig_thread, NULL, signal_main, &set);
    pthread_detach(sig_thread);

    cs_cancel cancel;
    if (cs_cancel_init(&cancel) != 0) {
        cs_daemon_config_free(&cfg);
        return fail("cannot create the cancellation eventfd");
    }
    pthread_mutex_lock(&g_server_mu);
    g_cancel = &cancel;
    pthread_mutex_unlock(&g_server_mu);

    cs_source *src = NULL;
    cs_range range;
    cs_ring *ring = NULL;
    cs_server *server = NULL;
    char ring_dir[PATH_MAX];
    snprintf(ring_dir, sizeof ring_dir, "%s/ledgers", cfg.data_dir);
    rc = build_source(&cfg, &cancel, &src, &range, &err);
    if (rc == 0 && (rc = cs_ring_open(&ring, ring_dir, cfg.retention, &err)) != 0 && src)
        src->ops->destroy(src);
    if (rc == 0) {
        /* Before listening: a ring of another run is reset before anyone can be served from it. */
        char identity[PATH_MAX + 128];
        run_identity(&cfg, identity, sizeof identity);
        uint32_t first = strcmp(cfg.source, "pipe") == 0 ? 0 : range.from; /* the pipe's is core's */
        if ((rc = cs_ring_claim(ring, identity, first, &err)) != 0) {
            src->ops->destroy(src);
            cs_ring_close(ring);
            ring = NULL;
        }
    }
    if (rc == 0) {
        cs_server_config sc = {
            .listen = cfg.listen,
            .source_name = cfg.source,
            .source = src,
            .range = range,
            .ring = ring,
            .cancel = &cancel,
            .chunk_size = cfg.chunk_size,
            .compress = cfg.compress,
            .compress_workers = cfg.compress_workers,
            .compress_level = cfg.compress_level,
            .retention = cfg.retention,
            .max_connections = cfg.max_connections,
            .max_connections_per_ip = cfg.max_connections_per_ip,
            .max_replays = cfg.max_replays,
            .max_replays_per_ip = cfg.max_replays_per_ip,
            .auth_tokens = cfg.auth_tokens,
            .auth_healthz = cfg.auth_healthz,
            .tls_cert = cfg.tls_cert,
            .tls_key = cfg.tls_key,
            .tls_client_ca = cfg.tls_client_ca,
        };
        rc = cs_server_new(&server, &sc, &err);
    }
    if (rc == 0) {
        pthread_mutex_lock(&g_server_mu);
        g_server = server;
        pthread_mutex_unlock(&g_server_mu);
        rc = cs_server_listen(server, &err);
    }
    bool ran = false;
    if (rc == 0 && !cs_cancel_is_set(&cancel)) {
        ran = true;
        rc = cs_server_run(server, &err);
    }

    pthread_mutex_lock(&g_server_mu);
    g_server = NULL;
    g_cancel = NULL;
    pthread_mutex_unlock(&g_server_mu);
    cs_server_free(server);
    cs_daemon_config_free(&cfg);
    cs_cancel_destroy(&cancel);
    if (rc != 0) {
        if (ran)
            CS_LOG(CS_LOG_ERROR, "corestreamd stopping on failure", KV_S("error", err.msg));
        return fail(err.msg);
    }
    CS_LOG0(CS_LOG_INFO, "corestreamd stopped");
    return 0;
}
