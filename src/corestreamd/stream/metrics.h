/* SPDX-License-Identifier: Apache-2.0 */
/* corestreamd's Prometheus metrics: the counters the hot paths bump and the text exposition
 * (format 0.0.4) that GET /metrics answers with.
 *
 * Cost on the hot paths: every counter is a relaxed atomic. A counter with one writer thread (the
 * source loop's, the I/O thread's) is bumped with a relaxed load and store,
 * which compiles to plain moves; counters several threads bump (the encoders' chunk counts) use
 * a relaxed fetch-add. Nothing here takes a lock, allocates or makes a
 * system call, except cs_metrics_render, which runs on the I/O thread at each scrape.
 *
 * Threads: cs_metrics_new/free by the server's owner; the cs_m_* bumps from the thread each
 * field names; cs_metrics_render from any thread (cs-heads at each scrape), several at once. */
#ifndef CS_CORESTREAMD_METRICS_H
#define CS_CORESTREAMD_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/strbuf.h"

/* What the source is doing, as /readyz and corestreamd_source_state report it. Written by the
 * source thread (and the server when it stops); read by anyone. */
typedef enum cs_source_state {
    CS_SRC_STARTING = 0,    /* the source thread has not started yet */
    CS_SRC_CATCHING_UP,     /* running, no ledger yet (captive core catching up, a pipe's first record) */
    CS_SRC_STREAMING,       /* at least one ledger emitted, no failure */
    CS_SRC_ENDED,           /* a bounded source is exhausted */
    CS_SRC_STOPPED,         /* the run was cancelled (SIGTERM/SIGINT) */
    CS_SRC_FAILED,          /* the source failed */
    CS_SRC_RING_FAILED,     /* streaming, but the last ring write failed (readiness only) */
    CS_SRC_RECONNECTING,    /* the source's writer went away; it waits for the next (a FIFO) */
    CS_SRC_WAITING,         /* the source skipped a message it could not serve and waits for a good
                               copy of ledger waiting_for (an edge) */
    CS_SRC_STATES
} cs_source_state;

/* The label value of a state: "starting", "catching_up", "streaming", "ended", "stopped",
 * "failed", "ring_failed", "reconnecting", "waiting". */
const char *cs_source_state_name(cs_source_state s);

/* Histogram buckets, in seconds, shared by both latency histograms: T_emit is 7.5 ms at the
 * target shape, publish-to-write a few hundred microseconds on a healthy path. */
#define CS_M_BUCKETS 14

typedef struct cs_m_histogram {
    atomic_uint_fast64_t buckets[CS_M_BUCKETS + 1]; /* not cumulative; the last is +Inf */
    atomic_uint_fast64_t count;
    atomic_uint_fast64_t sum_ns;
} cs_m_histogram;

/* The close codes counted by code; any other goes to the last slot (code="other"). */
#define CS_M_CLOSE_CODES 7

typedef struct cs_metrics {
    /* Source thread. */
    atomic_int source_state;            /* a cs_source_state */
    atomic_uint_fast64_t latest_emitted; /* the last ledger whose END went out; 0: none */
    atomic_uint_fast64_t waiting_for;    /* CS_SRC_WAITING: the ledger waited for */
    atomic_uint_fast64_t latest_emitted_at; /* its END's wall clock, Unix ns; 0: none */
    atomic_uint_fast64_t ledgers_emitted;
    atomic_uint_fast64_t bytes_raw;      /* ledger payload bytes emitted */
    atomic_uint_fast64_t bytes_framing;  /* BEGIN, END and chunk headers emitted */
    cs_m_histogram t_emit;               /* first byte (BEGIN) to last (END) of each ledger */
    /* Encoders (several threads): chunk messages published, by codec; their wire bytes. */
    atomic_uint_fast64_t chunks_zstd, chunks_raw;
    atomic_uint_fast64_t bytes_chunks_wire;
    /* Stream I/O threads: bumped with cs_m_add. */
    atomic_uint_fast64_t sent_bytes_live, sent_bytes_replay; /* message bytes written to sockets */
    /* Of the replay bytes, those of CHUNK messages sent from the ring's stored frames, and of those
     * compressed again at replay (a ledger without stored frames). */
    atomic_uint_fast64_t replay_bytes_stored, replay_bytes_encoded;
    cs_m_histogram publish_to_write;     /* a live message's publish to its write to one subscriber */
    atomic_uint_fast64_t connections_accepted, admin_connections_accepted;
    atomic_uint_fast64_t write_deadline_drops;
    atomic_uint_fast64_t closes[CS_M_CLOSE_CODES];
} cs_metrics;

/* Zeroed counters, state starting. NULL when out of memory. */
cs_metrics *cs_metrics_new(void);
void cs_metrics_free(cs_metrics *m);

/* One writer: a relaxed load and store, no locked instruction. */
static inline void cs_m_add1(atomic_uint_fast64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

/* Several writers. */
static inline void cs_m_add(atomic_uint_fast64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static inline uint64_t cs_m_get(const atomic_uint_fast64_t *c)
{
    return atomic_load_explicit((atomic_uint_fast64_t *)c, memory_order_relaxed);
}

/* Several writers (every stream I/O thread observes publish_to_write). */
void cs_m_observe_ns(cs_m_histogram *h, int64_t ns);

/* Several writers (every I/O thread). */
void cs_m_count_close(cs_metrics *m, int code);

/* The state, for the source thread and the server. */
static inline void cs_m_set_state(cs_metrics *m, cs_source_state s)
{
    atomic_store_explicit(&m->source_state, (int)s, memory_order_relaxed);
}

static inline cs_source_state cs_m_state(const cs_metrics *m)
{
    return (cs_source_state)atomic_load_explicit(&((cs_metrics *)m)->source_state, memory_order_relaxed);
}

/* The JetStream publisher's counters at scrape time (the daemon's hook copies them from
 * cs_js_stats, jetstream/publisher.h: the streaming core itself knows nothing of NATS). */
typedef struct cs_metrics_jetstream {
    uint64_t published, acked, duplicates, ack_failures, stalls;
    uint64_t ledgers, ring_ledgers, gaps, behind_episodes, resyncs, foreign_duplicates, republishes;
    bool behind, connected;
} cs_metrics_jetstream;

/* An edge's counters at scrape time (the daemon's hook copies them from the jetstream source):
 * messages skipped, by reason (names[i] the label value), the ledger waited for (0: none), and
 * the gaps the stream went on without. */
#define CS_M_EDGE_REASONS_MAX 8
typedef struct cs_metrics_edge {
    const char *const *names;
    uint64_t skipped[CS_M_EDGE_REASONS_MAX];
    size_t nreasons;
    uint64_t waiting_for;
    uint64_t gaps, gap_ledgers; /* gaps reported, and the ledgers in them */
    uint64_t ledgers_live, ledgers_stream; /* ledgers verified from the live messages, the stream */
    uint64_t stream_moves;                 /* moves from the live messages to the stream */
} cs_metrics_edge;

/* The lake's readers at scrape time (server/lakeserve.c): what /lake/ object requests got. */
typedef struct cs_metrics_lake {
    uint64_t objects, bytes;  /* 200s, and the object bytes sent (GET) */
    uint64_t not_found;       /* 404s: batches not wholly in the ring */
    uint64_t busy, failed;    /* 503s: no place left; an object that could not be made */
    uint64_t in_progress;     /* requests admitted now: waiting or being made */
} cs_metrics_lake;
/* The lake exporter's counters at scrape time (--lake-dir; the daemon's hook copies them from
 * cs_lake_export_stats_get, lake/lakeexport.h). */
typedef struct cs_metrics_lake_export {
    uint64_t objects, signatures; /* objects written, signature objects (.sig) written */
    uint64_t bytes;               /* the bytes of both */
    uint64_t io_errors, conflicts; /* attempts failed (retried); keys holding other content (kept) */
    uint64_t lost;                /* ledgers lost to the lake */
    uint64_t lag;                 /* ledgers: the ring's latest less the last one the export passed */
} cs_metrics_lake_export;

/* What the server knows at scrape time, beyond the counters. */
typedef struct cs_metrics_view {
    const char *version;      /* build info */
    const char *commit;       /* build info: the git commit built */
    bool compress;
    bool compress_auto;     /* --compress-level auto: build_info says compress_level="auto" */
    int compress_level;     /* the fixed level otherwise */
    int compress_level_now; /* the level given to the last live chunk (corestreamd_compress_level) */
    int compress_workers;
    uint32_t ring_oldest, ring_latest; /* 0/0: empty */
    uint64_t ring_bytes;
    uint64_t ring_frames_bytes; /* cs_ring_frames_bytes */
    uint64_t ring_write_failures; /* cs_ring_health */
    bool ring_degraded;           /* cs_ring_health: writes failing, the ring frozen */
    uint64_t ring_dropped;        /* cs_ring_health: quarantined or found missing since start */
    uint64_t ring_holes;          /* cs_ring_health: sequences in the bounds not held */
    uint64_t ring_io_errors;      /* cs_ring_health: reads that met an I/O error */
    int64_t retention;
    int subscribers;
    int connections;
    uint32_t max_connections;
    uint64_t refused_total, refused_per_ip, accept_pauses;
    uint64_t live_abandons;
    uint64_t raw_fallbacks;
    uint32_t replays_running, replays_waiting;
    bool ready;             /* what /readyz answers: true for 200 */
    int64_t tls_not_after;  /* the served certificate's notAfter, Unix seconds; 0: no TLS, family left out */
    const cs_metrics_jetstream *jetstream; /* NULL: no publisher, the corestreamd_jetstream_* families left out */
    const cs_metrics_edge *edge; /* NULL: not an edge, the corestreamd_edge_* families left out */
    const cs_metrics_lake *lake; /* NULL: the lake is off, the corestreamd_lake_* families left out */
    /* NULL: no --lake-dir, the corestreamd_lake_export_* families left out */
    const cs_metrics_lake_export *lake_export;
} cs_metrics_view;

/* Appends the whole exposition: every family with its HELP and TYPE lines (the
 * corestreamd_jetstream_* ones when v->jetstream is set, corestreamd_tls_certificate_not_after_timestamp_seconds
 * when v->tls_not_after is), then the process
 * metrics read from /proc/self (CPU, RSS, open and max descriptors, start time), which are left
 * out when /proc cannot be read. */
void cs_metrics_render(cs_strbuf *out, const cs_metrics *m, const cs_metrics_view *v);

#endif
