/* SPDX-License-Identifier: Apache-2.0 */
/* The routes: every complete request head, on either listener, plaintext or TLS, is judged here on
 * cs-heads (the head reader's judge) and answered with httpanswer.h's bytes:
 *
 *   /healthz /readyz /metrics  GET and HEAD (405 with `Allow: GET, HEAD` otherwise); on both
 *                              listeners; 401 first with --auth-tokens --auth-healthz
 *   /stream                    data listener only: with --auth-tokens a token (401), then the
 *                              query (400), the handshake (426, 405, 400), the Origin (403), in
 *                              the prototype's order; a good upgrade gets the 101
 *   /lake/...                  data listener only, with the lake on: GET and HEAD of its
 *                              config texts (here) and objects (a lake reader, lakeserve.c);
 *                              --auth-tokens as for /stream
 *   anything else              404
 *
 * (The head reader has already answered a head past the server's limits: 414, 431, 400.) Before
 * any route, a request that declares a body is refused (the server takes none): 400 `Transfer-Encoding is not accepted` or `invalid Content-Length`, 413
 * `request bodies are not accepted` for a Content-Length above 0. A refusal closes the connection
 * (after the head reader's lingering close); a probe, scrape or 404 answer keeps an HTTP/1.1
 * connection open for its next request unless it asked for `Connection: close`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <openssl/crypto.h>

#include "common/buildinfo.h"
#include "common/log.h"
#include "common/strbuf.h"
#include "common/tokenlist.h"
#include "corestreamd/net/httpanswer.h"
#include "corestreamd/net/httphead.h"
#include "corestreamd/net/listener.h"
#include "corestreamd/stream/readiness.h"
#include "corestreamd/server/server_internal.h"
#include "corestreamd/lake/lakekey.h"
#include "corestreamd/lake/lakeobject.h"
#include "wire/wire.h"
#include "wire/wsaccept.h"

/* One request being judged. */
typedef struct http_req {
    const cs_http_head *head;
    int fd;
    bool admin;     /* accepted on --admin-listen */
    cs_strbuf *out; /* the answer */
    bool refused;   /* the answer is a refusal: the connection closes after it */
    bool close;     /* the connection closes after the answer, whatever it is */
} http_req;

/* The extra header line of an answer the connection closes after. */
static unsigned closing(const http_req *r)
{
    return r->close ? CS_ANS_CLOSE : 0;
}


/* Strangers choose what gets refused, so each refusal is one DEBUG line, never louder. */
static void refuse(http_req *r, unsigned status, const char *logmsg, const char *body, unsigned extra)
{
    if (cs_log_enabled(CS_LOG_DEBUG)) {
        char remote[64];
        cs_format_peer(r->fd, remote, sizeof remote);
        CS_LOG(CS_LOG_DEBUG, logmsg, KV_S("remote", remote), KV_U("status", status), KV_S("error", body));
    }
    cs_http_answer_text(r->out, status, body, extra | CS_ANS_CLOSE);
    r->refused = true;
}

/* ---- probes and metrics --------------------------------------------------------------------- */

static void serve_healthz(cs_server *s, http_req *r, unsigned head)
{
    uint32_t oldest, latest;
    cs_ring_bounds(s->cfg.ring, &oldest, &latest);
    cs_ring_health_t h;
    cs_ring_health(s->cfg.ring, &h);
    char body[512], start[64 + SRV_RUN_MAX] = "";
    int n = 0;
    if (s->cfg.start_mode)
        n = snprintf(start, sizeof start, ",\"start\":\"%s\",\"start_ledger\":%u", s->cfg.start_mode,
                     s->cfg.range.from);
    if (*s->run && n >= 0 && (size_t)n < sizeof start) /* a token is [a-z0-9-]: nothing to escape */
        snprintf(start + n, sizeof start - (size_t)n, ",\"run\":\"%s\"", s->run);
    /* The prototype's five fields first, as its clients parse them; the ring's health, the run's
     * start and its token after. */
    snprintf(body, sizeof body,
             "{\"oldest\":%u,\"latest\":%u,\"subscribers\":%d,\"live_abandons\":%llu,\"raw_fallbacks\":%llu,"
             "\"version\":\"%s\",\"ring_write_failures\":%llu,\"ring_degraded\":%s,\"ring_dropped\":%llu,"
             "\"ring_holes\":%llu,\"ring_io_errors\":%llu%s}\n",
             oldest, latest, atomic_load(&s->subscribers), (unsigned long long)atomic_load(&s->live_abandons),
             (unsigned long long)cs_server_raw_fallbacks(s), cs_build_version(),
             (unsigned long long)h.write_failures, h.degraded ? "true" : "false", (unsigned long long)h.dropped,
             (unsigned long long)h.holes, (unsigned long long)h.io_errors, start);
    cs_http_answer(r->out, 200, "application/json", body, head);
}

/* /readyz's answer (200 or 503) and its body; corestreamd_ready is the same judgement. */
static unsigned readiness(cs_server *s, char *body, size_t len)
{
    cs_ring_health_t h;
    cs_ring_health(s->cfg.ring, &h);
    /* A ring that cannot be written no longer stops the run (the live flow carries on), but this
     * daemon cannot serve a catch-up it has not stored: not ready until a write works again. */
    cs_source_state st = cs_m_state(s->metrics);
    if (h.degraded && st == CS_SRC_STREAMING)
        st = CS_SRC_RING_FAILED;
    return cs_readiness(st, atomic_load(&s->stop_requested), cs_m_get(&s->metrics->latest_emitted),
                        cs_m_get(&s->metrics->waiting_for), body, len);
}

static void serve_readyz(cs_server *s, http_req *r, unsigned head)
{
    char body[256];
    unsigned code = readiness(s, body, sizeof body);
    cs_http_answer(r->out, code, "application/json", body, head);
}

/* The served certificate's notAfter (0 without TLS). */
static int64_t tls_not_after(cs_server *s)
{
    if (!s->tls_on)
        return 0;
    SSL_CTX *ctx = cs_tls_store_get(&s->tls);
    int64_t t = cs_tls_not_after(ctx);
    SSL_CTX_free(ctx);
    return t;
}

static void serve_metrics(cs_server *s, http_req *r, unsigned head)
{
    uint32_t oldest, latest;
    cs_ring_bounds(s->cfg.ring, &oldest, &latest);
    cs_ring_health_t h;
    cs_ring_health(s->cfg.ring, &h);
    cs_metrics_view v = {
        .version = cs_build_version(),
        .commit = cs_build_commit(),
        .compress = s->cfg.compress,
        .compress_auto = s->cfg.compress_level == 0,
        .compress_level = (int)s->cfg.compress_level,
        .compress_level_now = cs_pipeline_level(s->pipeline),
        .compress_workers = s->workers,
        .ring_oldest = oldest,
        .ring_latest = latest,
        .ring_bytes = cs_ring_bytes(s->cfg.ring),
        .ring_frames_bytes = cs_ring_frames_bytes(s->cfg.ring),
        .ring_write_failures = h.write_failures,
        .ring_degraded = h.degraded,
        .ring_dropped = h.dropped,
        .ring_holes = h.holes,
        .ring_io_errors = h.io_errors,
        .retention = s->cfg.retention,
        .subscribers = atomic_load(&s->subscribers),
        .connections = atomic_load(&s->connections),
        .max_connections = s->max_conns,
        .refused_total = atomic_load(&s->refused_total),
        .refused_per_ip = atomic_load(&s->refused_per_ip),
        .accept_pauses = atomic_load(&s->accept_pauses),
        .live_abandons = atomic_load(&s->live_abandons),
        .raw_fallbacks = cs_server_raw_fallbacks(s),
        .replays_running = cs_replay_slots_running(s->replay_slots),
        .replays_waiting = cs_replay_slots_waiting(s->replay_slots),
        .tls_not_after = tls_not_after(s),
    };
    char body[256];
    v.ready = readiness(s, body, sizeof body) == 200;
    cs_metrics_jetstream js;
    if (s->jetstream_stats) {
        memset(&js, 0, sizeof js);
        s->jetstream_stats(s->jetstream_arg, &js);
        v.jetstream = &js;
    }
    cs_metrics_edge edge;
    if (s->edge_stats) {
        memset(&edge, 0, sizeof edge);
        s->edge_stats(s->edge_arg, &edge);
        v.edge = &edge;
    }
    cs_metrics_lake lake;
    if (s->lake) {
        srv_lake_count(s->lake, &lake);
        v.lake = &lake;
    }
    cs_metrics_lake_export export_stats;
    if (s->lake_export_stats) {
        memset(&export_stats, 0, sizeof export_stats);
        s->lake_export_stats(s->lake_export_arg, &export_stats);
        v.lake_export = &export_stats;
    }
    cs_strbuf b = CS_STRBUF_INIT;
    cs_metrics_render(&b, s->metrics, &v);
    char *text = cs_strbuf_take(&b, NULL);
    if (!text) {
        r->refused = true; /* out of memory: no answer, the connection closes */
        return;
    }
    cs_http_answer(r->out, 200, "text/plain; version=0.0.4; charset=utf-8", text, head);
    free(text);
}

/* ---- tokens --------------------------------------------------------------------------------- */

/* Whether the request's `Authorization: Bearer` token is in the table (its digest and, with
 * name_out, its name copied out); *given says whether a bearer token was there at all. Compared
 * in constant time; the header's copy is wiped and the token itself is never logged. */
static bool request_token(cs_server *s, http_req *r, uint8_t digest[CS_TOKEN_DIGEST_LEN], bool *given,
                          char name_out[CS_TOKEN_NAME_MAX + 1])
{
    char *auth = cs_http_head_get(r->head, "authorization");
    const char *tok, *name = NULL;
    size_t len;
    *given = auth && cs_bearer_token(auth, &tok, &len);
    if (*given) {
        pthread_rwlock_rdlock(&s->tokens_rw); /* a reload may swap the table meanwhile */
        name = cs_tokens_match(s->tokens, tok, len, digest);
        if (name && name_out)
            snprintf(name_out, CS_TOKEN_NAME_MAX + 1, "%s", name);
        pthread_rwlock_unlock(&s->tokens_rw);
    }
    if (auth)
        OPENSSL_cleanse(auth, strlen(auth));
    free(auth);
    return name != NULL;
}

/* With --auth-tokens: true when the request names a token; otherwise the 401 is the answer. */
static bool authenticate(cs_server *s, http_req *r)
{
    uint8_t digest[CS_TOKEN_DIGEST_LEN];
    bool given;
    if (request_token(s, r, digest, &given, NULL))
        return true;
    refuse(r, 401, "request refused", given ? "unknown bearer token" : "a bearer token is required",
           CS_ANS_BEARER);
    return false;
}

/* ---- /stream -------------------------------------------------------------------------------- */

/* The decoded query pairs: all of them (the parser refuses a head with more than
 * CS_HTTP_PAIRS_MAX, so none is silently dropped and `start`/`end` after junk pairs are read). */
static void read_query(const cs_http_head *h, const char *args[CS_HTTP_PAIRS_MAX], size_t *n)
{
    *n = 0;
    for (const char *pair; *n < CS_HTTP_PAIRS_MAX && (pair = cs_http_head_pair(h, *n)) != NULL;)
        args[(*n)++] = pair;
}

/* The handshake rules on this request's headers; 0 when it may upgrade. */
static int upgrade_verdict(http_req *r, cs_upgrade_refusal *out)
{
    enum { MAX_KEYS = 4 };
    const char *keys[MAX_KEYS];
    size_t nkeys = 0;
    for (size_t i = 0; i < 64; i++) { /* every key is counted; only the first few are read */
        const char *k = cs_http_head_nth(r->head, "sec-websocket-key", i);
        if (!k)
            break;
        if (nkeys < MAX_KEYS)
            keys[nkeys] = k;
        nkeys++;
    }
    char *conn = cs_http_head_get(r->head, "connection"), *upgrade = cs_http_head_get(r->head, "upgrade");
    char *wsv = cs_http_head_get(r->head, "sec-websocket-version");
    int rc;
    if (!conn || !upgrade || !wsv) {
        memset(out, 0, sizeof *out);
        out->status = 400;
        snprintf(out->body, sizeof out->body, "out of memory");
        rc = -1;
    } else {
        cs_upgrade_request u = {.method = r->head->method,
                                .version = r->head->version,
                                .connection = conn,
                                .upgrade = upgrade,
                                .ws_version = wsv,
                                .keys = keys,
                                .nkeys = nkeys};
        rc = cs_upgrade_check(&u, out);
    }
    free(conn);
    free(upgrade);
    free(wsv);
    return rc;
}

/* Origin must match Host, as the prototype's WebSocket library insists (403 otherwise). */
static int check_origin(http_req *r, char *msg, size_t mlen)
{
    if (!cs_http_head_nth(r->head, "origin", 0))
        return 0;
    char *origin = cs_http_head_get(r->head, "origin"), *host = cs_http_head_get(r->head, "host");
    int rc = -1;
    if (!origin || !host || !*origin)
        snprintf(msg, mlen, "request Origin could not be read"); /* must not pass as none */
    else
        rc = cs_check_origin(origin, host, msg, mlen);
    free(origin);
    free(host);
    return rc;
}

/* /stream before an upgrade, in the prototype's order. 0 when it may upgrade (req filled);
 * otherwise the refusal is the answer. */
static int check_stream(cs_server *s, http_req *r, cs_stream_request *req)
{
    if (s->auth_on && !authenticate(s, r))
        return -1;
    const char *args[CS_HTTP_PAIRS_MAX];
    size_t n;
    read_query(r->head, args, &n);
    cs_stream_error *err = malloc(sizeof *err);
    cs_upgrade_refusal *no = malloc(sizeof *no);
    int rc = -1;
    if (!err || !no)
        refuse(r, 400, "request refused", "out of memory", 0);
    else if (cs_stream_request_parse(args, n, req, err) != 0)
        refuse(r, 400, "request refused", err->body, 0);
    else if (upgrade_verdict(r, no) != 0)
        refuse(r, no->status, "websocket handshake failed", no->body,
               (no->offer_upgrade ? CS_ANS_UPGRADE : 0) | (no->offer_version ? CS_ANS_WS_VERSION : 0));
    else if (check_origin(r, no->body, sizeof no->body) != 0)
        refuse(r, 403, "websocket handshake failed", no->body, 0);
    else
        rc = 0;
    free(err);
    free(no);
    return rc;
}

/* A /stream request that passed every check: the 101, and what its subscriber will need. */
static int accept_upgrade(cs_server *s, http_req *r, conn_tag *tag, const cs_stream_request *req, void **arg)
{
    upgrade_info *u = calloc(1, sizeof *u);
    const char *key = cs_http_head_nth(r->head, "sec-websocket-key", 0);
    bool given;
    if (!u || !key || (s->auth_on && !request_token(s, r, u->token_digest, &given, u->token_name))) {
        free(u); /* out of memory, or the token was revoked since check_stream: close */
        r->refused = true;
        return CS_HEAD_ANSWER;
    }
    char accept[CS_WS_ACCEPT_LEN + 1];
    cs_ws_accept(key, strlen(key), accept);
    /* The run token and the chunk bound after the handshake's own headers: additions clients may
     * ignore. No CHUNK this server sends decodes past the bound: live ones are cut at
     * --chunk-size, replayed ones at their recorded chunk size. */
    uint32_t ring_chunk = cs_ring_max_chunk_size(s->cfg.ring);
    char bound[24];
    snprintf(bound, sizeof bound, "%zu", ring_chunk > s->chunk_size ? (size_t)ring_chunk : s->chunk_size);
    cs_http_header extra[2] = {{"x-corestream-run", s->run}, {"x-corestream-chunk-size", bound}};
    cs_http_answer_101(r->out, accept, *s->run ? extra : extra + 1, *s->run ? 2 : 1);
    u->tag = tag;
    u->req = *req;
    *arg = u;
    return CS_HEAD_UPGRADE;
}

/* ---- /lake/ -------------------------------------------------------------------------------- */

/* The SEP-54 lake (PROTOCOL.md section 6): its two texts answered here, an object or its
 * signatures (<key>.sig) admitted and handed to a lake reader (CS_HEAD_LATER), which answers it;
 * anything else under /lake/ is 404.
 * Returns the verdict; *arg is the job for a reader. */
static int route_lake(cs_server *s, http_req *r, void **arg)
{
    if (s->auth_on && !authenticate(s, r))
        return CS_HEAD_ANSWER;
    const char *m = r->head->method, *path = r->head->path;
    bool head = strcmp(m, "HEAD") == 0, keep = !r->close;
    if (!head && strcmp(m, "GET") != 0) {
        cs_http_answer(r->out, 405, "text/plain; charset=utf-8", "Method Not Allowed\n", CS_ANS_ALLOW | closing(r));
        return keep ? CS_HEAD_KEEP : CS_HEAD_ANSWER;
    }
    unsigned extra = (head ? CS_ANS_NO_BODY : 0) | closing(r);
    const char *config, *manifest;
    int64_t modified;
    srv_lake_texts(s->lake, &config, &manifest, &modified);
    const char *text = strcmp(path, CS_LAKE_CONFIG_PATH) == 0     ? config
                       : strcmp(path, CS_LAKE_MANIFEST_PATH) == 0 ? manifest
                                                                  : NULL;
    cs_lake_batch b;
    cs_err err = {0};
    size_t plen = strlen(path), slen = strlen(CS_LAKE_SIG_SUFFIX);
    bool sig = plen > slen && strcmp(path + plen - slen, CS_LAKE_SIG_SUFFIX) == 0;
    if (sig)
        plen -= slen;
    if (text) {
        cs_http_meta meta = {.last_modified = modified, .cache = "no-cache"};
        cs_http_answer_bytes(r->out, 200, "application/json", text, strlen(text), &meta, extra);
    } else if (cs_lake_key_parse(srv_lake_layout(s->lake), path, plen, &b, NULL) != 0) {
        cs_http_answer(r->out, 404, "text/plain; charset=utf-8", "404 page not found\n", extra);
    } else if (cs_lake_batch_available(s->cfg.ring, b, &err) != 0) {
        srv_lake_not_found(s->lake);
        cs_http_answer_text(r->out, 404, err.msg, extra);
    } else if (!srv_lake_admit(s->lake)) {
        srv_lake_unavailable(r->out, "lake: every reader is busy and the queue is full", extra);
    } else if ((*arg = srv_lake_job_new(s->lake, b, sig, head, keep)) != NULL) {
        return CS_HEAD_LATER;
    } else {
        r->refused = true; /* out of memory: no answer, the connection closes */
    }
    return r->refused || !keep ? CS_HEAD_ANSWER : CS_HEAD_KEEP;
}

/* ---- before any route ----------------------------------------------------------------------- */

/* The server takes no request body: a request that declares one is refused before it is routed,
 * so that its body is never read as the next request. 0 when it declares none. */
static int refuse_body(http_req *r)
{
    switch (cs_http_head_body(r->head)) {
    case CS_HTTP_BODY_NONE:
        return 0;
    case CS_HTTP_BODY_TRANSFER:
        refuse(r, 400, "request refused", "Transfer-Encoding is not accepted", 0);
        return -1;
    case CS_HTTP_BODY_LENGTH:
        refuse(r, 413, "request refused", "request bodies are not accepted", 0);
        return -1;
    case CS_HTTP_BODY_INVALID:
    default:
        refuse(r, 400, "request refused", "invalid Content-Length", 0);
        return -1;
    }
}

typedef void (*probe_fn)(cs_server *s, http_req *r, unsigned head);

static probe_fn probe_route(const char *path)
{
    if (strcmp(path, "/healthz") == 0)
        return serve_healthz;
    if (strcmp(path, "/readyz") == 0)
        return serve_readyz;
    if (strcmp(path, "/metrics") == 0)
        return serve_metrics;
    return NULL;
}

/* GET, and HEAD as RFC 9110 requires of a server that serves GET (the same status and headers, no
 * body); any other method gets 405 with `Allow: GET, HEAD`. */
static void serve_probe(cs_server *s, http_req *r, probe_fn fn)
{
    if (s->auth_on && s->cfg.auth_healthz && !authenticate(s, r))
        return;
    const char *m = r->head->method;
    if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0)
        fn(s, r, (strcmp(m, "HEAD") == 0 ? CS_ANS_NO_BODY : 0) | closing(r));
    else
        cs_http_answer(r->out, 405, "text/plain; charset=utf-8", "Method Not Allowed\n", CS_ANS_ALLOW | closing(r));
}

/* The routes on a parsed head; CS_HEAD_* verdict, *arg for an upgrade. */
static int route(cs_server *s, http_req *r, conn_tag *tag, void **arg)
{
    if (refuse_body(r) != 0)
        return CS_HEAD_ANSWER;
    char *up = cs_http_head_get(r->head, "upgrade");
    bool upgrade = up && cs_list_has_token(up, strlen(up), "websocket"); /* by its Upgrade header alone */
    free(up);
    bool stream = strcmp(r->head->path, CS_WIRE_STREAM_PATH) == 0 && !r->admin;
    probe_fn fn = upgrade ? NULL : probe_route(r->head->path); /* an upgrade anywhere else: 404 */
    if (!fn && !stream && !upgrade && !r->admin && s->lake && strncmp(r->head->path, "/lake/", 6) == 0)
        return route_lake(s, r, arg);
    if (fn) {
        serve_probe(s, r, fn);
    } else if (stream) {
        cs_stream_request req;
        if (check_stream(s, r, &req) != 0)
            return CS_HEAD_ANSWER;
        if (upgrade)
            return accept_upgrade(s, r, tag, &req, arg);
        /* every check passed but this is no upgrade: the prototype's library words it this way */
        refuse(r, 426, "websocket handshake failed",
               "WebSocket protocol violation: Upgrade header \"\" does not contain websocket", CS_ANS_UPGRADE);
    } else {
        cs_http_answer(r->out, 404, "text/plain; charset=utf-8", "404 page not found\n", closing(r));
    }
    return r->refused || r->close ? CS_HEAD_ANSWER : CS_HEAD_KEEP;
}

int srv_judge_head(void *ctx, int fd, void *tagp, const cs_http_head *head, bool last, char **resp, size_t *resp_len,
                   void **arg)
{
    cs_server *s = ctx;
    conn_tag *tag = tagp;
    cs_strbuf out = CS_STRBUF_INIT;
    http_req r = {.head = head, .fd = fd, .admin = tag->admin, .out = &out,
                  .close = last || !cs_http_head_keep_alive(head)};
    *arg = NULL;
    int verdict = route(s, &r, tag, arg);
    if (verdict == CS_HEAD_LATER) {
        cs_strbuf_free(&out);
        *resp = NULL;
        return verdict;
    }
    *resp = cs_strbuf_take(&out, resp_len);
    return verdict;
}
