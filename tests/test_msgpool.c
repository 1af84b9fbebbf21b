/* SPDX-License-Identifier: Apache-2.0 */
/* The message pool: a released message goes back to its pool, not to the allocator, so the next
 * ledger's chunks reuse memory that is already mapped (no page faults, no page clearing); the pool
 * keeps at most its bound, and messages outlive the pool's owner safely. Threads release while the
 * owner takes, as the ring writer and the I/O thread do against the source loop. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include "corestreamd/stream/message.h"

static void test_released_messages_are_reused(void **state)
{
    (void)state;
    cs_msg_pool *p = cs_msg_pool_new(1000, 4);
    assert_non_null(p);
    cs_msg *a = cs_msg_pool_get(p), *b = cs_msg_pool_get(p);
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    assert_true(a->cap >= 1000);
    assert_int_equal(a->len, 0);
    a->len = 10;
    memset(a->data, 0xab, a->cap);
    cs_msg_retain(a);
    cs_msg_release(a);
    assert_int_equal(cs_msg_pool_idle(p), 0); /* still referenced */
    cs_msg_release(a);
    assert_int_equal(cs_msg_pool_idle(p), 1);
    cs_msg *c = cs_msg_pool_get(p);
    assert_ptr_equal(c, a); /* the same memory back */
    assert_int_equal(c->len, 0);
    assert_int_equal(atomic_load(&c->refs), 1);
    assert_ptr_equal(c->data, c->buf + CS_MSG_HEADROOM);
    assert_int_equal(cs_msg_pool_idle(p), 0);
    cs_msg_release(b);
    cs_msg_release(c);
    cs_msg_pool_free(p);
}

static void test_idle_messages_are_bounded(void **state)
{
    (void)state;
    cs_msg_pool *p = cs_msg_pool_new(64, 3);
    cs_msg *m[8];
    for (int i = 0; i < 8; i++)
        assert_non_null(m[i] = cs_msg_pool_get(p));
    for (int i = 0; i < 8; i++)
        cs_msg_release(m[i]);
    assert_int_equal(cs_msg_pool_idle(p), 3); /* the rest went back to the allocator */
    cs_msg_pool_free(p);
}

static void test_messages_outlive_the_pool(void **state)
{
    (void)state;
    cs_msg_pool *p = cs_msg_pool_new(64, 3);
    cs_msg *m = cs_msg_pool_get(p), *idle = cs_msg_pool_get(p);
    cs_msg_release(idle);
    cs_msg_pool_free(p); /* the owner is gone; m still holds the pool */
    m->len = 5;
    cs_msg_release(m); /* frees the message and, last, the pool (ASan checks both) */
}

static void test_plain_messages_are_unpooled(void **state)
{
    (void)state;
    cs_msg *m = cs_msg_new(32);
    assert_non_null(m);
    assert_null(m->pool);
    cs_msg_release(m);
}

enum { THREADS = 2, ROUNDS = 20000 };

static void *releaser(void *arg)
{
    cs_msg **ms = arg;
    for (int i = 0; i < ROUNDS; i++)
        cs_msg_release(ms[i]);
    return NULL;
}

static void test_concurrent_release_and_get(void **state)
{
    (void)state;
    cs_msg_pool *p = cs_msg_pool_new(256, 64);
    static cs_msg *ms[THREADS][ROUNDS];
    for (int t = 0; t < THREADS; t++)
        for (int i = 0; i < ROUNDS; i++)
            assert_non_null(ms[t][i] = cs_msg_pool_get(p));
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, releaser, ms[t]), 0);
    for (int i = 0; i < ROUNDS; i++) { /* the owner keeps taking meanwhile */
        cs_msg *m = cs_msg_pool_get(p);
        assert_non_null(m);
        m->data[0] = 1;
        cs_msg_release(m);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    assert_true(cs_msg_pool_idle(p) <= 64);
    cs_msg_pool_free(p);
}

/* The source loop's chunks: the payload after the 11-byte header starts a page (the ring writes
 * it with O_DIRECT), the headroom and the whole capacity are usable, and reuse keeps the layout. */
static void test_aligned_payloads(void **state)
{
    (void)state;
    enum { AT = 11, CAP = 11 + 8192 };
    cs_msg_pool *p = cs_msg_pool_new_aligned(CAP, 2, AT);
    assert_non_null(p);
    cs_msg *m = cs_msg_pool_get(p);
    assert_non_null(m);
    assert_int_equal((uintptr_t)(m->data + AT) % CS_MSG_ALIGN, 0);
    assert_true(m->cap >= CAP);
    memset(m->data - CS_MSG_HEADROOM, 0xAB, CS_MSG_HEADROOM + CAP); /* ASan checks the bounds */
    uint8_t *was = m->data;
    cs_msg_release(m);
    m = cs_msg_pool_get(p);
    assert_ptr_equal(m->data, was);
    cs_msg_release(m);
    assert_null(cs_msg_pool_new_aligned(CAP, 2, CS_MSG_ALIGN)); /* no room for the headroom */
    cs_msg_pool_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_released_messages_are_reused),
        cmocka_unit_test(test_idle_messages_are_bounded),
        cmocka_unit_test(test_messages_outlive_the_pool),
        cmocka_unit_test(test_plain_messages_are_unpooled),
        cmocka_unit_test(test_concurrent_release_and_get),
        cmocka_unit_test(test_aligned_payloads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
