/* SPDX-License-Identifier: Apache-2.0 */
/* Admission at accept (issue 10): the total and per-address caps, how addresses are grouped
 * (IPv4 exact, IPv6 per /64, IPv4-mapped as IPv4), and a long random walk of enters and leaves
 * against a plain reference model. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "common/admission.h"

static cs_addr_key v4(const char *ip)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(1234)};
    assert_int_equal(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
    return cs_addr_key_of((struct sockaddr *)&sa);
}

static cs_addr_key v6(const char *ip)
{
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons(1234)};
    assert_int_equal(inet_pton(AF_INET6, ip, &sa.sin6_addr), 1);
    return cs_addr_key_of((struct sockaddr *)&sa);
}

static void test_total_cap(void **state)
{
    (void)state;
    cs_admission *a = cs_admission_new(3, 0);
    cs_addr_key k1 = v4("192.0.2.1"), k2 = v4("192.0.2.2");
    assert_int_equal(cs_admission_enter(a, &k1), CS_ADMIT_OK);
    assert_int_equal(cs_admission_enter(a, &k1), CS_ADMIT_OK);
    assert_int_equal(cs_admission_enter(a, &k2), CS_ADMIT_OK);
    assert_int_equal(cs_admission_enter(a, &k2), CS_ADMIT_TOTAL);
    assert_int_equal(cs_admission_total(a), 3);
    cs_admission_leave(a, &k1);
    assert_int_equal(cs_admission_enter(a, &k2), CS_ADMIT_OK);
    assert_int_equal(cs_admission_count(a, &k1), 1);
    assert_int_equal(cs_admission_count(a, &k2), 2);
    cs_admission_free(a);
}

static void test_per_address_cap(void **state)
{
    (void)state;
    cs_admission *a = cs_admission_new(0, 2);
    cs_addr_key k1 = v4("198.51.100.7"), k2 = v4("198.51.100.8");
    assert_int_equal(cs_admission_enter(a, &k1), CS_ADMIT_OK);
    assert_int_equal(cs_admission_enter(a, &k1), CS_ADMIT_OK);
    assert_int_equal(cs_admission_enter(a, &k1), CS_ADMIT_PER_ADDR);
    assert_int_equal(cs_admission_enter(a, &k2), CS_ADMIT_OK);
    assert_int_equal(cs_admission_total(a), 3);
    cs_admission_leave(a, &k1);
    assert_int_equal(cs_admission_enter(a, &k1), CS_ADMIT_OK);
    cs_admission_free(a);
}

static void test_ipv6_counts_per_64(void **state)
{
    (void)state;
    cs_admission *a = cs_admission_new(0, 2);
    cs_addr_key a1 = v6("2001:db8:1:2::1"), a2 = v6("2001:db8:1:2:ffff::9"), b = v6("2001:db8:1:3::1");
    assert_true(memcmp(&a1, &a2, sizeof a1) == 0);
    assert_int_equal(cs_admission_enter(a, &a1), CS_ADMIT_OK);
    assert_int_equal(cs_admission_enter(a, &a2), CS_ADMIT_OK);
    assert_int_equal(cs_admission_enter(a, &a1), CS_ADMIT_PER_ADDR);
    assert_int_equal(cs_admission_enter(a, &b), CS_ADMIT_OK);
    char buf[64];
    cs_addr_key_format(&a1, buf, sizeof buf);
    assert_string_equal(buf, "2001:db8:1:2::/64");
    cs_admission_free(a);
}

static void test_v4_mapped_is_v4(void **state)
{
    (void)state;
    cs_addr_key m = v6("::ffff:203.0.113.5"), p = v4("203.0.113.5");
    assert_true(memcmp(&m, &p, sizeof m) == 0);
    char buf[64];
    cs_addr_key_format(&m, buf, sizeof buf);
    assert_string_equal(buf, "203.0.113.5");
}

static void test_leave_of_unknown_is_harmless(void **state)
{
    (void)state;
    cs_admission *a = cs_admission_new(1, 1);
    cs_addr_key k = v4("192.0.2.9");
    cs_admission_leave(a, &k);
    assert_int_equal(cs_admission_total(a), 0);
    assert_int_equal(cs_admission_enter(a, &k), CS_ADMIT_OK);
    cs_admission_free(a);
}

/* Thousands of addresses entering and leaving at random, through many table growths and
 * backward shifts, agree with an array of counts at every step. */
static void test_random_walk_matches_model(void **state)
{
    (void)state;
    enum { ADDRS = 3000, STEPS = 200000, PER = 3, TOTAL = 5000 };
    static uint32_t model[ADDRS];
    memset(model, 0, sizeof model);
    uint32_t total = 0;
    cs_admission *a = cs_admission_new(TOTAL, PER);
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (int step = 0; step < STEPS; step++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint32_t i = (uint32_t)(x % ADDRS);
        struct sockaddr_in6 sa = {.sin6_family = AF_INET6};
        sa.sin6_addr.s6_addr[0] = 0x20;
        sa.sin6_addr.s6_addr[6] = (uint8_t)(i >> 8);
        sa.sin6_addr.s6_addr[7] = (uint8_t)i;
        sa.sin6_addr.s6_addr[15] = (uint8_t)(x >> 40); /* same /64 whatever the host part */
        cs_addr_key k = cs_addr_key_of((struct sockaddr *)&sa);
        if ((x >> 32) % 2 == 0) {
            cs_admit want = total >= TOTAL ? CS_ADMIT_TOTAL : model[i] >= PER ? CS_ADMIT_PER_ADDR : CS_ADMIT_OK;
            assert_int_equal(cs_admission_enter(a, &k), want);
            if (want == CS_ADMIT_OK)
                model[i]++, total++;
        } else if (model[i]) {
            cs_admission_leave(a, &k);
            model[i]--, total--;
        }
        assert_int_equal(cs_admission_count(a, &k), model[i]);
        assert_int_equal(cs_admission_total(a), total);
    }
    for (uint32_t i = 0; i < ADDRS; i++) {
        struct sockaddr_in6 sa = {.sin6_family = AF_INET6};
        sa.sin6_addr.s6_addr[0] = 0x20;
        sa.sin6_addr.s6_addr[6] = (uint8_t)(i >> 8);
        sa.sin6_addr.s6_addr[7] = (uint8_t)i;
        cs_addr_key k = cs_addr_key_of((struct sockaddr *)&sa);
        assert_int_equal(cs_admission_count(a, &k), model[i]);
    }
    cs_admission_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_total_cap),
        cmocka_unit_test(test_per_address_cap),
        cmocka_unit_test(test_ipv6_counts_per_64),
        cmocka_unit_test(test_v4_mapped_is_v4),
        cmocka_unit_test(test_leave_of_unknown_is_harmless),
        cmocka_unit_test(test_random_walk_matches_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
