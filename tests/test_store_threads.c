/* SPDX-License-Identifier: Apache-2.0 */
/* The ring under concurrency: one writer putting ledgers (with a forward gap and a rewind, both
 * resets) while readers map random retained ledgers, hold some across iterations and verify every
 * byte; and a follower woken by the ring's doorbell (cs_ring_wait_change) at each put, never by its
 * timeout. Meant to run clean under ThreadSanitizer and ASan. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "store/ring.h"
#include "support/event.h"
#include "support/tmpdir.h"
#include "support/wait.h"

#define RETENTION 16
#define READERS 4
#define HELD 8
#define MAX_LEN 4096
#define MAX_READER_ITERS 2000000 /* a bound only; readers stop when the writer is done */

/* The writer's schedule: 1000 ledgers, a forward gap, 1000 more, a rewind, 1000 more. */
static const struct {
    uint32_t from, to;
} segments[] = {{1, 1000}, {1301, 2300}, {501, 1500}};

/* Content is a pure function of seq, so a ledger rewritten after a reset still verifies. */
static size_t len_of(uint32_t seq)
{
    return seq % 97 == 0 ? 0 : (size_t)((seq * 2654435761u) >> 8) % MAX_LEN;
}

static uint8_t byte_of(uint32_t seq, size_t i)
{
    if (i < 4)
        return (uint8_t)(seq >> (24 - 8 * i)); /* big-endian seq up front */
    uint64_t h = (uint64_t)seq * 0x9E3779B97F4A7C15u;
    return (uint8_t)((h >> (8 * (i & 7))) + i * 31);
}

static void fill(uint32_t seq, uint8_t *buf)
{
    size_t n = len_of(seq);
    for (size_t i = 0; i < n; i++)
        buf[i] = byte_of(seq, i);
}

static bool matches(const cs_ledger_ref *ref, uint32_t seq)
{
    if (ref->seq != seq || ref->rec.len != len_of(seq))
        return false;
    uint8_t buf[MAX_LEN];
    if (cs_ledger_read(ref, 0, buf, ref->rec.len, NULL) != 0)
        return false;
    for (size_t i = 0; i < ref->rec.len; i++)
        if (buf[i] != byte_of(seq, i))
            return false;
    return ref->rec.xxh64 == XXH64(buf, ref->rec.len, 0);
}

/* cmocka's asserts must not run off the main thread, so threads record failures here. */
typedef struct shared {
    cs_ring *ring;
    atomic_bool writer_done;
    atomic_int failures;
    atomic_long reads_ok, reads_not_retained;
    pthread_mutex_t mu;
    char first_failure[CS_ERR_MSG_MAX + 64];
} shared;

static void failure(shared *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void failure(shared *s, const char *fmt, ...)
{
    pthread_mutex_lock(&s->mu);
    if (atomic_fetch_add(&s->failures, 1) == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->first_failure, sizeof s->first_failure, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&s->mu);
}

static void *writer(void *arg)
{
    shared *s = arg;
    static uint8_t buf[MAX_LEN];
    for (size_t g = 0; g < sizeof segments / sizeof segments[0]; g++) {
        for (uint32_t seq = segments[g].from; seq <= segments[g].to; seq++) {
            fill(seq, buf);
            size_t n = len_of(seq), a = n / 3, b = 2 * n / 3;
            struct iovec parts[3] = {{buf, a}, {buf + a, b - a}, {buf + b, n - b}};
            bool reset;
            cs_err err = {0};
            cs_ledger_record rec = {.len = n, .xxh64 = XXH64(buf, n, 0)};
            if (cs_ring_put(s->ring, seq, parts, 3, NULL, 0, &rec, &reset, &err) != 0) {
                failure(s, "put %" PRIu32 ": %s", seq, err.msg);
                goto out;
            }
            bool want_reset = g > 0 && seq == segments[g].from;
            if (reset != want_reset) {
                failure(s, "put %" PRIu32 ": reset %d, want %d", seq, reset, want_reset);
                goto out;
            }
        }
    }
out:
    atomic_store(&s->writer_done, true);
    return NULL;
}

/* Re-verifies a held ref (it may have been pruned or reset since) and drops it. */
static void drop(shared *s, cs_ledger_ref **slot)
{
    if (!*slot)
        return;
    if (!matches(*slot, (*slot)->seq))
        failure(s, "held ledger %" PRIu32 " changed", (*slot)->seq);
    cs_ledger_ref_release(*slot);
    *slot = NULL;
}

typedef struct reader_arg {
    shared *s;
    unsigned seed;
} reader_arg;

static void *reader(void *arg)
{
    reader_arg *ra = arg;
    shared *s = ra->s;
    cs_ledger_ref *held[HELD] = {0};
    for (long it = 0; it < MAX_READER_ITERS && !atomic_load(&s->writer_done); it++) {
        uint32_t oldest, latest;
        if (!cs_ring_bounds(s->ring, &oldest, &latest))
            continue;
        if (oldest > latest || latest - oldest + 1 > RETENTION) {
            failure(s, "bad bounds [%" PRIu32 ",%" PRIu32 "]", oldest, latest);
            break;
        }
        /* Half the reads go to the oldest ledger, the one the next put prunes. */
        uint32_t seq = oldest;
        if (rand_r(&ra->seed) % 2)
            seq += (uint32_t)rand_r(&ra->seed) % (latest - oldest + 1);
        cs_ledger_ref *ref;
        cs_err err = {0};
        if (cs_ring_get(s->ring, seq, &ref, &err) != 0) {
            if (err.kind != CS_RING_ERR_NOT_RETAINED) {
                failure(s, "get %" PRIu32 ": %s", seq, err.msg);
                break;
            }
            atomic_fetch_add(&s->reads_not_retained, 1);
            continue;
        }
        atomic_fetch_add(&s->reads_ok, 1);
        if (!matches(ref, seq))
            failure(s, "ledger %" PRIu32 " has the wrong content", seq);
        /* Keep every few refs for a while, sometimes with an extra reference. */
        if (rand_r(&ra->seed) % 4 == 0) {
            cs_ledger_ref **slot = &held[it % HELD];
            drop(s, slot);
            *slot = ref;
            if (it % 3 == 0) {
                cs_ledger_ref_retain(ref);
                cs_ledger_ref_release(ref);
            }
        } else {
            cs_ledger_ref_release(ref);
        }
    }
    for (int i = 0; i < HELD; i++)
        drop(s, &held[i]);
    return NULL;
}

static void test_concurrent_put_and_get(void **state)
{
    (void)state;
    cs_tmpdir root;
    char dir[PATH_MAX + 16];
    assert_int_equal(cs_tmpdir_make(&root, "store-threads"), 0);
    cs_tmpdir_join(&root, "ledgers", dir, sizeof dir);

    shared s = {0};
    pthread_mutex_init(&s.mu, NULL);
    cs_err err = {0};
    assert_int_equal(cs_ring_open(&s.ring, dir, RETENTION, &err), 0);

    pthread_t w, rd[READERS];
    reader_arg ra[READERS];
    for (int i = 0; i < READERS; i++) {
        ra[i] = (reader_arg){&s, 0x5eed + (unsigned)i};
        assert_int_equal(pthread_create(&rd[i], NULL, reader, &ra[i]), 0);
    }
    assert_int_equal(pthread_create(&w, NULL, writer, &s), 0);
    pthread_join(w, NULL);
    for (int i = 0; i < READERS; i++)
        pthread_join(rd[i], NULL);

    if (atomic_load(&s.failures) != 0)
        fail_msg("%d failures, first: %s", atomic_load(&s.failures), s.first_failure);
    print_message("reads: %ld ok, %ld not retained\n", atomic_load(&s.reads_ok),
                  atomic_load(&s.reads_not_retained));
    assert_true(atomic_load(&s.reads_ok) > 0);

    /* The final state: the last segment's tail, all of it readable. */
    uint32_t oldest, latest;
    assert_true(cs_ring_bounds(s.ring, &oldest, &latest));
    assert_int_equal(latest, 1500);
    assert_int_equal(oldest, 1500 - RETENTION + 1);
    for (uint32_t seq = oldest; seq <= latest; seq++) {
        cs_ledger_ref *ref;
        assert_int_equal(cs_ring_get(s.ring, seq, &ref, &err), 0);
        assert_true(matches(ref, seq));
        cs_ledger_ref_release(ref);
    }
    cs_ring_close(s.ring);
    pthread_mutex_destroy(&s.mu);
    assert_int_equal(cs_tmpdir_remove(&root), 0);
}

/* A follower of the ring: it sleeps on the doorbell until the ring's latest is `until`, counting
 * the wakes that found the counter unchanged (a timeout, or a spurious wake). */
typedef struct follower {
    cs_ring *ring;
    uint32_t until;
    int quiet;
    atomic_bool stop; /* set, then cs_ring_wake: the follower's owner stopping it */
    event waiting;    /* set just before each sleep */
} follower;

static void *follow(void *arg)
{
    follower *fl = arg;
    for (int i = 0; i < 1000000; i++) {
        uint32_t seen = cs_ring_changes(fl->ring), oldest, latest;
        if (atomic_load(&fl->stop) || (cs_ring_bounds(fl->ring, &oldest, &latest) && latest >= fl->until))
            break;
        event_set(&fl->waiting);
        cs_ring_wait_change(fl->ring, seen, (int64_t)WAIT_MS * 1000000);
        if (cs_ring_changes(fl->ring) == seen)
            fl->quiet++;
    }
    return NULL;
}

static void test_doorbell(void **state)
{
    (void)state;
    cs_tmpdir root;
    char dir[PATH_MAX + 16];
    assert_int_equal(cs_tmpdir_make(&root, "store-doorbell"), 0);
    cs_tmpdir_join(&root, "ledgers", dir, sizeof dir);
    cs_ring *ring = NULL;
    cs_err err = {0};
    assert_int_equal(cs_ring_open(&ring, dir, RETENTION, &err), 0);
    follower fl = {.ring = ring, .until = 200};
    event_init(&fl.waiting);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, follow, &fl), 0);
    assert_true(event_wait(&fl.waiting, (int64_t)WAIT_MS * 1000000));
    uint8_t buf[MAX_LEN];
    for (uint32_t seq = 1; seq <= fl.until; seq++) {
        fill(seq, buf);
        struct iovec iov = {buf, len_of(seq)};
        cs_ledger_record rec = {.len = iov.iov_len, .xxh64 = XXH64(buf, iov.iov_len, 0)};
        bool reset;
        assert_int_equal(cs_ring_put(ring, seq, &iov, 1, NULL, 0, &rec, &reset, &err), 0);
    }
    pthread_join(t, NULL);
    assert_int_equal(fl.quiet, 0);

    /* cs_ring_wake: no change, and the sleeper wakes all the same (to see its stop flag). */
    follower idle = {.ring = ring, .until = UINT32_MAX};
    event_init(&idle.waiting);
    assert_int_equal(pthread_create(&t, NULL, follow, &idle), 0);
    assert_true(event_wait(&idle.waiting, (int64_t)WAIT_MS * 1000000));
    atomic_store(&idle.stop, true);
    cs_ring_wake(ring);
    pthread_join(t, NULL);
    assert_int_equal(idle.quiet, 0);
    event_destroy(&fl.waiting);
    event_destroy(&idle.waiting);
    cs_ring_close(ring);
    assert_int_equal(cs_tmpdir_remove(&root), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_concurrent_put_and_get), cmocka_unit_test(test_doorbell)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
