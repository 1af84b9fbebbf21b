/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/notify.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"

struct cs_notify {
    bool on; /* NOTIFY_SOCKET is set: the thread runs */
    int64_t watchdog_ns; /* 0: no watchdog */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond; /* on CLOCK_MONOTONIC */
    /* under mu */
    bool ready;            /* cs_notify_ready was called */
    char addr[128];
    uint32_t latest;       /* 0: no ledger yet */
    int64_t latest_at;     /* cs_mono_ns of the latest ledger */
    bool stopping;
    char why[256];
    bool quit;
    /* written by the sender, under mu */
    bool ready_sent, stopping_sent, warned;
    uint32_t status_sent;  /* ledger of the last STATUS sent */
    int64_t status_at;     /* when it was sent; INT64_MIN before the first */
    int64_t next_ping;
};

static void send_msg(cs_notify *n, const char *msg)
{
    int rc = sd_notify(0, msg);
    if (rc < 0 && !n->warned) {
        n->warned = true;
        CS_LOG(CS_LOG_WARN, "systemd notification failed", KV_S("error", strerror(-rc)));
    }
}

/* When the STATUS owed for the latest ledger may be sent: INT64_MIN for at once, INT64_MAX when
 * none is owed. Called with mu held. */
static int64_t status_due(const cs_notify *n)
{
    if (!n->ready_sent || n->stopping_sent || n->latest == 0 || n->latest == n->status_sent)
        return INT64_MAX;
    return n->status_at == INT64_MIN ? INT64_MIN : n->status_at + CS_NOTIFY_STATUS_PERIOD_NS;
}

/* Sends msg with mu released (sd_notify does a few syscalls; the source thread must not wait on
 * them), returning with it held. */
static void send_unlocked(cs_notify *n, const char *msg)
{
    pthread_mutex_unlock(&n->mu);
    send_msg(n, msg);
    pthread_mutex_lock(&n->mu);
}

static void send_status(cs_notify *n, int64_t now)
{
    uint32_t seq = n->latest;
    char msg[64];
    snprintf(msg, sizeof msg, "STATUS=streaming; latest ledger %u", seq);
    n->status_sent = seq;
    n->status_at = now;
    send_unlocked(n, msg);
}

/* Whether the watchdog may be fed now: see notify.h. Called with mu held. */
static bool progressing(const cs_notify *n, int64_t now)
{
    return n->stopping || n->latest == 0 || now - n->latest_at <= n->watchdog_ns;
}

static void *sender_main(void *arg)
{
    cs_notify *n = arg;
    pthread_mutex_lock(&n->mu);
    n->next_ping = cs_mono_ns();
    for (;;) {
        int64_t now = cs_mono_ns();
        if (n->ready && !n->ready_sent) {
            char msg[200];
            snprintf(msg, sizeof msg, "READY=1\nSTATUS=listening on %s; waiting for the first ledger", n->addr);
            n->ready_sent = true;
            send_unlocked(n, msg);
        }
        if (n->stopping && !n->stopping_sent) {
            if (status_due(n) != INT64_MAX)
                send_status(n, now); /* the last ledger goes out before the stop, unthrottled */
            char msg[300];
            snprintf(msg, sizeof msg, "STOPPING=1\nSTATUS=%s", n->why);
            n->stopping_sent = true;
            send_unlocked(n, msg);
        }
        if (status_due(n) <= now)
            send_status(n, now);
        if (n->watchdog_ns > 0 && now >= n->next_ping) {
            n->next_ping = now + n->watchdog_ns / 2;
            if (progressing(n, now))
                send_unlocked(n, "WATCHDOG=1");
        }
        /* Events that came in while mu was released are sent before anything else happens. */
        if ((n->ready && !n->ready_sent) || (n->stopping && !n->stopping_sent))
            continue;
        if (n->quit)
            break;
        int64_t wake = status_due(n);
        if (n->watchdog_ns > 0 && n->next_ping < wake)
            wake = n->next_ping;
        if (wake == INT64_MAX)
            pthread_cond_wait(&n->cond, &n->mu);
        else if (wake > cs_mono_ns()) {
            struct timespec ts = {.tv_sec = wake / 1000000000, .tv_nsec = wake % 1000000000};
            pthread_cond_timedwait(&n->cond, &n->mu, &ts);
        }
    }
    pthread_mutex_unlock(&n->mu);
    return NULL;
}

int cs_notify_new(cs_notify **out, cs_err *err)
{
    cs_notify *n = calloc(1, sizeof *n);
    if (!n)
        return cs_err_set(err, 0, "systemd notify: out of memory");
    n->status_at = INT64_MIN;
    const char *sock = getenv("NOTIFY_SOCKET");
    n->on = sock && *sock;
    *out = n;
    if (!n->on)
        return 0;
    uint64_t usec = 0;
    /* > 0 only when WATCHDOG_USEC is set and WATCHDOG_PID, if set, is this process. */
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0)
        n->watchdog_ns = (int64_t)usec * 1000;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&n->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&n->mu, NULL);
    if (pthread_create(&n->thread, NULL, sender_main, n) != 0) {
        pthread_cond_destroy(&n->cond);
        pthread_mutex_destroy(&n->mu);
        free(n);
        *out = NULL;
        return cs_err_set(err, 0, "systemd notify: cannot start the sender thread");
    }
    CS_LOG(CS_LOG_DEBUG, "systemd notification on", KV_S("socket", sock),
           KV_D("watchdog", n->watchdog_ns));
    return 0;
}

void cs_notify_ready(cs_notify *n, const char *addr)
{
    if (!n || !n->on)
        return;
    pthread_mutex_lock(&n->mu);
    if (!n->ready) {
        n->ready = true;
        snprintf(n->addr, sizeof n->addr, "%s", addr ? addr : "");
        pthread_cond_signal(&n->cond);
    }
    pthread_mutex_unlock(&n->mu);
}

void cs_notify_ledger(cs_notify *n, uint32_t seq)
{
    if (!n || !n->on)
        return;
    int64_t now = cs_mono_ns();
    pthread_mutex_lock(&n->mu);
    n->latest = seq;
    n->latest_at = now;
    /* Wake the sender only when the status may go out now; a deferred one waits for the
     * sender's own timer. */
    if (status_due(n) <= now)
        pthread_cond_signal(&n->cond);
    pthread_mutex_unlock(&n->mu);
}

void cs_notify_stopping(cs_notify *n, const char *why)
{
    if (!n || !n->on)
        return;
    pthread_mutex_lock(&n->mu);
    if (!n->stopping) {
        n->stopping = true;
        snprintf(n->why, sizeof n->why, "%s", why);
        pthread_cond_signal(&n->cond);
    }
    pthread_mutex_unlock(&n->mu);
}

void cs_notify_free(cs_notify *n)
{
    if (!n)
        return;
    if (n->on) {
        pthread_mutex_lock(&n->mu);
        n->quit = true;
        pthread_cond_signal(&n->cond);
        pthread_mutex_unlock(&n->mu);
        pthread_join(n->thread, NULL);
        pthread_cond_destroy(&n->cond);
        pthread_mutex_destroy(&n->mu);
    }
    free(n);
}
