/* SPDX-License-Identifier: Apache-2.0 */
/* Synthetic payload: byte-exact with Go math/rand/v2 PCG and the PORTSPEC 1.4c vectors. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/synthetic.h"

/* Lower-case hex of the first n bytes, into out (2n+1 bytes). */
static const char *hex(const uint8_t *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", p[i]);
    out[2 * n] = '\0';
    return out;
}

static uint8_t *filled(size_t size, uint32_t seq, bool compressible)
{
    uint8_t *buf = calloc(size, 1);
    assert_non_null(buf);
    cs_synthetic_fill(buf, size, seq, compressible);
    return buf;
}

/* Checks the first-32-bytes hex (when given) and the XXH64 (seed 0) of the whole payload. */
static void check_vector(uint32_t seq, size_t size, bool compressible, const char *first32,
                         uint64_t xxh)
{
    uint8_t *buf = filled(size, seq, compressible);
    char h[65];
    if (first32)
        assert_string_equal(hex(buf, 32, h), first32);
    assert_int_equal(XXH64(buf, size, 0), xxh);
    free(buf);
}

static void test_pcg_known_answer(void **state)
{
    (void)state;
    cs_pcg p;
    cs_pcg_seed(&p, 1, 2);
    assert_int_equal(cs_pcg_next(&p), 0xc4f5a58656eef510ULL);
    assert_int_equal(cs_pcg_next(&p), 0x9dcec3ad077dec6cULL);
    assert_int_equal(cs_pcg_next(&p), 0xc8d04605312f8088ULL);
}

static void test_vector_seq1_32_incompressible(void **state)
{
    (void)state;
    check_vector(1, 32, false,
                 "00000001083ff581ad540dacfc77b287ae63002f6cee09b1c66c8b338815cd31",
                 0xcf540c6484d9f162ULL);
}

static void test_vector_seq7_1024_incompressible(void **state)
{
    (void)state;
    check_vector(7, 1024, false,
                 "00000007dd0f07c0a9e7eb702527072e347cfcfb8f8deac0a1d9667ecdee5f1b",
                 0x5ade0ff6dae22f90ULL);
}

static void test_vector_seq1_default_incompressible(void **state)
{
    (void)state;
    check_vector(1, CS_SYNTHETIC_DEFAULT_SIZE, false, NULL, 0x6756e57309ca8b8eULL);
}

static void test_vector_seq1_default_compressible(void **state)
{
    (void)state;
    check_vector(1, CS_SYNTHETIC_DEFAULT_SIZE, true, NULL, 0xa8d3ca7d3096f47cULL);
}

static void test_vector_seq42_300_compressible(void **state)
{
    (void)state;
    check_vector(42, 300, true,
                 "0000002ad8f853a25ccf2ab860d80f58e367dbd2f68c4774426b0a049b2eb4e2",
                 0x7e874922cf16a7a8ULL);
}

/* 15 bytes: one full draw at 4 and a draw cut to 3 bytes at 12. */
static void test_vector_seq5_15_incompressible(void **state)
{
    (void)state;
    uint8_t *buf = filled(15, 5, false);
    char h[31];
    assert_string_equal(hex(buf, 15, h), "00000005f18da8b9cf99ae43562e06");
    free(buf);
}

/* PORTSPEC case 72: TestSyntheticPayloadIsDeterministic. */
static void test_deterministic(void **state)
{
    (void)state;
    uint8_t *a = filled(1024, 7, false), *b = filled(1024, 7, false), *c = filled(1024, 8, false);
    assert_memory_equal(a, b, 1024);
    assert_memory_not_equal(a, c, 1024);
    static const uint8_t be7[4] = {0, 0, 0, 7};
    assert_memory_equal(a, be7, 4);
    free(a);
    free(b);
    free(c);

    uint8_t small[3] = {0};
    cs_synthetic_fill(small, sizeof small, 7, false);
    static const uint8_t zero3[3] = {0};
    assert_memory_equal(small, zero3, 3);
}

/* Below 4 bytes nothing at all is written, in either shape. */
static void test_short_buffers_untouched(void **state)
{
    (void)state;
    for (size_t len = 0; len < 4; len++) {
        for (int compressible = 0; compressible < 2; compressible++) {
            uint8_t buf[4];
            memset(buf, 0xAB, sizeof buf);
            cs_synthetic_fill(buf, len, 99, compressible);
            for (size_t i = 0; i < sizeof buf; i++)
                assert_int_equal(buf[i], 0xAB);
        }
    }
}

/* No byte past len is written, for every length around the draw and record boundaries, and the
 * bytes within len match a fill of an exactly-sized buffer. */
static void test_no_writes_past_end(void **state)
{
    (void)state;
    enum { SLACK = 64, MAXLEN = 600 };
    uint8_t big[MAXLEN + SLACK];
    for (size_t len = 4; len <= MAXLEN; len++) {
        for (int compressible = 0; compressible < 2; compressible++) {
            memset(big, 0xEE, sizeof big);
            cs_synthetic_fill(big, len, 3, compressible);
            for (size_t i = len; i < sizeof big; i++)
                assert_int_equal(big[i], 0xEE);
            uint8_t *exact = filled(len, 3, compressible);
            assert_memory_equal(big, exact, len);
            free(exact);
        }
    }
}

/* A truncated payload is a prefix of a longer one for the incompressible shape (one stream of
 * draws), which pins the tail truncation to "first bytes of the LE draw". */
static void test_incompressible_prefix_property(void **state)
{
    (void)state;
    uint8_t *full = filled(4096, 11, false);
    for (size_t len = 4; len < 64; len++) {
        uint8_t *part = filled(len, 11, false);
        assert_memory_equal(part, full, len);
        free(part);
    }
    free(full);
}

/* Compressible records repeat the template: bytes [4, 4+224) of every full record are equal. */
static void test_compressible_records_share_template(void **state)
{
    (void)state;
    uint8_t *buf = filled(4 + 256 * 4, 9, true);
    for (size_t r = 1; r < 4; r++)
        assert_memory_equal(buf + 4, buf + 4 + r * 256, 256 - 32);
    assert_memory_not_equal(buf + 4 + 224, buf + 4 + 256 + 224, 32);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pcg_known_answer),
        cmocka_unit_test(test_vector_seq1_32_incompressible),
        cmocka_unit_test(test_vector_seq7_1024_incompressible),
        cmocka_unit_test(test_vector_seq1_default_incompressible),
        cmocka_unit_test(test_vector_seq1_default_compressible),
        cmocka_unit_test(test_vector_seq42_300_compressible),
        cmocka_unit_test(test_vector_seq5_15_incompressible),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_short_buffers_untouched),
        cmocka_unit_test(test_no_writes_past_end),
        cmocka_unit_test(test_incompressible_prefix_property),
        cmocka_unit_test(test_compressible_records_share_template),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
