/* SPDX-License-Identifier: Apache-2.0 */
/* The ledger hasher (corestreamd/stream/ledgerhash.h) on its own: the digest of pieces handed over
 * while cs-hash hashes beside the feeder equals SHA-256 over the bytes in one pass, whatever the
 * pace (a feeder that races ahead and fills the queue, one that waits for cs-hash, one that
 * finishes at once), a begin voids what was queued, and free stops cs-hash mid-ledger without
 * leaking a reference. Run under TSan (label concurrency). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "corestreamd/stream/ledgerhash.h"

#define MAX_PIECES 300

/* A ledger cut into pieces: each a message of its own, holding len bytes at data + 11. */
typedef struct ledger {
    cs_msg *m[MAX_PIECES];
    size_t n;
    size_t len[MAX_PIECES];
    uint8_t want[32];
} ledger;

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* n pieces of up to max bytes (some empty), filled from seed; want is their one-pass SHA-256. */
static void ledger_make(ledger *l, size_t n, size_t max, uint32_t seed)
{
    memset(l, 0, sizeof *l);
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    assert_int_equal(EVP_DigestInit_ex(c, EVP_sha256(), NULL), 1);
    for (size_t i = 0; i < n; i++) {
        size_t len = next_rand() % (max + 1);
        cs_msg *m = cs_msg_new(11 + len);
        assert_non_null(m);
        for (size_t k = 0; k < len; k++)
            m->data[11 + k] = (uint8_t)(seed * 131 + i * 17 + k);
        m->len = 11 + len;
        l->m[i] = m;
        l->len[i] = len;
        assert_int_equal(EVP_DigestUpdate(c, m->data + 11, len), 1);
    }
    l->n = n;
    assert_int_equal(EVP_DigestFinal_ex(c, l->want, NULL), 1);
    EVP_MD_CTX_free(c);
}

/* Every piece is back to the test's one reference: the hasher kept none. */
static void ledger_free(ledger *l)
{
    for (size_t i = 0; i < l->n; i++) {
        assert_int_equal(atomic_load(&l->m[i]->refs), 1);
        cs_msg_release(l->m[i]);
    }
}

static void feed(cs_hasher *h, const ledger *l, size_t from, size_t to, long pause_ns)
{
    for (size_t i = from; i < to; i++) {
        cs_hasher_add(h, l->m[i], l->m[i]->data + 11, l->len[i]);
        if (pause_ns)
            nanosleep(&(struct timespec){0, pause_ns}, NULL);
    }
}

static void assert_digest(cs_hasher *h, const ledger *l)
{
    uint8_t got[32];
    cs_err err;
    assert_int_equal(cs_hasher_finish(h, got, &err), 0);
    assert_memory_equal(got, l->want, 32);
}

/* A hasher for each test that feeds one, as *state. */
static int hasher_start(void **state)
{
    cs_err err;
    cs_hasher *h;
    if (cs_hasher_new(&h, &err) != 0)
        return -1;
    *state = h;
    return 0;
}

static int hasher_stop(void **state)
{
    cs_hasher_free(*state);
    return 0;
}

/* Many ledgers back to back, at three paces: racing ahead (the queue fills and the feeder hashes
 * the oldest piece itself), unhurried (cs-hash does nearly all), and a finish right after a
 * single piece (the feeder takes what cs-hash has not started). */
static void test_digest_is_one_pass_sha256(void **state)
{
    cs_hasher *h = *state;
    for (uint32_t round = 0; round < 60; round++) {
        ledger l;
        size_t n = round % 3 == 0 ? MAX_PIECES : round % 3 == 1 ? 1 + next_rand() % 40 : 1;
        ledger_make(&l, n, round % 5 == 0 ? 70000 : 9000, round);
        cs_hasher_begin(h);
        feed(h, &l, 0, l.n, round % 3 == 1 ? 20000 : 0);
        assert_digest(h, &l);
        ledger_free(&l);
    }
    /* Nothing handed over: the SHA-256 of no bytes. */
    ledger empty;
    ledger_make(&empty, 0, 0, 0);
    cs_hasher_begin(h);
    assert_digest(h, &empty);
}

/* A begin drops what was handed over of the ledger so far (the source began it again): the
 * digest is of the bytes after it only, and the voided pieces' references are dropped. */
static void test_begin_voids_the_queue(void **state)
{
    cs_hasher *h = *state;
    for (uint32_t round = 0; round < 20; round++) {
        ledger void_part, l;
        ledger_make(&void_part, 1 + round * 7, 50000, 1000 + round);
        ledger_make(&l, 1 + round * 5, 30000, 2000 + round);
        cs_hasher_begin(h);
        feed(h, &void_part, 0, void_part.n, 0);
        cs_hasher_begin(h);
        feed(h, &l, 0, l.n, 0);
        assert_digest(h, &l);
        ledger_free(&void_part);
        ledger_free(&l);
    }
}

/* Cancelled mid-ledger: free stops cs-hash after the piece it is on and drops the queue, however
 * much is waiting; no reference outlives it (ledger_free checks, ASan would see a leak). */
static void test_free_mid_ledger(void **state)
{
    (void)state;
    for (uint32_t round = 0; round < 20; round++) {
        void *h = NULL;
        assert_int_equal(hasher_start(&h), 0);
        ledger l;
        ledger_make(&l, round % 2 ? MAX_PIECES : CS_HASHER_QUEUE, 40000, round);
        cs_hasher_begin(h);
        feed(h, &l, 0, l.n, 0);
        cs_hasher_free(h);
        ledger_free(&l);
    }
    cs_hasher_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_digest_is_one_pass_sha256, hasher_start, hasher_stop),
        cmocka_unit_test_setup_teardown(test_begin_voids_the_queue, hasher_start, hasher_stop),
        cmocka_unit_test(test_free_mid_ledger),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
