/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: a one-shot flag one thread sets and another waits for, with a bounded wait (the
 * monotonic clock), so a test synchronises on the event itself instead of sleeping. */
#ifndef CS_TESTS_SUPPORT_EVENT_H
#define CS_TESTS_SUPPORT_EVENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct event {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool set;
} event;

void event_init(event *e);
void event_destroy(event *e);
void event_set(event *e);
/* True once set; false when timeout_ns passed first. */
bool event_wait(event *e, int64_t timeout_ns);

#endif
