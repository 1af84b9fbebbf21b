/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/stream/replayslots.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common/invariant.h"

struct cs_replay_slots {
    pthread_mutex_t mu; /* every I/O thread acquires and releases: the table and the queue */
    cs_admission *held; /* the slots as counts per address, with the two caps */
    cs_replay_ticket *head, *tail;
    /* Mirrors of the held total and the queue length, for the getters on other threads. */
    atomic_uint running, waiting;
};

cs_replay_slots *cs_replay_slots_new(uint32_t max_total, uint32_t max_per_addr)
{
    cs_replay_slots *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->held = cs_admission_new(max_total, max_per_addr);
    if (!s->held) {
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    return s;
}

void cs_replay_slots_free(cs_replay_slots *s)
{
    if (s) {
        cs_admission_free(s->held);
        pthread_mutex_destroy(&s->mu);
        free(s);
    }
}

static void dequeue(cs_replay_slots *s, cs_replay_ticket *t)
{
    if (t->prev)
        t->prev->next = t->next;
    else
        s->head = t->next;
    if (t->next)
        t->next->prev = t->prev;
    else
        s->tail = t->prev;
    t->prev = t->next = NULL;
    atomic_fetch_sub(&s->waiting, 1);
}

/* A ticket takes a slot from NONE (a fresh acquire) or WAITING (a grant), never twice. */
static bool take(cs_replay_slots *s, cs_replay_ticket *t, cs_admit *why)
{
    CS_CHECK(t->state == CS_TICKET_NONE || t->state == CS_TICKET_WAITING, "replay slots: a ticket takes one slot, never two");
    *why = cs_admission_enter(s->held, &t->key);
    if (*why != CS_ADMIT_OK)
        return false;
    t->state = CS_TICKET_HELD;
    atomic_fetch_add(&s->running, 1);
    return true;
}

static bool acquire_locked(cs_replay_slots *s, cs_replay_ticket *t, size_t *position)
{
    if (t->state == CS_TICKET_HELD)
        return true;
    cs_admit why;
    /* A fresh ticket may take a free slot at once: release hands every slot a waiter can use to
     * that waiter, so one left free is one no waiter fits and no one is overtaken. */
    if (t->state == CS_TICKET_NONE && take(s, t, &why))
        return true;
    *position = 0;
    if (t->state == CS_TICKET_NONE) {
        CS_CHECK(!t->prev && !t->next && s->head != t, "replay slots: a ticket joins the queue once");
        t->state = CS_TICKET_WAITING;
        t->next = NULL;
        t->prev = s->tail;
        if (s->tail)
            s->tail->next = t;
        else
            s->head = t;
        s->tail = t;
        *position = atomic_fetch_add(&s->waiting, 1) + 1;
    }
    return false;
}

bool cs_replay_slots_acquire(cs_replay_slots *s, cs_replay_ticket *t, size_t *position)
{
    pthread_mutex_lock(&s->mu);
    bool held = acquire_locked(s, t, position);
    pthread_mutex_unlock(&s->mu);
    return held;
}

static void release_locked(cs_replay_slots *s, cs_replay_ticket *t)
{
    if (t->state == CS_TICKET_WAITING) {
        dequeue(s, t);
        t->state = CS_TICKET_NONE;
        return;
    }
    if (t->state != CS_TICKET_HELD)
        return;
    cs_admission_leave(s->held, &t->key);
    atomic_fetch_sub(&s->running, 1);
    t->state = CS_TICKET_NONE;
    for (cs_replay_ticket *w = s->head, *next; w; w = next) {
        next = w->next;
        cs_admit why;
        CS_CHECK(w->state == CS_TICKET_WAITING, "replay slots: the queue holds waiting tickets only");
        if (take(s, w, &why)) {
            dequeue(s, w);
            w->granted(w->granted_ctx);
        } else if (why == CS_ADMIT_TOTAL) {
            break; /* nobody else fits either */
        }
    }
}

void cs_replay_slots_release(cs_replay_slots *s, cs_replay_ticket *t)
{
    pthread_mutex_lock(&s->mu);
    release_locked(s, t);
    pthread_mutex_unlock(&s->mu);
}

uint32_t cs_replay_slots_running(const cs_replay_slots *s)
{
    return atomic_load(&((cs_replay_slots *)s)->running);
}

uint32_t cs_replay_slots_waiting(const cs_replay_slots *s)
{
    return atomic_load(&((cs_replay_slots *)s)->waiting);
}
