/* SPDX-License-Identifier: Apache-2.0 */
/* The stream I/O threads (`cs-ws-N`): upgraded /stream subscribers, ws:// and wss:// alike, after
 * the head reader's 101, each on one of N live threads with its own epoll, so that no write to a
 * subscriber shares a thread with accepting or with the handshakes (docs/STREAM-THREADS.md). Beside
 * them one background thread (`cs-ws-bulk`, index N, at cs_thread_background_nice: nice 19 by
 * default) serves the connections added with bulk (catch-ups): its sends take what the
 * live threads leave of the cores. cs_wsio_move hands a connection to another thread (a catch-up
 * that reached the live flow goes to a live one).
 *
 * The module owns the connections' transports (xport.h); the server owns what a connection means, through hooks run
 * on the connection's own thread: open (a new connection; its user pointer), writable (it may
 * write: the server steps its cursor and calls cs_wsio_write), data (the client sent a data
 * frame), gone (the connection is over; last call for it), wake (cs_wsio_wake reached the
 * thread) and tick (about once a second).
 *
 * Framing (wsserver.h): a message's frame header is written once into its headroom
 * (cs_msg_ws_header) and goes out with the payload. Plaintext and TLS alike: the messages a
 * writable hook hands over (up to 16, about 1 MiB) are queued, each holding its reference, and go
 * out with any pong or close frame in one gather write (cs_xport_writev) at the end of the turn:
 * one writev(2) on plaintext, records sealed into the transport's buffer and sent in large writes
 * on TLS. What the socket did not take resumes mid-message on EPOLLOUT. A ping is answered with a pong, a close with the
 * same close (then the connection ends); a data frame goes to the data hook; a protocol violation
 * closes with 1002. TCP_NODELAY is set on every connection.
 *
 * Threads: cs_wsio_start, cs_wsio_free by the owner; cs_wsio_add and cs_wsio_wake from any
 * thread; the functions taking a cs_wsconn only on that connection's thread (inside a hook),
 * checked in every build: each thread binds an owner record as it starts (cs_wsio_thread_owner,
 * common/invariant.h), and a call on another thread logs `thread contract violated` and aborts.
 * Every hook of a connection runs on its thread, its last (gone) included, at a stop too. */
#ifndef CS_CORESTREAMD_WSIO_H
#define CS_CORESTREAMD_WSIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/invariant.h"
#include "transport/xport.h"
#include "corestreamd/stream/message.h"

typedef struct cs_wsio cs_wsio;
typedef struct cs_wsconn cs_wsconn;

typedef struct cs_wsio_hooks {
    void *ctx;
    /* A new connection on thread `thread` with the caller's arg from cs_wsio_add: returns the
     * user pointer the other hooks get, or NULL to close it at once (gone is then not called). */
    void *(*open)(void *ctx, int thread, cs_wsconn *c, void *arg);
    /* cs_wsio_want_write was asked and nothing is pending: write (cs_wsio_write). -1: close
     * the connection (after a close frame if cs_wsio_close queued one). */
    int (*writable)(void *ctx, void *user);
    void (*data)(void *ctx, void *user);
    void (*gone)(void *ctx, void *user);
    void (*wake)(void *ctx, int thread);
    void (*tick)(void *ctx, int thread);
    /* arg of a connection never opened (cs_wsio_free with it still queued). */
    void (*discard)(void *ctx, void *arg);
    /* cs_wsio_move: leave runs on the old thread as the connection leaves it (its last call
     * there; under the target's inbox lock: it may not call into this module), moved on the new
     * thread `thread` before any other hook there. In between (in transit) no hook runs for it; a
     * stop meanwhile has the target adopt it (moved) and end it (gone), on the target's thread. */
    void (*leave)(void *ctx, void *user);
    void (*moved)(void *ctx, int thread, void *user);
} cs_wsio_hooks;

/* n live threads (1..CS_WSIO_MAX_THREADS) and the background one. busy_poll_ns > 0: a thread about
 * to block in epoll_wait first polls without blocking for up to that long (--busy-poll-us),
 * trading a core's idle time for the wake-up latency of a blocked thread. *out is set before the
 * first thread starts, so the hooks may read the caller's copy of it. -1 with err (*out NULL). */
#define CS_WSIO_MAX_THREADS 4
int cs_wsio_start(cs_wsio **out, int n, int64_t busy_poll_ns, const cs_wsio_hooks *hooks, cs_err *err);
/* The live threads' count N (0..N-1), and the background thread's index (N). */
int cs_wsio_threads(const cs_wsio *io);
int cs_wsio_bulk_thread(const cs_wsio *io);

/* Takes the transport x (its socket non-blocking; TLS: handshake done) and early[0..n) to the
 * background thread (bulk) or the live thread x->fd % N. early: the bytes read past the request head
 * (frames the client sent right behind it), copied, all of them: their frames are acted on, in
 * order, on the connection's thread before the socket is read. n has no limit here (the head
 * reader's head limit bounds it); past 1 KiB the copy is a heap buffer of n bytes, freed once what
 * is left of them unparsed fits 1 KiB (after the first turn: a partial frame at most), at the
 * latest when the connection ends. 0, or -1 out of memory (the caller still owns all: x, early,
 * arg). */
int cs_wsio_add(cs_wsio *io, cs_xport *x, const uint8_t *early, size_t n, bool bulk, void *arg);

/* Runs the wake hook on thread `thread` (-1: every thread, the background one too) soon, once per
 * burst. Any thread. */
void cs_wsio_wake(cs_wsio *io, int thread);

/* The owner record of stream I/O thread `thread` (0..N), bound by that thread as it starts and
 * kept after it stops: what the checks of "only on that connection's thread" compare with
 * (CS_OWNED(cs_wsio_thread_owner(io, t), ...); cs_owner_mine for a question). Any thread. */
cs_owner *cs_wsio_thread_owner(cs_wsio *io, int thread);

/* The connection's thread only (checked in every build). */
void cs_wsio_want_write(cs_wsconn *c);
/* Queues m as one binary message for the turn's gather write, holding a reference until the
 * transport has taken its last byte: 1, or -1 (the connection is ending, or the queue is full:
 * ask cs_wsio_can_write first). */
int cs_wsio_write(cs_wsconn *c, cs_msg *m);
/* Another write now would be queued (the turn's queue has room: 16 messages, 1 MiB). */
bool cs_wsio_can_write(const cs_wsconn *c);
/* Queues a close frame (code, reason); the connection ends once it is out and the peer answers
 * or a short linger passes. */
void cs_wsio_close(cs_wsconn *c, int code, const char *reason);
/* Ends the connection at once (the socket is shut down: a stalled peer). */
void cs_wsio_drop(cs_wsconn *c);
int cs_wsio_fd(const cs_wsconn *c);
/* Hands c to thread `thread` (0..N) at a message boundary: once nothing of a message is waiting
 * for the socket (the turn's queue taken whole by the transport, and nothing left in it), at the
 * end of this thread's round, c leaves this epoll (leave hook) and goes through the target's
 * inbox (moved hook there), with its unread bytes, pong and transport; a pending want_write
 * comes along. Until
 * it leaves, no writable hook runs for it (the caller writes nothing more here). A connection
 * that closes or is dropped first stays and ends here. No-op for its own thread or a move already
 * asked. */
void cs_wsio_move(cs_wsconn *c, int thread);

/* Stops and joins the threads. Each thread ends its connections (gone for each) on itself before
 * it exits, those in transit to it included (moved, then gone); connections added meanwhile and
 * never opened are discarded here. cs_wsio_wake stays safe (it does nothing) until cs_wsio_free,
 * so threads that wake the server may outlive the stop. */
void cs_wsio_stop(cs_wsio *io);
/* Stops if not stopped, and frees. NULL-safe. */
void cs_wsio_free(cs_wsio *io);

#endif
