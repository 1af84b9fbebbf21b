/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger internals: the stream object and its connections, shared by the files that
 * implement the rl_stream_* API (remoteledger.h).
 *
 *   stream.c      the rl_stream object and the public entry points: new/free/cancel, the pull
 *                 calls (rl_stream_open, _next, _fd, _close, _reset, rl_stream_raw_ledgers)
 *   options.c     rl_options: the caller's struct copied, defaults resolved, checked
 *   conn.c        one connection: dial, TLS and the upgrade, the loop that services it, the
 *                 control frames it writes
 *   conn_input.c  what one connection reads: the upgrade's answer, frames into the assembler,
 *                 the server's close and the transport's failures classified into errors
 *   resume.c      a session's connections: each one from the ledger the tracker expects next,
 *                 and, with resume, the retry budget and the backoff between them
 *   bounds.c      rl_stream_bounds: GET /healthz over a connection of its own
 *
 * Threads: everything here runs on the thread that called the rl_stream_* function, one call at a
 * time per stream, except rl_stream_cancel, which may come from any thread. It only sets
 * `cancelled` and signals the wake descriptors that `mu` guards (live_wake, backoff_wake), which
 * the waits poll; every loop checks `cancelled` before it waits. Error messages are the
 * prototype's, word for word: each function says which it sets. */
#ifndef RLI_STREAM_INTERNAL_H
#define RLI_STREAM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestream/remoteledger.h"
#include "remoteledger/assemble.h"
#include "remoteledger/endpoint.h"
#include "remoteledger/handshake.h"
#include "remoteledger/transport.h"
#include "remoteledger/wsframe.h"
#include "wire/ledgersig.h"

/* Socket reads go into this per-connection buffer, and the framing parser consumes it in place.
 * Measured on loopback (2 vCPUs) with lws's RAW socket before: throughput is flat from 64 KiB to
 * 4 MiB (memory-bound, about 3 GB/s per client core for raw chunks), but 64 KiB and 256 KiB wake
 * the client more often and lengthen the delivery tail of 200 KiB ledgers; 1 MiB gave the best
 * tail and 4 MiB nothing more. */
#define RLI_RBUF_SIZE (1024u << 10)
/* Payload the assembler can take in place (a raw CHUNK's bytes, a fragmented zstd CHUNK's) is read
 * straight into the assembly buffer, at most this much per read. Once frames are this large
 * (CHUNK-sized), a read at a frame boundary takes only RLI_HEAD_READ bytes into rbuf: the frame
 * header and the CHUNK header (2 + 8 + 11 bytes) with a little payload, so the rest of the frame
 * lands in place instead of being read into rbuf and copied. One more read per frame buys a copy
 * less per payload byte. */
#define RLI_INPLACE_MAX (4096u << 10)
#define RLI_INPLACE_FRAME_MIN (16u << 10)
#define RLI_HEAD_READ 64u
/* The message of every RL_ERR_CANCELLED. */
#define RLI_CANCELED_MSG "context canceled"

/* Copies of the string options, which the stream's rl_options points at (options.c). Each is
 * malloc'd and owned by the stream; NULL where the caller's option was NULL. */
typedef struct rli_opt_strings {
    char *tls_ca_file, *tls_ca_dir, *tls_server_name, *tls_cert_file, *tls_key_file, *bearer_token,
        *trusted_keys_file;
} rli_opt_strings;

struct rli_conn;


/* The stream (rl_stream in the public header). Created by rl_stream_new, freed by rl_stream_free;
 * all of it is the calling thread's except cancelled, mu and what mu guards. */
struct rl_stream {
    rl_options opts; /* the caller's, defaults resolved; its strings point into strs */
    rli_url url;
    bool url_ok;
    cs_err url_err;
    char *endpoint;  /* the URL of the last connection's range (malloc'd), NULL before the first */
    cs_err err;
    bool tfb;
    uint32_t tfb_requested, tfb_oldest, tfb_latest;
    rli_asm *asm_;
    struct rli_conn *conn; /* the open session's connection (rl_stream_open), NULL when none */
    bool session;          /* a session is open: rl_stream_next may be called */
    bool session_ended;    /* ...and has ended with end_result (the message is in err) */
    rl_result end_result;
    rl_range range;        /* the session's range, as opened */
    /* Resume (opts.resume_retries != 0): between attempts conn is NULL and the next dial is due
     * at retry_at_ms; failures counts the attempts since the last ledger; reconnects the
     * connections after the first one of the session. */
    int64_t retry_at_ms;
    int64_t failures;
    uint64_t reconnects;
    /* The session's run token (X-Corestream-Run): the first a connection of it answered with (the
     * latest with allow_run_change); "" while none has. Cleared when a session opens. */
    char run[RLI_RUN_MAX + 1];
    /* Signed ledgers (trusted_keys_file): the keys, loaded by rl_stream_new (NULL without), and
     * the session's signing state (sigcheck.c), cleared when a session opens. */
    cs_sig_keyset *keys;
    cs_sig_chain sig;
    int backoff_wake; /* an eventfd rl_stream_cancel signals while no connection is up; -1 */
    int retry_timer;  /* a timerfd readable once retry_at_ms has come: rl_stream_fd between
                         connections; -1 until the first retry is scheduled */
    atomic_bool cancelled;
    pthread_mutex_t mu; /* guards live_wake and backoff_wake: cancel never writes to a descriptor
                           being closed */
    int live_wake;      /* the running call's wake eventfd, -1 when none */
    rli_opt_strings strs; /* the copies the string options point at */
};

/* One connection: a session's (resume.c makes it, stream.c drives it) or rl_stream_bounds'. It
 * belongs to the stream's calling thread; s is borrowed, everything else is owned and freed by
 * rli_conn_free (bounds.c frees its own). */
typedef struct rli_conn {
    rl_stream *s;
    rli_asm *a;     /* borrowed: the stream's assembler (NULL for /healthz) */
    const char *ep; /* the URL that messages name: the stream's endpoint, or the /healthz URL */
    rl_range range;
    int64_t read_limit;
    int wake;                   /* the wake eventfd (published as live_wake) */
    bool ready;                 /* a verified ledger is in the assembler, handed over or about to be */
    bool no_retry;              /* resume must not retry this failure (a refusal, a limit of ours) */
    uint16_t peer_close;        /* the code of the server's close frame, 0 when none came */
    uint32_t ready_seq;

    rli_tp tp;
    int64_t dial_deadline_ms;   /* for the TCP connect; -1: none */
    int64_t hs_deadline_ms;     /* for TLS and the upgrade, until established; -1: none */
    int64_t idle_ms;            /* once established: the idle timeout, -1 for none */
    int64_t last_msg_ms;        /* when the idle clock last restarted (a message, a hand-over) */
    int64_t linger_deadline_ms; /* while linger */
    uint8_t *rbuf;              /* RLI_RBUF_SIZE */
    size_t in_off, in_len;      /* rbuf[in_off, in_len) is read and not yet parsed */
    uint8_t *out;               /* what is still to be written: the request, then control frames */
    size_t out_len, out_off, out_cap;

    bool established;
    bool done;       /* the outcome is decided */
    bool linger;     /* ...but write the close frame first (bounded by linger_deadline_ms) */
    bool closing;    /* a close frame of ours (or the echo of the server's) is due */
    bool rx_off;     /* nothing more is read: a close is on its way out */
    bool drop_after; /* the bytes in out end with that close frame: drop once they are written */
    uint8_t close_payload[RLI_WS_MAX_CONTROL];
    size_t close_len;
    rl_result result;

    bool in_msg;      /* a data message has started and not ended */
    uint64_t msg_len; /* its length so far, as declared by its frames */
    bool big_frames;  /* the last data frame longer than RLI_HEAD_READ was CHUNK-sized */

    char key[RLI_HS_KEY_LEN + 1];
    uint64_t msg_hint; /* the message's length when its first frame is its last, else 0 */
    rli_ws_parser wp;
    bool pong_pending;
    uint8_t pong[RLI_WS_MAX_CONTROL];
    size_t pong_len;
    rli_hs_reader hs;
} rli_conn;

/* ---- stream.c ---- */

/* Sets the wake descriptor rl_stream_cancel signals for the running call (-1: none), under mu.
 * The caller owns the descriptor and unpublishes it (-1) before closing it. */
void rli_stream_publish_wake(rl_stream *s, int wake);

/* ---- options.c ---- */

/* The caller's options, as much of them as its struct_size says it has (in may be NULL), into *o
 * with every zero resolved to its default. 0, or -1 with the message in err (kind
 * RL_ERR_INVALID: struct_size 0, not a multiple of the alignment, or options this library does
 * not know) and *o all defaults. The strings still point at the caller's. */
int rli_opts_copy(rl_options *o, const rl_options *in, cs_err *err);

/* Points o's string options at copies of their own, made into *copies (which the caller owns and
 * frees with rli_opts_free_strings, also after a failure). false when out of memory. */
bool rli_opts_own_strings(rl_options *o, rli_opt_strings *copies);
void rli_opts_free_strings(rli_opt_strings *copies);

/* Options that can never work: 0, or -1 with the message in err (kind RL_ERR_INVALID: a key
 * without a certificate, a control character in the token, busy_poll_ns over its bound). */
int rli_opts_check(const rl_options *o, cs_err *err);

/* ---- conn.c ---- */

/* Decides the connection's outcome, once: the first call sets c->result, c->done and the message
 * (in c->s->err); later calls change nothing and return the outcome already decided. */
rl_result rli_conn_fail(rli_conn *c, rl_result r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void rli_conn_ok(rli_conn *c);        /* ...as RL_OK, the message cleared */
void rli_conn_cancelled(rli_conn *c); /* ...as RL_ERR_CANCELLED; no close frame is waited for */

/* Queues a close frame with this payload (cut to a control frame's 125 bytes): it is written next,
 * within the linger bound, and the connection is then dropped without waiting for an answer.
 * Nothing more is read meanwhile. */
void rli_conn_queue_close_payload(rli_conn *c, const uint8_t *p, size_t n);
/* The same for a status code and a reason (cut to fit). */
void rli_conn_queue_close(rli_conn *c, uint16_t code, const char *reason);

/* Makes room for n more bytes in c->out (realloc'd, owned by c). false when out of memory. */
bool rli_conn_out_reserve(rli_conn *c, size_t n);

/* A timeout option (resolved: positive, or negative for none) in whole milliseconds, rounded up;
 * -1 for none. */
int64_t rli_ns_to_ms(int64_t ns);

/* Connects and runs TLS for wss://, by the dial and handshake deadlines; c->done with the failure
 * when it did not work (RL_ERR_DIAL, RL_ERR_TLS, RL_ERR_DIAL_TIMEOUT, RL_ERR_HANDSHAKE_TIMEOUT,
 * RL_ERR_CANCELLED, RL_ERR_NOMEM). Allocates c->rbuf and c->wake, and publishes the wake for
 * rl_stream_cancel: rli_conn_free undoes all of it. */
void rli_conn_dial(rl_stream *s, rli_conn *c);

/* Dials, runs TLS and the upgrade for target (the request target, borrowed): RL_OK once the
 * server's 101 is in, or the failure, with c->done. */
rl_result rli_conn_start(rl_stream *s, rli_conn *c, const char *target);

/* Drops the connection (anything due has been written, or given up on), unpublishes its wake
 * descriptor and frees it all. NULL is a no-op. */
void rli_conn_free(rl_stream *s, rli_conn *c);

typedef enum rli_serve_status {
    RLI_SERVE_DONE,        /* the outcome is decided (c->result) and any close frame of ours is out */
    RLI_SERVE_READY,       /* a ledger is ready (c->ready) */
    RLI_SERVE_ESTABLISHED, /* the upgrade is done (only when asked for) */
    RLI_SERVE_AGAIN,       /* the call's own deadline passed first */
} rli_serve_status;

/* Runs the connection until one of the above. until_established: return as soon as the upgrade is
 * done. call_deadline_ms: the caller's own bound (-1: none); it never cuts short a close frame
 * on its way out. Failures (c->result, the message in c->s->err) are those of conn_input.c, the
 * idle and handshake timeouts, RL_ERR_CANCELLED and RL_ERR_NOMEM. */
rli_serve_status rli_conn_serve(rli_conn *c, bool until_established, int64_t call_deadline_ms);

/* ---- conn_input.c ---- */

/* What one read got, or what is left of it: *used bytes were parsed. Until the upgrade is done
 * only the response head is taken, so the frames after it wait for the first rl_stream_next; a
 * 101 whose X-Corestream-Run is not the session's run ends the connection there (RL_ERR_RUN_CHANGED,
 * or RL_ERR_PROTOCOL for a malformed token; never retried) with its close frame queued.
 * Afterwards payload goes to the assembler straight from in (rbuf, or the slot of
 * rli_conn_rx_slot); parsing stops after a ledger's END (c->ready). A failure decides the
 * outcome (RL_ERR_DIAL or RL_ERR_TLS for a refused upgrade; RL_ERR_READ, RL_ERR_TRUNCATED,
 * RL_ERR_TOO_FAR_BEHIND, RL_ERR_PROTOCOL, RL_ERR_GAP, RL_ERR_NOMEM after it) and may queue a close.
 * Returns -1 when the connection must be dropped now. */
int rli_conn_on_bytes(rli_conn *c, const uint8_t *in, size_t len, size_t *used);

/* Where the next read may land in place: inside a data frame's payload that the assembler takes
 * as it is (see rli_asm_recv_slot), at most what the frame has left, so the read holds no header.
 * The slot is the assembler's. NULL: read into rbuf. */
uint8_t *rli_conn_rx_slot(rli_conn *c, size_t *room);

/* The connection is gone (closed by the server, or reset): RL_ERR_DIAL before the upgrade,
 * RL_ERR_READ after it, RL_ERR_CANCELLED after a cancel. */
void rli_conn_on_closed(rli_conn *c);

/* The transport failed. A TLS failure is reported in its words (RL_ERR_TLS while dialing,
 * RL_ERR_READ after); a plain socket error reads as rli_conn_on_closed. */
void rli_conn_on_transport_error(rli_conn *c);

/* ---- sigcheck.c ---- */

/* The ledger the assembler just completed, against the session's trusted keys (s->keys non-NULL):
 * 0, the state advanced; or -1 with err (kind RL_ERR_SIGNATURE, the messages of
 * rl_options.trusted_keys_file). */
int rli_sigcheck(rl_stream *s, const rli_asm *a, cs_err *err);

/* ---- resume.c ---- */

/* Connects the session (s->conn, from the ledger the tracker expects next; the range's start when
 * first), retrying within the budget when resume is on. RL_OK, RL_AGAIN (the call's deadline came
 * during a backoff: the attempt stays scheduled), or the last failure with s->conn NULL (the
 * errors of rli_endpoint_build, rli_conn_start, RL_ERR_CANCELLED, RL_ERR_NOMEM). */
rl_result rli_resume_reconnect(rl_stream *s, bool first, int64_t call_deadline_ms);

/* Whether resume may retry the end of this connection: the transport failing, the server closing
 * before the range was done (a restart's 1001 included), the timeouts. Never a 4001, a gap, a
 * protocol violation, a cancel, or a refusal. */
bool rli_resume_retryable_end(const rli_conn *c);

/* Whether resume may try once more after a failure: then the attempt is scheduled (retry_at_ms,
 * and the timer rl_stream_fd hands out armed). */
bool rli_resume_schedule_retry(rl_stream *s);

#endif
