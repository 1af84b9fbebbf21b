/* SPDX-License-Identifier: Apache-2.0 */
/* The LedgerCloseMeta prefix walk to ledgerSeq (PORTSPEC 1.4e step 3, CAPTIVE.md 3.3; catalogue
 * 89): hand-built metas for every shape that moves ledgerSeq, every malformed variant the walk
 * must refuse, and every truncation up to ledgerSeq, each in an exactly-sized heap copy so that
 * ASan catches any read past the prefix. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corestreamd/sources/pipe/xdrwalk.h"
#include "support/metabuild.h"

/* ---- metas (support/metabuild.h) --------------------------------------------------------- */

/* One LedgerCloseMeta shape. Field values are the raw words written, so a test can put any
 * discriminant anywhere; `tail` bytes after ledgerSeq are never looked at. */
typedef cs_mb_meta meta;

/* Builds m into b from its start; returns the offset of ledgerSeq. */
static size_t build(cs_mb_buf *b, const meta *m)
{
    b->n = 0;
    return cs_mb_put_meta(b, m);
}

/* Walks an exactly-sized heap copy of the first len bytes of b. */
static int walk(const cs_mb_buf *b, size_t len, uint32_t *seq, cs_err *err)
{
    uint8_t *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    if (len)
        memcpy(copy, b->p, len);
    int rc = cs_xdr_ledger_seq(copy, len, seq, err);
    free(copy);
    return rc;
}

static void expect_seq(const meta *m, size_t want_at)
{
    cs_mb_buf b = {0};
    size_t at = build(&b, m);
    assert_int_equal(at, want_at);
    uint32_t seq = 0;
    cs_err err = {0};
    /* The whole meta, exactly up to ledgerSeq, and the 4096-byte prefix rule. */
    assert_int_equal(walk(&b, b.n, &seq, &err), 0);
    assert_int_equal(seq, m->seq);
    seq = 0;
    assert_int_equal(walk(&b, at + 4, &seq, &err), 0);
    assert_int_equal(seq, m->seq);
    seq = 0;
    size_t n = b.n < 4096 ? b.n : 4096;
    assert_int_equal(walk(&b, n, &seq, &err), 0);
    assert_int_equal(seq, m->seq);
    cs_mb_free(&b);
}

static void expect_error(const meta *m, const char *want)
{
    cs_mb_buf b = {0};
    build(&b, m);
    uint32_t seq = 0xdeadbeef;
    cs_err err = {0};
    assert_int_equal(walk(&b, b.n, &seq, &err), -1);
    assert_string_equal(err.msg, want);
    assert_int_equal(seq, 0xdeadbeef);
    cs_mb_free(&b);
}

/* Every cut short of ledgerSeq's last byte fails with the short-prefix message, never a seq. */
static void expect_every_truncation_fails(const meta *m)
{
    cs_mb_buf b = {0};
    size_t at = build(&b, m);
    for (size_t cut = 0; cut < at + 4; cut++) {
        uint32_t seq = 0xdeadbeef;
        cs_err err = {0};
        char want[96];
        snprintf(want, sizeof want, "xdr: prefix ends at byte %zu before ledgerSeq", cut);
        if (walk(&b, cut, &seq, &err) != -1)
            fail_msg("cut at %zu of %zu: walk succeeded with seq %u", cut, at + 4, seq);
        if (strcmp(err.msg, want) != 0)
            fail_msg("cut at %zu: got \"%s\", want \"%s\"", cut, err.msg, want);
        assert_int_equal(seq, 0xdeadbeef);
    }
    uint32_t seq = 0;
    cs_err err = {0};
    assert_int_equal(walk(&b, at + 4, &seq, &err), 0);
    assert_int_equal(seq, m->seq);
    cs_mb_free(&b);
}

/* ---- shapes ------------------------------------------------------------------------------- */

static void test_concrete_offsets(void **state)
{
    (void)state;
    /* CAPTIVE.md 3.3's table. */
    expect_seq(&(meta){.version = 0, .seq = 42}, 184);
    expect_seq(&(meta){.version = 1, .seq = 7654321}, 188);
    expect_seq(&(meta){.version = 2, .seq = 7654321}, 188);
    expect_seq(&(meta){.version = 1, .svt = 1, .siglen = 64, .seq = 99}, 292);
    expect_seq(&(meta){.version = 2, .svt = 1, .siglen = 64, .seq = 99}, 292);
    expect_seq(&(meta){.version = 1, .ext = 1, .svt = 1, .siglen = 64, .seq = 100}, 304);
    expect_seq(&(meta){.version = 2, .ext = 1, .svt = 1, .siglen = 64, .seq = 100}, 304);
    expect_seq(&(meta){.version = 2, .ext = 1, .seq = 0xffffffffu}, 200);
    expect_seq(&(meta){.version = 0, .seq = 0}, 184);
}

static void test_sdk_fixture_shapes(void **state)
{
    (void)state;
    /* The Go test's fixtures (catalogue 89): upgrades of 5+i bytes, a 7-byte signature. */
    expect_seq(&(meta){.version = 0, .seq = 42, .tail = 100}, 184);
    expect_seq(&(meta){.version = 1, .seq = 7654321, .tail = 100}, 188);
    expect_seq(&(meta){.version = 1, .ext = 1, .seq = 99, .tail = 100}, 200);
    meta signed3 = {.version = 1, .ext = 1, .nup = 3, .uplen = {5, 6, 7}, .svt = 1, .siglen = 7,
                    .seq = 1000000, .tail = 6000};
    /* 200 + (4+8)+(4+8)+(4+8) + 4+32+4+8 */
    expect_seq(&signed3, 200 + 36 + 48);
}

static void test_worst_case_prefix(void **state)
{
    (void)state;
    meta m = {.version = 2, .ext = 1, .nup = 6, .uplen = {128, 128, 128, 128, 128, 128}, .svt = 1,
              .siglen = 64, .seq = 77, .tail = 8000};
    expect_seq(&m, CS_XDR_SEQ_PREFIX_WORST - 4);
    cs_mb_buf b = {0};
    build(&b, &m);
    uint32_t seq;
    cs_err err;
    assert_int_equal(walk(&b, CS_XDR_SEQ_PREFIX_WORST - 1, &seq, &err), -1);
    assert_string_equal(err.msg, "xdr: prefix ends at byte 1099 before ledgerSeq");
    cs_mb_free(&b);
}

static void test_upgrades_and_padding(void **state)
{
    (void)state;
    meta m = {.version = 1, .nup = 6, .uplen = {0, 1, 2, 3, 4, 128}, .seq = 5};
    /* 188 + (4) + (4+4) + (4+4) + (4+4) + (4+4) + (4+128) */
    expect_seq(&m, 188 + 4 + 8 * 4 + 132);
    meta odd = {.version = 0, .nup = 6, .uplen = {127, 125, 5, 6, 7, 9}, .svt = 1, .siglen = 1, .seq = 6};
    expect_seq(&odd, 184 + (4 + 128) + (4 + 128) + (4 + 8) + (4 + 8) + (4 + 8) + (4 + 12) + 4 + 32 + 4 + 4);
    expect_seq(&(meta){.version = 2, .nup = 1, .uplen = {128}, .seq = 8}, 188 + 132);
    expect_seq(&(meta){.version = 2, .svt = 1, .siglen = 0, .seq = 9}, 188 + 4 + 32 + 4);
    expect_seq(&(meta){.version = 2, .svt = 1, .siglen = 63, .seq = 10}, 188 + 4 + 32 + 4 + 64);
}

/* ---- malformed ---------------------------------------------------------------------------- */

static void test_bad_discriminants(void **state)
{
    (void)state;
    expect_error(&(meta){.version = 7, .seq = 1}, "xdr: LedgerCloseMeta version 7 is not 0, 1 or 2");
    expect_error(&(meta){.version = 3, .seq = 1}, "xdr: LedgerCloseMeta version 3 is not 0, 1 or 2");
    expect_error(&(meta){.version = 0xffffffffu, .seq = 1},
                 "xdr: LedgerCloseMeta version -1 is not 0, 1 or 2");
    expect_error(&(meta){.version = 1, .ext = 2, .seq = 1},
                 "xdr: LedgerCloseMetaExt version 2 is not 0 or 1");
    expect_error(&(meta){.version = 2, .ext = 0x80000000u, .seq = 1},
                 "xdr: LedgerCloseMetaExt version -2147483648 is not 0 or 1");
    expect_error(&(meta){.version = 2, .ext = 1, .ext_point = 1, .seq = 1},
                 "xdr: LedgerCloseMetaExtV1 ExtensionPoint version 1 is not 0");
    expect_error(&(meta){.version = 1, .svt = 2, .seq = 1},
                 "xdr: StellarValueType 2 is not 0 (basic) or 1 (signed)");
    expect_error(&(meta){.version = 0, .svt = 1, .key_type = 1, .siglen = 64, .seq = 1},
                 "xdr: NodeID PublicKeyType 1 is not 0 (ed25519)");
}

static void test_schema_maxima(void **state)
{
    (void)state;
    expect_error(&(meta){.version = 1, .nup = 7, .uplen = {1, 1, 1, 1, 1, 1, 1}, .seq = 1},
                 "xdr: StellarValue has 7 upgrades, over the 6-upgrade maximum");
    expect_error(&(meta){.version = 1, .nup = 0xffffffffu, .seq = 1},
                 "xdr: StellarValue has 4294967295 upgrades, over the 6-upgrade maximum");
    expect_error(&(meta){.version = 1, .nup = 3, .uplen = {4, 200, 4}, .seq = 1},
                 "xdr: upgrade 1 is 200 bytes, over the 128-byte maximum");
    expect_error(&(meta){.version = 0, .nup = 1, .uplen = {129}, .seq = 1},
                 "xdr: upgrade 0 is 129 bytes, over the 128-byte maximum");
    expect_error(&(meta){.version = 2, .svt = 1, .siglen = 65, .seq = 1},
                 "xdr: signature is 65 bytes, over the 64-byte maximum");
    /* A huge length must not wrap the bounds arithmetic either. */
    cs_mb_buf b = {0};
    build(&b, &(meta){.version = 2, .nup = 1, .uplen = {0}, .seq = 1});
    assert_int_equal(b.p[119], 1); /* v2 ext 0: the upgrades count at 116 */
    b.p[120] = b.p[121] = b.p[122] = b.p[123] = 0xff; /* upgrade 0 length */
    uint32_t seq;
    cs_err err;
    assert_int_equal(walk(&b, b.n, &seq, &err), -1);
    assert_string_equal(err.msg, "xdr: upgrade 0 is 4294967295 bytes, over the 128-byte maximum");
    cs_mb_free(&b);
}

static void test_nonzero_padding(void **state)
{
    (void)state;
    expect_error(&(meta){.version = 1, .nup = 2, .uplen = {4, 5}, .pad_byte = 0x01, .seq = 1},
                 "xdr: upgrade 1 padding byte 137 is 0x01, not zero");
    /* Signature padding alone. v0: upgrades count at 112; upgrade 0 (2 bytes) at 116..123; svt
     * 124; key type 128; key 132..163; signature length 164; 7 bytes at 168..174; padding 175. */
    cs_mb_buf b = {0};
    build(&b, &(meta){.version = 0, .nup = 1, .uplen = {2}, .svt = 1, .siglen = 7, .seq = 1});
    assert_int_equal(b.p[167], 7);
    assert_int_equal(b.p[175], 0);
    b.p[175] = 0x80;
    uint32_t seq;
    cs_err err;
    assert_int_equal(walk(&b, b.n, &seq, &err), -1);
    assert_string_equal(err.msg, "xdr: signature padding byte 175 is 0x80, not zero");
    /* Every padding byte position counts, not just the last. */
    build(&b, &(meta){.version = 0, .nup = 1, .uplen = {1}, .seq = 1});
    for (size_t i = 121; i < 124; i++) { /* v0: upgrade 0 length at 116, its byte at 120 */
        b.p[i] = 0xff; /* one position at a time: restored below */
        assert_int_equal(walk(&b, b.n, &seq, &err), -1);
        b.p[i] = 0;
        char want[80];
        snprintf(want, sizeof want, "xdr: upgrade 0 padding byte %zu is 0xff, not zero", i);
        assert_string_equal(err.msg, want);
    }
    cs_mb_free(&b);
}

/* ---- truncation --------------------------------------------------------------------------- */

static void test_truncated_everywhere(void **state)
{
    (void)state;
    expect_every_truncation_fails(&(meta){.version = 0, .seq = 11});
    expect_every_truncation_fails(&(meta){.version = 1, .seq = 12});
    expect_every_truncation_fails(&(meta){.version = 2, .ext = 1, .svt = 1, .siglen = 64, .seq = 13});
    expect_every_truncation_fails(&(meta){.version = 1, .ext = 1, .nup = 6, .uplen = {128, 0, 1, 2, 3, 127},
                                          .svt = 1, .siglen = 61, .seq = 14});
    expect_every_truncation_fails(&(meta){.version = 2, .ext = 1, .nup = 6,
                                          .uplen = {128, 128, 128, 128, 128, 128}, .svt = 1, .siglen = 64,
                                          .seq = 15});
}

static void test_empty_and_null_sized(void **state)
{
    (void)state;
    uint32_t seq = 3;
    cs_err err;
    uint8_t one = 0;
    assert_int_equal(cs_xdr_ledger_seq(&one, 0, &seq, &err), -1);
    assert_string_equal(err.msg, "xdr: prefix ends at byte 0 before ledgerSeq");
    assert_int_equal(cs_xdr_ledger_seq(NULL, 0, &seq, NULL), -1); /* err may be NULL */
    assert_int_equal(seq, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concrete_offsets),
        cmocka_unit_test(test_sdk_fixture_shapes),
        cmocka_unit_test(test_worst_case_prefix),
        cmocka_unit_test(test_upgrades_and_padding),
        cmocka_unit_test(test_bad_discriminants),
        cmocka_unit_test(test_schema_maxima),
        cmocka_unit_test(test_nonzero_padding),
        cmocka_unit_test(test_truncated_everywhere),
        cmocka_unit_test(test_empty_and_null_sized),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
