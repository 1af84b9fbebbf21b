/* SPDX-License-Identifier: Apache-2.0 */
/* The two futex calls the lock-free hand-offs need (Linux, process-private). A futex only puts a
 * thread to sleep and wakes it: every piece of data still travels through C11 atomics, so TSan
 * sees the synchronisation and the futex word is nothing but a doorbell. */
#ifndef CS_COMMON_FUTEX_H
#define CS_COMMON_FUTEX_H

#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Sleeps while *word still holds seen (returns at once when it does not), until a wake or a
 * signal; callers re-check their condition in a loop, so spurious returns are harmless. */
static inline void cs_futex_wait(_Atomic uint32_t *word, uint32_t seen)
{
    (void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

/* cs_futex_wait for at most timeout_ns (relative; at or below 0 it returns at once). */
static inline void cs_futex_wait_ns(_Atomic uint32_t *word, uint32_t seen, int64_t timeout_ns)
{
    if (timeout_ns <= 0)
        return;
    struct timespec ts = {.tv_sec = (time_t)(timeout_ns / 1000000000), .tv_nsec = (long)(timeout_ns % 1000000000)};
    (void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
}

/* Rings the doorbell: changes the word first, so a thread about to sleep on the old value does
 * not, then wakes up to n sleepers (INT_MAX: all). */
static inline void cs_futex_ring(_Atomic uint32_t *word, int n)
{
    atomic_fetch_add(word, 1);
    (void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* A doorbell whose ring costs no system call when nobody sleeps on it. The waiter announces
 * itself (sleepers) before it looks at the word a last time; the ringer changes the word before it
 * looks at sleepers. Both are sequentially consistent, so either the waiter sees the new word and
 * does not sleep, or the ringer sees the sleeper and wakes it. */
typedef struct cs_bell {
    _Atomic uint32_t word;
    _Atomic uint32_t sleepers;
} cs_bell;

/* Sleeps while b->word holds seen, at most timeout_ns (negative: no limit); returns at once when
 * it does not. Spurious returns happen: callers re-check their condition in a loop. */
static inline void cs_bell_wait(cs_bell *b, uint32_t seen, int64_t timeout_ns)
{
    atomic_fetch_add(&b->sleepers, 1);
    if (atomic_load(&b->word) == seen) {
        if (timeout_ns < 0)
            cs_futex_wait(&b->word, seen);
        else
            cs_futex_wait_ns(&b->word, seen, timeout_ns);
    }
    atomic_fetch_sub(&b->sleepers, 1);
}

/* Changes the word, then wakes up to n sleepers if there are any. */
static inline void cs_bell_ring(cs_bell *b, int n)
{
    atomic_fetch_add(&b->word, 1);
    if (atomic_load(&b->sleepers) != 0)
        (void)syscall(SYS_futex, (uint32_t *)&b->word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

#endif
