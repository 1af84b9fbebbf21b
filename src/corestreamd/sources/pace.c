/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/sources/pace.h"

#include <stdlib.h>
#include <string.h>

#include "common/clock.h"

typedef struct paced {
    cs_source base;
    cs_ledger_stream *ls;
    cs_range range;
    cs_dur window;
    cs_dur cadence;
    cs_cancel *cancel;
    cs_pace_clock clock; /* a copy: one indirect call per read of the time, no pointer chase */

    /* 64-bit so that stepping past 4294967295 is visible instead of wrapping to 0. */
    uint64_t next_seq;
    bool grid_anchored;
    int64_t next_start; /* monotonic ns of the next emission start on the cadence grid */

    /* The current body: borrowed from the stream until the next pull. */
    const uint8_t *data;
    size_t len;
    size_t off;
    bool body_started;
    int64_t body_start;
} paced;

static int64_t pace_mono_now(void *arg)
{
    (void)arg;
    return cs_mono_ns();
}

static int pace_mono_sleep_until(void *arg, cs_cancel *cancel, int64_t deadline)
{
    (void)arg;
    return cs_cancel_sleep_until(cancel, deadline);
}

const cs_pace_clock cs_pace_clock_mono = {
    .now = pace_mono_now,
    .sleep_until = pace_mono_sleep_until,
    .arg = NULL,
};

static inline int64_t pace_now(const paced *p)
{
    return p->clock.now(p->clock.arg);
}

static inline int pace_sleep_until(paced *p, int64_t deadline)
{
    return p->clock.sleep_until(p->clock.arg, p->cancel, deadline);
}

static int cancelled(cs_err *err)
{
    return cs_err_set(err, CS_ERR_CANCELLED, "context canceled");
}

/* The last sequence this adapter may emit: range.to when bounded, otherwise the last
 * representable one (a sequence past it cannot be named on the wire). */
static uint64_t last_seq(const paced *p)
{
    return p->range.bounded ? p->range.to : UINT32_MAX;
}

/* Waits for this emission's slot on the absolute cadence grid and advances the grid. When the
 * next slot is already past too, the grid re-anchors to now, so lateness is never repaid as a
 * burst (pace.h, Timing). */
static int wait_for_slot(paced *p)
{
    if (!p->grid_anchored) {
        p->next_start = pace_now(p);
        p->grid_anchored = true;
    }
    if (pace_sleep_until(p, p->next_start) < 0)
        return -1;
    p->next_start += p->cadence;
    int64_t now = pace_now(p);
    if (p->next_start < now)
        p->next_start = now;
    return 0;
}

static int paced_next(cs_source *s, cs_emission *em, cs_err *err)
{
    paced *p = (paced *)s;
    if (p->next_seq > last_seq(p))
        return 0;
    uint32_t seq = (uint32_t)p->next_seq;
    em->seq = seq;
    em->declared_size = 0;

    /* Like the prototype, the ledger is pulled first and the cadence wait comes after it, so a
     * slow pull eats into the wait instead of adding to it. */
    const uint8_t *data = NULL;
    size_t len = 0;
    int r = p->ls->ops->pull(p->ls, seq, &data, &len, err);
    if (r <= 0)
        return r;
    if (p->cadence > 0 && wait_for_slot(p) < 0)
        return cancelled(err);

    p->data = data;
    p->len = len;
    p->off = 0;
    p->body_started = false;
    em->declared_size = len;
    p->next_seq++;
    return 1;
}

static ssize_t paced_read(cs_source *s, uint8_t *buf, size_t len, cs_err *err)
{
    paced *p = (paced *)s;
    if (p->off >= p->len)
        return 0;
    if (!p->body_started) {
        p->body_start = pace_now(p);
        p->body_started = true;
    }
    size_t n = p->len - p->off;
    if (len < n)
        n = len;
    if (p->window > 0 && n > 0) {
        /* The piece's last byte is due at window*(off+n)/total, so the body's final byte lands
         * exactly at the window's close. Floating point: the integer product window*bytes
         * overflows 64 bits for long windows over large ledgers. */
        double frac = (double)(p->off + n) / (double)p->len;
        int64_t due = p->body_start + (int64_t)((double)p->window * frac);
        if (pace_sleep_until(p, due) < 0)
            return cancelled(err);
    }
    memcpy(buf, p->data + p->off, n);
    p->off += n;
    return (ssize_t)n;
}

static void paced_destroy(cs_source *s)
{
    paced *p = (paced *)s;
    p->ls->ops->destroy(p->ls);
    free(p);
}

static const cs_source_ops paced_ops = {
    .next = paced_next,
    .read = paced_read,
    .destroy = paced_destroy,
};

cs_source *cs_paced_source_new_with_clock(cs_ledger_stream *ls, cs_range range, cs_dur window,
                                          cs_dur cadence, cs_cancel *cancel,
                                          const cs_pace_clock *clock)
{
    if (!ls) /* lets a failed stream constructor pass straight through */
        return NULL;
    paced *p = calloc(1, sizeof *p);
    if (!p) {
        ls->ops->destroy(ls);
        return NULL;
    }
    p->base.ops = &paced_ops;
    p->ls = ls;
    p->range = range;
    p->window = window;
    p->cadence = cadence;
    p->cancel = cancel;
    p->clock = clock ? *clock : cs_pace_clock_mono;
    p->next_seq = range.from;
    return &p->base;
}

cs_source *cs_paced_source_new(cs_ledger_stream *ls, cs_range range, cs_dur window, cs_dur cadence,
                               cs_cancel *cancel)
{
    return cs_paced_source_new_with_clock(ls, range, window, cadence, cancel, NULL);
}
