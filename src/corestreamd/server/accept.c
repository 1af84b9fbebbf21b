/* SPDX-License-Identifier: Apache-2.0 */
/* The accept loop: the thread that calls cs_server_run. It owns the listening sockets and the
 * admission tables, so a connection is counted (or refused) at accept, before any TLS or HTTP
 * state exists for it, and released here whatever became of it: its tag comes back from the head
 * reader (answered, timed out, failed) or from a stream I/O thread (a subscriber's end). It also
 * carries out the stop and the source's end: listeners closed, a deadline for the wind-down.
 *
 * One epoll: the listeners and an eventfd (srv_wake_loop); no timer descriptors, the two
 * deadlines (the wind-down's, accept's pause) bound epoll_wait. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <dirent.h>

#include "common/clock.h"
#include "common/log.h"
#include "corestreamd/net/listener.h"
#include "corestreamd/server/fdbudget.h"
#include "corestreamd/server/server_internal.h"

#define ACCEPT_BATCH 64                 /* accepts per wake-up: a storm cannot hold the loop */
#define ACCEPT_PAUSE_NS (100 * CS_MS)   /* accept rests this long when out of descriptors */
#define REFUSAL_WARN_NS (10 * CS_SEC)   /* at most one WARN line per this about refusals */
#define DRAIN_TIMEOUT_NS (5 * CS_SEC)   /* close frames after the source ends */
#define SHUTDOWN_TIMEOUT_NS (2 * CS_SEC) /* close frames on SIGINT/SIGTERM */
/* The admin listener's own caps: scrapers and probes, never subscribers. */
#define ADMIN_MAX_CONNECTIONS 64
#define ADMIN_MAX_CONNECTIONS_PER_IP 16

/* epoll data of the three descriptors the loop watches. */
enum { EV_WAKE, EV_DATA, EV_ADMIN };

/* Descriptors open in this process now. */
static long open_fds(void)
{
    long n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n > 3 ? n - 3 : 0; /* ".", ".." and the directory's own descriptor */
}

/* The total cap held under the descriptor budget (fdbudget.h) when the limit is finite; 0 when
 * no cap is configured nor needed. */
static int budgeted_total(cs_server *s, int64_t *want, cs_err *err)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return 0;
    cs_fd_parts parts = {.replay_slots = s->max_replays, .admin = s->admin_fd >= 0, .caller = s->cfg.fd_reserve,
                         .lake_readers = !s->lake ? 0
                                         : s->cfg.lake_readers ? (uint32_t)s->cfg.lake_readers
                                                               : CS_LAKE_READERS_DEFAULT};
    cs_fd_budget b;
    if (cs_fd_budget_make(&b, rl.rlim_cur, (uint64_t)open_fds(), &parts, err) != 0)
        return cs_err_prefix(err, "listen on %s: ", s->cfg.listen);
    CS_LOG(CS_LOG_DEBUG, "descriptor budget", KV_U("limit", b.limit), KV_U("open", b.open),
           KV_U("reserved", b.reserve), KV_U("per_connection", b.per_connection), KV_U("connections", b.connections));
    if (*want == 0 || (uint64_t)*want > b.connections)
        *want = b.connections > INT64_MAX ? INT64_MAX : (int64_t)b.connections;
    return 0;
}

/* The caps in force: the configured total held under the descriptor budget, and the
 * per-address cap at most half of that total, so that one address never holds every slot. */
int srv_admission_setup(cs_server *s, cs_err *err)
{
    int64_t want = s->cfg.max_connections ? s->cfg.max_connections : CS_DEFAULT_MAX_CONNECTIONS;
    int64_t per = s->cfg.max_connections_per_ip ? s->cfg.max_connections_per_ip : CS_DEFAULT_MAX_CONNECTIONS_PER_IP;
    if (want < 0)
        want = 0; /* no cap */
    if (per < 0)
        per = 0;
    if (budgeted_total(s, &want, err) != 0)
        return -1;
    if (want > UINT32_MAX)
        want = UINT32_MAX;
    int64_t half = want > 1 ? want / 2 : want;
    if (want > 0 && (per == 0 || per > half))
        per = half;
    if (per > UINT32_MAX)
        per = UINT32_MAX;
    s->max_conns = (uint32_t)want;
    s->max_conns_per_addr = (uint32_t)per;
    if (!(s->conns = cs_admission_new(s->max_conns, s->max_conns_per_addr)))
        return cs_err_set(err, 0, "listen on %s: out of memory", s->cfg.listen);
    return 0;
}

static int watch(cs_server *s, int fd, uint64_t what)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = what};
    return epoll_ctl(s->loop->ep, EPOLL_CTL_ADD, fd, &ev);
}

int srv_accept_setup(cs_server *s, cs_err *err)
{
    if (s->admin_fd >= 0 && !(s->admin_conns = cs_admission_new(ADMIN_MAX_CONNECTIONS, ADMIN_MAX_CONNECTIONS_PER_IP)))
        return cs_err_set(err, 0, "listen on %s: out of memory", s->cfg.admin_listen);
    accept_loop *l = calloc(1, sizeof *l);
    if (!l)
        return cs_err_set(err, 0, "listen on %s: out of memory", s->cfg.listen);
    s->loop = l;
    l->ep = epoll_create1(EPOLL_CLOEXEC);
    l->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->ep < 0 || l->evfd < 0 || watch(s, l->evfd, EV_WAKE) != 0 || watch(s, s->listen_fd, EV_DATA) != 0 ||
        (s->admin_fd >= 0 && watch(s, s->admin_fd, EV_ADMIN) != 0)) {
        char why[128];
        return cs_err_set(err, 0, "listen on %s: %s", s->cfg.listen, cs_go_errno(errno, why, sizeof why));
    }
    return 0;
}

void srv_accept_free(cs_server *s)
{
    accept_loop *l = s->loop;
    if (!l)
        return;
    if (l->ep >= 0)
        close(l->ep);
    if (l->evfd >= 0)
        close(l->evfd);
    free(l);
    s->loop = NULL;
}

void srv_wake_loop(cs_server *s)
{
    if (s->loop && !atomic_exchange(&s->wake_pending, true)) {
        uint64_t one = 1;
        while (write(s->loop->evfd, &one, sizeof one) < 0 && errno == EINTR)
            ;
    }
}

/* ---- tags ----------------------------------------------------------------------------------- */

void srv_release_tag(cs_server *s, conn_tag *tag)
{
    SRV_ON_LOOP(s);
    if (tag->admin) {
        cs_admission_leave(s->admin_conns, &tag->key);
    } else {
        cs_admission_leave(s->conns, &tag->key);
        atomic_fetch_sub(&s->connections, 1);
    }
    free(tag);
}

void srv_post_release(cs_server *s, conn_tag *tag)
{
    pthread_mutex_lock(&s->released_mu);
    tag->next = s->released;
    s->released = tag;
    pthread_mutex_unlock(&s->released_mu);
    srv_wake_loop(s);
}

void srv_take_released(cs_server *s)
{
    SRV_ON_LOOP(s);
    pthread_mutex_lock(&s->released_mu);
    conn_tag *t = s->released;
    s->released = NULL;
    pthread_mutex_unlock(&s->released_mu);
    while (t) {
        conn_tag *next = t->next;
        srv_release_tag(s, t);
        t = next;
    }
}

static void head_done(void *ctx, void *tag)
{
    srv_release_tag(ctx, tag);
}

/* ---- accepting ------------------------------------------------------------------------------ */

/* One WARN line per REFUSAL_WARN_NS at most, so a connection flood cannot flood the log too; each
 * refusal is at DEBUG. */
static void note_refusal(cs_server *s, const cs_addr_key *k, const char *remote, cs_admit why)
{
    accept_loop *l = s->loop;
    atomic_fetch_add(why == CS_ADMIT_PER_ADDR ? &s->refused_per_ip : &s->refused_total, 1);
    char addr[64];
    cs_addr_key_format(k, addr, sizeof addr);
    const char *reason = why == CS_ADMIT_PER_ADDR ? "per-address connection cap" : "connection cap";
    CS_LOG(CS_LOG_DEBUG, "connection refused", KV_S("remote", remote), KV_S("address", addr), KV_S("reason", reason));
    l->refused_unwarned++;
    int64_t now = cs_mono_ns();
    if (l->refusal_warned_at && now - l->refusal_warned_at < REFUSAL_WARN_NS)
        return;
    l->refusal_warned_at = now;
    CS_LOG(CS_LOG_WARN, "connections refused at accept", KV_U("refused", l->refused_unwarned),
           KV_S("last_address", addr), KV_S("last_reason", reason),
           KV_I("connections", atomic_load(&s->connections)), KV_U("max_connections", s->max_conns));
    l->refused_unwarned = 0;
}

static void listeners_watched(cs_server *s, bool on)
{
    int op = on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL;
    struct epoll_event data = {.events = EPOLLIN, .data.u64 = EV_DATA}, admin = {.events = EPOLLIN, .data.u64 = EV_ADMIN};
    if (s->listen_fd >= 0)
        epoll_ctl(s->loop->ep, op, s->listen_fd, &data);
    if (s->admin_fd >= 0)
        epoll_ctl(s->loop->ep, op, s->admin_fd, &admin);
}

/* Out of descriptors (or kernel memory): the listener stays readable, so retrying at once would
 * spin. Accept rests briefly instead; one WARN line per episode. */
static void pause_accept(cs_server *s, int e)
{
    accept_loop *l = s->loop;
    atomic_fetch_add(&s->accept_pauses, 1);
    listeners_watched(s, false);
    int64_t now = cs_mono_ns();
    l->resume_at = now + ACCEPT_PAUSE_NS;
    if (!l->pause_warned_at || now - l->pause_warned_at >= REFUSAL_WARN_NS) {
        l->pause_warned_at = now;
        char why[128];
        CS_LOG(CS_LOG_WARN, "accept paused", KV_S("error", cs_go_errno(e, why, sizeof why)),
               KV_I("connections", atomic_load(&s->connections)),
               KV_U("pauses", (uint64_t)atomic_load(&s->accept_pauses)));
    }
}

/* No Nagle: a chunk goes out the moment it is written. Keepalive finds dead peers, as Go's
 * listener defaults do (15 s idle, 15 s interval). */
static void tune_socket(int fd)
{
    int one = 1, idle = 15, intvl = 15, cnt = 9;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

/* One accepted socket: counted and handed to the head reader, or refused (closed at once). */
static void admit(cs_server *s, int fd, const struct sockaddr *sa, bool admin)
{
    cs_admission *adm = admin ? s->admin_conns : s->conns;
    cs_addr_key key = cs_addr_key_of(sa);
    cs_admit why = cs_admission_enter(adm, &key);
    conn_tag *tag = why == CS_ADMIT_OK ? malloc(sizeof *tag) : NULL;
    if (!tag) {
        char remote[64];
        cs_format_sockaddr(sa, remote, sizeof remote);
        if (why == CS_ADMIT_OK)
            cs_admission_leave(adm, &key); /* out of memory: refused like the cap */
        if (admin)
            CS_LOG(CS_LOG_DEBUG, "admin connection refused", KV_S("remote", remote));
        else
            note_refusal(s, &key, remote, why == CS_ADMIT_OK ? CS_ADMIT_TOTAL : why);
        close(fd); /* after counting: the peer sees the close once the refusal is counted */
        return;
    }
    tag->key = key;
    tag->admin = admin;
    tune_socket(fd);
    if (admin) {
        cs_m_add1(&s->metrics->admin_connections_accepted, 1);
    } else {
        cs_m_add1(&s->metrics->connections_accepted, 1);
        atomic_fetch_add(&s->connections, 1);
    }
    if (cs_headreader_add(s->heads, fd, tag) != 0) {
        close(fd);
        srv_release_tag(s, tag);
    }
}

static void accept_ready(cs_server *s, bool admin)
{
    int lfd = admin ? s->admin_fd : s->listen_fd;
    for (int i = 0; i < ACCEPT_BATCH && lfd >= 0; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO || errno == EPERM)
                continue; /* that connection is gone; the next may be fine */
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                pause_accept(s, errno);
            return;
        }
        admit(s, fd, (struct sockaddr *)&ss, admin);
    }
}

/* ---- the loop ------------------------------------------------------------------------------- */

void srv_close_listeners(cs_server *s)
{
    SRV_ON_LOOP(s);
    listeners_watched(s, false);
    s->loop->resume_at = 0;
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (s->admin_fd >= 0)
        close(s->admin_fd);
    s->listen_fd = s->admin_fd = -1;
}

/* A wake: a stop or the source's end starts the bounded wind-down. */
static void on_wake(cs_server *s)
{
    accept_loop *l = s->loop;
    uint64_t v;
    while (read(l->evfd, &v, sizeof v) < 0 && errno == EINTR)
        ;
    atomic_store(&s->wake_pending, false);
    if (atomic_load(&s->stop_requested) && !l->shutting_down) {
        l->shutting_down = true;
        srv_close_listeners(s);
        l->deadline = cs_mono_ns() + SHUTDOWN_TIMEOUT_NS;
        cs_wsio_wake(s->wsio, -1); /* every subscriber is told 1001 */
    }
    if (atomic_load(&s->source_done) && !l->draining && !s->cfg.linger) {
        l->draining = true;
        srv_close_listeners(s);
        if (!l->shutting_down)
            l->deadline = cs_mono_ns() + DRAIN_TIMEOUT_NS;
    }
}

/* Milliseconds epoll_wait may sleep: until the nearer deadline, or for ever. */
static int wait_ms(const accept_loop *l, int64_t now)
{
    int64_t next = l->deadline;
    if (l->resume_at && (!next || l->resume_at < next))
        next = l->resume_at;
    if (!next)
        return -1;
    int64_t ms = (next - now + CS_MS - 1) / CS_MS;
    return ms < 0 ? 0 : ms > 60000 ? 60000 : (int)ms;
}

void srv_accept_run(cs_server *s)
{
    accept_loop *l = s->loop;
    cs_owner_bind(&l->owner); /* whoever ran SRV_ON_LOOP calls before: this thread's from now on */
    struct epoll_event evs[8];
    while (!l->done) {
        int n = epoll_wait(l->ep, evs, 8, wait_ms(l, cs_mono_ns()));
        if (n < 0 && errno != EINTR)
            break; /* cannot happen with a valid epoll descriptor */
        for (int i = 0; i < n; i++) {
            if (evs[i].data.u64 == EV_WAKE)
                on_wake(s);
            else if (!l->shutting_down && !l->draining && !l->resume_at) /* paused: both rest */
                accept_ready(s, evs[i].data.u64 == EV_ADMIN);
        }
        int64_t now = cs_mono_ns();
        if (l->resume_at && now >= l->resume_at) {
            l->resume_at = 0;
            listeners_watched(s, true);
        }
        cs_headreader_drain(s->heads, head_done, s);
        srv_take_released(s);
        if ((l->shutting_down || l->draining) &&
            (atomic_load(&s->subscribers) == 0 || (l->deadline && now >= l->deadline)))
            l->done = true;
    }
}
