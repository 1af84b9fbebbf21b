/* SPDX-License-Identifier: Apache-2.0 */
/* --compress-level auto: the controller that picks each live chunk's zstd level.
 *
 * Aim: the strongest level the encoders sustain at the rate the source delivers, so that chunks
 * neither ship raw (every encoder's queue full) nor wait long in a queue. It is plain arithmetic
 * on what it is told, with no clock and no thread of its own, so tests drive it with synthetic
 * timings. The encoder pool calls it on the source thread only: once per chunk before handing
 * the chunk on (cs_level_ctl_pick), and with each compressed chunk's measured wall time once that
 * chunk has been published (cs_level_ctl_observe). One thread drives a controller: the first to
 * pick or observe owns it, and a pick or observe on another thread logs `thread contract violated`
 * and aborts, in every build (common/invariant.h).
 *
 * Range: CS_AUTO_LEVEL_MIN..CS_AUTO_LEVEL_MAX, zstd's 0 skipped (it means 3). -7 is the fastest
 * level that still compresses ledger-shaped data well (7x on the synthetic meta payload, about
 * 2.5x the speed of level 1); below it zstd trades most of the ratio away. 3 is zstd's default:
 * above it zstd moves to lazy match finders, each level roughly halves the speed for a few per
 * cent of ratio, and one 256 KiB chunk would take over a millisecond of a core, which a live
 * subscriber then waits for.
 *
 * Per chunk, in this order:
 *  1. The source's rate: the time since the previous chunk of the same ledger, per byte, into an
 *     EWMA (weight 1/8). A ledger's first chunk says nothing about the rate and is skipped.
 *  2. The budget, in wall ns of compression per byte: rate x encoders x CS_AUTO_UTILISATION, and
 *     no more than CS_AUTO_CHUNK_NS / chunk bytes (a chunk must not take longer than that).
 *     Unknown rate: the per-chunk cap alone.
 *  3. A level's cost: the EWMA (weight 1/4) of the wall ns per byte its chunks took; a level not
 *     yet used is estimated from a built-in table of relative zstd speeds, scaled by how the
 *     levels used so far compare with the table (so a slow or busy box shifts the whole table).
 *  4. Pressure (this chunk ships raw because every queue is full, or every encoder has a chunk
 *     waiting behind the one it compresses): one level down, then no further pressure step for
 *     `encoders` chunks (those already queued were cut at the old level), and no step up for
 *     CS_AUTO_UP_COOLDOWN chunks.
 *     Otherwise, when the current level's cost exceeds the budget: one level down.
 *     Otherwise, when an encoder is idle, the up hold has run out and the next level's cost fits
 *     within CS_AUTO_UP_MARGIN of the budget: one level up, then no step up for
 *     CS_AUTO_UP_SPACING chunks (time to measure the new level). */
#ifndef CS_CORESTREAMD_LEVELCTL_H
#define CS_CORESTREAMD_LEVELCTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/invariant.h"

#define CS_AUTO_LEVEL_MIN (-7)
#define CS_AUTO_LEVEL_MAX 3
#define CS_AUTO_LEVEL_START 1 /* the prototype's level, until the measurements say otherwise */
#define CS_AUTO_NLEVELS (CS_AUTO_LEVEL_MAX - CS_AUTO_LEVEL_MIN) /* 0 is not a level here */

/* Share of the encoders' wall time the budget plans for: the rest absorbs bursts and the CPU the
 * source loop, the I/O thread and (on one box) the consumers take. */
#define CS_AUTO_UTILISATION 0.7
/* Longest a chunk may take to compress, in ns: it is latency a subscriber sees. */
#define CS_AUTO_CHUNK_NS 1000000.0
/* A step up needs the next level's estimated cost within this share of the budget (hysteresis,
 * so the level does not flap between two neighbours). */
#define CS_AUTO_UP_MARGIN 0.8
#define CS_AUTO_UP_SPACING 8
#define CS_AUTO_UP_COOLDOWN 64

typedef struct cs_level_ctl {
    cs_owner owner; /* the thread that picks and observes (the source's); unbound until the first */
    int workers;
    int level;                     /* the level picked last */
    double cost[CS_AUTO_NLEVELS];  /* EWMA wall ns per byte; 0: not measured yet */
    double scale;                  /* EWMA of measured cost / table cost */
    double arrival;                /* EWMA source ns per byte within a ledger; 0: unknown */
    int hold_up;                   /* chunks until a step up may happen */
    int hold_down;                 /* chunks until pressure may step down again */
    uint64_t steps_up, steps_down; /* for tests and logs */
} cs_level_ctl;

/* What the pool sees as it hands one chunk on. */
typedef struct cs_level_load {
    size_t bytes;       /* the chunk's payload */
    int64_t arrival_ns; /* since the previous chunk of the same ledger was handed on; 0: first */
    int idle;           /* encoders with nothing to do */
    int backlogged;     /* encoders with a chunk waiting behind the one they compress */
    bool all_full;      /* every queue is full: this chunk ships raw */
} cs_level_load;

/* workers >= 1. Starts at CS_AUTO_LEVEL_START, with no owner yet (any thread may init). */
void cs_level_ctl_init(cs_level_ctl *c, int workers);

/* The level for the chunk described by l (always within the range). Its thread only. */
int cs_level_ctl_pick(cs_level_ctl *c, const cs_level_load *l);

/* A chunk of `bytes` took `ns` of wall time to compress at `level`. Levels outside the range,
 * and empty or zero-time measurements, are ignored. Its thread only. */
void cs_level_ctl_observe(cs_level_ctl *c, int level, size_t bytes, int64_t ns);

/* The estimated wall ns per byte of a level in the range (measured, or the scaled table). */
double cs_level_ctl_cost(const cs_level_ctl *c, int level);

#endif
