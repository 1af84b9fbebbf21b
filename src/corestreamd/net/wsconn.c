/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/net/wsio_internal.h"

void wsc_doom(cs_wsconn *c)
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
        wsc_doom(c);
}

static void close_out(cs_wsconn *c)
{
    c->close_sent = true;
    c->linger_until = cs_mono_ns() + LINGER_NS;
}

/* The output, in the order one gather write carries it: a pong goes at the first frame boundary
 * (before the queue, or after the message the last writev left half-written), then the queued
 * messages, then the close frame. seg[i] says what iov[i] is: -1 the pong, -2 the close frame,
 * k >= 0 the k-th queued message. */
static int out_layout(const cs_wsconn *c, struct iovec *iov, int *seg)
{
    int n = 0;
    bool pong_front = c->pong_len && (c->pong_off || c->qoff == 0 || !c->qn);
    if (pong_front) {
        seg[n] = -1;
        iov[n++] = (struct iovec){(void *)(c->pong + c->pong_off), c->pong_len - c->pong_off};
    }
    for (unsigned i = 0; i < c->qn; i++) {
        const qmsg *e = &c->q[(c->qhead + i) % OUT_QUEUE];
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

/* Takes w bytes the transport took off the output laid out as iov/seg. */
static void out_consume(cs_wsconn *c, const struct iovec *iov, const int *seg, int n, size_t w)
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
        c->qhead = (c->qhead + 1) % OUT_QUEUE;
        c->qn--;
    }
    c->pong_inflight = c->pong_off > 0;
}

/* One gather write of what is queued (out_layout), or a flush of what the transport holds. 1 all
 * out, 0 the socket is full (the rest goes on EPOLLOUT), -1 failed. */
static int out_put(cs_wsconn *c)
{
    struct iovec iov[OUT_QUEUE + 2];
    int seg[OUT_QUEUE + 2];
    int n = out_layout(c, iov, seg);
    size_t want = 0;
    for (int i = 0; i < n; i++)
        want += iov[i].iov_len;
    ssize_t w = cs_xport_writev(c->x, n ? iov : NULL, n);
    if (w < 0)
        return -1;
    out_consume(c, iov, seg, n, (size_t)w);
    return (size_t)w < want || cs_xport_pending(c->x) ? 0 : 1;
}

/* Writes what is queued in order: the messages, a pong, the close frame. 1 all out, 0 waiting
 * for the socket, -1 failed (the connection is doomed). */
int wsc_flush(cs_wsconn *c)
{
    int r = out_put(c);
    if (r == 1 && c->close_sent && !c->shut_sent) {
        c->shut_sent = true;
        cs_xport_shutdown(c->x); /* TLS: close_notify; the peer's close frame or EOF ends it */
        if (c->end_after_close)
            wsc_doom(c);
    }
    if (r < 0) {
        wsc_doom(c);
        return -1;
    }
    arm(c, r == 0);
    return r;
}

void wsc_push_ready(cs_wsconn *c)
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
bool wsc_out_idle(const cs_wsconn *c)
{
    return c->qn == 0 && !cs_xport_pending(c->x);
}

cs_owner *cs_wsio_thread_owner(cs_wsio *io, int thread)
{
    CS_CHECK(thread >= 0 && thread < io->all, "stream I/O: a thread index within 0..N");
    return &io->w[thread].owner;
}

void cs_wsio_want_write(cs_wsconn *c)
{
    ON_CONN_THREAD(c);
    c->want = true;
    if (wsc_out_idle(c))
        wsc_push_ready(c);
}

bool cs_wsio_can_write(const cs_wsconn *c)
{
    ON_CONN_THREAD(c);
    return !c->doomed && c->qn < OUT_QUEUE && c->qbytes < OUT_QUEUE_BYTES;
}

int cs_wsio_fd(const cs_wsconn *c)
{
    return c->fd;
}

int cs_wsio_write(cs_wsconn *c, cs_msg *m)
{
    ON_CONN_THREAD(c);
    if (c->doomed || c->qn == OUT_QUEUE)
        return -1;
    size_t hl = cs_msg_ws_header(m);
    qmsg *e = &c->q[(c->qhead + c->qn) % OUT_QUEUE];
    e->m = cs_msg_retain(m);
    e->p = m->data - hl;
    e->len = m->len + hl;
    c->qn++;
    c->qbytes += e->len;
    return 1; /* out with the turn's gather write */
}

void cs_wsio_close(cs_wsconn *c, int code, const char *reason)
{
    ON_CONN_THREAD(c);
    if (c->closing || c->doomed)
        return;
    c->closing = true;
    c->close_len = cs_wss_close(c->closef, code, reason);
    c->close_by = cs_mono_ns() + CLOSE_SEND_NS;
    wsc_flush(c);
}

void cs_wsio_drop(cs_wsconn *c)
{
    ON_CONN_THREAD(c);
    shutdown(c->fd, SHUT_RDWR);
    wsc_doom(c);
}

/* More of the client's bytes into rbuf: 1 some, 0 none for now, -1 closed or failed (doomed). */
static int conn_read(cs_wsconn *c)
{
    ssize_t n = cs_xport_read(c->x, c->rbuf + c->rlen, c->rcap - c->rlen);
    if (n > 0) {
        c->rlen += (size_t)n;
        return 1;
    }
    if (n == CS_XP_AGAIN) {
        if (cs_xport_pending(c->x)) /* reading made TLS write (an alert, a key update) */
            arm(c, true);
        return 0;
    }
    wsc_doom(c); /* closed or failed */
    return -1;
}

/* Acts on the client's frames: what is buffered already (bytes sent with the upgrade request
 * included), then what the socket has. */
void wsc_read_frames(cs_wsio *io, cs_wsconn *c)
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
                    wsc_doom(c);
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
                wsc_flush(c);
            } else if (f.opcode == CS_WSS_OP_CLOSE) {
                if (c->closing) { /* the answer to ours */
                    wsc_doom(c);
                    return;
                }
                /* Echo the code, or refuse the close (cs_wss_close_answer); the connection ends
                 * once the answer is out. */
                c->closing = true;
                c->end_after_close = true;
                char buf[48];
                const char *reason;
                int code = cs_wss_close_answer(f.payload, f.len, buf, &reason);
                c->close_len = code ? cs_wss_close(c->closef, code, reason)
                                    : cs_wss_control(c->closef, CS_WSS_OP_CLOSE, NULL, 0);
                c->close_by = cs_mono_ns() + CLOSE_SEND_NS;
                wsc_flush(c);
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
