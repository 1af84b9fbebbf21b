/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/net/headreader.h"

#include <errno.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/invariant.h"
#include "common/log.h"
#include "common/thread.h"
#include "corestreamd/net/httpanswer.h"
#include "corestreamd/net/listener.h"

#define FIRST_BUF 2048 /* most heads fit; the buffer doubles up to the head limit */
/* After a refusal the peer's unread bytes are read and dropped for this long (or until it closes)
 * before the close: closing on unread data sends a reset, which can destroy the answer before the
 * peer reads it. */
#define LINGER_NS (2 * 1000000000LL)
#define LINGER_MAX_BYTES (1u << 20)
#define EVENTS_PER_WAIT 64

typedef enum hstate { ST_READING, ST_HANDSHAKE, ST_ANSWERING, ST_WAITING, ST_LINGER } hstate;

typedef struct hconn {
    int fd;
    void *tag;
    char *buf;
    size_t len, cap;
    cs_http_parser hp; /* the head being read */
    hstate st;
    char *resp;
    size_t resp_len, resp_off;
    size_t dropped; /* bytes read and dropped while lingering */
    cs_xport *x;    /* once the first byte has said plaintext or TLS; it then owns fd */
    void *arg;      /* judge's for an upgrade, until upgraded */
    bool upgrade;   /* the answer is a 101 */
    bool keep;      /* after the answer, the next request on the connection is read */
    unsigned served; /* requests answered on this connection */
    size_t head_len;
    int64_t deadline;
    struct hconn *prev, *next;
    /* ST_WAITING: the answer as cs_headreader_answer gave it, written by the answering thread
     * before it puts the connection on the answered list (under mu), read here after. */
    char *ans_resp;
    size_t ans_len;
    bool ans_keep;
    struct hconn *ans_next;
} hconn;

/* A FIFO of connections; with one timeout per list, it is also in deadline order. */
typedef struct hlist {
    hconn *head, *tail;
} hlist;

struct cs_headreader {
    cs_headreader_config cfg;
    int ep, evfd;
    pthread_t thread;
    cs_owner owner; /* that thread, bound as it starts (cs_headreader_owner) */
    bool started;
    atomic_bool stop;
    atomic_size_t holding;
    pthread_mutex_t mu; /* inbox, done and answered */
    hlist inbox, done;
    hconn *answered; /* waiting connections whose answers came, newest first (ans_next) */
    /* the head reader thread's own */
    hlist reading; /* reading and answering, by the header deadline */
    hlist linger;  /* answered, by LINGER_NS */
    hlist waiting; /* CS_HEAD_LATER: no deadline until the answer comes */
    bool any_done; /* since the last ready call */
};

static void list_push(hlist *l, hconn *c)
{
    c->next = NULL;
    c->prev = l->tail;
    if (l->tail)
        l->tail->next = c;
    else
        l->head = c;
    l->tail = c;
}

static void list_remove(hlist *l, hconn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        l->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        l->tail = c->prev;
    c->prev = c->next = NULL;
}

/* Closes the connection's socket (through its transport once it has one). */
static void hconn_close(hconn *c)
{
    if (c->x)
        cs_xport_free(c->x);
    else if (c->fd >= 0)
        close(c->fd);
    c->x = NULL;
    c->fd = -1;
}

static void hconn_free(hconn *c)
{
    cs_xport_free(c->x);
    free(c->buf);
    free(c->resp);
    free(c);
}

/* Closes c and hands its tag to drain. */
static void finish(cs_headreader *hr, hlist *from, hconn *c)
{
    list_remove(from, c);
    epoll_ctl(hr->ep, EPOLL_CTL_DEL, c->fd, NULL);
    if (c->arg && hr->cfg.discard)
        hr->cfg.discard(hr->cfg.ctx, c->arg);
    c->arg = NULL;
    hconn_close(c);
    free(c->buf);
    c->buf = NULL;
    c->len = 0;
    free(c->resp);
    c->resp = NULL;
    pthread_mutex_lock(&hr->mu);
    list_push(&hr->done, c);
    pthread_mutex_unlock(&hr->mu);
    hr->any_done = true;
}


static void linger_read(cs_headreader *hr, hconn *c)
{
    char scratch[16384];
    for (;;) {
        ssize_t n = cs_xport_read(c->x, scratch, sizeof scratch);
        if (n > 0) {
            c->dropped += (size_t)n;
            if (c->dropped <= LINGER_MAX_BYTES)
                continue;
        } else if (n == CS_XP_AGAIN) {
            return;
        }
        finish(hr, &hr->linger, c); /* the peer closed, failed or sent too much */
        return;
    }
}

static void upgraded(cs_headreader *hr, hconn *c);
static void read_head(cs_headreader *hr, hconn *c);

/* A kept-alive connection after its answer: the bytes past the answered head (a pipelined
 * request) stay, and the next head is read under a fresh header deadline. */
static void next_request(cs_headreader *hr, hconn *c)
{
    CS_CHECK(c->st == ST_ANSWERING && c->keep && !c->upgrade, "head reader: a kept-alive connection reads its next head once answered");
    free(c->resp);
    c->resp = NULL;
    c->resp_len = c->resp_off = 0;
    c->len -= c->head_len;
    memmove(c->buf, c->buf + c->head_len, c->len);
    c->head_len = 0;
    cs_http_parser_init(&c->hp, &hr->cfg.limits);
    c->keep = false;
    c->st = ST_READING;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(hr->ep, EPOLL_CTL_MOD, c->fd, &ev) != 0) {
        finish(hr, &hr->reading, c);
        return;
    }
    list_remove(&hr->reading, c);
    c->deadline = cs_mono_ns() + hr->cfg.timeout_ns;
    list_push(&hr->reading, c);
    read_head(hr, c);
}

/* An answer that moves gets a fresh deadline: a large one to a slow reader is closed only when it
 * stops taking bytes, as a subscriber is. */
static void answer_progressed(cs_headreader *hr, hconn *c)
{
    list_remove(&hr->reading, c);
    c->deadline = cs_mono_ns() + hr->cfg.timeout_ns;
    list_push(&hr->reading, c);
}

/* Writes the answer, all of it through the transport to the socket, before the connection goes
 * on (next request, upgrade or close). */
static void write_answer(cs_headreader *hr, hconn *c)
{
    for (;;) {
        struct iovec iov = {c->resp + c->resp_off, c->resp_len - c->resp_off};
        size_t before = cs_xport_pending(c->x);
        ssize_t n = cs_xport_writev(c->x, &iov, iov.iov_len ? 1 : 0);
        if (n < 0) {
            finish(hr, &hr->reading, c);
            return;
        }
        c->resp_off += (size_t)n;
        size_t after = cs_xport_pending(c->x);
        if (c->resp_off == c->resp_len && after == 0)
            break;
        if (n > 0 || after < before)
            answer_progressed(hr, c);
        if (n == 0 && after >= before) { /* the socket is full: the rest on EPOLLOUT */
            struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
            if (epoll_ctl(hr->ep, EPOLL_CTL_MOD, c->fd, &ev) == 0)
                return;
            finish(hr, &hr->reading, c);
            return;
        }
    }
    if (c->upgrade) {
        upgraded(hr, c);
        return;
    }
    if (c->keep) {
        next_request(hr, c);
        return;
    }
    cs_xport_shutdown(c->x); /* TLS: close_notify first; the peer's is not waited for */
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(hr->ep, EPOLL_CTL_MOD, c->fd, &ev) != 0) {
        finish(hr, &hr->reading, c);
        return;
    }
    list_remove(&hr->reading, c);
    c->st = ST_LINGER;
    c->deadline = cs_mono_ns() + LINGER_NS;
    list_push(&hr->linger, c);
    linger_read(hr, c);
}

/* Strangers choose what gets refused, so each refusal is one DEBUG line, as the routes' are.
 * extra: CS_ANS_* bits. The connection is closed after the answer, which says so. */
static void refuse(cs_headreader *hr, hconn *c, unsigned status, unsigned extra, const char *body)
{
    if (cs_log_enabled(CS_LOG_DEBUG)) {
        char remote[64];
        cs_format_peer(c->fd, remote, sizeof remote);
        CS_LOG(CS_LOG_DEBUG, "request refused", KV_S("remote", remote), KV_U("status", status),
               KV_S("error", body));
    }
    free(c->buf);
    c->buf = NULL;
    c->len = c->cap = 0;
    cs_strbuf out = CS_STRBUF_INIT;
    cs_http_answer_text(&out, status, body, extra | CS_ANS_CLOSE);
    c->resp = cs_strbuf_take(&out, &c->resp_len);
    if (!c->resp) {
        finish(hr, &hr->reading, c);
        return;
    }
    c->st = ST_ANSWERING;
    write_answer(hr, c);
}

/* The 101 is out: the connection leaves for the stream I/O threads with the bytes past its head. */
static void upgraded(cs_headreader *hr, hconn *c)
{
    CS_CHECK(c->st == ST_ANSWERING && c->upgrade && c->arg, "head reader: an upgrade leaves once its 101 is out");
    list_remove(&hr->reading, c);
    epoll_ctl(hr->ep, EPOLL_CTL_DEL, c->fd, NULL);
    size_t early = c->len > c->head_len ? c->len - c->head_len : 0;
    atomic_fetch_sub(&hr->holding, 1);
    hr->cfg.upgraded(hr->cfg.ctx, c->x, c->tag, (const unsigned char *)c->buf + c->head_len, early, c->arg);
    c->x = NULL;
    c->fd = -1;
    c->arg = NULL;
    hconn_free(c);
}

static void handshake(cs_headreader *hr, hconn *c)
{
    const char *why;
    int rc = cs_xport_tls_accept(c->x, &why);
    if (rc == 1) {
        c->st = ST_READING;
        read_head(hr, c);
        return;
    }
    if (rc >= 0) {
        struct epoll_event ev = {.events = rc == 2 ? EPOLLOUT : EPOLLIN, .data.ptr = c};
        if (epoll_ctl(hr->ep, EPOLL_CTL_MOD, c->fd, &ev) == 0)
            return;
        why = "epoll failed";
    }
    if (cs_log_enabled(CS_LOG_DEBUG)) {
        char remote[64];
        cs_format_peer(c->fd, remote, sizeof remote);
        CS_LOG(CS_LOG_DEBUG, "TLS handshake failed", KV_S("remote", remote), KV_S("error", why));
    }
    finish(hr, &hr->reading, c);
}

static void start_tls(cs_headreader *hr, hconn *c)
{
    SSL_CTX *ctx = hr->cfg.tls_ctx(hr->cfg.ctx);
    c->x = ctx ? cs_xport_tls_server(c->fd, ctx) : NULL;
    SSL_CTX_free(ctx); /* the transport's SSL holds its own reference */
    if (!c->x) {
        finish(hr, &hr->reading, c);
        return;
    }
    c->st = ST_HANDSHAKE;
    handshake(hr, c);
}

/* A TLS port: the first byte says whether a TLS handshake (a handshake record, 0x16) is coming
 * (only peeked at: the handshake reads it), or a plaintext request, which is answered in plaintext
 * with the cause rather than closed without a word. */
static void peek_tls(cs_headreader *hr, hconn *c)
{
    unsigned char first;
    ssize_t n;
    do
        n = recv(c->fd, &first, 1, MSG_PEEK);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (n <= 0)
        finish(hr, &hr->reading, c);
    else if (first == 0x16)
        start_tls(hr, c);
    else if ((c->x = cs_xport_plain(c->fd)) == NULL)
        finish(hr, &hr->reading, c);
    else
        refuse(hr, c, 400, CS_ANS_TLS_REQUIRED, "this port speaks TLS: use wss:// or https://");
}

/* CS_HEAD_LATER: the connection is neither read nor timed until its answer comes. */
static void wait_for_answer(cs_headreader *hr, hconn *c, void *arg)
{
    /* Out of the epoll set: a hang-up is reported even for no events, and would spin the loop. */
    epoll_ctl(hr->ep, EPOLL_CTL_DEL, c->fd, NULL);
    list_remove(&hr->reading, c);
    c->st = ST_WAITING;
    list_push(&hr->waiting, c);
    hr->cfg.later(hr->cfg.ctx, (cs_head_pending *)c, arg);
}

/* An answer given through cs_headreader_answer: written as judge's would be. */
static void answer_came(cs_headreader *hr, hconn *c)
{
    CS_CHECK(c->st == ST_WAITING && !c->resp, "head reader: a later answer comes to a waiting connection");
    list_remove(&hr->waiting, c);
    c->deadline = cs_mono_ns() + hr->cfg.timeout_ns;
    list_push(&hr->reading, c);
    c->resp = c->ans_resp;
    c->resp_len = c->ans_len;
    c->resp_off = 0;
    c->ans_resp = NULL;
    c->upgrade = false;
    c->keep = c->ans_keep && ++c->served < hr->cfg.keepalive_max;
    c->st = ST_ANSWERING;
    struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
    if (!c->resp || epoll_ctl(hr->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        finish(hr, &hr->reading, c);
        return;
    }
    write_answer(hr, c);
}

/* A complete head: the server's judge answers it, a 101 included. */
static void judged(cs_headreader *hr, hconn *c)
{
    CS_CHECK(c->st == ST_READING && !c->resp, "head reader: a head is judged while reading, with no answer yet");
    size_t head_len = c->hp.head_len;
    cs_http_head head;
    if (cs_http_head_make(&c->hp, c->buf, &head) != 0) {
        cs_http_head_free(&head);
        finish(hr, &hr->reading, c);
        return;
    }
    char *resp = NULL;
    size_t rlen = 0;
    void *arg = NULL;
    bool last = c->served + 1 >= hr->cfg.keepalive_max;
    int v = hr->cfg.judge(hr->cfg.ctx, c->fd, c->tag, &head, last, &resp, &rlen, &arg);
    cs_http_head_free(&head);
    if (v == CS_HEAD_LATER && !resp && hr->cfg.later) {
        c->head_len = head_len;
        wait_for_answer(hr, c, arg);
        return;
    }
    if (!resp) {
        if (arg && hr->cfg.discard)
            hr->cfg.discard(hr->cfg.ctx, arg);
        finish(hr, &hr->reading, c);
        return;
    }
    c->head_len = head_len;
    c->upgrade = v == CS_HEAD_UPGRADE;
    c->arg = v == CS_HEAD_UPGRADE ? arg : NULL;
    c->keep = v == CS_HEAD_KEEP && ++c->served < hr->cfg.keepalive_max;
    c->resp = resp;
    c->resp_len = rlen;
    c->resp_off = 0;
    c->st = ST_ANSWERING;
    write_answer(hr, c);
}

static void read_head(cs_headreader *hr, hconn *c)
{
    if (!c->x && hr->cfg.tls) {
        peek_tls(hr, c);
        return;
    }
    if (!c->x && (c->x = cs_xport_plain(c->fd)) == NULL) {
        finish(hr, &hr->reading, c);
        return;
    }
    size_t limit = hr->cfg.limits.head_max + 1; /* one byte past the limit proves it passed */
    for (;;) {
        if (c->len > c->hp.pos) { /* new bytes, or a pipelined request kept from the last one */
            cs_http_verdict v = cs_http_parser_feed(&c->hp, c->buf, c->len);
            if (v == CS_HTTP_DONE) {
                judged(hr, c);
                return;
            }
            if (v == CS_HTTP_REFUSE) {
                refuse(hr, c, c->hp.status, 0, c->hp.why);
                return;
            }
        }
        if (c->len == c->cap) {
            size_t cap = c->cap ? c->cap * 2 : FIRST_BUF;
            if (cap > limit)
                cap = limit;
            char *nb = cap > c->cap ? realloc(c->buf, cap) : NULL;
            if (!nb) {
                finish(hr, &hr->reading, c);
                return;
            }
            c->buf = nb;
            c->cap = cap;
        }
        ssize_t n = cs_xport_read(c->x, c->buf + c->len, c->cap - c->len);
        if (n == CS_XP_AGAIN) { /* the handshake (or a TLS write) may have left EPOLLOUT armed */
            struct epoll_event ev = {.events = cs_xport_pending(c->x) ? EPOLLOUT : EPOLLIN, .data.ptr = c};
            epoll_ctl(hr->ep, EPOLL_CTL_MOD, c->fd, &ev);
            return;
        }
        if (n <= 0) {
            finish(hr, &hr->reading, c); /* closed or failed before its head was complete */
            return;
        }
        c->len += (size_t)n;
    }
}

static void take_inbox(cs_headreader *hr)
{
    uint64_t v;
    while (read(hr->evfd, &v, sizeof v) < 0 && errno == EINTR)
        ;
    pthread_mutex_lock(&hr->mu);
    hconn *c = hr->inbox.head;
    hr->inbox.head = hr->inbox.tail = NULL;
    hconn *answered = hr->answered;
    hr->answered = NULL;
    pthread_mutex_unlock(&hr->mu);
    while (answered) {
        hconn *next = answered->ans_next;
        answer_came(hr, answered);
        answered = next;
    }
    int64_t now = cs_mono_ns();
    while (c) {
        hconn *next = c->next;
        c->deadline = now + hr->cfg.timeout_ns;
        list_push(&hr->reading, c);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(hr->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0)
            finish(hr, &hr->reading, c);
        else
            read_head(hr, c); /* the head is often there already */
        c = next;
    }
}

static void expire(cs_headreader *hr, int64_t now)
{
    while (hr->reading.head && hr->reading.head->deadline <= now) {
        hconn *c = hr->reading.head;
        if (c->st == ST_READING && cs_log_enabled(CS_LOG_DEBUG)) {
            char remote[64];
            cs_format_peer(c->fd, remote, sizeof remote);
            CS_LOG(CS_LOG_DEBUG, "connection closed: request head not complete by the deadline",
                   KV_S("remote", remote), KV_U("read_bytes", c->len));
        }
        finish(hr, &hr->reading, c);
    }
    while (hr->linger.head && hr->linger.head->deadline <= now)
        finish(hr, &hr->linger, hr->linger.head);
}

static int wait_ms(const cs_headreader *hr, int64_t now)
{
    int64_t next = -1;
    if (hr->reading.head)
        next = hr->reading.head->deadline;
    if (hr->linger.head && (next < 0 || hr->linger.head->deadline < next))
        next = hr->linger.head->deadline;
    if (next < 0)
        return -1;
    int64_t ms = (next - now + 999999) / 1000000;
    return ms < 0 ? 0 : ms > 60000 ? 60000 : (int)ms;
}

static void *reader_main(void *arg)
{
    cs_headreader *hr = arg;
    cs_owner_bind(&hr->owner);
    cs_thread_role("cs-heads", CS_NICE_ADMISSION);
    struct epoll_event evs[EVENTS_PER_WAIT];
    while (!atomic_load(&hr->stop)) {
        int n = epoll_wait(hr->ep, evs, EVENTS_PER_WAIT, wait_ms(hr, cs_mono_ns()));
        if (n < 0 && errno != EINTR)
            break; /* cannot happen with a valid epoll fd; the deadlines then wait for free */
        for (int i = 0; i < n; i++) {
            hconn *c = evs[i].data.ptr;
            if (!c) {
                take_inbox(hr);
                continue;
            }
            if (c->st == ST_READING)
                read_head(hr, c);
            else if (c->st == ST_HANDSHAKE)
                handshake(hr, c);
            else if (c->st == ST_ANSWERING)
                write_answer(hr, c);
            else
                linger_read(hr, c);
        }
        expire(hr, cs_mono_ns());
        if (hr->any_done) {
            hr->any_done = false;
            hr->cfg.ready(hr->cfg.ctx);
        }
    }
    return NULL;
}

int cs_headreader_start(cs_headreader **out, const cs_headreader_config *cfg, cs_err *err)
{
    *out = NULL;
    cs_headreader *hr = calloc(1, sizeof *hr);
    if (!hr)
        return cs_err_set(err, 0, "request head reader: out of memory");
    hr->cfg = *cfg;
    hr->ep = epoll_create1(EPOLL_CLOEXEC);
    hr->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&hr->mu, NULL);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (hr->ep < 0 || hr->evfd < 0 || epoll_ctl(hr->ep, EPOLL_CTL_ADD, hr->evfd, &ev) != 0) {
        char why[128];
        cs_err_set(err, 0, "request head reader: %s", cs_go_errno(errno, why, sizeof why));
        cs_headreader_free(hr, NULL, NULL);
        return -1;
    }
    if (pthread_create(&hr->thread, NULL, reader_main, hr) != 0) {
        cs_headreader_free(hr, NULL, NULL);
        return cs_err_set(err, 0, "request head reader: cannot start its thread");
    }
    hr->started = true;
    *out = hr;
    return 0;
}

int cs_headreader_add(cs_headreader *hr, int fd, void *tag)
{
    hconn *c = calloc(1, sizeof *c);
    if (!c)
        return -1;
    c->fd = fd;
    c->tag = tag;
    c->st = ST_READING;
    cs_http_parser_init(&c->hp, &hr->cfg.limits);
    atomic_fetch_add(&hr->holding, 1);
    pthread_mutex_lock(&hr->mu);
    bool was_empty = !hr->inbox.head;
    list_push(&hr->inbox, c);
    pthread_mutex_unlock(&hr->mu);
    if (was_empty) {
        uint64_t one = 1;
        while (write(hr->evfd, &one, sizeof one) < 0 && errno == EINTR)
            ;
    }
    return 0;
}

void cs_headreader_answer(cs_headreader *hr, cs_head_pending *p, char *resp, size_t len, bool keep)
{
    hconn *c = (hconn *)p;
    c->ans_resp = resp;
    c->ans_len = len;
    c->ans_keep = keep;
    pthread_mutex_lock(&hr->mu);
    bool was_empty = !hr->answered && !hr->inbox.head;
    c->ans_next = hr->answered;
    hr->answered = c;
    pthread_mutex_unlock(&hr->mu);
    if (was_empty) {
        uint64_t one = 1;
        while (write(hr->evfd, &one, sizeof one) < 0 && errno == EINTR)
            ;
    }
}

size_t cs_headreader_drain(cs_headreader *hr, cs_head_done_fn fn, void *ctx)
{
    pthread_mutex_lock(&hr->mu);
    hconn *c = hr->done.head;
    hr->done.head = hr->done.tail = NULL;
    pthread_mutex_unlock(&hr->mu);
    size_t n = 0;
    while (c) {
        hconn *next = c->next;
        atomic_fetch_sub(&hr->holding, 1);
        fn(ctx, c->tag);
        hconn_free(c);
        c = next;
        n++;
    }
    return n;
}

cs_owner *cs_headreader_owner(cs_headreader *hr)
{
    return &hr->owner;
}

size_t cs_headreader_holding(cs_headreader *hr)
{
    return atomic_load(&hr->holding);
}

static void give_back_all(cs_headreader *hr, hlist *l, cs_head_done_fn fn, void *ctx)
{
    hconn *c = l->head;
    while (c) {
        hconn *next = c->next;
        if (c->arg && hr->cfg.discard)
            hr->cfg.discard(hr->cfg.ctx, c->arg);
        hconn_close(c);
        if (fn)
            fn(ctx, c->tag);
        hconn_free(c);
        c = next;
    }
    l->head = l->tail = NULL;
}

void cs_headreader_free(cs_headreader *hr, cs_head_done_fn fn, void *ctx)
{
    if (!hr)
        return;
    if (hr->started) {
        atomic_store(&hr->stop, true);
        uint64_t one = 1;
        while (write(hr->evfd, &one, sizeof one) < 0 && errno == EINTR)
            ;
        pthread_join(hr->thread, NULL);
    }
    for (hconn *c = hr->answered; c; c = c->ans_next) { /* they are on the waiting list too */
        free(c->ans_resp);
        c->ans_resp = NULL;
    }
    hr->answered = NULL;
    give_back_all(hr, &hr->reading, fn, ctx);
    give_back_all(hr, &hr->waiting, fn, ctx);
    give_back_all(hr, &hr->linger, fn, ctx);
    give_back_all(hr, &hr->inbox, fn, ctx);
    give_back_all(hr, &hr->done, fn, ctx);
    if (hr->ep >= 0)
        close(hr->ep);
    if (hr->evfd >= 0)
        close(hr->evfd);
    pthread_mutex_destroy(&hr->mu);
    free(hr);
}
