/* SPDX-License-Identifier: Apache-2.0 */
/* benchrunner's progress line (benchrunner(1)): on a terminal, one line redrawn in place each
 * period ("\r", the text, clear to the end of the line) with the ledgers received of those
 * expected, the rate, delivery p50/p99 so far, reconnects and abandons.
 *
 * The consuming thread notes each ledger (br_progress_note: a few relaxed atomic adds, no lock,
 * nothing that grows with the run); a thread of its own draws, so the line goes on ticking while
 * no ledger comes (a dial, a reconnect's backoff, a stalled server). The percentiles come from a
 * histogram (stats.h's br_hist_*), within 0.4 % of the exact ones the summary prints. */
#ifndef CS_BENCHRUNNER_PROGRESS_H
#define CS_BENCHRUNNER_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "benchrunner/stats.h"

/* What one line shows. */
typedef struct br_progress_view {
    uint64_t received;   /* ledgers, every subscriber's */
    uint64_t expected;   /* the same for the whole range; 0 when unbounded or not yet known */
    size_t subscribers;
    double rate;         /* ledgers per second per subscriber over the last period */
    bool has_delivery;   /* p50 and p99 are set: at least one ledger had an emit stamp */
    int64_t p50, p99;
    uint64_t reconnects; /* every subscriber's, as of its last ledger */
    uint64_t abandons;   /* partial deliveries discarded: live flows the server abandoned */
    uint64_t replayed;   /* ledgers without an emit stamp (sent from the ring) */
    int64_t elapsed_ns;  /* since the progress began */
} br_progress_view;

/* The line's text, at most cols display columns when cols > 0 (a terminal that wraps would
 * leave every redraw behind), e.g.
 *   1234 of 5000 ledgers  99.8/s  delivery p50 1.23ms p99 4.56ms  reconnects 0  abandons 0  12s
 * Returns buf. */
#define BR_PROGRESS_LINE_MAX 256
char *br_progress_format(const br_progress_view *v, int cols, char *buf, size_t len);

typedef struct br_progress br_progress;

typedef struct br_progress_spec {
    int fd;             /* where the line is drawn (a terminal) */
    int64_t period_ns;  /* how often */
    size_t subscribers; /* each expects every ledger of the range */
    uint64_t start;     /* 0: from the first ledger that comes (the tip) */
    uint64_t end;       /* 0: unbounded */
    bool stamped;       /* ledgers carry emit stamps (remote, loopback): a stampless one was replayed */
} br_progress_spec;

/* Starts drawing. NULL when memory or the thread cannot be had (the run goes on without a
 * progress line). */
br_progress *br_progress_start(const br_progress_spec *spec);

/* Subscriber sub received s (s->reconnects is that session's count). Any thread; NULL p: nothing. */
void br_progress_note(br_progress *p, size_t sub, const br_sample *s);

/* The counts so far, as a line would show them at now_ns. It advances the rate's reference
 * point, which the drawing thread owns: call it from that thread, or (tests) where that thread
 * cannot be drawing (a period longer than the test). */
void br_progress_view_at(br_progress *p, int64_t now_ns, br_progress_view *v);

/* Stops the drawing thread, clears the line if one was drawn, and frees p. NULL: nothing. */
void br_progress_stop(br_progress *p);

#endif
