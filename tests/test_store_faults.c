/* SPDX-License-Identifier: Apache-2.0 */
/* I/O errors are not corruption (docs/RING.md, "Failure policy"): every errno a disk or a
 * descriptor shortage gives, met at the open, at a replay's open of a ledger, at a record read and
 * at a ring write, fails what met it, is counted, and changes nothing on disk; only a proof
 * quarantines. Faults come from support/faultfs. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <xxhash.h>

#include "store/ring.h"
#include "support/faultfs.h"
#include "support/ringfiles.h"
#include "support/tmpdir.h"

static const int k_errnos[] = {EMFILE, ENFILE, ENOMEM, EACCES, EIO, ENOSPC};
#define NERRNOS (sizeof k_errnos / sizeof k_errnos[0])

typedef struct fixture {
    cs_tmpdir dir;
    char ring[4200];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || cs_tmpdir_make(&f->dir, "storefaults") != 0) {
        free(f);
        return -1;
    }
    snprintf(f->ring, sizeof f->ring, "%s/ledgers", f->dir.path);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    cs_fault_disarm();
    int rc = cs_tmpdir_remove(&f->dir);
    free(f);
    return rc;
}

static cs_ring *open_ring(const fixture *f)
{
    cs_ring *r = NULL;
    cs_err err = {0};
    if (cs_ring_open(&r, f->ring, 100, &err) != 0)
        fail_msg("open: %s", err.msg);
    return r;
}

static int put(cs_ring *r, uint32_t seq, cs_err *err)
{
    char text[64];
    snprintf(text, sizeof text, "ledger %" PRIu32 " bytes", seq);
    struct iovec iov = {text, strlen(text)};
    cs_ledger_record rec = {.len = iov.iov_len, .xxh64 = XXH64(text, iov.iov_len, 0)};
    bool reset;
    return cs_ring_put(r, seq, &iov, 1, NULL, 0, &rec, &reset, err);
}

/* A ring of ledgers 1 to 4, written and closed. */
static void fill(const fixture *f)
{
    cs_ring *r = open_ring(f);
    cs_err err = {0};
    for (uint32_t s = 1; s <= 4; s++)
        if (put(r, s, &err) != 0)
            fail_msg("put %u: %s", s, err.msg);
    assert_int_equal(cs_ring_claim(r, "faults", 0, &err), 0);
    cs_ring_close(r);
}

static bool exists(const fixture *f, const char *name)
{
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", f->ring, name);
    struct stat st;
    return lstat(p, &st) == 0;
}

static void expect_whole(const fixture *f, cs_ring *r)
{
    for (uint32_t s = 1; s <= 4; s++) {
        char name[64];
        snprintf(name, sizeof name, "ledger-%u.xdr", s);
        assert_true(exists(f, name));
        char line[1100];
        assert_true(cs_ringfiles_record(f->ring, s, line, sizeof line, NULL));
    }
    uint32_t o, l;
    assert_true(cs_ring_bounds(r, &o, &l));
    assert_int_equal(o, 1);
    assert_int_equal(l, 4);
    cs_ring_health_t h;
    cs_ring_health(r, &h);
    assert_int_equal(h.dropped, 0);
    assert_int_equal(h.holes, 0);
    cs_ledger_ref *ref;
    cs_err err = {0};
    for (uint32_t s = 1; s <= 4; s++) {
        if (cs_ring_get(r, s, &ref, &err) != 0)
            fail_msg("get %u: %s", s, err.msg);
        cs_ledger_ref_release(ref);
    }
}

/* Failure table, "an I/O error at open": the open fails naming the file and the errno; the ring is
 * as it was (a second open, with the fault gone, finds every ledger). */
static void errors_at_open_stop_the_open(void **state)
{
    fixture *f = *state;
    fill(f);
    static const struct {
        cs_fault_op op;
        const char *suffix;
    } places[] = {{CS_FAULT_OPEN, "records-0.log"}, {CS_FAULT_READ, "records-0.log"}, {CS_FAULT_STAT, "ledger-3.xdr"}};
    for (size_t p = 0; p < sizeof places / sizeof places[0]; p++)
        for (size_t i = 0; i < NERRNOS; i++) {
            cs_fault_arm(places[p].op, places[p].suffix, k_errnos[i], -1);
            cs_ring *r = (cs_ring *)1;
            cs_err err = {0};
            assert_int_equal(cs_ring_open(&r, f->ring, 100, &err), -1);
            cs_fault_disarm();
            assert_null(r);
            char want[4500];
            snprintf(want, sizeof want, "store: open \"%s\": %s: %s", f->ring, places[p].suffix, strerror(k_errnos[i]));
            assert_string_equal(err.msg, want);
            r = open_ring(f);
            expect_whole(f, r);
            cs_ring_close(r);
        }
}

/* Failure table, "an I/O error reading a ledger": a replay's open of the ledger or its record, or
 * a read of its bytes, fails with CS_RING_ERR_IO naming the errno; the ring keeps the ledger and a
 * verdict asked for under the same fault proves nothing. */
static void errors_at_get_change_nothing(void **state)
{
    fixture *f = *state;
    fill(f);
    cs_ring *r = open_ring(f);
    cs_err err = {0};
    assert_int_equal(cs_ring_claim(r, "faults", 0, &err), 0);
    static const struct {
        cs_fault_op op;
        const char *suffix;
    } places[] = {{CS_FAULT_OPEN, "ledger-2.xdr"}, {CS_FAULT_OPEN, "records-0.log"}, {CS_FAULT_READ, "records-0.log"}};
    uint64_t errors = 0;
    for (size_t p = 0; p < sizeof places / sizeof places[0]; p++)
        for (size_t i = 0; i < NERRNOS; i++) {
            cs_fault_arm(places[p].op, places[p].suffix, k_errnos[i], -1);
            cs_ledger_ref *ref = (cs_ledger_ref *)1;
            assert_int_equal(cs_ring_get(r, 2, &ref, &err), -1);
            assert_null(ref);
            assert_int_equal(err.kind, CS_RING_ERR_IO);
            char want[300];
            snprintf(want, sizeof want, "store: read ledger 2: %s: %s", places[p].suffix, strerror(k_errnos[i]));
            assert_string_equal(err.msg, want);
            assert_int_equal(cs_ring_condemn(r, 2, "a test's suspicion"), CS_RING_VERDICT_IO);
            cs_fault_disarm();
            errors += 2;
            expect_whole(f, r);
        }
    /* A read of the bytes themselves. */
    cs_ledger_ref *ref;
    assert_int_equal(cs_ring_get(r, 2, &ref, &err), 0);
    for (size_t i = 0; i < NERRNOS; i++) {
        cs_fault_arm(CS_FAULT_READ, "ledger-2.xdr", k_errnos[i], -1);
        uint8_t buf[64];
        assert_int_equal(cs_ledger_read(ref, 0, buf, ref->rec.len, &err), -1);
        assert_int_equal(err.kind, CS_RING_ERR_IO);
        assert_int_equal(cs_ring_condemn(r, 2, err.msg), CS_RING_VERDICT_IO);
        cs_fault_disarm();
        errors++;
        expect_whole(f, r);
    }
    cs_ledger_ref_release(ref);
    cs_ring_health_t h;
    cs_ring_health(r, &h);
    assert_int_equal(h.io_errors, errors);
    cs_ring_close(r);
}

/* Failure table, "a ring write fails": the put fails naming the errno, the ring keeps what it
 * holds, and the next put that works leaves the failed ledger a hole, never a reset. */
static void errors_at_put_leave_a_hole(void **state)
{
    fixture *f = *state;
    fill(f);
    cs_ring *r = open_ring(f);
    cs_err err = {0};
    assert_int_equal(cs_ring_claim(r, "faults", 0, &err), 0);
    uint32_t seq = 5;
    for (size_t i = 0; i < NERRNOS; i++, seq += 2) {
        cs_fault_arm(CS_FAULT_OPEN, ".xdr.tmp", k_errnos[i], -1);
        assert_int_equal(put(r, seq, &err), -1);
        cs_fault_disarm();
        assert_int_equal(err.kind, CS_RING_ERR_IO);
        char want[200];
        snprintf(want, sizeof want, "store: write ledger %u: %s", seq, strerror(k_errnos[i]));
        assert_string_equal(err.msg, want);
        if (put(r, seq + 1, &err) != 0)
            fail_msg("put %u: %s", seq + 1, err.msg);
        uint32_t o, l, first, last;
        assert_true(cs_ring_bounds(r, &o, &l));
        assert_int_equal(o, 1);
        assert_int_equal(l, seq + 1);
        assert_true(cs_ring_hole(r, seq, &first, &last));
        assert_int_equal(first, seq);
        assert_int_equal(last, seq);
    }
    cs_ring_health_t h;
    cs_ring_health(r, &h);
    assert_int_equal(h.write_failures, NERRNOS);
    assert_false(h.degraded);
    assert_int_equal(h.holes, NERRNOS);
    cs_ring_close(r);
}

/* A shortage that passes (one EMFILE, ENFILE or ENOMEM) is retried once by the put itself: the
 * ledger is stored and nothing counts as failed; EIO is not retried. */
static void a_passing_shortage_is_retried(void **state)
{
    fixture *f = *state;
    fill(f);
    cs_ring *r = open_ring(f);
    cs_err err = {0};
    assert_int_equal(cs_ring_claim(r, "faults", 0, &err), 0);
    static const int passing[] = {EMFILE, ENFILE, ENOMEM};
    uint32_t seq = 5;
    for (size_t i = 0; i < 3; i++, seq++) {
        cs_fault_arm(CS_FAULT_OPEN, ".xdr.tmp", passing[i], 1);
        if (put(r, seq, &err) != 0)
            fail_msg("put %u: %s", seq, err.msg);
        assert_int_equal(cs_fault_hits(), 1);
        cs_fault_disarm();
    }
    cs_fault_arm(CS_FAULT_OPEN, ".xdr.tmp", EIO, 1);
    assert_int_equal(put(r, seq, &err), -1);
    cs_fault_disarm();
    cs_ring_health_t h;
    cs_ring_health(r, &h);
    assert_int_equal(h.write_failures, 1);
    cs_ring_close(r);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(errors_at_open_stop_the_open),
        T(errors_at_get_change_nothing),
        T(errors_at_put_leave_a_hole),
        T(a_passing_shortage_is_retried),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
