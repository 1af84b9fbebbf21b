/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: one-shot events. See event.h. */
#include "support/event.h"

#include <errno.h>
#include <stdint.h>
#include <time.h>

void event_init(event *e)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, &a);
    pthread_condattr_destroy(&a);
    e->set = false;
}

void event_destroy(event *e)
{
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
}

void event_set(event *e)
{
    pthread_mutex_lock(&e->mu);
    e->set = true;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

bool event_wait(event *e, int64_t timeout_ns)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    int64_t ns = (int64_t)dl.tv_nsec + timeout_ns % 1000000000LL;
    dl.tv_sec += (time_t)(timeout_ns / 1000000000LL + ns / 1000000000LL);
    dl.tv_nsec = (long)(ns % 1000000000LL);
    pthread_mutex_lock(&e->mu);
    int rc = 0;
    while (!e->set && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&e->cv, &e->mu, &dl);
    bool set = e->set;
    pthread_mutex_unlock(&e->mu);
    return set;
}
