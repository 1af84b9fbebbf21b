/* SPDX-License-Identifier: Apache-2.0 */
/* Replay admission's slot table (issue 10): the total and per-address caps, the hand-over of a
 * freed slot to the first waiter that fits, in arrival order, and leaving the queue. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "corestreamd/stream/replayslots.h"

typedef struct waiter {
    cs_replay_ticket t;
    int grants;
} waiter;

static void on_grant(void *ctx)
{
    ((waiter *)ctx)->grants++;
}

static void init(waiter *w, const char *ip)
{
    memset(w, 0, sizeof *w);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    assert_int_equal(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
    w->t.key = cs_addr_key_of((struct sockaddr *)&sa);
    w->t.granted = on_grant;
    w->t.granted_ctx = w;
}

static void test_total_cap_hands_slots_over_in_order(void **state)
{
    (void)state;
    cs_replay_slots *s = cs_replay_slots_new(2, 0);
    waiter a, b, c, d;
    init(&a, "192.0.2.1");
    init(&b, "192.0.2.2");
    init(&c, "192.0.2.3");
    init(&d, "192.0.2.4");
    size_t pos = 0;
    assert_true(cs_replay_slots_acquire(s, &a.t, &pos));
    assert_true(cs_replay_slots_acquire(s, &b.t, &pos));
    assert_false(cs_replay_slots_acquire(s, &c.t, &pos));
    assert_int_equal(pos, 1);
    assert_false(cs_replay_slots_acquire(s, &d.t, &pos));
    assert_int_equal(pos, 2);
    assert_false(cs_replay_slots_acquire(s, &d.t, &pos)); /* asking again: queued already */
    assert_int_equal(pos, 0);
    assert_int_equal(cs_replay_slots_running(s), 2);
    assert_int_equal(cs_replay_slots_waiting(s), 2);

    cs_replay_slots_release(s, &a.t);
    assert_int_equal(c.grants, 1);
    assert_int_equal(d.grants, 0);
    assert_int_equal(c.t.state, CS_TICKET_HELD);
    assert_true(cs_replay_slots_acquire(s, &c.t, &pos));
    assert_false(cs_replay_slots_acquire(s, &d.t, &pos));
    assert_int_equal(cs_replay_slots_running(s), 2);
    assert_int_equal(cs_replay_slots_waiting(s), 1);

    cs_replay_slots_release(s, &b.t);
    cs_replay_slots_release(s, &c.t);
    cs_replay_slots_release(s, &d.t);
    assert_int_equal(d.grants, 1);
    assert_int_equal(cs_replay_slots_running(s), 0);
    assert_int_equal(cs_replay_slots_waiting(s), 0);
    cs_replay_slots_free(s);
}

/* A waiter whose address is full does not hold back one from another address. */
static void test_per_address_cap_passes_over_a_full_address(void **state)
{
    (void)state;
    cs_replay_slots *s = cs_replay_slots_new(2, 1);
    waiter x1, x2, y1, z1;
    init(&x1, "192.0.2.1");
    init(&x2, "192.0.2.1");
    init(&y1, "192.0.2.2");
    init(&z1, "192.0.2.3");
    size_t pos;
    assert_true(cs_replay_slots_acquire(s, &x1.t, &pos));
    assert_false(cs_replay_slots_acquire(s, &x2.t, &pos)); /* per-address */
    assert_true(cs_replay_slots_acquire(s, &y1.t, &pos));  /* another address is not queued behind */
    assert_false(cs_replay_slots_acquire(s, &z1.t, &pos)); /* total */
    assert_int_equal(pos, 2);
    /* y1's slot: x2 is first but its address is still full, so z1 gets it. */
    cs_replay_slots_release(s, &y1.t);
    assert_int_equal(x2.grants, 0);
    assert_int_equal(z1.grants, 1);
    cs_replay_slots_release(s, &x1.t);
    assert_int_equal(x2.grants, 1);
    assert_int_equal(cs_replay_slots_running(s), 2);
    assert_int_equal(cs_replay_slots_waiting(s), 0);
    cs_replay_slots_release(s, &x2.t);
    cs_replay_slots_release(s, &z1.t);
    assert_int_equal(cs_replay_slots_running(s), 0);
    cs_replay_slots_free(s);
}

static void test_a_waiter_that_leaves_is_passed_nothing(void **state)
{
    (void)state;
    cs_replay_slots *s = cs_replay_slots_new(1, 0);
    waiter a, b, c;
    init(&a, "192.0.2.1");
    init(&b, "192.0.2.2");
    init(&c, "192.0.2.3");
    size_t pos;
    assert_true(cs_replay_slots_acquire(s, &a.t, &pos));
    assert_false(cs_replay_slots_acquire(s, &b.t, &pos));
    assert_int_equal(pos, 1);
    assert_false(cs_replay_slots_acquire(s, &c.t, &pos));
    assert_int_equal(pos, 2);
    cs_replay_slots_release(s, &b.t);
    assert_int_equal(b.t.state, CS_TICKET_NONE);
    assert_int_equal(cs_replay_slots_waiting(s), 1);
    cs_replay_slots_release(s, &a.t);
    assert_int_equal(b.grants, 0);
    assert_int_equal(c.grants, 1);
    cs_replay_slots_release(s, &b.t); /* nothing held, nothing queued: no effect */
    cs_replay_slots_release(s, &c.t);
    assert_int_equal(cs_replay_slots_running(s), 0);
    assert_int_equal(cs_replay_slots_waiting(s), 0);
    cs_replay_slots_free(s);
}

static void test_no_caps_never_wait(void **state)
{
    (void)state;
    cs_replay_slots *s = cs_replay_slots_new(0, 0);
    waiter w[50];
    size_t pos;
    for (int i = 0; i < 50; i++) {
        init(&w[i], "192.0.2.1");
        assert_true(cs_replay_slots_acquire(s, &w[i].t, &pos));
    }
    assert_int_equal(cs_replay_slots_running(s), 50);
    for (int i = 0; i < 50; i++)
        cs_replay_slots_release(s, &w[i].t);
    assert_int_equal(cs_replay_slots_running(s), 0);
    cs_replay_slots_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_total_cap_hands_slots_over_in_order),
        cmocka_unit_test(test_per_address_cap_passes_over_a_full_address),
        cmocka_unit_test(test_a_waiter_that_leaves_is_passed_nothing),
        cmocka_unit_test(test_no_caps_never_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
