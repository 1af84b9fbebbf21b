/* The TLS I/O threads (`cs-tls-N`): upgraded wss:// subscribers, after the head reader's 101,
 * each on one of N threads with its own epoll, so that no SSL_write to a subscriber shares a
 * thread with libwebsockets' service loop or with the handshakes (docs/TLS-THREADS.md).
 *
 * The module owns sockets and SSLs; the server owns what a connection means, through hooks run
 * on the connection's own thread: open (a new connection; its user pointer), writable (it may
 * write: the server steps its cursor and calls cs_tlsio_write), data (the client sent a data
 * frame), gone (the connection is over; last call for it), wake (cs_tlsio_wake reached the
 * thread) and tick (about once a second).
 *
 * Framing (wsserver.h): a message goes out as one SSL_write of its frame header (in the message's
 * headroom, cs_msg_ws_header) and payload, never copied; a ping is answered with a pong, a close
 * with the same close (then the connection ends); a data frame goes to the data hook; a protocol
 * violation closes with 1002. TCP_NODELAY is set on every connection.
 *
 * Threads: cs_tlsio_start, cs_tlsio_free by the owner; cs_tlsio_add and cs_tlsio_wake from any
 * thread; the functions taking a cs_tlsconn only on that connection's thread (inside a hook). */
#ifndef CS_CORESTREAMD_TLSIO_H
#define CS_CORESTREAMD_TLSIO_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestreamd/server/message.h"

typedef struct cs_tlsio cs_tlsio;
typedef struct cs_tlsconn cs_tlsconn;

typedef struct cs_tlsio_hooks {
    void *ctx;
    /* A new connection on thread `thread` with the caller's arg from cs_tlsio_add: returns the
     * user pointer the other hooks get, or NULL to close it at once (gone is then not called). */
    void *(*open)(void *ctx, int thread, cs_tlsconn *c, void *arg);
    /* cs_tlsio_want_write was asked and nothing is pending: write (cs_tlsio_write). -1: close
     * the connection (after a close frame if cs_tlsio_close queued one). */
    int (*writable)(void *ctx, void *user);
    void (*data)(void *ctx, void *user);
    void (*gone)(void *ctx, void *user);
    void (*wake)(void *ctx, int thread);
    void (*tick)(void *ctx, int thread);
    /* arg of a connection never opened (cs_tlsio_free with it still queued). */
    void (*discard)(void *ctx, void *arg);
} cs_tlsio_hooks;

/* n threads (1..CS_TLSIO_MAX_THREADS). -1 with err. */
#define CS_TLSIO_MAX_THREADS 4
int cs_tlsio_start(cs_tlsio **out, int n, const cs_tlsio_hooks *hooks, cs_err *err);
int cs_tlsio_threads(const cs_tlsio *io);

/* Takes fd (non-blocking, TLS handshake done), ssl and early[0..n) (copied: bytes read past the
 * request head) to the thread fd % n. 0, or -1 out of memory (the caller still owns all). */
int cs_tlsio_add(cs_tlsio *io, int fd, SSL *ssl, const uint8_t *early, size_t n, void *arg);

/* Runs the wake hook on thread `thread` (-1: every thread) soon, once per burst. Any thread. */
void cs_tlsio_wake(cs_tlsio *io, int thread);

/* The connection's thread only. */
void cs_tlsio_want_write(cs_tlsconn *c);
/* Writes m as one binary message: 1 written whole, 0 pending (the message is held; writable is
 * called again once it is out, if wanted), -1 failed. */
int cs_tlsio_write(cs_tlsconn *c, cs_msg *m);
/* Nothing pending: another write now would not wait. */
bool cs_tlsio_can_write(const cs_tlsconn *c);
/* Queues a close frame (code, reason); the connection ends once it is out and the peer answers
 * or a short linger passes. */
void cs_tlsio_close(cs_tlsconn *c, int code, const char *reason);
/* Ends the connection at once (the socket is shut down: a stalled peer). */
void cs_tlsio_drop(cs_tlsconn *c);
int cs_tlsio_fd(const cs_tlsconn *c);

/* Stops and joins the threads, then ends every connection (gone for each, on this thread).
 * cs_tlsio_wake stays safe (it does nothing) until cs_tlsio_free, so threads that wake the
 * server may outlive the stop. */
void cs_tlsio_stop(cs_tlsio *io);
/* Stops if not stopped, and frees. NULL-safe. */
void cs_tlsio_free(cs_tlsio *io);

#endif
