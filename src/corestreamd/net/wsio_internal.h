/* SPDX-License-Identifier: Apache-2.0 */
/* What the stream I/O threads' two files share: wsio.c (the threads: their loop, inboxes, moves,
 * start and stop) and wsconn.c (one connection's reads and writes: frames in, messages, pongs and
 * close frames out, through the connection's transport, xport.h). Not a public header. Everything here is the owning
 * thread's (a connection's: its worker's), but for what a worker's comment says. */
#ifndef CS_CORESTREAMD_WSIO_INTERNAL_H
#define CS_CORESTREAMD_WSIO_INTERNAL_H

#include "corestreamd/net/wsio.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/godur.h"
#include "common/invariant.h"
#include "common/thread.h"
#include "corestreamd/net/wsserver.h"
#include "transport/xport.h"

/* Client frames are control frames (131 bytes at most) or refused at the header, so this holds any
 * partial frame with room to spare; only early bytes (cs_wsio_add) may need more, for a while. */
#define RBUF 1024
#define LINGER_NS (2 * CS_SEC) /* after our close frame, how long the peer's answer is waited for */
/* A close frame stuck behind a write the peer does not read: the server's write deadline no
 * longer watches a closing subscriber, so this bounds it (as the server's per-message bound). */
#define CLOSE_SEND_NS (10 * CS_SEC)
#define EVENTS_PER_WAIT 64
#define TICK_NS CS_SEC
/* What one turn may queue for the transport's gather write. A catch-up subscriber's chunks are
 * 30 KB-256 KB, so a turn is a few hundred KB to 1 MiB in one call instead of one send per chunk;
 * the byte bound keeps one fast reader from holding the thread long while others wait. */
#define OUT_QUEUE 16
#define OUT_QUEUE_BYTES (1u << 20)

/* A queued message: header (in its headroom) and payload, contiguous. */
typedef struct qmsg {
    cs_msg *m;
    const uint8_t *p;
    size_t len;
} qmsg;

typedef struct worker worker;

struct cs_wsconn {
    worker *w;
    cs_xport *x; /* plaintext or TLS: the only way to the socket */
    int fd;      /* x->fd, for epoll */
    void *user, *arg;
    /* The client's bytes not parsed yet, rlen of rcap. rbuf is rbuf_own, except after more early
     * bytes than it holds: then a heap buffer of their size, until what is left of them fits
     * rbuf_own again (read_frames parses them all first, so that is the first round). */
    uint8_t *rbuf;
    size_t rlen, rcap;
    uint8_t rbuf_own[RBUF];
    uint8_t pong[2 + CS_WSS_MAX_CONTROL], closef[2 + CS_WSS_MAX_CONTROL];
    size_t pong_len, close_len;
    bool want, in_ready, doomed, closing, close_sent, shut_sent, end_after_close;
    bool out_armed;
    /* Part of the pong is written (pong_off): the rest goes first, and a newer ping may not
     * rewrite it. */
    bool pong_inflight;
    /* cs_wsio_move asked for thread move_to (-1: none): the connection leaves once nothing of a
     * message is waiting for the socket; until then no writable hook runs for it here. moved: it
     * sits in the target's inbox, opened there with the moved hook rather than open. */
    int move_to;
    bool in_moving, moved;
    /* Messages queued by cs_wsio_write during the writable hook, handed (with a pong and the close
     * frame behind them) to one cs_xport_writev at the end of the turn. Each holds its reference
     * until the transport has taken its last byte; q[qhead] has qoff bytes taken already. */
    qmsg q[OUT_QUEUE];
    unsigned qhead, qn;
    size_t qbytes; /* not yet taken, over the queue */
    size_t qoff, pong_off, close_off;
    int64_t linger_until;
    int64_t close_by; /* closing, the close frame not out yet: ended at this time */
    cs_wsconn *prev, *next, *ready_next, *doomed_next, *moving_next;
};

struct worker {
    cs_wsio *io;
    int idx, ep, evfd;
    pthread_t th;
    cs_owner owner; /* its thread, bound as it starts: what the connection checks compare with */
    bool started;
    atomic_bool wake_pending;
    pthread_mutex_t mu;
    cs_wsconn *inbox; /* under mu */
    /* Under mu: the thread has stopped taking connections (its stop, after which it adopts what
     * its inbox holds and ends every connection it has): no move hands it another. */
    bool closed;
    cs_wsconn *conns, *ready, *ready_tail, *doomed, *moving;
};

struct cs_wsio {
    cs_wsio_hooks h;
    int n;   /* live threads: 0..n-1; the background thread is w[n] */
    int all; /* n + 1 */
    int64_t busy_ns; /* 0: block at once */
    atomic_bool stop;
    bool stopped;
    worker w[CS_WSIO_MAX_THREADS + 1];
};

/* Only on c's own thread: checked in every build (common/invariant.h). */
#define CONN_THREAD "stream I/O connection: its own thread only (wsio.h)"
#define ON_CONN_THREAD(c) CS_OWNED(&(c)->w->owner, CONN_THREAD)

/* wsconn.c, on the connection's thread. */
void wsc_doom(cs_wsconn *c);            /* ends c at the end of its thread's round */
int wsc_flush(cs_wsconn *c);            /* writes what is queued; -1: the connection failed */
void wsc_push_ready(cs_wsconn *c);      /* c has a writable turn due */
bool wsc_out_idle(const cs_wsconn *c);  /* nothing of a message waits for the socket */
void wsc_read_frames(cs_wsio *io, cs_wsconn *c); /* reads and answers what the client sent */

#endif
