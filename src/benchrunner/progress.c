/* SPDX-License-Identifier: Apache-2.0 */
/* benchrunner's progress line. See progress.h. */
#include "benchrunner/progress.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "common/godur.h"

struct br_progress {
    int fd;
    int64_t period_ns;
    size_t subscribers;
    uint64_t start, end;
    bool stamped;
    int64_t began_ns;
    /* written by the consuming thread, read by the drawing one */
    atomic_uint_fast64_t received, abandons, replayed, reconnects, deliveries;
    atomic_uint_fast64_t first_seq; /* 0 until a ledger came */
    atomic_uint_fast64_t *last_reconnects; /* per subscriber; only the consuming thread writes */
    atomic_uint_fast64_t *hist;            /* BR_HIST_BUCKETS delivery counts */
    /* the drawing thread's */
    uint64_t *snap;
    uint64_t rate_received;
    int64_t rate_ns;
    bool drawn;
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC */
    bool stop;         /* under mu */
};

/* ---- the text ------------------------------------------------------------------------------------ */

static void fmt_elapsed(int64_t ns, char *buf, size_t len)
{
    long long s = (long long)(ns / CS_SEC);
    if (s < 60)
        snprintf(buf, len, "%llds", s);
    else if (s < 3600)
        snprintf(buf, len, "%lldm%02llds", s / 60, s % 60);
    else
        snprintf(buf, len, "%lldh%02lldm", s / 3600, s / 60 % 60);
}

/* Cuts s to at most cols display columns (UTF-8: continuation bytes take none). */
static void cut_to_columns(char *s, int cols)
{
    int used = 0;
    for (char *c = s; *c; c++) {
        if (((unsigned char)*c & 0xc0) == 0x80)
            continue;
        if (used++ == cols) {
            *c = '\0';
            return;
        }
    }
}

char *br_progress_format(const br_progress_view *v, int cols, char *buf, size_t len)
{
    char count[96], rate[48], delivery[128], elapsed[32], replayed[48] = "";
    char a[BR_DUR_STR_MAX], b[BR_DUR_STR_MAX];
    int n = snprintf(count, sizeof count, "%" PRIu64, v->received);
    if (v->expected > 0)
        n += snprintf(count + n, sizeof count - (size_t)n, " of %" PRIu64, v->expected);
    snprintf(count + n, sizeof count - (size_t)n, v->subscribers > 1 ? " ledgers (%zu subscribers)" : " ledgers",
             v->subscribers);
    snprintf(rate, sizeof rate, v->subscribers > 1 ? "%.1f/s each" : "%.1f/s", v->rate);
    if (v->has_delivery)
        snprintf(delivery, sizeof delivery, "delivery p50 %s p99 %s", br_fmt_dur(v->p50, a, sizeof a),
                 br_fmt_dur(v->p99, b, sizeof b));
    else
        snprintf(delivery, sizeof delivery, "delivery -");
    if (v->replayed > 0)
        snprintf(replayed, sizeof replayed, "  replayed %" PRIu64, v->replayed);
    fmt_elapsed(v->elapsed_ns, elapsed, sizeof elapsed);
    snprintf(buf, len, "%s  %s  %s  reconnects %" PRIu64 "  abandons %" PRIu64 "%s  %s", count, rate, delivery,
             v->reconnects, v->abandons, replayed, elapsed);
    if (cols > 0)
        cut_to_columns(buf, cols);
    return buf;
}

/* ---- the counts ---------------------------------------------------------------------------------- */

void br_progress_note(br_progress *p, size_t sub, const br_sample *s)
{
    if (!p)
        return;
    uint_fast64_t none = 0;
    atomic_compare_exchange_strong_explicit(&p->first_seq, &none, s->seq, memory_order_relaxed,
                                            memory_order_relaxed);
    if (s->has_delivery) {
        atomic_fetch_add_explicit(&p->hist[br_hist_index(s->delivery)], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->deliveries, 1, memory_order_relaxed);
    } else if (p->stamped) {
        atomic_fetch_add_explicit(&p->replayed, 1, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&p->abandons, s->discarded, memory_order_relaxed);
    if (sub < p->subscribers) {
        uint64_t before = atomic_load_explicit(&p->last_reconnects[sub], memory_order_relaxed);
        if (s->reconnects > before) {
            atomic_store_explicit(&p->last_reconnects[sub], s->reconnects, memory_order_relaxed);
            atomic_fetch_add_explicit(&p->reconnects, s->reconnects - before, memory_order_relaxed);
        }
    }
    atomic_fetch_add_explicit(&p->received, 1, memory_order_relaxed);
}

static uint64_t expected_of(br_progress *p)
{
    if (p->end == 0)
        return 0;
    uint64_t first = p->start ? p->start : atomic_load_explicit(&p->first_seq, memory_order_relaxed);
    if (first == 0 || first > p->end)
        return 0;
    return (p->end - first + 1) * p->subscribers;
}

void br_progress_view_at(br_progress *p, int64_t now_ns, br_progress_view *v)
{
    *v = (br_progress_view){.subscribers = p->subscribers, .elapsed_ns = now_ns - p->began_ns};
    v->received = atomic_load_explicit(&p->received, memory_order_relaxed);
    v->expected = expected_of(p);
    v->reconnects = atomic_load_explicit(&p->reconnects, memory_order_relaxed);
    v->abandons = atomic_load_explicit(&p->abandons, memory_order_relaxed);
    v->replayed = atomic_load_explicit(&p->replayed, memory_order_relaxed);
    /* A snapshot first, so the rank and the buckets it is looked up in agree. */
    uint64_t n = 0;
    for (size_t i = 0; i < BR_HIST_BUCKETS; i++)
        n += p->snap[i] = atomic_load_explicit(&p->hist[i], memory_order_relaxed);
    if (n > 0) {
        v->has_delivery = true;
        v->p50 = br_hist_percentile(p->snap, n, 50);
        v->p99 = br_hist_percentile(p->snap, n, 99);
    }
    int64_t dt = now_ns - p->rate_ns;
    if (dt > 0)
        v->rate = (double)(v->received - p->rate_received) / ((double)dt / 1e9) / (double)p->subscribers;
    p->rate_received = v->received;
    p->rate_ns = now_ns;
}

/* ---- drawing ------------------------------------------------------------------------------------- */

static void write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* a terminal that went away: the line is not worth an error */
        s += w;
        n -= (size_t)w;
    }
}

static void draw(br_progress *p)
{
    br_progress_view v;
    br_progress_view_at(p, br_mono_ns(), &v);
    struct winsize ws;
    int cols = ioctl(p->fd, TIOCGWINSZ, &ws) == 0 ? ws.ws_col - 1 : 0;
    char line[BR_PROGRESS_LINE_MAX + 8] = "\r\033[K";
    br_progress_format(&v, cols, line + 4, sizeof line - 4);
    write_all(p->fd, line, strlen(line));
    p->drawn = true;
}

static struct timespec mono_at(int64_t ns)
{
    return (struct timespec){.tv_sec = ns / CS_SEC, .tv_nsec = ns % CS_SEC};
}

static void *progress_main(void *arg)
{
    br_progress *p = arg;
    int64_t next = p->began_ns + p->period_ns;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        struct timespec at = mono_at(next);
        if (pthread_cond_timedwait(&p->cv, &p->mu, &at) != ETIMEDOUT || p->stop)
            continue;
        pthread_mutex_unlock(&p->mu);
        draw(p);
        int64_t now = br_mono_ns();
        while (next <= now) /* a late wake-up skips the ticks it missed */
            next += p->period_ns;
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void progress_free(br_progress *p)
{
    free(p->last_reconnects);
    free(p->hist);
    free(p->snap);
    free(p);
}

static bool init_sync(br_progress *p)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0)
        return false;
    bool ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 && pthread_cond_init(&p->cv, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (ok && pthread_mutex_init(&p->mu, NULL) != 0) {
        pthread_cond_destroy(&p->cv);
        ok = false;
    }
    return ok;
}

br_progress *br_progress_start(const br_progress_spec *spec)
{
    br_progress *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->fd = spec->fd;
    p->period_ns = spec->period_ns > 0 ? spec->period_ns : CS_SEC;
    p->subscribers = spec->subscribers ? spec->subscribers : 1;
    p->start = spec->start;
    p->end = spec->end;
    p->stamped = spec->stamped;
    p->began_ns = p->rate_ns = br_mono_ns();
    p->last_reconnects = calloc(p->subscribers, sizeof *p->last_reconnects);
    p->hist = calloc(BR_HIST_BUCKETS, sizeof *p->hist);
    p->snap = calloc(BR_HIST_BUCKETS, sizeof *p->snap);
    if (!p->last_reconnects || !p->hist || !p->snap || !init_sync(p)) {
        progress_free(p);
        return NULL;
    }
    if (pthread_create(&p->tid, NULL, progress_main, p) != 0) {
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        progress_free(p);
        return NULL;
    }
    return p;
}

void br_progress_stop(br_progress *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->tid, NULL);
    if (p->drawn)
        write_all(p->fd, "\r\033[K", 4);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    progress_free(p);
}
