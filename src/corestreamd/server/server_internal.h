/* SPDX-License-Identifier: Apache-2.0 */
/* What the server's own files share (server.c, accept.c, routes.c, subscriber.c): the server's
 * state and the calls between them. Not a public header: nothing outside src/corestreamd/server
 * includes it.
 *
 * Threads (docs/STREAM-THREADS.md has the table):
 *   accept loop  the thread that calls cs_server_run: listening sockets, the admission tables
 *                and every connection's tag, the shutdown and drain decisions. SRV_ON_LOOP()
 *                checks it, in every build (common/invariant.h).
 *   cs-heads     the head reader (headreader.h): TLS handshakes, request heads, the routes'
 *                judge (routes.c) and the 101.
 *   cs-ws-N, cs-ws-bulk  the stream I/O threads (wsio.h): each subscriber and its cursor live
 *                on one of them (subscriber.c); only its own thread touches a subscriber.
 *   cs-source    the source loop (sourceloop.h).
 *   cs-lake      the lake's readers (lakeserve.c): each makes the object of a /lake/ request
 *                the judge handed over, and gives its answer back to the head reader.
 * A field's comment names its owner; atomics are read anywhere. */
#ifndef CS_CORESTREAMD_SERVER_INTERNAL_H
#define CS_CORESTREAMD_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/admission.h"
#include "common/invariant.h"
#include "corestreamd/stream/broadcast.h"
#include "corestreamd/stream/compress.h"
#include "corestreamd/stream/cursor.h"
#include "corestreamd/stream/framesfill.h"
#include "corestreamd/net/headreader.h"
#include "corestreamd/stream/metrics.h"
#include "corestreamd/stream/replay.h"
#include "corestreamd/stream/replayslots.h"
#include "corestreamd/net/request.h"
#include "corestreamd/server/server.h"
#include "corestreamd/net/tls.h"
#include "corestreamd/net/tokens.h"
#include "corestreamd/net/wsio.h"
#include "corestreamd/lake/lakekey.h"
#include "common/strbuf.h"

#define SRV_RUN_MAX 65 /* a run token (cs_server_set_run), NUL included */

/* What admission counted for one accepted connection: it travels with the connection (head
 * reader, then a stream I/O thread) and comes back to the accept loop, which alone releases it. */
typedef struct conn_tag {
    cs_addr_key key;
    bool admin; /* accepted on --admin-listen: /healthz, /readyz and /metrics only */
    struct conn_tag *next; /* on the released list */
} conn_tag;

/* What the judge passes from the 101 to the stream I/O thread's new subscriber. */
typedef struct upgrade_info {
    conn_tag *tag;
    cs_stream_request req;
    char token_name[CS_TOKEN_NAME_MAX + 1];
    uint8_t token_digest[CS_TOKEN_DIGEST_LEN];
} upgrade_info;

typedef struct subscriber subscriber;
typedef struct srv_lake srv_lake;
typedef struct srv_lake_job srv_lake_job;

/* A stream I/O thread's own subscribers and what it has seen of the server's decisions. */
typedef struct io_worker {
    subscriber *subs;
    bool stopping_seen;
    unsigned tokens_gen_seen;
    /* Subscribers on the list, written by its thread, read by publishers: a publish wakes only
     * threads that have one (a subscriber that joins later steps its cursor when it opens). */
    atomic_int nsubs;
} io_worker;

/* The accept loop's own state, apart from the atomics other threads write (GCC may merge reads
 * of neighbouring bools into one wide load, which TSan reports as a race with an atomic beside
 * them). */
typedef struct accept_loop {
    /* Its thread: bound once cs_server_run starts (and by cs_server_free after it); before, the
     * first SRV_ON_LOOP claims it. */
    cs_owner owner;
    int ep;   /* epoll: the listeners and the wake eventfd */
    int evfd; /* srv_wake_loop */
    bool shutting_down; /* a stop was seen: listeners closed, subscribers told 1001 */
    bool draining;      /* the source ended: listeners closed, subscribers finish */
    bool done;
    int64_t deadline;     /* monotonic ns by which the wind-down ends; 0: none */
    int64_t resume_at;    /* monotonic ns accept resumes after running out of descriptors; 0 */
    uint64_t refused_unwarned; /* refusals since the last WARN line */
    int64_t refusal_warned_at; /* monotonic ns of that line; 0: never */
    int64_t pause_warned_at;   /* likewise for accept pauses */
} accept_loop;

struct cs_server {
    cs_server_config cfg;
    size_t chunk_size;
    int workers;
    char addr[80];
    int listen_fd; /* accept loop; -1 once closed */
    char admin_addr[80];
    int admin_fd; /* --admin-listen, as listen_fd */
    cs_metrics *metrics;

    /* The streaming core. */
    cs_broadcaster *bc;
    cs_chunk_pipeline *pipeline;
    cs_replay_pool *replays;
    cs_frames_fill *frames_fill;   /* stored frames for ledgers retained without them */
    cs_replay_slots *replay_slots; /* under its own mutex */
    uint32_t max_replays;          /* the slots' total cap in force; 0: none */
    atomic_uint_fast64_t live_abandons;
    atomic_int subscribers;
    int64_t write_timeout_ns; /* set before any thread starts */

    /* Admission at accept: the tables are the accept loop's; the counters are read anywhere. */
    cs_admission *conns;
    cs_admission *admin_conns; /* its own small caps: probes and scrapes, never subscribers */
    uint32_t max_conns;         /* the caps in force once listening */
    uint32_t max_conns_per_addr;
    atomic_int connections;
    atomic_uint_fast64_t refused_total, refused_per_ip, accept_pauses;

    /* Bearer tokens, read under tokens_rw (cs-heads judging, I/O threads revoking); a reload
     * swaps the table under it and bumps tokens_gen, and each I/O thread then walks its own. */
    bool auth_on; /* --auth-tokens: set once, before any thread starts */
    cs_tokens *tokens;
    pthread_rwlock_t tokens_rw;
    atomic_uint tokens_gen;

    bool tls_on;
    bool tls_store_ready;
    cs_tls_store tls;

    cs_headreader *heads;
    srv_lake *lake; /* the lake's readers; NULL when the lake is off */
    cs_wsio *wsio;
    io_worker tw[CS_WSIO_MAX_THREADS + 1]; /* each its own thread's: the live threads, then bulk */
    /* Tags of connections that ended on a stream I/O thread, for the accept loop to release. */
    pthread_mutex_t released_mu;
    conn_tag *released;

    atomic_bool wake_pending;
    atomic_bool stop_requested;
    atomic_bool stopping; /* subscribers are told 1001 from now on */
    atomic_bool source_done;
    accept_loop *loop;

    pthread_t source_thread;
    bool source_started;
    int source_rc;
    cs_err source_err;
    void (*jetstream_stats)(void *arg, cs_metrics_jetstream *out); /* set before listen */
    void *jetstream_arg;
    void (*edge_stats)(void *arg, cs_metrics_edge *out); /* set before listen */
    void *edge_arg;
    void (*lake_export_stats)(void *arg, cs_metrics_lake_export *out); /* set before listen */
    void *lake_export_arg;
    /* The run token (cs_server_set_run): set before cs_server_run, read by cs-heads for each 101
     * and /healthz (the accept loop's hand-over orders the two). "" when none was set. */
    char run[SRV_RUN_MAX];
};

/* Only on the accept loop: checked in every build. */
#define SRV_ON_LOOP(s) CS_OWNED(&(s)->loop->owner, "accept loop only: admission tables and tags (server_internal.h)")

/* server.c. Any thread: the accept loop runs its wake soon, once per burst. */
void srv_wake_loop(cs_server *s);

/* accept.c: the accept loop. */
int srv_accept_setup(cs_server *s, cs_err *err); /* the epoll; after bind */
/* The connection caps in force, under the descriptor budget (fdbudget.h): last in
 * cs_server_listen, once the threads it starts have their descriptors open. */
int srv_admission_setup(cs_server *s, cs_err *err);
void srv_accept_run(cs_server *s);                /* until the wind-down ends */
void srv_release_tag(cs_server *s, conn_tag *tag); /* accept loop only */
void srv_post_release(cs_server *s, conn_tag *tag); /* any thread: the loop releases it */
void srv_take_released(cs_server *s);               /* accept loop only */
void srv_close_listeners(cs_server *s);             /* accept loop only */
void srv_accept_free(cs_server *s);

/* routes.c: the head reader's judge (headreader.h cfg.judge), on cs-heads. */
int srv_judge_head(void *ctx, int fd, void *tag, const cs_http_head *head, bool last, char **resp,
                   size_t *resp_len, void **arg);

/* lakeserve.c: the lake's readers (cs-lake). The content type of an object (RFC 8878). */
#define CS_LAKE_OBJECT_TYPE "application/zstd"
/* Starts the readers, which answer through heads; *out is set even on failure, for
 * srv_lake_free. Before the accept loop runs. */
int srv_lake_start(srv_lake **out, const cs_server_config *cfg, cs_headreader *heads, cs_err *err);
/* cs-heads: the layout, and the two texts served as they are (with their Last-Modified). */
const cs_lake_layout *srv_lake_layout(const srv_lake *l);
void srv_lake_texts(const srv_lake *l, const char **config_json, const char **manifest_json, int64_t *modified);
/* cs-heads: takes a place for one more request (readers x CS_LAKE_QUEUE_PER_READER in all);
 * false when none is left (the request is answered 503). */
bool srv_lake_admit(srv_lake *l);
/* cs-heads: the job for an admitted request (sig: the batch's signature object, not the
 * object); NULL when out of memory (the place is given back). It goes to the head reader as
 * judge's *arg with CS_HEAD_LATER. */
srv_lake_job *srv_lake_job_new(srv_lake *l, cs_lake_batch b, bool sig, bool head, bool keep);
/* cs-heads: the head reader's later callback (ctx the server): queues the job for a reader. */
void srv_lake_later(void *ctx, cs_head_pending *p, void *arg);
/* A 503 naming msg, with Retry-After: 1 (a reader failed, or no place was left). Any thread. */
void srv_lake_unavailable(cs_strbuf *out, const char *msg, unsigned extra);
/* What the readers answered since the start, for /metrics. Any thread. */
void srv_lake_count(srv_lake *l, cs_metrics_lake *out);
/* cs-heads: a request for a batch the judge found missing (counted with the readers' 404s). */
void srv_lake_not_found(srv_lake *l);
/* Joins the readers; every request still queued is closed unanswered. Before the head reader is
 * freed. NULL-safe; again is a no-op. */
void srv_lake_stop(srv_lake *l);
void srv_lake_free(srv_lake *l);

/* subscriber.c: the stream I/O threads' hooks (wsio.h), and the 101's hand-over (cs-heads). */
void srv_io_hooks(cs_server *s, cs_wsio_hooks *out);
void srv_upgraded(void *ctx, cs_xport *x, void *tag, const unsigned char *early, size_t n, void *arg);
void srv_discard_upgrade(void *ctx, void *arg); /* an upgrade that never reached its thread */

#endif
