/* SPDX-License-Identifier: Apache-2.0 */
/* Replay admission: how many subscribers read the ring at once, in total and per client
 * address (the same grouping as admission at accept, cs_addr_key). A subscriber holds a slot from
 * its first ring ledger until its cursor stops reading the ring (it reached the live flow, its
 * range is done, it was closed or it went away). One without a free slot waits in a queue and is
 * handed a slot, in arrival order, when one frees; a waiter whose address is at its own cap is
 * passed over, so it never holds back waiters from other addresses.
 *
 * Threads: any stream I/O thread acquires and releases; the table
 * is under a mutex. The granted callback runs inside the cs_replay_slots_release that freed the
 * slot, on the releasing thread and with that mutex held: it must only post the grant to the
 * waiter's own thread (a flag and a wake), never step a cursor or take another lock. Holding the
 * mutex is what keeps the waiter alive meanwhile: its own release waits for it. */
#ifndef CS_CORESTREAMD_REPLAYSLOTS_H
#define CS_CORESTREAMD_REPLAYSLOTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/admission.h"

typedef enum cs_ticket_state {
    CS_TICKET_NONE,    /* neither holding nor waiting */
    CS_TICKET_WAITING, /* queued for a slot */
    CS_TICKET_HELD,    /* holds a slot */
} cs_ticket_state;

/* One subscriber's claim, embedded in its cursor. key, granted and granted_ctx are set by the
 * owner before the first acquire; the rest belongs to the table. */
typedef struct cs_replay_ticket {
    cs_addr_key key;
    /* A waiting ticket was handed a slot: its owner should step its cursor again. */
    void (*granted)(void *ctx);
    void *granted_ctx;
    cs_ticket_state state;
    struct cs_replay_ticket *prev, *next; /* the queue, while WAITING */
} cs_replay_ticket;

typedef struct cs_replay_slots cs_replay_slots;

/* Caps of 0 mean unlimited. NULL when out of memory. */
cs_replay_slots *cs_replay_slots_new(uint32_t max_total, uint32_t max_per_addr);
/* Only once no ticket holds or waits. */
void cs_replay_slots_free(cs_replay_slots *s);

/* True when t holds a slot (already, or taken now). Otherwise t waits and false is returned:
 * *position is its place when it joins the queue now (the queue's length, 1 when it is next),
 * 0 when it was waiting already. Out of memory for the per-address table counts as no free
 * slot. */
bool cs_replay_slots_acquire(cs_replay_slots *s, cs_replay_ticket *t, size_t *position);

/* Gives up what t has: a held slot is freed and handed to the first waiter that fits (whose
 * granted callback runs before this returns), a waiting ticket leaves the queue. Nothing for a
 * ticket in CS_TICKET_NONE. t is NONE afterwards. */
void cs_replay_slots_release(cs_replay_slots *s, cs_replay_ticket *t);

/* Slots held and tickets waiting now. Any thread (a test or a metric reading a moving value). */
uint32_t cs_replay_slots_running(const cs_replay_slots *s);
uint32_t cs_replay_slots_waiting(const cs_replay_slots *s);

#endif
