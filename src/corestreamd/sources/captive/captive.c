/* SPDX-License-Identifier: Apache-2.0 */
/* `--source captive` (captive.h): construction, and the stream of core's meta pipe with the SDK's
 * checks on it. The start sequence is in start.c, process supervision in supervise.c, core's log
 * relay in corelog.c, the working dir in workdir.c. */
#include "corestreamd/sources/captive/captive_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/goquote.h"
#include "common/log.h"
#include "corestreamd/sources/captive/archive.h"
#include "corestreamd/sources/pipe/xdrwalk.h"

/* ---- streaming ------------------------------------------------------------------------------ */

/* Ends the stream with an error (stored, so later calls repeat it) and stops core. */
static int fail(captive_source *cs, cs_err *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(captive_source *cs, cs_err *err, const char *fmt, ...)
{
    char msg[CS_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cs->failed = true;
    cs_err_set(&cs->failure, 0, "captive: %s", msg);
    captive_stop_core(cs);
    if (err)
        *err = cs->failure;
    return -1;
}

/* The meta pipe ended (EOF, a short frame) or failed (reader_err). The SDK's order: a core that
 * exited with an error is the cause; then the reader's error; then a clean exit that still left
 * ledgers wanted; then a pipe closed under a live core. */
static int stream_broken(captive_source *cs, const cs_err *reader_err, const char *what, bool expect_exit, cs_err *err)
{
    if (cs_cancel_is_set(cs->cancel) || (reader_err && reader_err->kind == CS_ERR_CANCELLED))
        return captive_cancelled(err);
    /* EOF comes with core's exit; give the exit the grace to become visible. */
    int64_t deadline = expect_exit ? cs_mono_ns() + cs->grace : cs_mono_ns();
    int w = cs_child_wait(&cs->run.c, deadline, cs->cancel, -1);
    if (w < 0 || cs_cancel_is_set(cs->cancel))
        return captive_cancelled(err); /* e.g. a terminal's Ctrl-C reached core before our cancel */
    if (w == 1 && !cs_child_exited_ok(&cs->run.c)) {
        char why[128];
        cs_child_status_string(&cs->run.c, why, sizeof why);
        return fail(cs, err, "stellar-core exited unexpectedly: %s", why);
    }
    if (reader_err)
        return fail(cs, err, "%s%s%s", what ? what : "", what ? ": " : "", reader_err->msg);
    if (w == 1)
        return fail(cs, err, "stellar-core exited unexpectedly");
    return fail(cs, err, "meta pipe closed unexpectedly");
}

static void hex32(const uint8_t *h, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = d[h[i] >> 4];
        out[2 * i + 1] = d[h[i] & 15];
    }
    out[64] = 0;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int captive_next(cs_source *s, cs_emission *em, cs_err *err)
{
    captive_source *cs = (captive_source *)s;
    em->seq = cs->expect;
    em->declared_size = 0;
    if (cs->failed) {
        *err = cs->failure;
        return -1;
    }
    if (cs_cancel_is_set(cs->cancel))
        return captive_cancelled(err);
    cs_err e;
    if (!cs->started) {
        cs->started = true;
        if (captive_start_core(cs, &e) != 0) {
            if (e.kind == CS_ERR_CANCELLED)
                return captive_cancelled(err);
            cs->failed = true;
            cs_err_set(&cs->failure, 0, "captive: %s", e.msg);
            *err = cs->failure;
            return -1;
        }
    }
    for (;;) {
        uint32_t len;
        int r = cs_frame_reader_next(cs->fr, &len, &e);
        if (r == 0)
            return stream_broken(cs, NULL, NULL, true, err);
        if (r < 0)
            return stream_broken(cs, &e, e.kind == CS_FRAME_ERR_SHORT ? "error reading frame" : "error reading frame length",
                                 e.kind == CS_FRAME_ERR_SHORT, err);
        const uint8_t *prefix;
        size_t n;
        if (cs_frame_reader_prefix(cs->fr, &prefix, &n, &e) != 0)
            return stream_broken(cs, &e, "reading LedgerCloseMeta frame body", e.kind == CS_FRAME_ERR_SHORT, err);
        uint32_t seq;
        if (cs_xdr_ledger_seq(prefix, n, &seq, &e) != 0)
            return fail(cs, err, "read ledger seq: %s", e.msg);
        /* The walk reached ledgerSeq, so the prefix holds LedgerHeaderHistoryEntry.hash at H and
         * previousLedgerHash at H+36 (CAPTIVE.md 3.3). */
        size_t h = be32(prefix) == 0 ? 4 : be32(prefix + 4) == 1 ? 20 : 8;
        const uint8_t *hash = prefix + h, *prev = prefix + h + 36;

        if (cs->next_ledger != 0 && seq != cs->next_ledger)
            return fail(cs, err, "unexpected ledger sequence (expected=%u actual=%u)", cs->next_ledger, seq);
        if (cs->next_ledger == 0 && seq > cs->from)
            return fail(cs, err, "unexpected ledger sequence (expected=<=%u actual=%u)", cs->from, seq);
        if (cs->have_prev && memcmp(prev, cs->prev_hash, 32) != 0) {
            char want[65], got[65];
            hex32(cs->prev_hash, want);
            hex32(prev, got);
            return fail(cs, err, "unexpected previous ledger hash for ledger %u (expected=%s actual=%s)", seq, want, got);
        }
        cs->next_ledger = seq + 1;
        memcpy(cs->prev_hash, hash, 32);
        cs->have_prev = true;
        if (seq < cs->emit_from)
            continue; /* before the range: checked, its body dropped by the next marker read */
        em->seq = seq;
        em->declared_size = len;
        cs->expect = seq + 1;
        return 1;
    }
}

static ssize_t captive_read(cs_source *s, uint8_t *buf, size_t len, cs_err *err)
{
    captive_source *cs = (captive_source *)s;
    if (cs->failed) {
        *err = cs->failure;
        return -1;
    }
    if (!cs->fr)
        return 0;
    cs_err e;
    ssize_t k = cs_frame_reader_read(cs->fr, buf, len, &e);
    if (k >= 0)
        return k;
    if (e.kind == CS_ERR_CANCELLED || cs_cancel_is_set(cs->cancel))
        return captive_cancelled(err);
    if (e.kind == CS_FRAME_ERR_SHORT)
        return stream_broken(cs, &e, NULL, true, err);
    return stream_broken(cs, &e, "read frame body", false, err);
}

static void captive_destroy(cs_source *s)
{
    captive_source *cs = (captive_source *)s;
    if (!cs)
        return;
    captive_stop_core(cs);
    cs_frame_reader_free(cs->fr);
    if (cs->meta_rfd >= 0)
        close(cs->meta_rfd);
    cs_coretoml_free(cs->toml);
    for (size_t i = 0; i < cs->nurls; i++)
        free(cs->urls[i]);
    free(cs->urls);
    free(cs->bin);
    free(cs->config_path);
    free(cs->storage);
    free(cs->workdir);
    free(cs->conf);
    free(cs->passphrase);
    free(cs->user_agent);
    free(cs);
}

static const cs_source_ops captive_ops = {
    .next = captive_next,
    .read = captive_read,
    .destroy = captive_destroy,
};

const char *cs_captive_source_workdir(const cs_source *s)
{
    return ((const captive_source *)s)->workdir;
}

int cs_captive_source_core_pid(const cs_source *s)
{
    const captive_source *cs = (const captive_source *)s;
    return cs->run.c.pid > 0 && !cs->run.c.reaped ? (int)cs->run.c.pid : -1;
}

/* ---- construction --------------------------------------------------------------------------- */

/* exec.LookPath("stellar-core"). */
static char *look_path(const char *name, cs_err *err)
{
    const char *path = getenv("PATH");
    char q[256];
    cs_go_quote(q, sizeof q, name);
    if (path && *path) {
        const char *s = path;
        for (;;) {
            const char *colon = strchr(s, ':');
            size_t n = colon ? (size_t)(colon - s) : strlen(s);
            char *cand = NULL;
            if (asprintf(&cand, "%.*s/%s", (int)(n ? n : 1), n ? s : ".", name) < 0) {
                cs_err_set(err, 0, "out of memory");
                return NULL;
            }
            struct stat st;
            if (stat(cand, &st) == 0 && !S_ISDIR(st.st_mode) && (st.st_mode & 0111) && access(cand, X_OK) == 0) {
                if (cand[0] != '/') {
                    free(cand);
                    cs_err_set(err, 0, "exec: %s: cannot run executable found relative to current directory", q);
                    return NULL;
                }
                return cand;
            }
            free(cand);
            if (!colon)
                break;
            s = colon + 1;
        }
    }
    cs_err_set(err, 0, "exec: %s: executable file not found in $PATH", q);
    return NULL;
}

static int read_file(const char *path, char **data, size_t *len, cs_err *err)
{
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cs_err_set(err, 0, "open %s: %s", path, GOERR(errno));
    size_t cap = 8192, n = 0;
    char *buf = malloc(cap + 1);
    int rc = buf ? 0 : cs_err_set(err, 0, "out of memory");
    while (rc == 0) {
        if (n == cap) {
            if (cap > (64u << 20)) {
                rc = cs_err_set(err, 0, "read %s: file too large", path);
                break;
            }
            char *p = realloc(buf, cap * 2 + 1);
            if (!p) {
                rc = cs_err_set(err, 0, "out of memory");
                break;
            }
            buf = p;
            cap *= 2;
        }
        ssize_t k = read(fd, buf + n, cap - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            rc = cs_err_set(err, 0, "read %s: %s", path, GOERR(errno));
        else if (k == 0)
            break;
        else
            n += (size_t)k;
    }
    close(fd);
    if (rc != 0) {
        free(buf);
        return -1;
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    return 0;
}

/* The binary to run: --core-binary (a relative path with a '/' is taken from our cwd, as core
 * runs in the working dir; a bare name is looked up on PATH when it runs, as exec.Command does),
 * else stellar-core on PATH. */
static int resolve_binary(captive_source *cs, const cs_captive_config *cfg, cs_err *err)
{
    cs_err e;
    if (cfg->core_binary && *cfg->core_binary) {
        bool rel = cfg->core_binary[0] != '/' && strchr(cfg->core_binary, '/');
        if (!(cs->bin = rel ? captive_abs_path(cfg->core_binary) : strdup(cfg->core_binary)))
            return cs_err_set(err, 0, "captive: out of memory");
    } else if (!(cs->bin = look_path("stellar-core", &e))) {
        return cs_err_set(err, 0, "captive: no --core-binary given and stellar-core is not on PATH: %s", e.msg);
    }
    return 0;
}

/* mkdir -p the storage dir, made absolute, and the paths of the working dir and its conf. */
static int prepare_storage(captive_source *cs, const char *storage_dir, cs_err *err)
{
    cs_err e;
    char qs[PATH_MAX + 64];
    cs_go_quote(qs, sizeof qs, storage_dir);
    if (captive_mkdir_all(storage_dir, &e) != 0)
        return cs_err_set(err, 0, "captive: create storage path %s: %s", qs, e.msg);
    if (!(cs->storage = captive_abs_path(storage_dir)))
        return cs_err_set(err, 0, "captive: resolve storage path %s: %s", qs, strerror(errno ? errno : ENOMEM));
    if (asprintf(&cs->workdir, "%s%scaptive-core", cs->storage,
                 cs->storage[strlen(cs->storage) - 1] == '/' ? "" : "/") < 0 ||
        asprintf(&cs->conf, "%s/stellar-core.conf", cs->workdir) < 0)
        return cs_err_set(err, 0, "captive: out of memory");
    return 0;
}

/* The archive URLs, the user agent and the config path, copied. */
static int copy_strings(captive_source *cs, const cs_captive_config *cfg, cs_err *err)
{
    cs->urls = calloc(cfg->nurls, sizeof *cs->urls);
    cs->nurls = cs->urls ? cfg->nurls : 0;
    for (size_t i = 0; i < cs->nurls; i++)
        if (!(cs->urls[i] = strdup(cfg->urls[i])))
            return cs_err_set(err, 0, "captive: out of memory");
    if (!cs->urls || !(cs->user_agent = strdup(cfg->user_agent ? cfg->user_agent : CS_ARCHIVE_USER_AGENT)) ||
        !(cs->config_path = strdup(cfg->core_config)))
        return cs_err_set(err, 0, "captive: out of memory");
    return 0;
}

/* The toml defaults that depend on the binary: its build version and protocol. A binary that
 * cannot answer only loses those defaults here; the first pull refuses it. */
static void probe_core(captive_source *cs, const cs_captive_config *cfg)
{
    if (cs->toml && cs_coretoml_history_configured(cs->toml))
        CS_LOG(CS_LOG_WARN, "Configuring captive core with history archive from the config file",
               KV_S("config", cfg->core_config), SUBSERVICE);
    cs->params = (cs_coretoml_params){
        .network_passphrase = cs->passphrase,
        .urls = (const char *const *)cs->urls,
        .nurls = cs->nurls,
    };
    char *ver;
    cs_err e;
    if (captive_core_version(cs, &ver, &e) == 0) {
        char line[256];
        captive_first_line(ver, line, sizeof line);
        cs_coretoml_build_version(line, &cs->params.core_major, &cs->params.core_minor);
        if (cs_coretoml_protocol_version(ver, &cs->params.core_protocol, &e) != 0)
            CS_LOG(CS_LOG_WARN, "Error getting core protocol version", KV_S("error", e.msg), SUBSERVICE);
        free(ver);
    } else if (e.kind != CS_ERR_CANCELLED) {
        CS_LOG(CS_LOG_WARN, "Error getting core protocol version", KV_S("binary", cs->bin), KV_S("error", e.msg),
               SUBSERVICE);
    }
    if (cs->params.core_protocol < CS_CAPTIVE_MIN_PROTOCOL)
        CS_LOG(CS_LOG_WARN, "Core supported protocol version too low; unified events flag has no effect",
               KV_U("protocol", cs->params.core_protocol), KV_I("want", CS_CAPTIVE_MIN_PROTOCOL), SUBSERVICE);
}

/* The config's passphrase (or --network-passphrase), the binary, the storage, the parsed config
 * and the copied strings, in the prototype's order of checks. data is the config file's text. */
static int captive_prepare(captive_source *cs, const cs_captive_config *cfg, const char *data, size_t len,
                           const char *qpath, cs_err *err)
{
    cs_err e;
    if (cfg->network_passphrase && *cfg->network_passphrase) {
        if (!(cs->passphrase = strdup(cfg->network_passphrase)))
            return cs_err_set(err, 0, "captive: out of memory");
    } else if (cs_coretoml_peek_passphrase(data, len, &cs->passphrase, &e) != 0) {
        return cs_err_set(err, 0, "captive: config %s: %s", qpath, e.msg);
    }
    if (resolve_binary(cs, cfg, err) != 0 || prepare_storage(cs, cfg->storage_dir, err) != 0)
        return -1;
    if (cs_coretoml_parse(&cs->toml, data, len, cs->passphrase, &e) != 0)
        return cs_err_set(err, 0, "captive: invalid config %s: %s", qpath, e.msg);
    return copy_strings(cs, cfg, err);
}

int cs_captive_source_new(cs_source **out, const cs_captive_config *cfg, cs_cancel *cancel, cs_err *err)
{
    *out = NULL;
    if (!cfg->core_config || !*cfg->core_config)
        return cs_err_set(err, 0, "captive: config path is required");
    if (!cfg->storage_dir || !*cfg->storage_dir)
        return cs_err_set(err, 0, "captive: storage path is required");
    if (cfg->nurls == 0)
        return cs_err_set(err, 0, "captive: at least one history archive URL is required");
    if (cfg->start == 0)
        return cs_err_set(err, 0, "captive: a start ledger is required");

    char qpath[PATH_MAX + 64];
    cs_go_quote(qpath, sizeof qpath, cfg->core_config);
    char *data;
    size_t len;
    cs_err e;
    if (read_file(cfg->core_config, &data, &len, &e) != 0)
        return cs_err_set(err, 0, "captive: read config %s: %s", qpath, e.msg);

    captive_source *cs = calloc(1, sizeof *cs);
    if (!cs) {
        free(data);
        return cs_err_set(err, 0, "captive: out of memory");
    }
    cs->base.ops = &captive_ops;
    cs->cancel = cancel;
    cs->meta_rfd = -1;
    cs->from = cfg->start;
    cs->emit_from = cfg->emit_from && cfg->emit_from < cfg->start ? cfg->emit_from : cfg->start;
    cs->expect = cs->emit_from;
    cs->grace = cfg->stop_grace_ns > 0 ? cfg->stop_grace_ns : CS_CAPTIVE_STOP_GRACE_NS;
    captive_proc_init(&cs->run);
    int rc = captive_prepare(cs, cfg, data, len, qpath, err);
    free(data);
    if (rc != 0) {
        captive_destroy(&cs->base);
        return -1;
    }
    probe_core(cs, cfg);
    *out = &cs->base;
    return 0;
}
