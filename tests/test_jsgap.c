/* SPDX-License-Identifier: Apache-2.0 */
/* The edge's gap watch (sources/jsgap.h): only a later ledger that verifies makes a candidate, the
 * lowest one wins, the gap is due only once the wait has passed, and clearing forgets it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>
#include <xxhash.h>

#include "corestream/wire.h"
#include "corestreamd/sources/jsgap.h"
#include "wire/wire.h"

#define BODY 100

/* Feeds ledger seq (BEGIN at stream sequence sseq, one raw chunk, END; the END's checksum flipped
 * by xor) to g while the edge waits for want, at time now. */
static void offer_ledger(cs_jsgap *g, uint32_t want, uint32_t seq, uint64_t sseq, uint64_t xor, int64_t now)
{
    uint8_t body[BODY];
    memset(body, (int)seq, sizeof body);
    cs_sig_chain chain = {0};
    size_t lens[3];
    uint8_t msgs[3][BODY + CS_WIRE_CHUNK_HEADER_LEN];
    lens[0] = cs_wire_put_begin(msgs[0], seq, 1);
    lens[1] = cs_wire_append_chunk(msgs[1], seq, 0, CS_CODEC_RAW, body, BODY);
    lens[2] = cs_wire_put_end(msgs[2], seq, 1, BODY, 2, XXH64(body, BODY, 0) ^ xor);
    for (int i = 0; i < 3; i++) {
        cs_wire_msg w;
        assert_int_equal(cs_wire_decode(msgs[i], lens[i], &w, NULL), 0);
        cs_jsgap_offer(g, want, &w, msgs[i], lens[i], sseq + (uint64_t)i, &chain, now);
    }
}

static void test_only_a_verified_later_ledger_counts(void **state)
{
    (void)state;
    cs_jsgap *g = cs_jsgap_new(1000, NULL);
    assert_non_null(g);
    uint32_t seq;
    uint64_t sseq;
    int64_t deadline;
    offer_ledger(g, 3, 2, 10, 0, 0);  /* an older ledger: not a gap */
    offer_ledger(g, 3, 5, 20, 1, 0);  /* a later one that does not verify */
    assert_false(cs_jsgap_deadline(g, &deadline));
    offer_ledger(g, 3, 5, 30, 0, 100); /* a later one that verifies: due 1000 ns on */
    assert_true(cs_jsgap_deadline(g, &deadline));
    assert_int_equal(deadline, 1100);
    assert_false(cs_jsgap_due(g, 1099, &seq, &sseq));
    offer_ledger(g, 3, 4, 40, 0, 200); /* a lower one replaces it, with its own clock */
    offer_ledger(g, 3, 6, 50, 0, 300); /* a higher one does not */
    assert_false(cs_jsgap_due(g, 1199, &seq, &sseq));
    assert_true(cs_jsgap_due(g, 1200, &seq, &sseq));
    assert_int_equal(seq, 4);
    assert_int_equal(sseq, 40);
    cs_jsgap_clear(g); /* the ledger waited for began */
    assert_false(cs_jsgap_due(g, 5000, &seq, &sseq));
    cs_jsgap_free(g);
}

/* Messages of a later ledger without its BEGIN (the stream went on mid-ledger) never complete one. */
static void test_a_ledger_without_its_begin_is_no_candidate(void **state)
{
    (void)state;
    cs_jsgap *g = cs_jsgap_new(0, NULL);
    assert_non_null(g);
    uint8_t body[BODY], msg[BODY + CS_WIRE_CHUNK_HEADER_LEN];
    memset(body, 7, sizeof body);
    cs_sig_chain chain = {0};
    cs_wire_msg w;
    size_t n = cs_wire_append_chunk(msg, 7, 0, CS_CODEC_RAW, body, BODY);
    assert_int_equal(cs_wire_decode(msg, n, &w, NULL), 0);
    cs_jsgap_offer(g, 3, &w, msg, n, 1, &chain, 0);
    n = cs_wire_put_end(msg, 7, 1, BODY, 2, XXH64(body, BODY, 0));
    assert_int_equal(cs_wire_decode(msg, n, &w, NULL), 0);
    cs_jsgap_offer(g, 3, &w, msg, n, 2, &chain, 0);
    int64_t deadline;
    assert_false(cs_jsgap_deadline(g, &deadline));
    cs_jsgap_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_only_a_verified_later_ledger_counts),
        cmocka_unit_test(test_a_ledger_without_its_begin_is_no_candidate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
