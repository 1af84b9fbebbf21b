/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/net/wsio_internal.h"

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
    cs_xport_free(c->x);
    if (c->rbuf != c->rbuf_own)
        free(c->rbuf);
    for (; c->qn; c->qn--, c->qhead = (c->qhead + 1) % OUT_QUEUE)
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

static void kick(worker *w);

/* The connections cs_wsio_move asked to leave: one whose output is idle goes to its target's inbox
 * now (leave hook here first: nothing on this thread touches it afterwards); one doomed or closing
 * stays and ends here, as does one whose target has stopped; one with a message still going out
 * waits for a later round (its EPOLLOUT, or the write deadline's drop). Runs just before reap, so
 * a doomed one is still valid. */
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
        } else if (!wsc_out_idle(c)) {
            c->moving_next = keep;
            keep = c;
        } else {
            worker *to = &io->w[c->move_to];
            c->in_moving = false;
            c->move_to = -1;
            /* Under the target's lock, so that it cannot close between the look and the post: a
             * target that has stopped takes nothing more, and c stays to end here. The leave hook
             * runs under that lock too (the server's touches only its own thread's list). */
            pthread_mutex_lock(&to->mu);
            bool open = !to->closed;
            if (open) {
                unready(w, c);
                unlink_conn(w, c);
                c->out_armed = false;
                c->moved = true;
                io->h.leave(io->h.ctx, c->user);
                c->next = to->inbox;
                to->inbox = c;
            }
            pthread_mutex_unlock(&to->mu);
            if (open) {
                atomic_store(&to->wake_pending, false); /* the inbox must be looked at even mid-burst */
                kick(to);
            }
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
    wsc_read_frames(io, c); /* early frames, and what TLS holds already */
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
        wsc_flush(c); /* a pong the old thread had not written yet */
    if (!c->doomed && c->want)
        wsc_push_ready(c);
    wsc_read_frames(io, c); /* what the old thread had buffered (and what TLS holds) */
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
        if (!c->doomed && !c->closing && c->want && wsc_out_idle(c)) {
            c->want = false;
            if (io->h.writable(io->h.ctx, c->user) < 0 && !c->closing)
                wsc_doom(c);
            else if (c->qn && !c->doomed && wsc_flush(c) == 1 && c->want)
                wsc_push_ready(c); /* all out: the next turn may write again */
        }
        c = next;
    }
}

static void tick(cs_wsio *io, worker *w, int64_t now)
{
    for (cs_wsconn *c = w->conns; c; c = c->next)
        if (!c->doomed && (c->close_sent ? now >= c->linger_until : c->closing && now >= c->close_by))
            wsc_doom(c);
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

/* The stop, on the thread itself, so that every connection's last hook (gone) runs on its own
 * thread as the rest did: closed first (under mu: no move hands this thread another connection
 * after it), then the connections in transit to it are adopted (moved: the server's record of
 * their thread becomes this one) and every connection here ends. New connections in the inbox
 * were never opened: discarded, no hook of theirs having run; those cs_wsio_add posts from now on
 * cs_wsio_stop discards once the threads are joined. */
static void worker_exit(cs_wsio *io, worker *w)
{
    pthread_mutex_lock(&w->mu);
    w->closed = true;
    cs_wsconn *c = w->inbox;
    w->inbox = NULL;
    pthread_mutex_unlock(&w->mu);
    while (c) {
        cs_wsconn *next = c->next;
        c->next = c->prev = NULL;
        if (c->moved) {
            c->w = w;
            c->moved = false;
            c->next = w->conns;
            if (w->conns)
                w->conns->prev = c;
            w->conns = c;
            io->h.moved(io->h.ctx, w->idx, c->user);
        } else {
            io->h.discard(io->h.ctx, c->arg);
            free_conn(io, c);
        }
        c = next;
    }
    w->ready = w->ready_tail = w->doomed = w->moving = NULL; /* every connection ends below */
    while (w->conns) {
        w->conns->in_ready = false;
        end_conn(io, w->conns);
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    cs_wsio *io = w->io;
    cs_owner_bind(&w->owner); /* its connections' hooks run here alone */
    char name[16];
    if (w->idx == io->n) {
        /* Catch-up sends: below the live threads, as the replay readers that feed them. */
        cs_thread_role("cs-ws-bulk", cs_thread_background_nice());
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
                wsc_read_frames(io, c);
            if (!c->doomed && (evs[i].events & EPOLLOUT))
                wsc_flush(c);
            if (!c->doomed && wsc_out_idle(c) && c->want)
                wsc_push_ready(c);
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
    worker_exit(io, w);
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
    *out = io; /* before any thread starts: the hooks may read the caller's pointer */
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
            *out = NULL;
            return cs_err_set(err, 0, "stream I/O threads: cannot start thread %d", i);
        }
        w->started = true;
    }
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

int cs_wsio_add(cs_wsio *io, cs_xport *x, const uint8_t *early, size_t n, bool bulk, void *arg)
{
    cs_wsconn *c = calloc(1, sizeof *c);
    if (!c)
        return -1;
    c->x = x;
    c->fd = x->fd;
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
    post(&io->w[bulk ? io->n : (int)((unsigned)c->fd % (unsigned)io->n)], c);
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
    /* Each thread ended its own connections (worker_exit); what is left are connections never
     * opened, posted after their thread closed: discarded here, no hook of theirs having run. */
    for (int i = 0; i < io->all; i++) {
        worker *w = &io->w[i];
        CS_CHECK(!w->conns, "stream I/O: a stopped thread has ended its connections");
        while (w->inbox) {
            cs_wsconn *c = w->inbox;
            w->inbox = c->next;
            CS_CHECK(!c->moved, "stream I/O: no connection in transit once every thread stopped");
            io->h.discard(io->h.ctx, c->arg);
            free_conn(io, c);
        }
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
