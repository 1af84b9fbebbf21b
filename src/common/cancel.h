/* SPDX-License-Identifier: Apache-2.0 */
/* Run-wide cancellation: one flag that every blocking wait in the source path can watch. It owns
 * an eventfd so a wait can be a poll() on it (with a deadline or alongside a pipe fd), which makes
 * a cancel wake sleepers and blocked reads at once. */
#ifndef CS_COMMON_CANCEL_H
#define CS_COMMON_CANCEL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct cs_cancel {
    atomic_bool cancelled;
    int efd; /* readable once cancelled */
} cs_cancel;

int cs_cancel_init(cs_cancel *c);
void cs_cancel_destroy(cs_cancel *c);
/* Idempotent and async-signal-safe. */
void cs_cancel_fire(cs_cancel *c);
bool cs_cancel_is_set(const cs_cancel *c);

/* Sleeps until the monotonic deadline (common/clock.h). Returns 0 when the deadline passed, -1 when cancelled
 * first (also when already cancelled). */
int cs_cancel_sleep_until(cs_cancel *c, int64_t deadline_mono_ns);

/* Waits until fd is readable (0) or the run is cancelled (-1). */
int cs_cancel_wait_readable(cs_cancel *c, int fd);

#endif
