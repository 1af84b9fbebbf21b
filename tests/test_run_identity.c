/* SPDX-License-Identifier: Apache-2.0 */
/* The run token (issue 28): the ring's run nonce (`ring-run`, cs_ring_claim, cs_ring_run_nonce)
 * and the token the daemon makes of it (cs_run_token). The nonce is kept while the ring's
 * identity is, across reopens and a --start-ledger reset; drawn anew for a new directory, a ring
 * without one (an older build's), another identity, or a record that does not read; and written
 * before any reset, so a failure to write it resets nothing. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <xxhash.h>

#include "corestreamd/config.h"
#include "corestreamd/start.h"
#include "store/ring.h"
#include "support/tmpdir.h"

#define SIZE1 "source=synthetic size=1 compressible=false"
#define SIZE2 "source=synthetic size=2 compressible=false"

typedef struct fixture {
    cs_tmpdir dir;
    char ring[600]; /* <dir>/ledgers */
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || cs_tmpdir_make(&f->dir, "runid") != 0) {
        free(f);
        return -1;
    }
    int n = snprintf(f->ring, sizeof f->ring, "%s/ledgers", f->dir.path);
    if (n < 0 || (size_t)n >= sizeof f->ring) {
        cs_tmpdir_remove(&f->dir);
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    int rc = cs_tmpdir_remove(&f->dir);
    free(f);
    return rc;
}

static void ring_file(const fixture *f, const char *name, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s/%s", f->ring, name);
    assert_true(n > 0 && (size_t)n < len);
}

/* Opens the ring, puts ledgers [from, to] when from > 0, claims it for identity at first_seq and
 * closes it; returns the nonce the claim kept or drew. */
static uint64_t claim_as(const fixture *f, const char *identity, uint32_t first_seq, uint32_t from, uint32_t to)
{
    cs_ring *r;
    cs_err err = {0};
    if (cs_ring_open(&r, f->ring, 100, &err) != 0)
        fail_msg("open: %s", err.msg);
    assert_int_equal(cs_ring_run_nonce(r), 0); /* before the claim */
    if (cs_ring_claim(r, identity, first_seq, &err) != 0)
        fail_msg("claim: %s", err.msg);
    for (uint32_t seq = from; from && seq <= to; seq++) {
        char text[32];
        snprintf(text, sizeof text, "ledger %" PRIu32, seq);
        struct iovec iov = {text, strlen(text)};
        cs_ledger_record rec = {.len = iov.iov_len, .xxh64 = XXH64(text, iov.iov_len, 0)};
        bool reset;
        if (cs_ring_put(r, seq, &iov, 1, NULL, 0, &rec, &reset, &err) != 0)
            fail_msg("put %" PRIu32 ": %s", seq, err.msg);
    }
    uint64_t nonce = cs_ring_run_nonce(r);
    assert_true(nonce != 0);
    cs_ring_close(r);
    return nonce;
}

static void expect_bounds(const fixture *f, bool filled, uint32_t oldest, uint32_t latest)
{
    cs_ring *r;
    cs_err err = {0};
    assert_int_equal(cs_ring_open(&r, f->ring, 100, &err), 0);
    uint32_t o = 0, l = 0;
    assert_int_equal(cs_ring_bounds(r, &o, &l), filled);
    assert_int_equal(o, oldest);
    assert_int_equal(l, latest);
    cs_ring_close(r);
}

/* ring-run's one line, as written. */
static void expect_record(const fixture *f, uint64_t nonce, const char *identity)
{
    char p[700], text[128] = "", want[128];
    ring_file(f, "ring-run", p, sizeof p);
    FILE *fp = fopen(p, "r");
    assert_non_null(fp);
    size_t n = fread(text, 1, sizeof text - 1, fp);
    fclose(fp);
    text[n] = '\0';
    snprintf(want, sizeof want, "corestream-run 1 nonce=%016" PRIx64 " identity_xxh64=%016" PRIx64 "\n", nonce,
             (uint64_t)XXH64(identity, strlen(identity), 0));
    assert_string_equal(text, want);
}

static void test_nonce_kept_while_the_identity_is(void **state)
{
    fixture *f = *state;
    uint64_t a = claim_as(f, SIZE1, 1, 1, 3); /* a new directory: a nonce is drawn */
    expect_record(f, a, SIZE1);
    assert_true(claim_as(f, SIZE1, 4, 4, 5) == a); /* a restart that continues the ring */
    expect_bounds(f, true, 1, 5);
    assert_true(claim_as(f, SIZE1, 20, 0, 0) == a); /* a --start-ledger reset: same identity, same run */
    expect_bounds(f, false, 0, 0);
    assert_true(claim_as(f, SIZE1, 0, 20, 21) == a); /* the source knows its first ledger */
    expect_record(f, a, SIZE1);
}

static void test_nonce_drawn_anew(void **state)
{
    fixture *f = *state;
    uint64_t a = claim_as(f, SIZE1, 1, 1, 3);
    /* another identity's ledgers go, and with them the run */
    uint64_t b = claim_as(f, SIZE2, 1, 1, 2);
    assert_true(b != a);
    expect_record(f, b, SIZE2);
    expect_bounds(f, true, 1, 2);

    /* a ring of an older build (no ring-run) that the run continues: kept, and given a nonce */
    char p[700];
    ring_file(f, "ring-run", p, sizeof p);
    assert_int_equal(unlink(p), 0);
    uint64_t c = claim_as(f, SIZE2, 3, 0, 0);
    assert_true(c != b);
    expect_bounds(f, true, 1, 2);

    /* an empty ring recorded under another identity: nothing to reset, a new run all the same */
    uint64_t d = claim_as(f, SIZE1, 50, 0, 0); /* resets [1,2]: SIZE2's */
    assert_true(d != c);
    uint64_t e = claim_as(f, SIZE2, 0, 0, 0); /* empty now, recorded as SIZE1 */
    assert_true(e != d);
    expect_record(f, e, SIZE2);

    /* a record that does not read as the writer's line is no nonce */
    const char *junk[] = {"junk\n", "corestream-run 1 nonce=0000000000000000 identity_xxh64=0\n",
                          "corestream-run 1 nonce=00000000000000AB identity_xxh64=0000000000000000\n", ""};
    uint64_t last = e;
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        ring_file(f, "ring-run", p, sizeof p);
        FILE *fp = fopen(p, "w");
        assert_non_null(fp);
        fputs(junk[i], fp);
        fclose(fp);
        uint64_t n = claim_as(f, SIZE2, 0, 0, 0);
        assert_true(n != last);
        expect_record(f, n, SIZE2);
        last = n;
    }
}

/* ring-run cannot be written (a directory where its temporary file goes): the claim fails before
 * any reset. */
static void test_unwritable_run_resets_nothing(void **state)
{
    fixture *f = *state;
    claim_as(f, SIZE1, 1, 1, 3);
    char p[700];
    ring_file(f, "ring-run.tmp", p, sizeof p);
    assert_int_equal(mkdir(p, 0755), 0);
    char inside[720];
    snprintf(inside, sizeof inside, "%s/x", p);
    FILE *fp = fopen(inside, "w");
    assert_non_null(fp);
    fclose(fp);
    cs_ring *r;
    cs_err err = {0};
    assert_int_equal(cs_ring_open(&r, f->ring, 100, &err), 0);
    assert_int_equal(cs_ring_claim(r, SIZE2, 1, &err), -1);
    char want[800];
    snprintf(want, sizeof want, "store: write \"%s/ring-run\": Is a directory", f->ring);
    assert_string_equal(err.msg, want);
    assert_int_equal(cs_ring_run_nonce(r), 0);
    cs_ring_close(r);
    expect_bounds(f, true, 1, 3);
}

/* ring-identity or ring-run that exists and cannot be read stops the open, naming the file and the
 * system's error, and the ring is left as it was: a run that cannot be told is never reset or given
 * a new token. (docs/RING.md, failure table: "bookkeeping that cannot be read") */
static void test_unreadable_bookkeeping_stops_the_open(void **state)
{
    fixture *f = *state;
    claim_as(f, SIZE1, 1, 1, 3);
    const char *names[] = {"ring-identity", "ring-run"};
    for (size_t i = 0; i < 2; i++) {
        char p[700], saved[720];
        ring_file(f, names[i], p, sizeof p);
        snprintf(saved, sizeof saved, "%s.saved", p);
        assert_int_equal(rename(p, saved), 0);
        assert_int_equal(mkdir(p, 0755), 0); /* reads fail with EISDIR, as root too */
        cs_ring *r = (cs_ring *)1;
        cs_err err = {0};
        assert_int_equal(cs_ring_open(&r, f->ring, 100, &err), -1);
        assert_null(r);
        char want[800];
        snprintf(want, sizeof want, "store: read \"%s/%s\": Is a directory", f->ring, names[i]);
        assert_string_equal(err.msg, want);
        assert_int_equal(rmdir(p), 0);
        assert_int_equal(rename(saved, p), 0);
        expect_bounds(f, true, 1, 3);
    }
}

/* "<source>-<16 hex of XXH64(identity, seed nonce)>"; an edge's ignores the nonce. */
static void test_token(void **state)
{
    (void)state;
    cs_daemon_config c = {.source = "synthetic"};
    char tok[CS_RUN_TOKEN_MAX], want[CS_RUN_TOKEN_MAX];
    cs_run_token(&c, SIZE1, 7, tok, sizeof tok);
    snprintf(want, sizeof want, "synthetic-%016" PRIx64, (uint64_t)XXH64(SIZE1, strlen(SIZE1), 7));
    assert_string_equal(tok, want);
    char other[CS_RUN_TOKEN_MAX];
    cs_run_token(&c, SIZE1, 8, other, sizeof other);
    assert_string_not_equal(tok, other); /* another directory */
    cs_run_token(&c, SIZE2, 7, other, sizeof other);
    assert_string_not_equal(tok, other); /* another identity */

    const char *edge = "source=jetstream stream=CORESTREAM run=synthetic-96c3927734215cd2";
    c.source = "jetstream";
    cs_run_token(&c, edge, 7, tok, sizeof tok);
    snprintf(want, sizeof want, "jetstream-%016" PRIx64, (uint64_t)XXH64(edge, strlen(edge), 0));
    assert_string_equal(tok, want);
    cs_run_token(&c, edge, 8, other, sizeof other);
    assert_string_equal(tok, other); /* every edge of the stream's run answers the same */
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_nonce_kept_while_the_identity_is),
        T(test_nonce_drawn_anew),
        T(test_unwritable_run_resets_nothing),
        T(test_unreadable_bookkeeping_stops_the_open),
        cmocka_unit_test(test_token),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
