#include "corestreamd/server/server.h"

#include <libwebsockets.h>
#include <openssl/crypto.h>
#include <netinet/in.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/buildinfo.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/thread.h"
#include "corestreamd/server/admission.h"
#include "corestreamd/server/broadcast.h"
#include "corestreamd/server/compress.h"
#include "corestreamd/server/cursor.h"
#include "corestreamd/server/headreader.h"
#include "corestreamd/server/httphead.h"
#include "corestreamd/server/listener.h"
#include "corestreamd/server/metrics.h"
#include "corestreamd/server/readiness.h"
#include "corestreamd/server/framesfill.h"
#include "corestreamd/server/replay.h"
#include "corestreamd/server/replayslots.h"
#include "corestreamd/server/request.h"
#include "corestreamd/server/sourceloop.h"
#include "corestreamd/server/tls.h"
#include "corestreamd/server/wsio.h"
#include "corestreamd/server/wsserver.h"
#include "corestreamd/server/tokens.h"
#include "wire/wire.h"

_Static_assert(LWS_PRE == CS_MSG_HEADROOM, "message headroom must match libwebsockets' LWS_PRE");

#define WRITE_TIMEOUT_SECS 10 /* bound on one message write to a subscriber */
#define DRAIN_TIMEOUT_US (5 * LWS_US_PER_SEC) /* close frames after the source ends */
#define SHUTDOWN_TIMEOUT_US (2 * LWS_US_PER_SEC) /* close frames on SIGINT/SIGTERM */
#define WRITE_CHECK_US LWS_US_PER_SEC /* how often stalled writes are looked for */
#define ACCEPT_PAUSE_US (100 * LWS_US_PER_MS) /* accept rests this long when out of descriptors */
#define REFUSAL_WARN_NS (10 * CS_SEC) /* at most one WARN line per this about refusals */
#define MAX_QUERY_ARGS 32 /* more pairs: 400 `too many query parameters` */
#define URI_MAX 4096      /* request path and query bytes; longer: 414 */
/* A plaintext request's head is read by the head reader (headreader.h) first, within these
 * limits: 414 past URI_MAX, 431 past HEAD_MAX bytes or HEAD_FIELDS_MAX header lines, 400 `too
 * many query parameters` past HEAD_PAIRS_MAX. Beside the bytes, lws 4.1 holds at most about 95
 * pieces of a request (each header line, each query pair, the path, the version) and hangs up
 * past that (measured), so lines and pairs together stay below it. Pairs past MAX_QUERY_ARGS but
 * within HEAD_PAIRS_MAX get the same 400 from check_stream. */
#define HEAD_MAX 16384
#define HEAD_FIELDS_MAX 48
#define HEAD_PAIRS_MAX 36
/* lws' per-connection header store, above HEAD_MAX so that lws never meets a head it cannot hold:
 * lws 4.1 hangs up on a request past its store without an answer. (TLS requests and plaintext
 * /stream upgrades never reach lws: the head reader judges them through judge_head.) */
#define HEADER_STORE_BYTES (2 * HEAD_MAX)
#define HEADER_STORES 256 /* connections parsing headers at once; others wait their turn */
/* The admin listener's own caps: scrapers and probes, never subscribers. */
#define ADMIN_MAX_CONNECTIONS 64
#define ADMIN_MAX_CONNECTIONS_PER_IP 16

typedef struct subscriber subscriber;

/* How a subscriber's connection is written and closed: libwebsockets' (a plaintext upgrade lws
 * got after an earlier request on a kept-alive connection, on the lws thread) or the stream I/O
 * threads' (wsio.h: ws:// and wss://). Everything else about a subscriber is shared. */
typedef struct sub_ops {
    int writes_per_turn; /* messages one writable callback may hand over */
    void (*want_write)(subscriber *sub);
    int (*write)(subscriber *sub, cs_msg *m); /* 1 whole, 0 pending (writable again later), -1 failed */
    bool (*more)(subscriber *sub);            /* another write now would not wait */
    void (*close)(subscriber *sub, int code, const char *reason); /* a close frame, then the end */
    void (*shut)(subscriber *sub);            /* a stalled peer: end it now */
} sub_ops;

struct subscriber {
    const sub_ops *ops;
    struct lws *wsi;       /* lws */
    cs_wsconn *tc;        /* stream I/O threads */
    subscriber **list;     /* the owning thread's list; NULL in transit between I/O threads */
    atomic_bool granted;   /* I/O threads: a replay slot was handed over on another thread */
    int thread;            /* I/O threads: the thread's index (a caught-up catch-up moves once) */
    struct conn_tag *tag;  /* I/O threads: admission's count, released when the connection ends */
    cs_server *srv;
    cs_cursor cursor;
    cs_stream_request req;
    char remote[64];
    bool waiting; /* asked for nothing: woken by the broadcaster or a replay (not when queued for
                     a replay slot: its grant wakes it) */
    int64_t write_started; /* monotonic ns since a message has been waiting to go out; 0: none */
    bool closing; /* a close frame (or drop) was decided */
    bool revoked; /* its token was withdrawn by a reload: close 1008 at the next write */
    char token_name[CS_TOKEN_NAME_MAX + 1]; /* "" without --auth-tokens */
    uint8_t token_digest[CS_TOKEN_DIGEST_LEN];
    struct subscriber *prev, *next;
};

typedef struct pss {
    subscriber *sub;
} pss;

/* What admission counted for one accepted socket: lws's opaque user data on its wsi, released
 * when lws destroys the wsi, whatever became of the connection. */
typedef struct conn_tag {
    cs_addr_key key;
    bool admin; /* accepted on --admin-listen: /healthz, /readyz and /metrics only */
    struct conn_tag *next; /* waiting for the lws thread to release it (I/O thread connections) */
} conn_tag;

/* A stream I/O thread's own subscribers and what it has seen of the lws thread's decisions. */
typedef struct io_worker {
    subscriber *subs;
    bool stopping_seen;
    unsigned tokens_gen_seen;
} io_worker;

/* What the judge passes from the 101 to the stream I/O thread's new subscriber. */
typedef struct upgrade_info {
    conn_tag *tag;
    bool tls;
    cs_stream_request req;
    char token_name[CS_TOKEN_NAME_MAX + 1];
    uint8_t token_digest[CS_TOKEN_DIGEST_LEN];
} upgrade_info;

static void release_tag(struct cs_server *s, conn_tag *tag);

struct cs_server {
    cs_server_config cfg;
    size_t chunk_size;
    int workers;
    char addr[80];
    int listen_fd;
    struct lws *listen_wsi;
    /* --admin-listen: a second listener for the probes and the scrape, with its own caps. */
    char admin_addr[80];
    int admin_fd;
    struct lws *admin_wsi;      /* NULL once closed, as listen_wsi */
    struct lws *admin_listener; /* the same wsi, kept to recognise its callbacks */
    cs_admission *admin_conns;
    cs_metrics *metrics;

    cs_broadcaster *bc;
    cs_chunk_pipeline *pipeline;
    cs_replay_pool *replays;
    cs_frames_fill *frames_fill; /* stored frames for ledgers retained without them */
    cs_replay_slots *replay_slots; /* I/O thread, but for its counters */
    atomic_uint_fast64_t live_abandons;
    atomic_int subscribers;

    /* Admission at accept (I/O thread, but for the atomic counters read by getters). */
    cs_admission *conns;
    uint32_t max_conns;
    atomic_int connections;
    atomic_uint_fast64_t refused_total, refused_per_ip, accept_pauses;
    uint64_t refused_unwarned; /* refusals since the last WARN line */
    int64_t refusal_warned_at; /* monotonic ns of that line; 0: never */
    int64_t pause_warned_at;   /* likewise for accept pauses */
    bool accept_paused;
    lws_sorted_usec_list_t accept_resume;

    /* Bearer tokens: the I/O thread's table, and one a reload hands over (under reload_mu). */
    cs_tokens *tokens;
    bool auth_on; /* --auth-tokens: set once, before any thread starts */
    pthread_mutex_t reload_mu;
    cs_tokens *tokens_pending;
    atomic_bool tokens_reload_pending; /* lets every other wake skip the mutex */
    /* Tokens are read by the head reader (upgrades it judges) as well: swapped under tokens_rw. */
    pthread_rwlock_t tokens_rw;
    atomic_uint tokens_gen; /* bumped per swap, for the I/O threads' revocation walk */
    /* TLS: the server's own context, the I/O threads, and the tags of their ended connections,
     * which only the lws thread may release (the admission table is its own). */
    bool tls_on;
    bool tls_store_ready;
    cs_tls_store tls;
    cs_wsio *wsio;
    io_worker tw[CS_WSIO_MAX_THREADS + 1]; /* the live threads, then the background one (wsio.h) */
    pthread_mutex_t released_mu;
    conn_tag *released;
    atomic_bool stopping; /* shutting_down, for the I/O threads */
    /* Stream subscribers on the lws thread: a publish wakes lws only when there is one. */
    atomic_int lws_subs;

    /* Plaintext connections wait here for their request head before lws adopts them. */
    cs_headreader *heads;
    conn_tag *adopting; /* during lws_adopt_socket_vhost_readbuf: the tag for the new wsi */

    atomic_bool wake_pending;
    atomic_bool stop_requested;
    atomic_bool source_done;
    /* The pointers keep the atomics above out of the 8-byte word of the flags below: GCC merges
     * `shutting_down || draining` into one wide load, which TSan reports as a race with them. */
    struct lws_context *ctx;
    struct lws_vhost *vhost;
    bool shutting_down; /* I/O thread only, from here down */
    bool draining;
    bool deadline_passed;
    bool loop_done;
    bool ctx_destroying; /* lws is closing every connection: ask it for nothing more */
    lws_sorted_usec_list_t deadline;
    lws_sorted_usec_list_t write_check;
    subscriber *subs;

    pthread_t source_thread;
    bool source_started;
    int source_rc;
    cs_err source_err;
    void (*jetstream_stats)(void *arg, cs_metrics_jetstream *out); /* set before listen */
    void *jetstream_arg;
};

/* ---- waking the I/O thread ------------------------------------------------------------------ */

/* Any thread: the lws thread's on_wake runs soon, once per burst, not once per call. */
static void wake_lws(cs_server *s)
{
    if (s->ctx && !atomic_exchange(&s->wake_pending, true))
        lws_cancel_service(s->ctx);
}

/* A publish (the broadcaster's wake): every I/O thread, and lws only when a stream subscriber
 * lives there; its own work (stop, reload, the source's end, released tags) is posted with
 * wake_all or lws_cancel_service. */
static void server_wake(void *arg)
{
    cs_server *s = arg;
    if (atomic_load_explicit(&s->lws_subs, memory_order_relaxed) > 0)
        wake_lws(s);
    cs_wsio_wake(s->wsio, -1);
}

/* Messages of one replay are ready (the replay pool's wake, on a replay worker): only the thread
 * whose subscriber reads it (the cursor's stepper: an I/O thread's index, -1 lws). A catch-up
 * wakes its thread once per batch of chunks; the live threads sleep through it. A subscriber moves
 * thread only outside a replay (move_caught_up), so a replay's index stays right. */
static void replay_wake(void *arg, int thread)
{
    cs_server *s = arg;
    if (thread < 0)
        wake_lws(s);
    else
        cs_wsio_wake(s->wsio, thread);
}

/* Any thread: the lws thread and every I/O thread. */
static void wake_all(cs_server *s)
{
    wake_lws(s);
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

/* ---- HTTP answers --------------------------------------------------------------------------- */

/* Room for the status line and headers in front of a body. */
#define HEADERS_MAX 1024

/* Extra response headers of a refusal. */
#define OFFER_UPGRADE 1u /* Connection: Upgrade, Upgrade: websocket (426) */
#define OFFER_VERSION 2u /* Sec-WebSocket-Version: 13 (400 for another version) */
#define OFFER_BEARER 4u  /* WWW-Authenticate: Bearer (401) */
#define OFFER_ALLOW 8u   /* Allow: GET, HEAD (405 on the probe and metrics paths) */
#define NO_BODY 16u      /* HEAD: the GET answer's headers, Content-Length included, no body */

/* A request being judged: from lws' header table (wsi set) or from the head reader's own split
 * (head set: TLS, or a plaintext /stream upgrade), whose answer goes into out, the same bytes lws
 * writes. */
typedef struct http_req {
    struct lws *wsi;
    const cs_http_head *head;
    int fd;         /* own path: the socket, for the peer's name */
    bool admin;     /* own path: accepted on --admin-listen */
    cs_strbuf *out; /* own path: the answer */
} http_req;

static int add_header(struct lws *wsi, const char *name, const char *value, unsigned char **p,
                      unsigned char *end)
{
    return lws_add_http_header_by_name(wsi, (const unsigned char *)name, (const unsigned char *)value,
                                       (int)strlen(value), p, end);
}

/* Go's http.StatusText for the statuses this server sends. */
static const char *status_text(unsigned code)
{
    switch (code) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 414: return "Request URI Too Long";
    case 426: return "Upgrade Required";
    case 503: return "Service Unavailable";
    default: return "";
    }
}

/* One write of status line, headers and body; the request's transaction then completes. The body
 * may be long: a 400 quotes the offending query value whole. The status line is ours, always
 * HTTP/1.1 as Go writes it: lws would answer an upgrade request it has not yet versioned with
 * HTTP/1.0, and has no words for 426. */
static int respond_with(http_req *r, unsigned code, const char *ctype, const char *body, unsigned extra)
{
    struct lws *wsi = r->wsi;
    if (!wsi) {
        /* lws' bytes exactly: its header style, in the same order. */
        cs_strbuf *o = r->out;
        cs_strbuf_printf(o, "HTTP/1.1 %u %s\r\ncontent-type: %s\r\ncontent-length: %zu\r\n"
                            "x-content-type-options: nosniff\r\n", code, status_text(code), ctype, strlen(body));
        if (extra & OFFER_UPGRADE)
            cs_strbuf_puts(o, "connection: Upgrade\r\nupgrade: websocket\r\n");
        if (extra & OFFER_VERSION)
            cs_strbuf_puts(o, "sec-websocket-version: 13\r\n");
        if (extra & OFFER_BEARER)
            cs_strbuf_puts(o, "www-authenticate: Bearer realm=\"corestream\"\r\n");
        if (extra & OFFER_ALLOW)
            cs_strbuf_puts(o, "allow: GET, HEAD\r\n");
        cs_strbuf_puts(o, "\r\n");
        if (!(extra & NO_BODY))
            cs_strbuf_puts(o, body);
        return 0;
    }
    size_t blen = strlen(body), total = LWS_PRE + HEADERS_MAX + blen + 1;
    unsigned char *buf = malloc(total);
    if (!buf)
        return -1;
    unsigned char *start = buf + LWS_PRE, *p = start, *end = buf + total - 1;
    int rc = -1;
    char status[64];
    int sl = snprintf(status, sizeof status, "HTTP/1.1 %u %s", code, status_text(code));
    if (!lws_add_http_header_by_name(wsi, NULL, (const unsigned char *)status, sl, &p, end) &&
        !lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE, (const unsigned char *)ctype,
                                      (int)strlen(ctype), &p, end) &&
        !lws_add_http_header_content_length(wsi, blen, &p, end) &&
        !add_header(wsi, "x-content-type-options:", "nosniff", &p, end) &&
        !((extra & OFFER_UPGRADE) && (add_header(wsi, "connection:", "Upgrade", &p, end) ||
                                      add_header(wsi, "upgrade:", "websocket", &p, end))) &&
        !((extra & OFFER_VERSION) && add_header(wsi, "sec-websocket-version:", "13", &p, end)) &&
        !((extra & OFFER_BEARER) && add_header(wsi, "www-authenticate:", "Bearer realm=\"corestream\"", &p, end)) &&
        !((extra & OFFER_ALLOW) && add_header(wsi, "allow:", "GET, HEAD", &p, end)) &&
        !lws_finalize_http_header(wsi, &p, end) && (size_t)(end - p) >= blen) {
        if (!(extra & NO_BODY)) {
            memcpy(p, body, blen);
            p += blen;
        }
        if (lws_write(wsi, start, (size_t)(p - start), LWS_WRITE_HTTP_HEADERS) >= 0)
            rc = 0;
    }
    free(buf);
    return rc;
}

static int respond(http_req *r, unsigned code, const char *ctype, const char *body)
{
    return respond_with(r, code, ctype, body, 0);
}

static int respond_text_with(http_req *r, unsigned code, const char *msg, unsigned extra)
{
    size_t n = strlen(msg);
    char *body = malloc(n + 2);
    if (!body)
        return -1;
    memcpy(body, msg, n);
    memcpy(body + n, "\n", 2);
    int rc = respond_with(r, code, "text/plain; charset=utf-8", body, extra);
    free(body);
    return rc;
}


static void peer_of_fd(int fd, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
        cs_format_sockaddr((struct sockaddr *)&ss, buf, len);
    else
        snprintf(buf, len, "unknown");
}

/* The decoded query pairs of the request, copied out of lws' header storage. */
typedef struct query {
    char storage[CS_QUERY_MAX + MAX_QUERY_ARGS]; /* URI_MAX bytes decoded, a NUL per pair */
    const char *args[MAX_QUERY_ARGS];
    size_t n;
} query;

/* Copies every pair, or fails (-1) when there are more than MAX_QUERY_ARGS of them: a pair is
 * never silently dropped, or `start`/`end` after junk pairs would be lost. */
static int read_query(http_req *r, query *q)
{
    struct lws *wsi = r->wsi;
    size_t used = 0;
    q->n = 0;
    for (int i = 0;; i++) {
        const char *pair = wsi ? NULL : cs_http_head_pair(r->head, (size_t)i);
        if (!wsi) {
            if (!pair)
                return 0;
            size_t len = strlen(pair);
            if (q->n == MAX_QUERY_ARGS || used + len + 1 > sizeof q->storage)
                return -1;
            memcpy(q->storage + used, pair, len + 1);
            q->args[q->n++] = q->storage + used;
            used += len + 1;
            continue;
        }
        int len = lws_hdr_fragment_length(wsi, WSI_TOKEN_HTTP_URI_ARGS, i);
        if (len <= 0)
            return 0;
        if (q->n == MAX_QUERY_ARGS || used + (size_t)len + 1 > sizeof q->storage)
            return -1;
        if (lws_hdr_copy_fragment(wsi, q->storage + used, len + 1, WSI_TOKEN_HTTP_URI_ARGS, i) < 0)
            return -1;
        q->args[q->n++] = q->storage + used;
        used += (size_t)len + 1;
    }
}

/* lws keeps the path under a token named for the method. */
static const struct {
    enum lws_token_indexes token;
    const char *method;
} methods[] = {
    {WSI_TOKEN_GET_URI, "GET"},     {WSI_TOKEN_POST_URI, "POST"},     {WSI_TOKEN_PUT_URI, "PUT"},
    {WSI_TOKEN_PATCH_URI, "PATCH"}, {WSI_TOKEN_DELETE_URI, "DELETE"}, {WSI_TOKEN_OPTIONS_URI, "OPTIONS"},
    {WSI_TOKEN_HEAD_URI, "HEAD"},
};

static const char *request_method_lws(struct lws *wsi, enum lws_token_indexes *token)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (lws_hdr_total_length(wsi, methods[i].token) > 0) {
            if (token)
                *token = methods[i].token;
            return methods[i].method;
        }
    return "";
}

static const char *request_method(http_req *r)
{
    return r->wsi ? request_method_lws(r->wsi, NULL) : r->head->method;
}

static int uri_path(http_req *r, char *buf, int len)
{
    enum lws_token_indexes t;
    if (!r->wsi) {
        snprintf(buf, (size_t)len, "%s", r->head->path);
        return 0;
    }
    if (*request_method_lws(r->wsi, &t) && lws_hdr_copy(r->wsi, buf, len, t) > 0)
        return 0;
    buf[0] = '\0';
    return -1;
}

/* Bytes of the request's path and query as lws holds them. */
static size_t request_uri_len(http_req *r)
{
    struct lws *wsi = r->wsi;
    if (!wsi)
        return r->head->target_len;
    enum lws_token_indexes t;
    size_t uri = 0;
    if (*request_method_lws(wsi, &t))
        uri = (size_t)lws_hdr_total_length(wsi, t);
    for (int i = 0;; i++) {
        int n = lws_hdr_fragment_length(wsi, WSI_TOKEN_HTTP_URI_ARGS, i);
        if (n <= 0)
            break;
        uri += (size_t)n + 1;
    }
    return uri;
}

static int serve_healthz(cs_server *s, http_req *wsi, unsigned head)
{
    uint32_t oldest, latest;
    cs_ring_bounds(s->cfg.ring, &oldest, &latest);
    cs_ring_health_t h;
    cs_ring_health(s->cfg.ring, &h);
    char body[320];
    /* PORTSPEC's five fields first, as the prototype's clients parse them; the ring's health after. */
    snprintf(body, sizeof body,
             "{\"oldest\":%u,\"latest\":%u,\"subscribers\":%d,\"live_abandons\":%llu,\"raw_fallbacks\":%llu,"
             "\"version\":\"%s\",\"ring_write_failures\":%llu,\"ring_degraded\":%s,\"ring_dropped\":%llu}\n",
             oldest, latest, atomic_load(&s->subscribers),
             (unsigned long long)atomic_load(&s->live_abandons),
             (unsigned long long)cs_server_raw_fallbacks(s), cs_build_version(),
             (unsigned long long)h.write_failures, h.degraded ? "true" : "false", (unsigned long long)h.dropped);
    return respond_with(wsi, 200, "application/json", body, head);
}

static int serve_readyz(cs_server *s, http_req *wsi, unsigned head)
{
    char body[256];
    cs_ring_health_t h;
    cs_ring_health(s->cfg.ring, &h);
    /* A ring that cannot be written no longer stops the run (the live flow carries on), but this
     * daemon cannot serve a catch-up it has not stored: not ready until a write works again. */
    cs_source_state st = cs_m_state(s->metrics);
    if (h.degraded && st == CS_SRC_STREAMING)
        st = CS_SRC_RING_FAILED;
    unsigned code = cs_readiness(st, atomic_load(&s->stop_requested),
                                 cs_m_get(&s->metrics->latest_emitted), body, sizeof body);
    return respond_with(wsi, code, "application/json", body, head);
}

static int serve_metrics(cs_server *s, http_req *wsi, unsigned head)
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
    };
    cs_metrics_jetstream js;
    if (s->jetstream_stats) {
        memset(&js, 0, sizeof js);
        s->jetstream_stats(s->jetstream_arg, &js);
        v.jetstream = &js;
    }
    cs_strbuf b = CS_STRBUF_INIT;
    cs_metrics_render(&b, s->metrics, &v);
    char *text = cs_strbuf_take(&b, NULL);
    if (!text)
        return -1;
    int rc = respond_with(wsi, 200, "text/plain; version=0.0.4; charset=utf-8", text, head);
    free(text);
    return rc;
}


/* A header's whole value, malloc'd ("" when absent); NULL only when out of memory. */
static const char *header_name(enum lws_token_indexes h)
{
    switch (h) {
    case WSI_TOKEN_CONNECTION: return "connection";
    case WSI_TOKEN_UPGRADE: return "upgrade";
    case WSI_TOKEN_VERSION: return "sec-websocket-version";
    case WSI_TOKEN_KEY: return "sec-websocket-key";
    case WSI_TOKEN_ORIGIN: return "origin";
    case WSI_TOKEN_HOST: return "host";
    case WSI_TOKEN_HTTP_AUTHORIZATION: return "authorization";
    default: return "";
    }
}

static char *header_dup(http_req *r, enum lws_token_indexes h)
{
    if (!r->wsi) {
        if (h == WSI_TOKEN_HTTP) /* lws keeps the request line's version under this token */
            return strdup(r->head->version);
        return cs_http_head_get(r->head, header_name(h));
    }
    struct lws *wsi = r->wsi;
    int n = lws_hdr_total_length(wsi, h);
    char *v = malloc(n > 0 ? (size_t)n + 1 : 1);
    if (v && (n <= 0 || lws_hdr_copy(wsi, v, n + 1, h) < 0))
        v[0] = '\0';
    return v;
}

/* Strangers choose what gets refused, so each refusal is one DEBUG line, never louder. */
static int refuse(http_req *wsi, unsigned status, const char *logmsg, const char *body, unsigned extra)
{
    if (cs_log_enabled(CS_LOG_DEBUG)) {
        char remote[64];
        peer_of_fd(wsi->wsi ? lws_get_socket_fd(wsi->wsi) : wsi->fd, remote, sizeof remote);
        CS_LOG(CS_LOG_DEBUG, logmsg, KV_S("remote", remote), KV_U("status", status), KV_S("error", body));
    }
    return respond_text_with(wsi, status, body, extra);
}

/* The handshake rules on this request's headers; 0 when it may upgrade. */
static int upgrade_verdict(http_req *wsi, cs_upgrade_refusal *out)
{
    enum { MAX_KEYS = 4 };
    char *version = header_dup(wsi, WSI_TOKEN_HTTP), *conn = header_dup(wsi, WSI_TOKEN_CONNECTION);
    char *upgrade = header_dup(wsi, WSI_TOKEN_UPGRADE), *wsv = header_dup(wsi, WSI_TOKEN_VERSION);
    char keybuf[MAX_KEYS][256];
    const char *keys[MAX_KEYS];
    size_t nkeys = 0;
    for (int i = 0; i < 64; i++) { /* every key is counted; only the first few are read */
        const char *own = wsi->wsi ? NULL : cs_http_head_nth(wsi->head, "sec-websocket-key", (size_t)i);
        int n = wsi->wsi ? lws_hdr_fragment_length(wsi->wsi, WSI_TOKEN_KEY, i) : own ? 1 : 0;
        if (n <= 0)
            break;
        if (nkeys < MAX_KEYS) {
            if (own ? (size_t)snprintf(keybuf[nkeys], sizeof keybuf[nkeys], "%s", own) >= sizeof keybuf[nkeys]
                    : lws_hdr_copy_fragment(wsi->wsi, keybuf[nkeys], sizeof keybuf[nkeys], WSI_TOKEN_KEY, i) < 0)
                snprintf(keybuf[nkeys], sizeof keybuf[nkeys], "?"); /* over-long: no 24-byte key */
            keys[nkeys] = keybuf[nkeys];
        }
        nkeys++;
    }
    int rc;
    if (!version || !conn || !upgrade || !wsv) {
        memset(out, 0, sizeof *out);
        out->status = 400;
        snprintf(out->body, sizeof out->body, "out of memory");
        rc = -1;
    } else {
        cs_upgrade_request r = {.method = request_method(wsi),
                                .version = version,
                                .connection = conn,
                                .upgrade = upgrade,
                                .ws_version = wsv,
                                .keys = keys,
                                .nkeys = nkeys};
        rc = cs_upgrade_check(&r, out);
    }
    free(version);
    free(conn);
    free(upgrade);
    free(wsv);
    return rc;
}

/* Origin must match Host, as the prototype's WebSocket library insists (403 otherwise). Both are
 * copied whole, sized by lws' own count: a fixed buffer made lws_hdr_copy fail on a long Origin,
 * which then passed as no Origin at all. */
static int check_origin(http_req *wsi, char *msg, size_t mlen)
{
    if (wsi->wsi ? lws_hdr_total_length(wsi->wsi, WSI_TOKEN_ORIGIN) <= 0
                 : !cs_http_head_nth(wsi->head, "origin", 0))
        return 0;
    char *origin = header_dup(wsi, WSI_TOKEN_ORIGIN), *host = header_dup(wsi, WSI_TOKEN_HOST);
    int rc = -1;
    if (!origin || !host || !*origin)
        snprintf(msg, mlen, "request Origin could not be read"); /* must not pass as none */
    else
        rc = cs_check_origin(origin, host, msg, mlen);
    free(origin);
    free(host);
    return rc;
}

/* What every request answers first, whatever the path: 414 past the URI limit. (A request past
 * the header store never gets this far.) */
static int refuse_over_limits(http_req *wsi)
{
    if (request_uri_len(wsi) <= URI_MAX)
        return 0;
    refuse(wsi, 414, "request refused", "request URI too long", 0);
    return 1;
}

/* The name of the token in the request's `Authorization: Bearer` header, or NULL; *given says
 * whether a bearer token was there at all. Compared in constant time; the header's copy is wiped
 * and the token itself is never logged. */
static bool request_token(cs_server *s, http_req *wsi, uint8_t digest[CS_TOKEN_DIGEST_LEN], bool *given,
                          char name_out[CS_TOKEN_NAME_MAX + 1])
{
    char *auth = header_dup(wsi, WSI_TOKEN_HTTP_AUTHORIZATION);
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

/* With --auth-tokens: the request's token name, or NULL once the 401 is sent. */
static bool authenticate(cs_server *s, http_req *wsi, uint8_t digest[CS_TOKEN_DIGEST_LEN])
{
    bool given;
    bool found = request_token(s, wsi, digest, &given, NULL);
    if (!found)
        refuse(wsi, 401, "request refused", given ? "unknown bearer token" : "a bearer token is required",
               OFFER_BEARER);
    return found;
}

/* /stream before an upgrade, in the prototype's order: the query (400), the handshake (426, 405,
 * 400), the Origin (403); a token (401) before all of them when tokens are set. Returns 0 to
 * allow, 1 when answered. */
static int check_stream(cs_server *s, http_req *wsi)
{
    uint8_t digest[CS_TOKEN_DIGEST_LEN];
    if (s->auth_on && !authenticate(s, wsi, digest))
        return 1;
    query q;
    cs_stream_request req;
    cs_stream_error err;
    if (read_query(wsi, &q) != 0) {
        refuse(wsi, 400, "request refused", "too many query parameters", 0);
        return 1;
    }
    if (cs_stream_request_parse(q.args, q.n, &req, &err) != 0) {
        refuse(wsi, 400, "request refused", err.body, 0);
        return 1;
    }
    cs_upgrade_refusal *no = malloc(sizeof *no);
    if (!no)
        return 1;
    int rc = 0;
    if (upgrade_verdict(wsi, no) != 0) {
        refuse(wsi, no->status, "websocket handshake failed", no->body,
               (no->offer_upgrade ? OFFER_UPGRADE : 0) | (no->offer_version ? OFFER_VERSION : 0));
        rc = 1;
    } else if (check_origin(wsi, no->body, sizeof no->body) != 0) {
        refuse(wsi, 403, "websocket handshake failed", no->body, 0);
        rc = 1;
    }
    free(no);
    return rc;
}

/* The probe and scrape paths: GET, and HEAD as RFC 9110 requires of a server that serves GET
 * (the same status and headers, no body); any other method gets 405 with `Allow: GET, HEAD`. */
typedef int (*admin_fn)(cs_server *s, http_req *wsi, unsigned head);

static admin_fn admin_endpoint(const char *path)
{
    if (strcmp(path, "/healthz") == 0)
        return serve_healthz;
    if (strcmp(path, "/readyz") == 0)
        return serve_readyz;
    if (strcmp(path, "/metrics") == 0)
        return serve_metrics;
    return NULL;
}

static int serve_admin(cs_server *s, http_req *wsi, admin_fn fn)
{
    uint8_t digest[CS_TOKEN_DIGEST_LEN];
    if (s->auth_on && s->cfg.auth_healthz && !authenticate(s, wsi, digest))
        return 0;
    const char *method = request_method(wsi);
    if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)
        return fn(s, wsi, strcmp(method, "HEAD") == 0 ? NO_BODY : 0);
    return respond_with(wsi, 405, "text/plain; charset=utf-8", "Method Not Allowed\n", OFFER_ALLOW);
}

static bool on_admin_listener(http_req *r)
{
    if (!r->wsi)
        return r->admin;
    const conn_tag *tag = lws_get_opaque_user_data(r->wsi);
    return tag && tag->admin;
}

/* A plain (non-upgrade) request: /healthz, /readyz, /metrics, /stream (always refused: it must
 * upgrade; not served on the admin listener), or 404. Returns the value for the lws callback. */
static int serve_request(cs_server *s, http_req *wsi)
{
    int rc = 0;
    if (!refuse_over_limits(wsi)) {
        char path[512];
        uri_path(wsi, path, sizeof path);
        admin_fn fn = admin_endpoint(path);
        if (fn) {
            rc = serve_admin(s, wsi, fn);
        } else if (strcmp(path, CS_WIRE_STREAM_PATH) == 0 && !on_admin_listener(wsi)) {
            if (check_stream(s, wsi) == 0) /* an upgrade lws did not route as one */
                refuse(wsi, 426, "websocket handshake failed",
                       "WebSocket protocol violation: Upgrade header \"\" does not contain websocket",
                       OFFER_UPGRADE);
        } else
            rc = respond(wsi, 404, "text/plain; charset=utf-8", "404 page not found\n");
    }
    return rc;
}

static int serve_http(cs_server *s, struct lws *wsi)
{
    http_req r = {.wsi = wsi};
    if (serve_request(s, &r) != 0 || lws_http_transaction_completed(wsi))
        return -1;
    return 0;
}

/* Before the upgrade: limits, path, query, handshake and origin. Returns 0 to allow, 1 when
 * answered. */
static int confirm_upgrade_req(cs_server *s, http_req *wsi)
{
    if (refuse_over_limits(wsi))
        return 1;
    char path[512];
    uri_path(wsi, path, sizeof path);
    if (strcmp(path, CS_WIRE_STREAM_PATH) != 0 || on_admin_listener(wsi)) {
        respond(wsi, 404, "text/plain; charset=utf-8", "404 page not found\n");
        return 1;
    }
    return check_stream(s, wsi);
}

static int confirm_upgrade(cs_server *s, struct lws *wsi)
{
    http_req r = {.wsi = wsi};
    return confirm_upgrade_req(s, &r);
}

/* ---- what libwebsockets reports ----------------------------------------------------------- */

/* lws' own error lines go to our log at DEBUG: strangers trigger most of them (a request past the
 * header store, for one: lws 4.1 hangs up on it with only a log line). */
static void lws_log_line(int level, const char *line)
{
    (void)level;
    if (!cs_log_enabled(CS_LOG_DEBUG))
        return;
    char msg[256];
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        n--;
    snprintf(msg, sizeof msg, "%.*s", (int)n, line);
    CS_LOG(CS_LOG_DEBUG, "libwebsockets", KV_S("line", msg));
}

/* ---- subscribers ---------------------------------------------------------------------------- */

static void log_subscriber(int level, const char *msg, const subscriber *sub, size_t n, const cs_kv *extra)
{
    cs_kv kvs[9] = {KV_S("remote", sub->remote), KV_U("start", sub->req.start), KV_U("end", sub->req.end),
                    KV_B("bounded", sub->req.bounded)};
    size_t k = 4;
    if (sub->token_name[0])
        kvs[k++] = KV_S("token", sub->token_name);
    for (size_t i = 0; i < n && k < 9; i++)
        kvs[k++] = extra[i];
    cs_log_kvs(level, msg, k, kvs);
}

/* Asks for a writable callback and starts the write clock: the time from wanting to write the
 * next message until the socket takes it is what WRITE_TIMEOUT_SECS bounds, as a per-message
 * write deadline would. */
static void want_write(subscriber *sub)
{
    if (!sub->write_started)
        sub->write_started = cs_mono_ns();
    sub->ops->want_write(sub);
}

/* ---- the two transports ---- */

static void lws_want_write(subscriber *sub)
{
    lws_callback_on_writable(sub->wsi);
}

static int lws_write_msg(subscriber *sub, cs_msg *m)
{
    int n = lws_write(sub->wsi, m->data, m->len, LWS_WRITE_BINARY);
    return n >= 0 && (size_t)n == m->len ? 1 : -1;
}

/* lws' own rule: write again only when the socket has room and nothing is left buffered. */
static bool lws_more(subscriber *sub)
{
    return !lws_partial_buffered(sub->wsi) && !lws_send_pipe_choked(sub->wsi);
}

static void lws_close_sub(subscriber *sub, int code, const char *reason)
{
    lws_close_reason(sub->wsi, (enum lws_close_status)code, (unsigned char *)reason, strlen(reason));
}

/* Shut down rather than closed through lws, which would first wait to flush what the peer will
 * never read. */
static void lws_shut(subscriber *sub)
{
    shutdown(lws_get_socket_fd(sub->wsi), SHUT_RDWR);
}

/* Several messages per writable callback while the socket takes them whole (lws' own rule: write
 * again only when lws_send_pipe_choked() says the socket has room and nothing is left buffered).
 * It saves a trip through poll() per message; the cap keeps one fast subscriber from holding the
 * I/O thread while others wait. */
static const sub_ops lws_ops = {8, lws_want_write, lws_write_msg, lws_more, lws_close_sub, lws_shut};

static void io_want_write(subscriber *sub)
{
    cs_wsio_want_write(sub->tc);
}

static int io_write_msg(subscriber *sub, cs_msg *m)
{
    return cs_wsio_write(sub->tc, m);
}

static bool io_more(subscriber *sub)
{
    return cs_wsio_can_write(sub->tc);
}

static void io_close_sub(subscriber *sub, int code, const char *reason)
{
    cs_wsio_close(sub->tc, code, reason);
}

static void io_shut(subscriber *sub)
{
    cs_wsio_drop(sub->tc);
}

/* Plaintext queues a turn's messages for one writev, which io_more bounds (16 messages, about
 * 1 MiB); TLS writes each at once (io_more: nothing pending), with lws' cap of 8. */
static const sub_ops plain_ops = {16, io_want_write, io_write_msg, io_more, io_close_sub, io_shut};
static const sub_ops tls_ops = {8, io_want_write, io_write_msg, io_more, io_close_sub, io_shut};

/* A replay slot freed by another subscriber was handed to this waiting one. On the lws thread
 * it is acted on at once; an I/O-thread subscriber's grant may come from another I/O thread, under
 * the slot table's mutex: it is posted to its own thread. sub->thread is stable here: a subscriber
 * only moves (io_moved) once its ticket is released for good (followed live: it never queues
 * again), and that release took the same mutex after any grant. */
static void replay_granted(void *ctx)
{
    subscriber *sub = ctx;
    cs_server *s = sub->srv;
    if (sub->tc) {
        atomic_store(&sub->granted, true);
        cs_wsio_wake(s->wsio, sub->thread);
        return;
    }
    if (s->ctx_destroying || sub->closing)
        return;
    sub->waiting = false;
    want_write(sub);
}

/* Sets up what both transports share and puts sub on list; token and request already filled. */
static void subscriber_start(cs_server *s, subscriber *sub, subscriber **list, const conn_tag *tag)
{
    sub->srv = s;
    sub->list = list;
    cs_cursor_env env = {.bc = s->bc, .ring = s->cfg.ring, .replays = s->replays,
                         .slots = s->replay_slots, .live_abandons = &s->live_abandons};
    cs_cursor_init(&sub->cursor, &env, sub->req.start, sub->req.bounded, sub->req.end);
    /* Replays are counted per address as connections are: the key admission took at accept. */
    if (tag)
        sub->cursor.ticket.key = tag->key;
    sub->cursor.ticket.granted = replay_granted;
    sub->cursor.ticket.granted_ctx = sub;
    sub->next = *list;
    if (*list)
        (*list)->prev = sub;
    *list = sub;
    int n = atomic_fetch_add(&s->subscribers, 1) + 1;
    cs_kv extra[] = {KV_I("subscribers", n)};
    log_subscriber(CS_LOG_INFO, "subscriber connected", sub, 1, extra);
    want_write(sub);
}

static int subscriber_open(cs_server *s, struct lws *wsi, pss *ps)
{
    subscriber *sub = calloc(1, sizeof *sub);
    if (!sub)
        return -1;
    query q;
    http_req r = {.wsi = wsi};
    /* confirm_upgrade has answered a bad query already. */
    if (read_query(&r, &q) != 0 || cs_stream_request_parse(q.args, q.n, &sub->req, NULL) != 0) {
        free(sub);
        return -1;
    }
    if (s->auth_on) {
        /* confirm_upgrade checked the token; this names it for the logs and a later reload. */
        bool given;
        if (!request_token(s, &r, sub->token_digest, &given, sub->token_name)) {
            free(sub);
            return -1;
        }
    }
    sub->ops = &lws_ops;
    sub->wsi = wsi;
    atomic_fetch_add(&s->lws_subs, 1);
    peer_of_fd(lws_get_socket_fd(wsi), sub->remote, sizeof sub->remote);
    ps->sub = sub;
    subscriber_start(s, sub, &s->subs, lws_get_opaque_user_data(wsi));
    return 0;
}

/* Off its thread's list (none in transit). */
static void unlink_subscriber(subscriber *sub)
{
    if (!sub->list)
        return;
    if (sub->prev)
        sub->prev->next = sub->next;
    else
        *sub->list = sub->next;
    if (sub->next)
        sub->next->prev = sub->prev;
    sub->prev = sub->next = NULL;
    sub->list = NULL;
}

static void subscriber_end(cs_server *s, subscriber *sub)
{
    if (!sub->closing) {
        cs_kv extra[] = {KV_S("error", "connection closed")};
        log_subscriber(CS_LOG_INFO, "subscriber disconnected", sub, 1, extra);
    }
    unlink_subscriber(sub);
    cs_cursor_destroy(&sub->cursor);
    free(sub);
    atomic_fetch_sub(&s->subscribers, 1);
}

static void subscriber_gone(cs_server *s, pss *ps)
{
    subscriber *sub = ps->sub;
    if (!sub)
        return;
    ps->sub = NULL;
    subscriber_end(s, sub);
    atomic_fetch_sub(&s->lws_subs, 1);
}

static int close_subscriber(cs_server *s, subscriber *sub, int code, const char *reason)
{
    cs_kv extra[] = {KV_I("code", code), KV_S("reason", reason)};
    log_subscriber(CS_LOG_INFO, "closing subscriber", sub, 2, extra);
    cs_m_count_close(s->metrics, code);
    sub->closing = true;
    sub->ops->close(sub, code, reason);
    return -1;
}

/* A catch-up on the background I/O thread that reached the live flow (it has followed the tip, so
 * it holds no replay slot: cs_cursor_step released it, and it never queues again) goes to a live
 * thread: cs_wsio_move hands it over once this turn's messages are out, and io_moved asks for its
 * next write there. True: asked (write nothing more here); the write clock runs meanwhile, so a
 * peer that stops reading before the hand-off is still dropped by this thread's drop_stalled. */
static bool move_caught_up(cs_server *s, subscriber *sub)
{
    if (!sub->tc || sub->thread != cs_wsio_bulk_thread(s->wsio) || !sub->cursor.followed_live ||
        sub->cursor.mode == CS_CUR_REPLAY || sub->cursor.mode == CS_CUR_QUEUED)
        return false;
    if (!sub->write_started)
        sub->write_started = cs_mono_ns();
    cs_wsio_move(sub->tc, (int)((unsigned)cs_wsio_fd(sub->tc) % (unsigned)cs_wsio_threads(s->wsio)));
    return true;
}

static int subscriber_writable(cs_server *s, subscriber *sub)
{
    if (sub->closing)
        return 0; /* the close frame is on its way */
    for (int round = 0;; round++) {
        sub->write_started = 0;
        sub->waiting = false;
        if (atomic_load_explicit(&s->stopping, memory_order_relaxed))
            return close_subscriber(s, sub, CS_CLOSE_GOING_AWAY, CS_REASON_SHUTTING_DOWN);
        if (sub->revoked)
            return close_subscriber(s, sub, CS_CLOSE_POLICY, "token revoked");

        cs_step st;
        cs_cursor_step(&sub->cursor, sub->tc ? sub->thread : -1, &st);
        if (st.abandoned && cs_log_enabled(CS_LOG_DEBUG)) {
            cs_kv extra[] = {KV_U("ledger", sub->cursor.abandoned_seq)};
            log_subscriber(CS_LOG_DEBUG, "live chunk flow abandoned; redelivering from the ring", sub, 1, extra);
        }
        if (st.replay_queued) {
            cs_kv extra[] = {KV_U("ledger", sub->cursor.next), KV_U("position", st.queue_position),
                             KV_U("replays", cs_replay_slots_running(s->replay_slots))};
            log_subscriber(CS_LOG_INFO, "replay waiting for a slot", sub, 3, extra);
        }
        if (st.replay_started && cs_log_enabled(CS_LOG_DEBUG)) {
            cs_kv extra[] = {KV_U("ledger", sub->cursor.next),
                             KV_U("replays", cs_replay_slots_running(s->replay_slots))};
            log_subscriber(CS_LOG_DEBUG, "replay started", sub, 2, extra);
        }
        switch (st.kind) {
        case CS_STEP_WRITE: {
            size_t len = st.msg->len;
            int n = sub->ops->write(sub, st.msg); /* 0: the I/O thread holds it until it is out */
            if (n >= 0) {
                if (st.msg->published_ns) {
                    cs_m_observe_ns(&s->metrics->publish_to_write, cs_mono_ns() - st.msg->published_ns);
                    cs_m_add(&s->metrics->sent_bytes_live, len);
                } else {
                    cs_m_add(&s->metrics->sent_bytes_replay, len);
                    if (st.msg->origin)
                        cs_m_add(st.msg->origin == CS_MSG_STORED ? &s->metrics->replay_bytes_stored
                                                                  : &s->metrics->replay_bytes_encoded, len);
                }
            }
            cs_msg_release(st.msg);
            if (n < 0) {
                sub->closing = true;
                cs_kv extra[] = {KV_S("error", "write failed")};
                log_subscriber(CS_LOG_INFO, "subscriber disconnected", sub, 1, extra);
                return -1;
            }
            if (move_caught_up(s, sub))
                return 0;
            if (n == 1 && round + 1 < sub->ops->writes_per_turn && sub->ops->more(sub))
                continue;
            /* lws holds what the socket did not take and calls back only once it drained; either
             * way the next message now waits for the socket, on the clock. */
            want_write(sub);
            return 0;
        }
        case CS_STEP_WAIT:
            /* A cursor queued for a replay slot is woken by its grant, not by every publish: a
             * long queue costs the live path's wake-ups nothing. */
            sub->waiting = sub->cursor.mode != CS_CUR_QUEUED;
            if (move_caught_up(s, sub))
                sub->waiting = false; /* io_moved steps it again on the live thread */
            return 0;
        case CS_STEP_CLOSE:
            return close_subscriber(s, sub, st.code, st.reason);
        case CS_STEP_DROP:
        default: {
            sub->closing = true;
            cs_kv extra[] = {KV_S("error", st.err.msg)};
            log_subscriber(CS_LOG_INFO, "subscriber disconnected", sub, 1, extra);
            return -1;
        }
        }
    }
}

/* ---- lifecycle on the I/O thread ------------------------------------------------------------ */

static void deadline_cb(lws_sorted_usec_list_t *sul)
{
    cs_server *s = lws_container_of(sul, cs_server, deadline);
    s->deadline_passed = true;
    /* lws 4.1 runs expired timers but goes back to sleep: wake the loop so it sees the flag. */
    lws_cancel_service(s->ctx);
}

/* A subscriber that keeps draining is never dropped, however slowly; one whose socket has taken
 * nothing for WRITE_TIMEOUT_SECS while a message waited is. The socket is shut down rather than closed through lws,
 * which would first wait to flush what the peer will never read. */
static void drop_stalled(cs_server *s, subscriber *list)
{
    int64_t now = cs_mono_ns();
    for (subscriber *sub = list; sub; sub = sub->next) {
        if (sub->closing || !sub->write_started || now - sub->write_started < WRITE_TIMEOUT_SECS * CS_SEC)
            continue;
        sub->closing = true;
        cs_m_add(&s->metrics->write_deadline_drops, 1);
        cs_kv extra[] = {KV_S("error", "write timed out: the subscriber stopped reading")};
        log_subscriber(CS_LOG_INFO, "subscriber disconnected", sub, 1, extra);
        sub->ops->shut(sub);
    }
}

static void check_stalled_writes(lws_sorted_usec_list_t *sul)
{
    cs_server *s = lws_container_of(sul, cs_server, write_check);
    drop_stalled(s, s->subs);
    lws_sul_schedule(s->ctx, 0, &s->write_check, check_stalled_writes, WRITE_CHECK_US);
}

static void close_listener(cs_server *s)
{
    if (s->listen_wsi) {
        lws_set_timeout(s->listen_wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
        s->listen_wsi = NULL;
    }
    if (s->admin_wsi) {
        lws_set_timeout(s->admin_wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
        s->admin_wsi = NULL;
    }
}

/* Reacts to a wake: subscribers waiting for data get a writable callback; stop and source end
 * start the bounded wind-down. */
/* Subscribers on list (the caller's thread's) whose token is no longer in the table: closed 1008. */
static void revoke_gone_tokens(cs_server *s, subscriber *list)
{
    pthread_rwlock_rdlock(&s->tokens_rw);
    for (subscriber *sub = list; sub; sub = sub->next)
        if (sub->token_name[0] && !sub->closing && !cs_tokens_has(s->tokens, sub->token_digest)) {
            sub->revoked = true;
            want_write(sub);
        }
    pthread_rwlock_unlock(&s->tokens_rw);
}

/* A reload's tokens replace the table in force; subscribers whose token is gone are closed. */
static void take_reloaded_tokens(cs_server *s)
{
    if (!atomic_exchange(&s->tokens_reload_pending, false))
        return;
    pthread_mutex_lock(&s->reload_mu);
    cs_tokens *fresh = s->tokens_pending;
    s->tokens_pending = NULL;
    pthread_mutex_unlock(&s->reload_mu);
    if (!fresh)
        return;
    pthread_rwlock_wrlock(&s->tokens_rw);
    cs_tokens *old = s->tokens;
    s->tokens = fresh;
    pthread_rwlock_unlock(&s->tokens_rw);
    cs_tokens_free(old);
    revoke_gone_tokens(s, s->subs);
    atomic_fetch_add(&s->tokens_gen, 1);
    cs_wsio_wake(s->wsio, -1); /* each TLS thread walks its own subscribers */
}

/* The subscribers on list waiting for data get a writable callback. */
static void wake_waiting(subscriber *list)
{
    for (subscriber *sub = list; sub; sub = sub->next)
        if (sub->waiting) {
            sub->waiting = false;
            want_write(sub);
        }
}

static void take_released_tags(cs_server *s);

static void on_wake(cs_server *s)
{
    atomic_store(&s->wake_pending, false);
    take_reloaded_tokens(s);
    take_released_tags(s);
    if (atomic_load(&s->stop_requested) && !s->shutting_down) {
        s->shutting_down = true;
        atomic_store(&s->stopping, true);
        cs_wsio_wake(s->wsio, -1);
        cs_cancel_fire(s->cfg.cancel);
        close_listener(s);
        lws_sul_schedule(s->ctx, 0, &s->deadline, deadline_cb, SHUTDOWN_TIMEOUT_US);
        for (subscriber *sub = s->subs; sub; sub = sub->next)
            want_write(sub);
    }
    if (atomic_load(&s->source_done) && !s->draining && !s->cfg.linger) {
        s->draining = true;
        close_listener(s);
        if (!s->shutting_down)
            lws_sul_schedule(s->ctx, 0, &s->deadline, deadline_cb, DRAIN_TIMEOUT_US);
    }
    wake_waiting(s->subs);
}

/* ---- TLS subscribers (the TLS I/O threads, wsio.h) ------------------------------------------ */

/* A TLS connection's tag goes back to the lws thread, which owns the admission table. */
static void post_release(cs_server *s, conn_tag *tag)
{
    pthread_mutex_lock(&s->released_mu);
    tag->next = s->released;
    s->released = tag;
    pthread_mutex_unlock(&s->released_mu);
    if (s->ctx)
        lws_cancel_service(s->ctx);
}

static void take_released_tags(cs_server *s)
{
    pthread_mutex_lock(&s->released_mu);
    conn_tag *t = s->released;
    s->released = NULL;
    pthread_mutex_unlock(&s->released_mu);
    while (t) {
        conn_tag *next = t->next;
        release_tag(s, t);
        t = next;
    }
}

static void *io_open(void *ctx, int thread, cs_wsconn *c, void *arg)
{
    cs_server *s = ctx;
    upgrade_info *u = arg;
    subscriber *sub = calloc(1, sizeof *sub);
    if (!sub) {
        post_release(s, u->tag);
        free(u);
        return NULL;
    }
    sub->ops = u->tls ? &tls_ops : &plain_ops;
    sub->tc = c;
    sub->thread = thread;
    sub->req = u->req;
    memcpy(sub->token_name, u->token_name, sizeof sub->token_name);
    memcpy(sub->token_digest, u->token_digest, sizeof sub->token_digest);
    sub->tag = u->tag;
    free(u);
    if (s->auth_on) {
        /* The token was judged on cs-heads; a reload since then may have revoked it, and its
         * generation walk may have run before this subscriber joined the list. */
        pthread_rwlock_rdlock(&s->tokens_rw);
        sub->revoked = !cs_tokens_has(s->tokens, sub->token_digest);
        pthread_rwlock_unlock(&s->tokens_rw);
    }
    peer_of_fd(cs_wsio_fd(c), sub->remote, sizeof sub->remote);
    subscriber_start(s, sub, &s->tw[thread].subs, sub->tag);
    return sub;
}

static int io_writable(void *ctx, void *user)
{
    return subscriber_writable(ctx, user);
}

/* cs_wsio_move: off the background thread's list, on its last call there. */
static void io_leave(void *ctx, void *user)
{
    (void)ctx;
    unlink_subscriber(user);
}

/* On the live thread it moved to: on that thread's list, its token looked at again (a reload's
 * walks may have missed it in transit), and its next step asked for. */
static void io_moved(void *ctx, int thread, void *user)
{
    cs_server *s = ctx;
    subscriber *sub = user;
    sub->thread = thread;
    sub->list = &s->tw[thread].subs;
    sub->prev = NULL;
    sub->next = *sub->list;
    if (*sub->list)
        (*sub->list)->prev = sub;
    *sub->list = sub;
    if (s->auth_on && sub->token_name[0]) {
        pthread_rwlock_rdlock(&s->tokens_rw);
        sub->revoked = !cs_tokens_has(s->tokens, sub->token_digest);
        pthread_rwlock_unlock(&s->tokens_rw);
    }
    cs_kv extra[] = {KV_U("ledger", sub->cursor.next), KV_I("thread", thread)};
    log_subscriber(CS_LOG_INFO, "caught up, moved to the live thread", sub, 2, extra);
    want_write(sub);
}

static void io_data(void *ctx, void *user)
{
    subscriber *sub = user;
    if (!sub->closing)
        close_subscriber(ctx, sub, CS_CLOSE_POLICY, "unexpected data message");
}

static void io_gone(void *ctx, void *user)
{
    cs_server *s = ctx;
    subscriber *sub = user;
    conn_tag *tag = sub->tag;
    subscriber_end(s, sub);
    post_release(s, tag);
}

/* What the lws thread decided (shutdown, a token reload), and what woke this thread's own
 * subscribers (publishes, replays, granted slots). */
static void io_wake(void *ctx, int thread)
{
    cs_server *s = ctx;
    io_worker *w = &s->tw[thread];
    if (atomic_load(&s->stopping) && !w->stopping_seen) {
        w->stopping_seen = true;
        for (subscriber *sub = w->subs; sub; sub = sub->next)
            want_write(sub);
    }
    unsigned gen = atomic_load(&s->tokens_gen);
    if (gen != w->tokens_gen_seen) {
        w->tokens_gen_seen = gen;
        revoke_gone_tokens(s, w->subs);
    }
    for (subscriber *sub = w->subs; sub; sub = sub->next)
        if (atomic_load_explicit(&sub->granted, memory_order_relaxed) && atomic_exchange(&sub->granted, false) &&
            !sub->closing) {
            sub->waiting = false;
            want_write(sub);
        }
    wake_waiting(w->subs);
}

static void io_tick(void *ctx, int thread)
{
    cs_server *s = ctx;
    drop_stalled(s, s->tw[thread].subs);
}

/* An upgrade that never reached its TLS thread's open hook: the tag is the TLS side's by then. */
static void io_discard(void *ctx, void *arg)
{
    upgrade_info *u = arg;
    if (!u)
        return;
    post_release(ctx, u->tag);
    free(u);
}

/* The head reader still owns the tag (it gives it back through drain): only the info goes. */
static void heads_discard(void *ctx, void *arg)
{
    (void)ctx;
    free(arg);
}

/* Head reader thread: the context in force for a new connection. */
static SSL_CTX *tls_ctx_now(void *ctx)
{
    cs_server *s = ctx;
    return cs_tls_store_get(&s->tls);
}

/* A plaintext head that stays lws': all but a /stream upgrade on the data listener (lws would
 * answer those the same, but its subscriber would live on its one thread). A head the splitter
 * cannot read goes to lws too, which answers it as it always did. */
static bool stays_with_lws(http_req *r, bool parsed, bool upgrade)
{
    if (!parsed || !upgrade || r->admin)
        return true;
    char path[512];
    uri_path(r, path, sizeof path);
    return strcmp(path, CS_WIRE_STREAM_PATH) != 0;
}

/* Head reader thread: a TLS request head, or a plaintext one that may be a /stream upgrade (any
 * other goes back to lws, CS_HEAD_PASS), judged as the lws path judges one, with the same bytes
 * out; a good /stream upgrade gets our own 101. After any other answer the connection is closed,
 * as lws closes one whose upgrade it refused. */
static int judge_head(void *ctx, int fd, void *tagp, bool tls, const char *buf, size_t len, char **resp,
                      size_t *resp_len, void **arg)
{
    cs_server *s = ctx;
    conn_tag *tag = tagp;
    cs_http_head head;
    cs_strbuf out = CS_STRBUF_INIT;
    http_req r = {.head = &head, .fd = fd, .admin = tag->admin, .out = &out};
    int verdict = CS_HEAD_ANSWER;
    *arg = NULL;
    bool parsed = cs_http_head_parse(buf, len, &head) == 0, upgrade = false;
    if (parsed) {
        char *up = cs_http_head_get(&head, "upgrade");
        /* lws routes a request as an upgrade by its Upgrade header alone */
        upgrade = up && strcasecmp(up, "websocket") == 0;
        free(up);
    }
    if (!tls && stays_with_lws(&r, parsed, upgrade)) {
        verdict = CS_HEAD_PASS;
    } else if (!parsed) {
        refuse(&r, 400, "request refused", "malformed HTTP request", 0);
    } else {
        if (!upgrade) {
            serve_request(s, &r);
        } else if (confirm_upgrade_req(s, &r) == 0) {
            upgrade_info *u = calloc(1, sizeof *u);
            query q;
            const char *key = cs_http_head_nth(&head, "sec-websocket-key", 0);
            if (u && key && read_query(&r, &q) == 0 && cs_stream_request_parse(q.args, q.n, &u->req, NULL) == 0 &&
                (!s->auth_on || request_token(s, &r, u->token_digest, &(bool){false}, u->token_name))) {
                char accept[29];
                cs_wss_accept(key, strlen(key), accept);
                cs_strbuf_printf(&out, "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n"
                                       "connection: Upgrade\r\nsec-websocket-accept: %s\r\n\r\n", accept);
                u->tag = tag;
                u->tls = tls;
                *arg = u;
                verdict = CS_HEAD_UPGRADE;
            } else {
                free(u);
            }
        }
    }
    cs_http_head_free(&head);
    *resp = cs_strbuf_take(&out, resp_len);
    return verdict;
}

/* A request whose first step reads the ring (its start is before the tip, or there is no tip
 * yet): a catch-up, served on the background I/O thread until it reaches the live flow. Decided
 * here, before the connection exists on any I/O thread, so no thread ever hands over a cursor
 * mid-replay. The tip only moves forward, so a start before it stays before it; a start at the
 * tip that the tip passes before its first step replays those few ledgers on its live thread. */
static bool starts_with_catch_up(cs_server *s, const cs_stream_request *req)
{
    if (req->start == 0)
        return false;
    cs_snap snap;
    cs_broadcast_watch(s->bc, &snap);
    bool behind = snap.seq == 0 || req->start < snap.seq;
    cs_snap_release(&snap);
    return behind;
}

/* Head reader thread: the 101 is out; the subscriber moves to a stream I/O thread (ssl NULL:
 * plaintext), the background one for a catch-up. */
static void head_upgraded(void *ctx, int fd, SSL *ssl, void *tagp, const unsigned char *early, size_t n, void *arg)
{
    cs_server *s = ctx;
    (void)tagp;
    upgrade_info *u = arg;
    if (cs_wsio_add(s->wsio, fd, ssl, early, n, starts_with_catch_up(s, &u->req), arg) != 0) {
        SSL_free(ssl);
        close(fd);
        io_discard(s, arg);
    }
}

/* One WARN line per REFUSAL_WARN_NS at most, so a connection flood cannot flood the log too; each
 * refusal is at DEBUG. */
static void note_refusal(cs_server *s, const cs_addr_key *k, const char *remote, cs_admit why)
{
    if (why == CS_ADMIT_PER_ADDR)
        atomic_fetch_add(&s->refused_per_ip, 1);
    else
        atomic_fetch_add(&s->refused_total, 1);
    char addr[64];
    cs_addr_key_format(k, addr, sizeof addr);
    const char *reason = why == CS_ADMIT_PER_ADDR ? "per-address connection cap" : "connection cap";
    CS_LOG(CS_LOG_DEBUG, "connection refused", KV_S("remote", remote), KV_S("address", addr),
           KV_S("reason", reason));
    s->refused_unwarned++;
    int64_t now = cs_mono_ns();
    if (s->refusal_warned_at && now - s->refusal_warned_at < REFUSAL_WARN_NS)
        return;
    s->refusal_warned_at = now;
    CS_LOG(CS_LOG_WARN, "connections refused at accept", KV_U("refused", s->refused_unwarned),
           KV_S("last_address", addr), KV_S("last_reason", reason),
           KV_I("connections", atomic_load(&s->connections)), KV_U("max_connections", s->max_conns));
    s->refused_unwarned = 0;
}

static void accept_resume_cb(lws_sorted_usec_list_t *sul)
{
    cs_server *s = lws_container_of(sul, cs_server, accept_resume);
    s->accept_paused = false;
    if (s->listen_wsi)
        lws_rx_flow_control(s->listen_wsi, 1);
    if (s->admin_wsi)
        lws_rx_flow_control(s->admin_wsi, 1);
}

/* Out of descriptors (or kernel memory): the listener stays readable, so retrying at once would
 * spin. Accept rests briefly instead; one WARN line per episode. */
static void pause_accept(cs_server *s, int e)
{
    atomic_fetch_add(&s->accept_pauses, 1);
    s->accept_paused = true;
    if (s->listen_wsi)
        lws_rx_flow_control(s->listen_wsi, 0);
    if (s->admin_wsi)
        lws_rx_flow_control(s->admin_wsi, 0);
    lws_sul_schedule(s->ctx, 0, &s->accept_resume, accept_resume_cb, ACCEPT_PAUSE_US);
    int64_t now = cs_mono_ns();
    if (!s->pause_warned_at || now - s->pause_warned_at >= REFUSAL_WARN_NS) {
        s->pause_warned_at = now;
        char why[128];
        CS_LOG(CS_LOG_WARN, "accept paused", KV_S("error", cs_go_errno(e, why, sizeof why)),
               KV_I("connections", atomic_load(&s->connections)),
               KV_U("pauses", (uint64_t)atomic_load(&s->accept_pauses)));
    }
}

/* Accepts on the data listener or, with admin set, on --admin-listen: admin connections are
 * held under their own small caps and are never counted as the data port's. */
static int accept_ready(cs_server *s, bool admin)
{
    cs_admission *adm = admin ? s->admin_conns : s->conns;
    /* Bounded per wake-up so a connection storm cannot monopolise the loop. */
    for (int i = 0; i < 64 && !s->accept_paused; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(admin ? s->admin_fd : s->listen_fd, (struct sockaddr *)&ss, &sl,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO || errno == EPERM)
                continue; /* that connection is gone; the next may be fine */
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                pause_accept(s, errno);
            return 0;
        }
        if (s->shutting_down || s->draining) {
            close(fd);
            continue;
        }
        cs_addr_key key = cs_addr_key_of((struct sockaddr *)&ss);
        cs_admit why = cs_admission_enter(adm, &key);
        conn_tag *tag = why == CS_ADMIT_OK ? malloc(sizeof *tag) : NULL;
        if (!tag) {
            char remote[64];
            cs_format_sockaddr((struct sockaddr *)&ss, remote, sizeof remote);
            if (why == CS_ADMIT_OK)
                cs_admission_leave(adm, &key); /* out of memory: refused like the cap */
            if (admin)
                CS_LOG(CS_LOG_DEBUG, "admin connection refused", KV_S("remote", remote));
            else
                note_refusal(s, &key, remote, why == CS_ADMIT_OK ? CS_ADMIT_TOTAL : why);
            close(fd); /* after counting: the peer sees the close once the refusal is counted */
            continue;
        }
        tag->key = key;
        tag->admin = admin;
        /* No Nagle: a chunk goes out the moment it is written. Keepalive finds dead peers, as Go's
         * listener defaults do (15 s idle, 15 s interval). */
        int one = 1, idle = 15, intvl = 15, cnt = 9;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
        if (admin) {
            cs_m_add1(&s->metrics->admin_connections_accepted, 1);
        } else {
            cs_m_add1(&s->metrics->connections_accepted, 1);
            atomic_fetch_add(&s->connections, 1);
        }
        /* The head reader has it until its request head is complete (TLS: until its first byte
         * shows a handshake); it still counts toward the caps meanwhile. */
        if (cs_headreader_add(s->heads, fd, tag) != 0) {
            close(fd);
            release_tag(s, tag);
        }
    }
    return 0;
}

/* A connection whose head the head reader finished, on the I/O thread: lws adopts it with the
 * bytes read so far (TLS: none, lws reads the handshake itself); fd -1: it ended in the head
 * reader, only its count is released. */
static void adopt_head(void *ctx, int fd, void *tag, const char *buf, size_t len)
{
    cs_server *s = ctx;
    conn_tag *t = tag;
    if (fd < 0 || s->shutting_down || s->draining || s->ctx_destroying) {
        if (fd >= 0)
            close(fd);
        release_tag(s, t);
        return;
    }
    /* lws serves the new wsi within this call, before it returns it: callback_stream gives the
     * wsi its tag at its first callback, so that a close during the call releases it. */
    s->adopting = t;
    struct lws *wsi = lws_adopt_socket_vhost_readbuf(s->vhost, fd, buf, len);
    if (s->adopting) {
        s->adopting = NULL;
        if (wsi)
            lws_set_opaque_user_data(wsi, t);
        else
            release_tag(s, t); /* no wsi ever existed; lws closed fd */
    }
}

/* Head reader thread: connections are waiting for adopt_head; cs_server_run drains them once
 * lws_service returns. */
static void heads_ready(void *arg)
{
    cs_server *s = arg;
    lws_cancel_service(s->ctx);
}

/* Every wsi ends here, accepted sockets and the listener alike. */
static void connection_gone(cs_server *s, struct lws *wsi)
{
    conn_tag *tag = lws_get_opaque_user_data(wsi);
    if (!tag)
        return;
    lws_set_opaque_user_data(wsi, NULL);
    release_tag(s, tag);
}

/* Releases what admission counted for an accepted connection. */
static void release_tag(cs_server *s, conn_tag *tag)
{
    if (tag->admin) {
        cs_admission_leave(s->admin_conns, &tag->key);
    } else {
        cs_admission_leave(s->conns, &tag->key);
        atomic_fetch_sub(&s->connections, 1);
    }
    free(tag);
}

static int callback_stream(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                           size_t len)
{
    struct lws_context *ctx = lws_get_context(wsi);
    cs_server *s = ctx ? lws_context_user(ctx) : NULL;
    pss *ps = user;
    (void)in;
    (void)len;
    if (!s)
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    /* Not at WSI_CREATE: lws sets the new wsi's opaque data (to NULL) after that one. */
    if (s->adopting && wsi && reason != LWS_CALLBACK_WSI_CREATE && !lws_get_opaque_user_data(wsi)) {
        lws_set_opaque_user_data(wsi, s->adopting);
        s->adopting = NULL;
    }

    switch (reason) {
    case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
        on_wake(s);
        return 0;
    case LWS_CALLBACK_HTTP:
        return serve_http(s, wsi);
    case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
        return confirm_upgrade(s, wsi);
    case LWS_CALLBACK_ESTABLISHED:
        return subscriber_open(s, wsi, ps) == 0 ? 0 : -1;
    case LWS_CALLBACK_SERVER_WRITEABLE:
        return ps && ps->sub ? subscriber_writable(s, ps->sub) : 0;
    case LWS_CALLBACK_RECEIVE:
        /* Subscribers only ever send control frames. */
        if (ps && ps->sub)
            return close_subscriber(s, ps->sub, CS_CLOSE_POLICY, "unexpected data message");
        return -1;
    case LWS_CALLBACK_CLOSED:
        if (ps)
            subscriber_gone(s, ps);
        return 0;
    case LWS_CALLBACK_WSI_DESTROY:
        connection_gone(s, wsi);
        return 0;
    default:
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    }
}

static int callback_listen(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                           size_t len)
{
    struct lws_context *ctx = lws_get_context(wsi);
    cs_server *s = ctx ? lws_context_user(ctx) : NULL;
    bool admin = s && wsi == s->admin_listener;
    if (s && reason == LWS_CALLBACK_RAW_RX_FILE)
        return accept_ready(s, admin);
    if (s && reason == LWS_CALLBACK_RAW_CLOSE_FILE) {
        int *fd = admin ? &s->admin_fd : &s->listen_fd;
        close(*fd);
        *fd = -1;
        return 0;
    }
    return lws_callback_http_dummy(wsi, reason, user, in, len);
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
    };
    s->source_rc = cs_source_loop_run(&loop, &s->source_err);
    /* Pending chunks still go into the open flow before the stream is declared over. */
    cs_pipeline_flush(s->pipeline);
    atomic_store(&s->source_done, true);
    cs_broadcast_finish(s->bc, s->source_rc != 0);
    wake_all(s);
    return NULL;
}

/* ---- public API ----------------------------------------------------------------------------- */

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
    pthread_mutex_init(&s->reload_mu, NULL);
    pthread_mutex_init(&s->released_mu, NULL);
    pthread_rwlock_init(&s->tokens_rw, NULL);
    if (!s->cfg.max_payload)
        s->cfg.max_payload = CS_MAX_PAYLOAD_SIZE;
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
    if (rc == 0)
        rc = cs_frames_fill_start(&s->frames_fill, cfg->ring, cfg->compress, (int)level, s->chunk_size, err);
    if (rc == 0 && !(s->replay_slots = cs_replay_slots_new(replay_cap(cfg->max_replays, CS_DEFAULT_MAX_REPLAYS),
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

static const struct lws_protocols protocols_template[] = {
    {"corestream", callback_stream, sizeof(pss), 1024, 0, NULL, 0},
    {"cs-listen", callback_listen, 0, 0, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/* Descriptors open in this process now. */
static long open_fds(void)
{
    long n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n > 3 ? n - 3 : 0; /* ".", ".." and the directory's own descriptor */
}

/* The caps in force: the configured ones, with the total held under the descriptor limit less
 * what is open already and CS_FD_RESERVE, so the ring, the source and the loop never run out. */
static int admission_setup(cs_server *s, cs_err *err)
{
    int64_t want = s->cfg.max_connections ? s->cfg.max_connections : CS_DEFAULT_MAX_CONNECTIONS;
    int64_t per = s->cfg.max_connections_per_ip ? s->cfg.max_connections_per_ip
                                                : CS_DEFAULT_MAX_CONNECTIONS_PER_IP;
    if (want < 0)
        want = 0;
    if (per < 0)
        per = 0;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        int64_t room = (int64_t)rl.rlim_cur - open_fds() - CS_FD_RESERVE;
        if (room < 1)
            return cs_err_set(err, 0,
                              "listen on %s: the descriptor limit (%llu) leaves no room for connections "
                              "beyond the %d held in reserve; raise LimitNOFILE or ulimit -n",
                              s->cfg.listen, (unsigned long long)rl.rlim_cur, CS_FD_RESERVE);
        if (want == 0 || want > room)
            want = room;
    }
    if (want > UINT32_MAX)
        want = UINT32_MAX;
    if (per > UINT32_MAX)
        per = UINT32_MAX;
    s->max_conns = (uint32_t)want;
    s->conns = cs_admission_new(s->max_conns, (uint32_t)per);
    if (!s->conns)
        return cs_err_set(err, 0, "listen on %s: out of memory", s->cfg.listen);
    return 0;
}

/* One stream I/O thread per core beyond the lws thread, at least 1, at most CS_WSIO_MAX_THREADS. */
static int io_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN) - 1;
    return n < 1 ? 1 : n > CS_WSIO_MAX_THREADS ? CS_WSIO_MAX_THREADS : (int)n;
}

int cs_server_listen(cs_server *s, cs_err *err)
{
    if (cs_listen_tcp(s->cfg.listen, &s->listen_fd, s->addr, sizeof s->addr, err) != 0)
        return -1;
    if (admission_setup(s, err) != 0)
        return -1;
    bool admin = s->cfg.admin_listen && *s->cfg.admin_listen;
    if (admin && cs_listen_tcp(s->cfg.admin_listen, &s->admin_fd, s->admin_addr, sizeof s->admin_addr, err) != 0)
        return cs_err_prefix(err, "--admin-listen: ");
    if (admin && !(s->admin_conns = cs_admission_new(ADMIN_MAX_CONNECTIONS, ADMIN_MAX_CONNECTIONS_PER_IP)))
        return cs_err_set(err, 0, "listen on %s: out of memory", s->cfg.admin_listen);

    static struct lws_protocols protocols[3];
    memcpy(protocols, protocols_template, sizeof protocols);
    /* One chunk message per send(): otherwise lws cuts a 256 KiB write into 4 KiB pieces through a
     * heap copy per subscriber. */
    protocols[0].tx_packet_size = s->chunk_size + CS_WIRE_CHUNK_HEADER_LEN + 1024;

    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    info.port = CONTEXT_PORT_NO_LISTEN_SERVER;
    info.protocols = protocols;
    info.user = s;
    info.pt_serv_buf_size = 64 * 1024;
    info.max_http_header_data = HEADER_STORE_BYTES;
    info.max_http_header_pool = HEADER_STORES;
    /* Dead peers are found by TCP keepalive, set on each accepted socket: the server never pings
     * (a stalled subscriber could not answer). */
    /* Also the header deadline: a connection whose request is not complete by then is closed. */
    info.timeout_secs = s->cfg.header_timeout_s > 0 ? (unsigned)s->cfg.header_timeout_s
                                                    : CS_DEFAULT_HEADER_TIMEOUT_S;
    info.timeout_secs_ah_idle = info.timeout_secs; /* a request whose headers never finish */
    /* No TLS in lws: a TLS connection never reaches it (the head reader terminates TLS, the TLS
     * I/O threads serve its subscriber). */
    info.options = LWS_SERVER_OPTION_DISABLE_OS_CA_CERTS;
    lws_set_log_level(LLL_ERR, lws_log_line);
    s->ctx = lws_create_context(&info);
    if (!s->ctx)
        return cs_err_set(err, 0, "listen on %s: libwebsockets context creation failed", s->cfg.listen);
    s->vhost = lws_get_vhost_by_name(s->ctx, "default");
    lws_sock_file_fd_type fd = {.filefd = s->listen_fd};
    s->listen_wsi = s->vhost ? lws_adopt_descriptor_vhost(s->vhost, LWS_ADOPT_RAW_FILE_DESC, fd,
                                                          "cs-listen", NULL)
                             : NULL;
    if (!s->listen_wsi)
        return cs_err_set(err, 0, "listen on %s: cannot register the listener", s->cfg.listen);
    if (admin) {
        lws_sock_file_fd_type afd = {.filefd = s->admin_fd};
        s->admin_wsi = lws_adopt_descriptor_vhost(s->vhost, LWS_ADOPT_RAW_FILE_DESC, afd, "cs-listen", NULL);
        if (!s->admin_wsi)
            return cs_err_set(err, 0, "listen on %s: cannot register the listener", s->cfg.admin_listen);
        s->admin_listener = s->admin_wsi;
    }
    lws_sul_schedule(s->ctx, 0, &s->write_check, check_stalled_writes, WRITE_CHECK_US);
    cs_wsio_hooks th = {.ctx = s, .open = io_open, .writable = io_writable, .data = io_data,
                        .gone = io_gone, .wake = io_wake, .tick = io_tick, .discard = io_discard,
                        .leave = io_leave, .moved = io_moved};
    if (cs_wsio_start(&s->wsio, io_threads(), s->cfg.busy_poll_us * CS_US, &th, err) != 0)
        return -1;
    cs_headreader_config hc = {
        .limits = {.uri_max = URI_MAX, .head_max = HEAD_MAX, .fields_max = HEAD_FIELDS_MAX,
                   .pairs_max = HEAD_PAIRS_MAX},
        .tls = s->tls_on,
        .judge_plain = true, /* /stream upgrades: our own 101 and I/O threads */
        .tls_ctx = tls_ctx_now,
        .judge = judge_head,
        .upgraded = head_upgraded,
        .discard = heads_discard,
        .timeout_ns = (int64_t)info.timeout_secs * CS_SEC,
        .ready = heads_ready,
        .ctx = s,
    };
    if (cs_headreader_start(&s->heads, &hc, err) != 0)
        return -1;
    if (!s->cfg.quiet_listen) {
        CS_LOG(CS_LOG_INFO, "corestreamd listening", KV_S("addr", s->addr),
               KV_S("source", s->cfg.source_name ? s->cfg.source_name : ""),
               KV_U("start_ledger", s->cfg.range.from), KV_I("retention", s->cfg.retention),
               KV_U("max_connections", s->max_conns), KV_S("version", cs_build_version()),
               KV_S("commit", cs_build_commit()));
        if (admin)
            CS_LOG(CS_LOG_INFO, "admin endpoints listening", KV_S("addr", s->admin_addr),
                   KV_S("paths", "/healthz /readyz /metrics"));
    }
    return 0;
}

void cs_server_set_jetstream_stats(cs_server *s, void (*fn)(void *arg, cs_metrics_jetstream *out), void *arg)
{
    s->jetstream_stats = fn;
    s->jetstream_arg = arg;
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
    if (pthread_create(&s->source_thread, NULL, source_main, s) != 0)
        return cs_err_set(err, 0, "server: cannot start the source thread");
    s->source_started = true;
    /* Only now: a thread inherits its creator's priority, and the source keeps the daemon's. */
    cs_thread_nice(CS_NICE_LIVE);
    while (!s->loop_done) {
        if (lws_service(s->ctx, 0) < 0)
            break;
        /* Outside any lws callback: adoption serves the new connection at once. */
        cs_headreader_drain(s->heads, adopt_head, s);
        take_released_tags(s);
        bool winding_down = s->shutting_down || s->draining;
        if (winding_down && (atomic_load(&s->subscribers) == 0 || s->deadline_passed))
            s->loop_done = true;
    }
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
    bool tokens = s->cfg.auth_tokens && *s->cfg.auth_tokens; /* s->tokens is the I/O thread's */
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
    pthread_mutex_lock(&s->reload_mu);
    cs_tokens_free(s->tokens_pending);
    s->tokens_pending = fresh;
    pthread_mutex_unlock(&s->reload_mu);
    atomic_store(&s->tokens_reload_pending, true);
    CS_LOG(CS_LOG_INFO, "reload: auth tokens reloaded", KV_S("file", s->cfg.auth_tokens), KV_U("tokens", n));
    wake_all(s);
}

void cs_server_stop(cs_server *s)
{
    atomic_store(&s->stop_requested, true);
    /* Before the cancel: the source it ends would otherwise reach a stream I/O thread as the end
     * of the stream (1000) before the lws thread's decision did (1001). */
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

void cs_server_free(cs_server *s)
{
    if (!s)
        return;
    if (s->source_started) {
        cs_cancel_fire(s->cfg.cancel);
        pthread_join(s->source_thread, NULL);
    }
    /* Before the context: its thread wakes lws, and what it holds is released here. */
    cs_headreader_free(s->heads, adopt_head, s);
    s->heads = NULL;
    cs_wsio_stop(s->wsio); /* its subscribers end here; their tags come back below */
    take_released_tags(s);
    if (s->ctx) {
        s->ctx_destroying = true;
        lws_context_destroy(s->ctx); /* closes every connection: cursors release their flows */
    }
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (s->admin_fd >= 0)
        close(s->admin_fd);
    take_released_tags(s);
    cs_admission_free(s->conns); /* after the context: its teardown releases every connection */
    cs_admission_free(s->admin_conns);
    cs_tokens_free(s->tokens);
    cs_tokens_free(s->tokens_pending);
    pthread_mutex_destroy(&s->reload_mu);
    cs_replay_slots_free(s->replay_slots); /* after the context: every cursor gave its slot back */
    cs_frames_fill_stop(s->frames_fill);
    cs_replay_pool_free(s->replays);
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
