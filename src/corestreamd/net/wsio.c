#include "corestreamd/net/wsio.h"

#include <assert.h>
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
#include "common/thread.h"
#include "corestreamd/net/wsserver.h"

/* Client frames are control frames (131 bytes at most) or refused at the header, so this holds any
 * partial frame with room to spare; only early bytes (cs_wsio_add) may need more, for a while. */
#define RBUF 1024
#define LINGER_NS (2 * CS_SEC) /* after our close frame, how long the peer's answer is waited for */
/* A close frame stuck behind a write the peer does not read: the server's write deadline no
 * longer watches a closing subscriber, so this bounds it (as the server's per-message bound). */
#define CLOSE_SEND_NS (10 * CS_SEC)
#define EVENTS_PER_WAIT 64
#define TICK_NS CS_SEC
/* Plaintext: what one writev may carry. A catch-up subscriber's chunks are 30 KB-256 KB, so a turn
 * is a few hundred KB to 1 MiB in one call instead of one send per chunk; the byte bound keeps one
 * fast reader from holding the thread long while others wait. */
#define PLAIN_QUEUE 16
#define PLAIN_QUEUE_BYTES (1u << 20)

/* A queued plaintext message: header (in its headroom) and payload, contiguous. */
typedef struct qmsg {
    cs_msg *m;
    const uint8_t *p;
    size_t len;
} qmsg;

typedef struct worker worker;

struct cs_wsconn {
    worker *w;
    int fd;
    SSL *ssl; /* NULL: plaintext */
    void *user, *arg;
    /* The client's bytes not parsed yet, rlen of rcap. rbuf is rbuf_own, except after more early
     * bytes than it holds: then a heap buffer of their size, until what is left of them fits
     * rbuf_own again (read_frames parses them all first, so that is the first round). */
    uint8_t *rbuf;
    size_t rlen, rcap;
    uint8_t rbuf_own[RBUF];
    cs_msg *pend; /* TLS: a message being written: the same pointer and length go to SSL_write again */
    const uint8_t *pend_ptr;
    size_t pend_len;
    uint8_t pong[2 + CS_WSS_MAX_CONTROL], closef[2 + CS_WSS_MAX_CONTROL];
    size_t pong_len, close_len;
    bool want, in_ready, doomed, closing, close_sent, shut_sent, end_after_close;
    bool out_armed;
    /* The pong met SSL_ERROR_WANT_WRITE: OpenSSL holds it half-written, so it goes again (same
     * buffer, same length) before any other write, and a newer ping may not rewrite it. Plaintext:
     * part of it is written (pong_off), the rest goes first. */
    bool pong_inflight;
    /* cs_wsio_move asked for thread move_to (-1: none): the connection leaves once nothing of a
     * message is waiting for the socket; until then no writable hook runs for it here. moved: it
     * sits in the target's inbox, opened there with the moved hook rather than open. */
    int move_to;
    bool in_moving, moved;
    /* Plaintext: messages queued by cs_wsio_write during the writable hook, written (with a pong
     * and the close frame behind them) by one writev at the end of the turn. Each holds its
     * reference until its last byte is out; q[qhead] has qoff bytes out already. */
    qmsg q[PLAIN_QUEUE];
    unsigned qhead, qn;
    size_t qbytes; /* not yet written, over the queue */
    size_t qoff, pong_off, close_off;
    int64_t linger_until;
    int64_t close_by; /* closing, the close frame not out yet: ended at this time */
    cs_wsconn *prev, *next, *ready_next, *doomed_next, *moving_next;
};

struct worker {
    cs_wsio *io;
    int idx, ep, evfd;
    pthread_t th;
    bool started;
    atomic_bool wake_pending;
    pthread_mutex_t mu;
    cs_wsconn *inbox; /* under mu */
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

static void doom(cs_wsconn *c)
{
    if (c->doomed)
        return;
    c->doomed = true;
    c->doomed_next = c->w->doomed;
    c->w->doomed = c;
}

static void arm(cs_wsconn *c, bool out)
{
    if (c->out_armed == out)
        return;
    struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = c};
    if (epoll_ctl(c->w->ep, EPOLL_CTL_MOD, c->fd, &ev) == 0)
        c->out_armed = out;
    else
        doom(c);
}

/* One SSL_write of p[0..len): 1 done, 0 wants the socket again, -1 failed. */
static int ssl_put(cs_wsconn *c, const uint8_t *p, size_t len)
{
    ERR_clear_error();
    int n = SSL_write(c->ssl, p, (int)len);
    if (n > 0)
        return 1;
    int e = SSL_get_error(c->ssl, n);
    if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ)
        return 0;
    ERR_clear_error();
    return -1;
}

static void close_out(cs_wsconn *c)
{
    c->close_sent = true;
    c->linger_until = cs_mono_ns() + LINGER_NS;
}

/* Plaintext output, in the order one writev carries it: a pong goes at the first frame boundary
 * (before the queue, or after the message the last writev left half-written), then the queued
 * messages, then the close frame. seg[i] says what iov[i] is: -1 the pong, -2 the close frame,
 * k >= 0 the k-th queued message. */
static int plain_layout(const cs_wsconn *c, struct iovec *iov, int *seg)
{
    int n = 0;
    bool pong_front = c->pong_len && (c->pong_off || c->qoff == 0 || !c->qn);
    if (pong_front) {
        seg[n] = -1;
        iov[n++] = (struct iovec){(void *)(c->pong + c->pong_off), c->pong_len - c->pong_off};
    }
    for (unsigned i = 0; i < c->qn; i++) {
        const qmsg *e = &c->q[(c->qhead + i) % PLAIN_QUEUE];
        size_t skip = i == 0 ? c->qoff : 0;
        seg[n] = (int)i;
        iov[n++] = (struct iovec){(void *)(e->p + skip), e->len - skip};
        if (i == 0 && c->pong_len && !pong_front) {
            seg[n] = -1;
            iov[n++] = (struct iovec){(void *)c->pong, c->pong_len};
        }
    }
    if (c->close_len && !c->close_sent) {
        seg[n] = -2;
        iov[n++] = (struct iovec){(void *)(c->closef + c->close_off), c->close_len - c->close_off};
    }
    return n;
}

/* Takes w written bytes off the output laid out as iov/seg. */
static void plain_consume(cs_wsconn *c, const struct iovec *iov, const int *seg, int n, size_t w)
{
    unsigned done_msgs = 0;
    for (int i = 0; i < n && w; i++) {
        size_t k = iov[i].iov_len < w ? iov[i].iov_len : w;
        w -= k;
        if (seg[i] == -1) {
            c->pong_off += k;
            if (c->pong_off == c->pong_len)
                c->pong_len = c->pong_off = 0;
        } else if (seg[i] == -2) {
            c->close_off += k;
            if (c->close_off == c->close_len)
                close_out(c);
        } else {
            c->qbytes -= k;
            c->qoff += k;
            if (k == iov[i].iov_len) {
                done_msgs++;
                c->qoff = 0;
            }
        }
    }
    for (; done_msgs; done_msgs--) {
        cs_msg_release(c->q[c->qhead].m);
        c->q[c->qhead].m = NULL;
        c->qhead = (c->qhead + 1) % PLAIN_QUEUE;
        c->qn--;
    }
    c->pong_inflight = c->pong_off > 0;
}

/* Plaintext: one writev of what is pending (plain_layout). 1 all out, 0 the socket is full, -1
 * failed. */
static int plain_put(cs_wsconn *c)
{
    for (;;) {
        struct iovec iov[PLAIN_QUEUE + 2];
        int seg[PLAIN_QUEUE + 2];
        int n = plain_layout(c, iov, seg);
        if (n == 0)
            return 1;
        size_t want = 0;
        for (int i = 0; i < n; i++)
            want += iov[i].iov_len;
        ssize_t w = writev(c->fd, iov, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        }
        plain_consume(c, iov, seg, n, (size_t)w);
        if ((size_t)w < want)
            return 0; /* the socket is full: the rest goes on EPOLLOUT */
    }
}

/* TLS: one SSL_write at a time, in order: a pong being retried, the message, a pong, the close
 * frame. 1 all out, 0 waiting for the socket, -1 failed. */
static int ssl_flush(cs_wsconn *c)
{
    int r = 1;
    if (c->pong_inflight) {
        r = ssl_put(c, c->pong, c->pong_len);
        if (r == 1) {
            c->pong_len = 0;
            c->pong_inflight = false;
        }
    }
    if (r == 1 && c->pend) {
        r = ssl_put(c, c->pend_ptr, c->pend_len);
        if (r == 1) {
            cs_msg_release(c->pend);
            c->pend = NULL;
        }
    }
    if (r == 1 && c->pong_len) {
        r = ssl_put(c, c->pong, c->pong_len);
        if (r == 1)
            c->pong_len = 0;
        else if (r == 0)
            c->pong_inflight = true;
    }
    if (r == 1 && c->close_len && !c->close_sent) {
        r = ssl_put(c, c->closef, c->close_len);
        if (r == 1)
            close_out(c);
    }
    return r;
}

/* Writes what is pending in order: the message, a pong, the close frame. 1 all out, 0 waiting
 * for the socket, -1 failed (the connection is doomed). */
static int flush(cs_wsconn *c)
{
    int r = c->ssl ? ssl_flush(c) : plain_put(c);
    if (r == 1 && c->close_sent && !c->shut_sent) {
        c->shut_sent = true;
        if (c->ssl) {
            ERR_clear_error();
            SSL_shutdown(c->ssl); /* close_notify; the peer's close frame or EOF ends it */
            ERR_clear_error();
        }
        if (c->end_after_close)
            doom(c);
    }
    if (r < 0) {
        doom(c);
        return -1;
    }
    arm(c, r == 0);
    return r;
}

static void push_ready(cs_wsconn *c)
{
    if (c->in_ready || c->doomed || c->closing || c->move_to >= 0)
        return;
    c->in_ready = true;
    c->ready_next = NULL;
    if (c->w->ready_tail)
        c->w->ready_tail->ready_next = c;
    else
        c->w->ready = c;
    c->w->ready_tail = c;
}

/* Nothing of a message is waiting for the socket. */
static bool out_idle(const cs_wsconn *c)
{
    return c->ssl ? !c->pend : c->qn == 0;
}

/* The stream I/O thread running here (cs_wsio_on_thread); NULL on any other thread. */
static _Thread_local const worker *tl_worker;

bool cs_wsio_on_thread(const cs_wsio *io, int thread)
{
    if (!tl_worker)
        return atomic_load(&((cs_wsio *)io)->stop); /* cs_wsio_stop ends connections on its caller */
    return tl_worker->io == io && tl_worker->idx == thread;
}

/* Only on c's own thread (asserted where assertions are on). */
#define ON_CONN_THREAD(c) assert(cs_wsio_on_thread((c)->w->io, (c)->w->idx))

void cs_wsio_want_write(cs_wsconn *c)
{
    ON_CONN_THREAD(c);
    c->want = true;
    if (out_idle(c))
        push_ready(c);
}

bool cs_wsio_can_write(const cs_wsconn *c)
{
    ON_CONN_THREAD(c);
    if (c->doomed)
        return false;
    if (!c->ssl)
        return c->qn < PLAIN_QUEUE && c->qbytes < PLAIN_QUEUE_BYTES;
    return !c->pend && !c->pong_inflight;
}

int cs_wsio_fd(const cs_wsconn *c)
{
    return c->fd;
}

int cs_wsio_write(cs_wsconn *c, cs_msg *m)
{
    ON_CONN_THREAD(c);
    if (!c->ssl) {
        if (c->doomed || c->qn == PLAIN_QUEUE)
            return -1;
        size_t hl = cs_msg_ws_header(m);
        qmsg *e = &c->q[(c->qhead + c->qn) % PLAIN_QUEUE];
        e->m = cs_msg_retain(m);
        e->p = m->data - hl;
        e->len = m->len + hl;
        c->qn++;
        c->qbytes += e->len;
        return 1; /* out with the turn's writev */
    }
    if (c->pend || c->doomed)
        return -1;
    size_t hl = cs_msg_ws_header(m);
    c->pend = cs_msg_retain(m);
    c->pend_ptr = m->data - hl;
    c->pend_len = m->len + hl;
    int r = flush(c);
    return r < 0 ? -1 : c->pend ? 0 : 1;
}

void cs_wsio_close(cs_wsconn *c, int code, const char *reason)
{
    ON_CONN_THREAD(c);
    if (c->closing || c->doomed)
        return;
    c->closing = true;
    c->close_len = cs_wss_close(c->closef, code, reason);
    c->close_by = cs_mono_ns() + CLOSE_SEND_NS;
    flush(c);
}

void cs_wsio_drop(cs_wsconn *c)
{
    ON_CONN_THREAD(c);
    shutdown(c->fd, SHUT_RDWR);
    doom(c);
}

/* More of the client's bytes into rbuf: 1 some, 0 none for now, -1 closed or failed (doomed). */
static int conn_read(cs_wsconn *c)
{
    if (!c->ssl) {
        ssize_t n;
        do
            n = read(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen);
        while (n < 0 && errno == EINTR);
        if (n > 0) {
            c->rlen += (size_t)n;
            return 1;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        doom(c); /* closed or failed */
        return -1;
    }
    ERR_clear_error();
    int n = SSL_read(c->ssl, c->rbuf + c->rlen, (int)(c->rcap - c->rlen));
    if (n > 0) {
        c->rlen += (size_t)n;
        return 1;
    }
    int e = SSL_get_error(c->ssl, n);
    ERR_clear_error();
    if (e == SSL_ERROR_WANT_READ)
        return 0;
    if (e == SSL_ERROR_WANT_WRITE) {
        arm(c, true);
        return 0;
    }
    doom(c); /* closed or failed */
    return -1;
}

/* Acts on the client's frames: what is buffered already (bytes sent with the upgrade request
 * included), then what the socket has. */
static void read_frames(cs_wsio *io, cs_wsconn *c)
{
    for (int rounds = 0; rounds < 64 && !c->doomed; rounds++) {
        if (rounds > 0 && conn_read(c) <= 0)
            return;
        size_t off = 0;
        while (!c->doomed) {
            cs_wss_frame f;
            size_t used = cs_wss_parse(c->rbuf + off, c->rlen - off, &f);
            if (f.kind == CS_WSS_MORE)
                break;
            if (f.kind == CS_WSS_ERROR) {
                c->rlen = 0;
                if (c->closing)
                    doom(c);
                else
                    cs_wsio_close(c, 1002, f.err);
                return;
            }
            off += used;
            if (f.kind == CS_WSS_DATA) {
                /* Its payload is never read: what follows in the buffer is dropped with it (off
                 * must not outrun rlen, or the parser would run past rbuf). */
                c->rlen = 0;
                if (c->closing)
                    return;
                if (c->user)
                    io->h.data(io->h.ctx, c->user);
                if (!c->closing)
                    cs_wsio_close(c, 1008, "unexpected data message");
                return;
            }
            /* While a pong is half-written, newer pings go unanswered (RFC 6455 5.5.3 allows
             * answering only the latest; this one is still on its way). */
            if (f.opcode == CS_WSS_OP_PING && !c->closing && !c->pong_inflight) {
                c->pong_len = cs_wss_control(c->pong, CS_WSS_OP_PONG, f.payload, f.len);
                flush(c);
            } else if (f.opcode == CS_WSS_OP_CLOSE) {
                if (c->closing) { /* the answer to ours */
                    doom(c);
                    return;
                }
                /* Echo the code (RFC 6455 5.5.1); the connection ends once it is out. */
                c->closing = true;
                c->end_after_close = true;
                uint8_t code[2];
                size_t cl = f.len >= 2 ? 2 : 0;
                if (cl)
                    memcpy(code, f.payload, 2);
                c->close_len = cs_wss_control(c->closef, CS_WSS_OP_CLOSE, code, cl);
                c->close_by = cs_mono_ns() + CLOSE_SEND_NS;
                flush(c);
            }
        }
        if (off) {
            memmove(c->rbuf, c->rbuf + off, c->rlen - off);
            c->rlen -= off;
        }
        if (c->rbuf != c->rbuf_own && c->rlen <= RBUF) { /* the early bytes are parsed */
            memcpy(c->rbuf_own, c->rbuf, c->rlen);
            free(c->rbuf);
            c->rbuf = c->rbuf_own;
            c->rcap = RBUF;
        }
        if (c->rlen == c->rcap) { /* cannot happen with frames this small; refuse rather than spin */
            cs_wsio_close(c, 1009, "frame too large");
            return;
        }
    }
}

/* Out of w's epoll and connection list. */
static void unlink_conn(worker *w, cs_wsconn *c)
{
    epoll_ctl(w->ep, EPOLL_CTL_DEL, c->fd, NULL);
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

/* Out of w's ready list, if it is there. */
static void unready(worker *w, cs_wsconn *c)
{
    if (!c->in_ready)
        return;
    cs_wsconn **pp = &w->ready, *prev = NULL;
    while (*pp && *pp != c) {
        prev = *pp;
        pp = &(*pp)->ready_next;
    }
    if (*pp)
        *pp = c->ready_next;
    if (w->ready_tail == c)
        w->ready_tail = prev;
    c->in_ready = false;
}

/* Closes and frees c (in no list by now); gone for an opened one. */
static void free_conn(cs_wsio *io, cs_wsconn *c)
{
    close(c->fd);
    SSL_free(c->ssl);
    if (c->rbuf != c->rbuf_own)
        free(c->rbuf);
    cs_msg_release(c->pend);
    for (; c->qn; c->qn--, c->qhead = (c->qhead + 1) % PLAIN_QUEUE)
        cs_msg_release(c->q[c->qhead].m);
    if (c->user)
        io->h.gone(io->h.ctx, c->user);
    free(c);
}

static void end_conn(cs_wsio *io, cs_wsconn *c)
{
    unlink_conn(c->w, c);
    free_conn(io, c);
}

static void reap(cs_wsio *io, worker *w)
{
    while (w->doomed) {
        cs_wsconn *c = w->doomed;
        w->doomed = c->doomed_next;
        unready(w, c);
        end_conn(io, c);
    }
}

static void post(worker *w, cs_wsconn *c);

/* The connections cs_wsio_move asked to leave: one whose output is idle goes to its target's inbox
 * now (leave hook here first: nothing on this thread touches it afterwards); one doomed or closing
 * stays and ends here; one with a message still going out waits for a later round (its EPOLLOUT,
 * or the write deadline's drop). Runs just before reap, so a doomed one is still valid. */
static void take_moves(cs_wsio *io, worker *w)
{
    cs_wsconn *c = w->moving, *keep = NULL;
    w->moving = NULL;
    while (c) {
        cs_wsconn *next = c->moving_next;
        c->moving_next = NULL;
        if (c->doomed || c->closing) {
            c->in_moving = false;
            c->move_to = -1;
        } else if (!out_idle(c)) {
            c->moving_next = keep;
            keep = c;
        } else {
            worker *to = &io->w[c->move_to];
            c->in_moving = false;
            c->move_to = -1;
            unready(w, c);
            unlink_conn(w, c);
            c->out_armed = false;
            c->moved = true;
            io->h.leave(io->h.ctx, c->user);
            post(to, c);
        }
        c = next;
    }
    w->moving = keep;
}

static void open_conn(cs_wsio *io, worker *w, cs_wsconn *c)
{
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->w = w;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    void *arg = c->arg;
    c->arg = NULL;
    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    w->conns = c;
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        io->h.discard(io->h.ctx, arg);
        end_conn(io, c);
        return;
    }
    c->user = io->h.open(io->h.ctx, w->idx, c, arg);
    if (!c->user) {
        end_conn(io, c);
        return;
    }
    read_frames(io, c); /* early frames, and what SSL holds already */
}

/* A connection cs_wsio_move sent here: its buffered bytes, pong and TLS state came with it (and no
 * message: it left with its output idle). An epoll failure ends it before the server has re-linked
 * it (gone without moved). */
static void adopt_moved(cs_wsio *io, worker *w, cs_wsconn *c)
{
    c->w = w;
    c->moved = false;
    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    w->conns = c;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        end_conn(io, c);
        return;
    }
    io->h.moved(io->h.ctx, w->idx, c->user);
    if (c->pong_len)
        flush(c); /* a pong the old thread had not written yet */
    if (!c->doomed && c->want)
        push_ready(c);
    read_frames(io, c); /* what the old thread had buffered (and what SSL holds) */
}

static void take_inbox(cs_wsio *io, worker *w)
{
    uint64_t v;
    while (read(w->evfd, &v, sizeof v) < 0 && errno == EINTR)
        ;
    atomic_store(&w->wake_pending, false);
    pthread_mutex_lock(&w->mu);
    cs_wsconn *c = w->inbox;
    w->inbox = NULL;
    pthread_mutex_unlock(&w->mu);
    /* The inbox is a stack: open in arrival order. */
    cs_wsconn *rev = NULL;
    while (c) {
        cs_wsconn *next = c->next;
        c->next = rev;
        rev = c;
        c = next;
    }
    while (rev) {
        cs_wsconn *next = rev->next;
        rev->next = rev->prev = NULL;
        if (rev->moved)
            adopt_moved(io, w, rev);
        else
            open_conn(io, w, rev);
        rev = next;
    }
    io->h.wake(io->h.ctx, w->idx);
}

static void run_ready(cs_wsio *io, worker *w)
{
    cs_wsconn *c = w->ready;
    w->ready = w->ready_tail = NULL; /* what the hooks ask for now waits for the next round */
    while (c) {
        cs_wsconn *next = c->ready_next;
        c->in_ready = false;
        if (!c->doomed && !c->closing && c->want && out_idle(c)) {
            c->want = false;
            if (io->h.writable(io->h.ctx, c->user) < 0 && !c->closing)
                doom(c);
            else if (!c->ssl && c->qn && !c->doomed && flush(c) == 1 && c->want)
                push_ready(c); /* all out: the next turn may write again */
        }
        c = next;
    }
}

static void tick(cs_wsio *io, worker *w, int64_t now)
{
    for (cs_wsconn *c = w->conns; c; c = c->next)
        if (!c->doomed && (c->close_sent ? now >= c->linger_until : c->closing && now >= c->close_by))
            doom(c);
    io->h.tick(io->h.ctx, w->idx);
}

/* epoll_wait; with busy polling, a wait that would block first polls without blocking until an
 * event comes or busy_ns pass (the tick may then come that much late: it is about once a
 * second). */
static int wait_events(cs_wsio *io, worker *w, struct epoll_event *evs, int timeout)
{
    if (timeout != 0 && io->busy_ns > 0) {
        int64_t until = cs_mono_ns() + io->busy_ns;
        do {
            int n = epoll_wait(w->ep, evs, EVENTS_PER_WAIT, 0);
            if (n != 0)
                return n;
        } while (cs_mono_ns() < until && !atomic_load_explicit(&io->stop, memory_order_relaxed));
    }
    return epoll_wait(w->ep, evs, EVENTS_PER_WAIT, timeout);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    cs_wsio *io = w->io;
    tl_worker = w;
    char name[16];
    if (w->idx == io->n) {
        /* Catch-up sends: below the live threads, as the replay readers that feed them. */
        cs_thread_role("cs-ws-bulk", CS_NICE_BACKGROUND);
    } else {
        snprintf(name, sizeof name, "cs-ws-%d", w->idx);
        cs_thread_role(name, CS_NICE_LIVE); /* the live path */
    }
    struct epoll_event evs[EVENTS_PER_WAIT];
    int64_t next_tick = cs_mono_ns() + TICK_NS;
    while (!atomic_load(&io->stop)) {
        int64_t now = cs_mono_ns();
        int timeout = w->ready ? 0 : (int)((next_tick - now) / 1000000 + 1);
        if (timeout < 0)
            timeout = 0;
        int n = wait_events(io, w, evs, timeout);
        for (int i = 0; i < n; i++) {
            cs_wsconn *c = evs[i].data.ptr;
            if (!c) {
                take_inbox(io, w);
                continue;
            }
            if (c->doomed)
                continue;
            if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                read_frames(io, c);
            if (!c->doomed && (evs[i].events & EPOLLOUT))
                flush(c);
            if (!c->doomed && out_idle(c) && c->want)
                push_ready(c);
        }
        run_ready(io, w);
        now = cs_mono_ns();
        if (now >= next_tick) {
            next_tick = now + TICK_NS;
            tick(io, w, now);
        }
        if (w->moving)
            take_moves(io, w);
        reap(io, w);
    }
    return NULL;
}

int cs_wsio_start(cs_wsio **out, int n, int64_t busy_poll_ns, const cs_wsio_hooks *hooks, cs_err *err)
{
    *out = NULL;
    if (n < 1)
        n = 1;
    if (n > CS_WSIO_MAX_THREADS)
        n = CS_WSIO_MAX_THREADS;
    cs_wsio *io = calloc(1, sizeof *io);
    if (!io)
        return cs_err_set(err, 0, "stream I/O threads: out of memory");
    io->h = *hooks;
    io->n = n;
    io->all = n + 1;
    io->busy_ns = busy_poll_ns > 0 ? busy_poll_ns : 0;
    for (int i = 0; i < io->all; i++) {
        worker *w = &io->w[i];
        w->io = io;
        w->idx = i;
        pthread_mutex_init(&w->mu, NULL);
        w->ep = epoll_create1(EPOLL_CLOEXEC);
        w->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        if (w->ep < 0 || w->evfd < 0 || epoll_ctl(w->ep, EPOLL_CTL_ADD, w->evfd, &ev) != 0 ||
            pthread_create(&w->th, NULL, worker_main, w) != 0) {
            io->all = i + 1;
            cs_wsio_free(io);
            return cs_err_set(err, 0, "stream I/O threads: cannot start thread %d", i);
        }
        w->started = true;
    }
    *out = io;
    return 0;
}

int cs_wsio_threads(const cs_wsio *io)
{
    return io->n;
}

int cs_wsio_bulk_thread(const cs_wsio *io)
{
    return io->n;
}

static void kick(worker *w)
{
    if (atomic_load(&w->io->stop))
        return;
    if (!atomic_exchange(&w->wake_pending, true)) {
        uint64_t one = 1;
        while (write(w->evfd, &one, sizeof one) < 0 && errno == EINTR)
            ;
    }
}

/* Into w's inbox; w opens (or adopts) it on its own thread. */
static void post(worker *w, cs_wsconn *c)
{
    pthread_mutex_lock(&w->mu);
    c->next = w->inbox;
    w->inbox = c;
    pthread_mutex_unlock(&w->mu);
    atomic_store(&w->wake_pending, false); /* the inbox must be looked at even mid-burst */
    kick(w);
}

int cs_wsio_add(cs_wsio *io, int fd, SSL *ssl, const uint8_t *early, size_t n, bool bulk, void *arg)
{
    cs_wsconn *c = calloc(1, sizeof *c);
    if (!c)
        return -1;
    c->fd = fd;
    c->ssl = ssl;
    c->arg = arg;
    c->move_to = -1;
    c->rbuf = c->rbuf_own;
    c->rcap = RBUF;
    if (n > RBUF) { /* all of them: a byte dropped here would misframe the stream */
        c->rbuf = malloc(n);
        if (!c->rbuf) {
            free(c);
            return -1;
        }
        c->rcap = n;
    }
    if (n)
        memcpy(c->rbuf, early, n);
    c->rlen = n;
    post(&io->w[bulk ? io->n : (int)((unsigned)fd % (unsigned)io->n)], c);
    return 0;
}

void cs_wsio_move(cs_wsconn *c, int thread)
{
    ON_CONN_THREAD(c);
    cs_wsio *io = c->w->io;
    if (thread < 0 || thread >= io->all || thread == c->w->idx || c->in_moving || c->doomed || c->closing)
        return;
    c->move_to = thread;
    c->in_moving = true;
    c->moving_next = c->w->moving;
    c->w->moving = c;
}

void cs_wsio_wake(cs_wsio *io, int thread)
{
    if (!io)
        return;
    for (int i = 0; i < io->all; i++)
        if (thread < 0 || thread == i)
            kick(&io->w[i]);
}

void cs_wsio_stop(cs_wsio *io)
{
    if (!io || io->stopped)
        return;
    io->stopped = true;
    atomic_store(&io->stop, true);
    for (int i = 0; i < io->all; i++) {
        worker *w = &io->w[i];
        if (w->started) {
            uint64_t one = 1;
            while (write(w->evfd, &one, sizeof one) < 0 && errno == EINTR)
                ;
            pthread_join(w->th, NULL);
        }
    }
    for (int i = 0; i < io->all; i++) {
        worker *w = &io->w[i];
        while (w->inbox) {
            cs_wsconn *c = w->inbox;
            w->inbox = c->next;
            if (!c->moved) {
                io->h.discard(io->h.ctx, c->arg);
                c->user = NULL;
            }
            free_conn(io, c); /* in transit: gone, here */
        }
        w->doomed = w->moving = NULL;
        while (w->conns)
            end_conn(io, w->conns);
    }
}

void cs_wsio_free(cs_wsio *io)
{
    if (!io)
        return;
    cs_wsio_stop(io);
    for (int i = 0; i < io->all; i++) {
        worker *w = &io->w[i];
        if (w->ep > 0)
            close(w->ep);
        if (w->evfd > 0)
            close(w->evfd);
        pthread_mutex_destroy(&w->mu);
    }
    free(io);
}
