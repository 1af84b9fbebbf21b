/* SPDX-License-Identifier: Apache-2.0 */
/* The paced adapter (docs/operations/sources.md): turns a stream of complete ledgers into
 * emissions whose starts follow an absolute cadence grid and whose bytes are released over an emit
 * window, so the overlap of emission and transfer is measurable.
 *
 * Timing, exactly (what tests/test_pace.c asserts against a fake clock):
 *   - next() pulls the ledger first and waits for its slot after, so a slow pull eats into the
 *     wait instead of adding to it. The first emission anchors the grid at the clock's now (read
 *     after its pull) and starts at once.
 *   - After each wait the grid moves one cadence on. When that next slot is already in the past
 *     (the emission started more than a cadence late), the grid re-anchors to now: the next
 *     emission may start at once, the one after it a full cadence later. Missed slots are
 *     skipped, never repaid as a burst. Lateness under a cadence keeps the grid.
 *   - A body's window starts at its first read(). A read that hands out the bytes up to offset k
 *     of a len-byte body returns no earlier than body_start + window * k / len, so the last byte
 *     is due exactly when the window closes. An empty body, and window <= 0, never wait.
 *   - A finished range and a failed pull return without waiting.
 *
 * Threads. A paced source is used by one thread at a time (the source loop's): next(), read()
 * and destroy() never overlap. Its clock is called only from inside next() and read(), on that
 * thread. The cancel may be fired from any thread; the wait in progress ends with it.
 */
#ifndef CS_CORESTREAMD_PACE_H
#define CS_CORESTREAMD_PACE_H

#include <stdint.h>

#include "common/godur.h"
#include "common/cancel.h"
#include "corestreamd/sources/source.h"

/* The clock the adapter reads and waits on: the monotonic clock in the daemon
 * (cs_pace_clock_mono), a hand-advanced one in tests. Times are nanoseconds on one monotonic
 * scale with an arbitrary origin (0 will do); the adapter only adds durations to them and compares
 * them, so they must never go backwards.
 *
 * Both functions receive arg as given here and are called on the thread using the source (see
 * Threads above); neither may be NULL. */
typedef struct cs_pace_clock {
    /* The current time. Cannot fail. */
    int64_t (*now)(void *arg);
    /* Returns once now() >= deadline (at once when it already is): 0. Returns -1 when cancel is
     * set, on entry (whatever the deadline) or before the deadline is reached; the adapter reports
     * that as CS_ERR_CANCELLED "context canceled". A wait that cannot go on for another reason
     * also returns -1 and reads the same way: the default clock does so if ppoll() fails with
     * anything other than EINTR. When cancel can be fired from another thread, a cancel fired
     * during the wait must end it (the default clock polls the cancel's eventfd). */
    int (*sleep_until)(void *arg, cs_cancel *cancel, int64_t deadline);
    /* Borrowed: passed to both functions, never freed by the adapter. */
    void *arg;
} cs_pace_clock;

/* The real clock: cs_mono_ns() and cs_cancel_sleep_until() (common/clock.h, common/cancel.h),
 * arg NULL. Stateless, shared by every source. */
extern const cs_pace_clock cs_pace_clock_mono;

/* Takes ownership of ls: it is destroyed with the source, or at once when allocation fails
 * (NULL). ls NULL returns NULL, so a failed stream constructor can be passed straight in. window
 * <= 0: bytes are released at once; cadence <= 0: no wait between ledgers. Sequences count from
 * range.from; a bounded range stops after range.to, an unbounded one after UINT32_MAX. cancel is
 * borrowed and must outlive the source. Uses cs_pace_clock_mono. */
cs_source *cs_paced_source_new(cs_ledger_stream *ls, cs_range range, cs_dur window, cs_dur cadence,
                               cs_cancel *cancel);

/* The same on another clock. *clock is copied; clock->arg is borrowed and must outlive the
 * source. clock NULL means cs_pace_clock_mono. */
cs_source *cs_paced_source_new_with_clock(cs_ledger_stream *ls, cs_range range, cs_dur window,
                                          cs_dur cadence, cs_cancel *cancel,
                                          const cs_pace_clock *clock);

#endif
