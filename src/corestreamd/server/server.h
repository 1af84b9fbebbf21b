/* SPDX-License-Identifier: Apache-2.0 */
/* corestreamd's server: the HTTP surface on one port (/stream upgrades to a WebSocket subscriber,
 * /healthz, /readyz and /metrics, 404 otherwise; optionally the last three on an admin port too),
 * plaintext or TLS alike: connections accepted and admitted on the accept loop (the thread that
 * calls cs_server_run), TLS handshakes and request heads on cs-heads (headreader.h), answers from
 * routes.c, and every /stream subscriber on the stream I/O threads (docs/STREAM-THREADS.md),
 * plus the source thread and the encoder pools around them. No stream I/O thread compresses,
 * hashes or reads a ledger: they write messages other threads built.
 *
 * HTTP: one request per head, no request bodies (a request that declares one is refused with 413
 * or 400 and closed); a probe, scrape or 404 answer keeps an HTTP/1.1 connection alive for up to
 * 100 requests, each head due within the header timeout of the last answer; a refusal closes it. */
#ifndef CS_CORESTREAMD_SERVER_H
#define CS_CORESTREAMD_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/cancel.h"
#include "corestreamd/stream/metrics.h"
#include "corestreamd/stream/signing.h"
#include "corestreamd/sources/source.h"
#include "store/ring.h"

typedef struct cs_server_config {
    const char *listen;      /* Go net.Listen syntax: ":8462", "127.0.0.1:0", "[::1]:9000" */
    const char *source_name; /* for the listening log line */
    cs_source *source;       /* taken over by cs_server_new, even on failure */
    cs_range range;
    /* How range.from was chosen (start.h: "given", "continue", "default"), for the listening line
     * and /healthz; NULL: not said (embedding, benchrunner). start_ring_latest: with "continue",
     * the ring's latest ledger at start. */
    const char *start_mode;
    uint32_t start_ring_latest;
    cs_ring *ring;           /* taken over by cs_server_new, even on failure */
    cs_cancel *cancel;       /* the run's cancellation, shared with the source; not owned */
    int64_t chunk_size;      /* 0 → 262144 */
    bool compress;
    int64_t compress_workers; /* 0 → 4 */
    int64_t compress_level;   /* 0 → auto (levelctl.h) for live chunks, CS_DEFAULT_COMPRESS_LEVEL
                                 for ring replays (zstd's own 0 is not offered) */
    uint64_t max_payload;     /* 0 → 268435456; smaller only in tests */
    bool hold_until_subscriber; /* benchrunner loopback: every ledger is delivered live */
    int64_t retention;          /* for the listening log line */
    bool linger;                /* keep serving the ring after the source ends, until stopped
                                   (embedding and tests; the daemon exits instead) */
    /* Admission at accept. Connections beyond a cap are closed at once, before any HTTP state.
     * The total is also held under the process's descriptor limit, less what is open at listen
     * and what the rest may hold (fdbudget.h: the ring writer, the stored-frames fill, the
     * replays, the admin port, fd_reserve); cs_server_listen fails when that leaves no room for
     * one connection. 0 means the default; negative means no cap. */
    int64_t max_connections;        /* 0 → CS_DEFAULT_MAX_CONNECTIONS */
    /* Descriptors the caller's own parts (the source, a JetStream publisher) may open at once
     * while the server runs, beyond those open at cs_server_listen: kept out of the connection
     * budget (fdbudget.h). 0: none. */
    uint32_t fd_reserve;
    int64_t max_connections_per_ip; /* per IPv4 address or IPv6 /64; 0 → CS_DEFAULT_MAX_CONNECTIONS_PER_IP */
    int64_t header_timeout_s;       /* a connection's request must be complete by then; 0 → 10 */
    /* A subscriber whose socket takes nothing for this long while a message waits is dropped
     * without a close frame (the frame would wait behind what it does not read). */
    int64_t write_timeout_s; /* 0 → CS_DEFAULT_WRITE_TIMEOUT_S */
    /* Replay admission: subscribers reading the ring at once, in total and per address (as for
     * connections). One more waits, holding nothing, until a replay ends, then starts in arrival
     * order; it is never refused for it. Subscribers following the live flow need no slot. 0
     * means the default; negative means no cap. */
    int64_t max_replays;        /* 0 → CS_DEFAULT_MAX_REPLAYS */
    int64_t max_replays_per_ip; /* 0 → CS_DEFAULT_MAX_REPLAYS_PER_IP */
    int64_t busy_poll_us;       /* stream I/O threads' busy poll before each blocking wait; 0: off */
    /* --auth-tokens: when set, /stream (and /healthz with auth_healthz) needs `Authorization:
     * Bearer <token>` naming a token of this file (tokens.h); cs_server_reload re-reads it. */
    const char *auth_tokens;
    bool auth_healthz;
    /* --tls-cert/--tls-key (PEM; the cert file may hold the chain): https:// and wss:// on the
     * same port, TLS 1.2 or later; a plaintext connection there is closed at its first bytes.
     * --tls-client-ca: clients must present a certificate it signed. cs_server_reload swaps the
     * certificate and key. */
    const char *tls_cert;
    const char *tls_key;
    const char *tls_client_ca;
    /* Progress of the source (cs_source_loop.on_progress): seq 0 once the source loop has started
     * (the listener is bound by then), then each ledger once published. NULL: none. */
    void (*on_progress)(void *arg, uint32_t seq);
    void *progress_arg;
    /* --admin-listen: a second address serving only /healthz, /readyz and /metrics (never
     * /stream), with caps of its own (64 connections, 16 per address) so a flood of the data port
     * cannot lock the probes out. NULL or "": none. TLS and --auth-healthz apply as on --listen. */
    const char *admin_listen;
    /* --signing-key: the source loop signs every ledger with it (stream/signing.h); borrowed, the
     * caller frees it after the server. NULL: unsigned. */
    cs_signing *signing;
    /* The ring as a SEP-54 lake on the data listener (docs/LAKE.md, PROTOCOL.md section 6):
     * /lake/config.json, /lake/ledgers/.config.json and every batch's object, when
     * lake_passphrase is set (copied; NULL or "": no /lake/ route, 404). lake_layout must pass
     * cs_lake_layout_check (zero counts: the defaults). lake_readers threads (cs-lake) make the
     * objects, off the I/O threads; requests beyond them wait, CS_LAKE_QUEUE_PER_READER per
     * reader, then get 503. 0 → CS_LAKE_READERS_DEFAULT. */
    const char *lake_passphrase;
    uint32_t lake_ledgers_per_batch;
    uint32_t lake_batches_per_partition;
    int64_t lake_readers;
} cs_server_config;

#define CS_LAKE_READERS_DEFAULT 2
#define CS_LAKE_READERS_MAX 64
#define CS_LAKE_QUEUE_PER_READER 64

#define CS_DEFAULT_MAX_CONNECTIONS 4096
#define CS_DEFAULT_MAX_CONNECTIONS_PER_IP 256
#define CS_DEFAULT_HEADER_TIMEOUT_S 10
#define CS_DEFAULT_WRITE_TIMEOUT_S 10
/* Eight: a handful of clients catch up side by side on the two replay encoders, while the I/O
 * thread's replay writes stay a small share of its loop. Two per address: one client can replay
 * and re-dial without queueing behind itself. */
#define CS_DEFAULT_MAX_REPLAYS 8
#define CS_DEFAULT_MAX_REPLAYS_PER_IP 2

typedef struct cs_server cs_server;

/* Validates and builds everything that can fail before the port is bound (both zstd encoder pools
 * and the token file included): `server: source range must start at a concrete ledger, not 0`,
 * `server: source range [a,b] ends before it starts`, `server: chunk size …`,
 * `server: compress workers N is outside [1,64]`. */
int cs_server_new(cs_server **out, const cs_server_config *cfg, cs_err *err);

/* The JetStream publisher's counters for /metrics (the corestreamd_jetstream_* families): fn fills
 * out at each scrape, on cs-heads, and must be quick and thread-safe (cs_js_publisher_stats is). Call before cs_server_listen; fn and arg must outlive the server's run. */
void cs_server_set_jetstream_stats(cs_server *s, void (*fn)(void *arg, cs_metrics_jetstream *out), void *arg);

/* The same for an edge's counters (the corestreamd_edge_* families). */
void cs_server_set_edge_stats(cs_server *s, void (*fn)(void *arg, cs_metrics_edge *out), void *arg);

/* The same for the lake exporter's counters (the corestreamd_lake_export_* families, --lake-dir). */
void cs_server_set_lake_export_stats(cs_server *s, void (*fn)(void *arg, cs_metrics_lake_export *out), void *arg);

/* The run token (cs_run_token): every 101 then carries it as `x-corestream-run: <run>`, /healthz
 * as "run", and the listening line as run=; a server without one sends neither (embedded
 * servers, the tests'). Copied; 1 to 64 characters of A-Z a-z 0-9 . _ : - (anything else is
 * ignored). Call before cs_server_run (the daemon does once the ring is claimed). */
void cs_server_set_run(cs_server *s, const char *run);

/* Binds the listeners (`listen on <addr>: <reason>`) and starts the head reader and the stream I/O
 * threads; connections wait in the kernel's backlog until cs_server_run accepts them, so nothing is
 * served, and the ring is neither read nor written, before then: the caller claims the ring
 * (cs_ring_claim) in between. SIGPIPE is ignored from here on when its disposition is still the
 * default (a peer that closes its TLS connection must not end the process); an embedder's own
 * handler is kept. */
int cs_server_listen(cs_server *s, cs_err *err);

/* Logs INFO `corestreamd listening` (addr, source, start_ledger, start and, when the run
 * continues the ring, latest; retention, the connection caps, version, commit; run, when set) and, with
 * --admin-listen, `admin endpoints listening`. The daemon calls it once the ring is claimed. */
void cs_server_log_listening(const cs_server *s);

/* The bound address as logged, e.g. "127.0.0.1:41234" or "[::]:8462". */
const char *cs_server_addr(const cs_server *s);
/* The admin listener's, "" without one. */
const char *cs_server_admin_addr(const cs_server *s);

/* Starts filling in stored frames for retained ledgers without them (frames fill, on cs-frames),
 * then runs the source thread, and the accept loop on the calling thread, until the source ends (subscribers
 * get their close frames first, waited for up to 5 s), the run is stopped (every subscriber gets
 * 1001 `server shutting down`), or the source fails (subscribers get 1011; returns -1 with the
 * source's error). */
int cs_server_run(cs_server *s, cs_err *err);

/* Asks a running server to shut down. Safe from any thread. */
void cs_server_stop(cs_server *s);

/* SIGHUP: re-reads what can be reloaded (the --auth-tokens file, the TLS certificate and key) and
 * logs what it did. A file that fails to load is logged at ERROR and what is in force is kept; a
 * new certificate (a fresh TLS context, swapped in here) serves new connections, open ones keep
 * theirs. New tokens are in force at once: every subscriber whose token is gone is then closed with
 * 1008 `token revoked` by its stream I/O thread. Safe from any thread but the accept loop (it reads
 * files); never concurrently with itself. */
void cs_server_reload(cs_server *s);

/* Waits until ledger seq is in the ring (true) or the source ended without it or timeout_ns
 * passed (false). For embedders and tests that must not poll. */
bool cs_server_wait_retained(cs_server *s, uint32_t seq, int64_t timeout_ns);

/* The broadcaster of the live flows, for a second consumer beside the WebSocket cursors (the
 * JetStream publisher): it may watch and wait on it from its own thread, and must be done with
 * it before cs_server_free. */
struct cs_broadcaster *cs_server_broadcaster(cs_server *s);

int cs_server_subscribers(const cs_server *s);
/* Connections held now (subscribers, HTTP requests in progress, idle keep-alives). */
int cs_server_connections(const cs_server *s);
/* The total cap in force once listening (after the descriptor limit); 0 means none. */
uint32_t cs_server_max_connections(const cs_server *s);
/* The per-address cap in force once listening: the configured one, at most half the total cap in
 * force (so one address never holds every slot); 0 means none. */
uint32_t cs_server_max_connections_per_ip(const cs_server *s);
/* Connections closed at accept since start: over the total cap, over the per-address cap. */
uint64_t cs_server_refused_total(const cs_server *s);
uint64_t cs_server_refused_per_ip(const cs_server *s);
/* How many times accept ran out of descriptors (EMFILE/ENFILE) and paused. */
uint64_t cs_server_accept_pauses(const cs_server *s);
uint64_t cs_server_live_abandons(const cs_server *s);
/* Subscribers reading the ring under a replay slot, and waiting for one. Any thread. */
uint32_t cs_server_replays_running(const cs_server *s);
uint32_t cs_server_replays_waiting(const cs_server *s);
uint64_t cs_server_raw_fallbacks(const cs_server *s);

void cs_server_free(cs_server *s);

#endif
