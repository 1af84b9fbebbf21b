/* SPDX-License-Identifier: Apache-2.0 */
/* The descriptor budget (fdbudget.h): the reserve is the sum of what the parts may hold, a replay
 * slot costs the ledger its catch-up holds, a replay cap that would cost more than counting every
 * connection as a catch-up (or none) falls back to 3 per connection, and a limit with no room
 * for one connection is refused naming the limit and what would do. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "corestreamd/server/fdbudget.h"

/* ring writer 2 + stored-frames fill 3 + replay workers 2 x 3 + the server's own 7 */
#define FIXED 18

static void slots_cost_their_ledgers(void **state)
{
    (void)state;
    cs_fd_budget b;
    cs_err err = {0};
    cs_fd_parts parts = {.replay_slots = 8};
    assert_int_equal(cs_fd_budget_make(&b, 256, 16, &parts, &err), 0);
    assert_int_equal(b.reserve, FIXED + 16);
    assert_int_equal(b.per_connection, 1);
    assert_int_equal(b.connections, 256 - 16 - FIXED - 16);
    parts.admin = true;
    parts.caller = 13;
    assert_int_equal(cs_fd_budget_make(&b, 1024, 16, &parts, &err), 0);
    assert_int_equal(b.reserve, FIXED + 64 + 13 + 16);
    assert_int_equal(b.connections, 1024 - 16 - b.reserve);
}

static void no_replay_cap_counts_every_connection_as_a_catch_up(void **state)
{
    (void)state;
    cs_fd_budget b;
    cs_err err = {0};
    cs_fd_parts none = {0}, many = {.replay_slots = 1000};
    assert_int_equal(cs_fd_budget_make(&b, 256, 16, &none, &err), 0);
    assert_int_equal(b.reserve, FIXED);
    assert_int_equal(b.per_connection, 3);
    assert_int_equal(b.connections, (256 - 16 - FIXED) / 3);
    assert_int_equal(cs_fd_budget_make(&b, 256, 16, &many, &err), 0);
    assert_int_equal(b.per_connection, 3);
    assert_int_equal(b.connections, (256 - 16 - FIXED) / 3);
}

static void no_room_is_refused_naming_the_limit(void **state)
{
    (void)state;
    cs_fd_budget b;
    cs_err err = {0};
    cs_fd_parts parts = {.replay_slots = 8};
    assert_int_equal(cs_fd_budget_make(&b, 30, 16, &parts, &err), -1);
    assert_non_null(strstr(err.msg, "the descriptor limit (RLIMIT_NOFILE 30) leaves no room for a connection: "
                                    "16 descriptors are open and 18 reserved"));
    assert_non_null(strstr(err.msg, "raise LimitNOFILE or ulimit -n to at least 37"));
    assert_int_equal(cs_fd_budget_make(&b, 37, 16, &parts, &err), 0);
    assert_int_equal(b.connections, 1);
    assert_int_equal(cs_fd_budget_make(&b, 10, 16, &parts, &err), -1); /* more open than the limit */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(slots_cost_their_ledgers),
        cmocka_unit_test(no_replay_cap_counts_every_connection_as_a_catch_up),
        cmocka_unit_test(no_room_is_refused_naming_the_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
