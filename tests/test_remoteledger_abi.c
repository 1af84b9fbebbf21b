/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger's ABI, as a separate program sees it: this test links the shared library
 * (libremoteledger.so.1) and uses the public header only. Options grow by struct_size: a zeroed
 * struct means every default, an older caller's shorter struct is accepted and never read past,
 * a newer caller's longer one only when what this library does not know is zero, and a size that
 * cannot be a layout is refused with a message naming it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "corestream/remoteledger.h"
#include "support/rlclient.h"
#include "support/scriptserver.h"

/* Streams range with opts passed to the library exactly as they are (rlclient's drain would copy
 * them into a struct of this header's size). */
static void run_with(ss_server *ss, const rl_options *opts, rl_range range, collected *c, rl_result want, int count)
{
    c->first = -1;
    assert_int_equal(rl_stream_new(&c->s, ss_url(ss), opts), RL_OK);
    c->r = rl_stream_raw_ledgers(c->s, range, on_ledger, c);
    snprintf(c->err, sizeof c->err, "%s", rl_stream_error(c->s));
    drain_done(ss, c);
    expect(c, want, count);
}

static void test_version(void **state)
{
    (void)state;
    assert_int_equal(RL_VERSION_MAJOR, 1);
    assert_int_equal(RL_VERSION_NUMBER, RL_VERSION_MAJOR * 10000 + RL_VERSION_MINOR * 100 + RL_VERSION_PATCH);
    assert_int_equal(rl_version_number(), RL_VERSION_NUMBER);
    assert_string_equal(rl_version_string(), RL_VERSION_STRING);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", RL_VERSION_MAJOR, RL_VERSION_MINOR, RL_VERSION_PATCH);
    assert_string_equal(rl_version_string(), want);
    /* Result codes are appended, never renumbered. */
    assert_int_equal(RL_AGAIN, 15);
    assert_int_equal(RL_ERR_RUN_CHANGED, 16);
    assert_string_equal(rl_result_name(RL_ERR_RUN_CHANGED), "RL_ERR_RUN_CHANGED");
    assert_int_equal(RL_ERR_SIGNATURE, 17);
    assert_string_equal(rl_result_name(RL_ERR_SIGNATURE), "RL_ERR_SIGNATURE");
    assert_int_equal(RL_ERR_HOLE, 18);
    assert_string_equal(rl_result_name(RL_ERR_HOLE), "RL_ERR_HOLE");
    assert_string_equal(rl_result_name((rl_result)19), "RL_ERR_UNKNOWN");
}

/* A zeroed struct (as Go's `var o C.rl_options` makes it) with only its size set: every default.
 * A 1 MiB ledger in chunks of the server's default size passes the default caps (a cap of 0
 * would refuse it). */
static void test_zeroed_options_are_the_defaults(void **state)
{
    (void)state;
    enum { SIZE = 1 << 20, CHUNK = 262144 };
    uint8_t *payload = malloc(SIZE);
    for (size_t i = 0; i < SIZE; i++)
        payload[i] = (uint8_t)(i * 7);
    ss_server *ss = ss_start();
    ss_bulk_ledgers(ss, 10, 2, payload, SIZE, CHUNK);
    rl_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    collected c = {0};
    run_with(ss, &o, rl_bounded_range(10, 11), &c, RL_OK, 2);
    assert_int_equal(c.sizes[0], SIZE);
    assert_memory_equal(c.copies[1], payload, SIZE);
    assert_int_equal(c.infos[0].chunks, SIZE / CHUNK);
    ss_stop(ss);
    collected_free(&c);
    free(payload);
}

/* An older caller's struct ends before the fields added since: it is accepted, the library reads
 * none of the missing bytes (the struct is a heap block of exactly that size, so ASan would see
 * it), and the missing fields take their defaults. */
static void old_size_run(size_t old_size)
{
    rl_options full;
    rl_options_init(&full);
    full.struct_size = old_size;
    collected c = {0};
    full.observer = observer;
    full.observer_ctx = &c;
    rl_options *old = malloc(old_size);
    memcpy(old, &full, old_size);

    ss_server *ss = ss_start();
    ss_ledger(ss, 3, 5000);
    ss_ledger(ss, 4, 5000);
    run_with(ss, old, rl_bounded_range(3, 4), &c, RL_OK, 2);
    /* the observer is honoured when it is inside the old layout, and not read when it is not */
    assert_int_equal(c.observed, old_size > offsetof(rl_options, observer_ctx) ? 2 : 0);
    ss_stop(ss);
    collected_free(&c);
    free(old);
}

static void test_old_size_options_accepted(void **state)
{
    (void)state;
    old_size_run(offsetof(rl_options, trusted_keys_file));    /* a 1.3 caller's struct (160 bytes) */
    assert_int_equal(offsetof(rl_options, trusted_keys_file), 160); /* 1.4 appended after 1.3's padded end */
    assert_int_equal(sizeof(rl_options), 168);
    old_size_run(offsetof(rl_options, allow_run_change));     /* a 1.2 caller's struct (152 bytes) */
    assert_int_equal(offsetof(rl_options, allow_run_change), 152); /* 1.3 appended after 1.2's last byte */
    old_size_run(offsetof(rl_options, busy_poll_ns));         /* a 1.1 caller's struct (144 bytes) */
    assert_int_equal(offsetof(rl_options, busy_poll_ns), 144);  /* 1.2 appended after 1.1's last byte */
    old_size_run(offsetof(rl_options, tls_ca_file));          /* as if the TLS fields were newer */
    old_size_run(offsetof(rl_options, handshake_timeout_ns)); /* ...or the timeouts and resume */
    old_size_run(offsetof(rl_options, max_message_size));     /* struct_size alone: all defaults */
}

/* A newer caller's struct: extra bytes that are all zero ask for nothing this library lacks. */
static void test_newer_size_with_zero_tail_accepted(void **state)
{
    (void)state;
    const size_t big = sizeof(rl_options) + 64;
    unsigned char *buf = calloc(1, big);
    rl_options base;
    rl_options_init(&base);
    memcpy(buf, &base, sizeof base);
    ((rl_options *)buf)->struct_size = big;

    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 100);
    collected c = {0};
    run_with(ss, (rl_options *)buf, rl_single_ledger_range(1), &c, RL_OK, 1);
    ss_stop(ss);
    collected_free(&c);
    free(buf);
}

/* A refused struct_size: RL_ERR_INVALID at rl_stream_new with the message, the stream still
 * readable, every call returning the same error without dialling. */
static void expect_refused(ss_server *ss, const rl_options *o, const char *msg)
{
    rl_stream *s = NULL;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), o), RL_ERR_INVALID);
    assert_non_null(s);
    assert_string_equal(rl_stream_error(s), msg);
    assert_int_equal(rl_stream_raw_ledgers(s, rl_unbounded_range(1), NULL, NULL), RL_ERR_INVALID);
    assert_string_equal(rl_stream_error(s), msg);
    rl_stream_free(s);
}

static void test_bad_struct_size_refused(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    rl_options o;
    memset(&o, 0, sizeof o);
    expect_refused(ss, &o, "remoteledger: rl_options.struct_size is 0: set it to sizeof(rl_options) "
                           "(rl_options_init does)");
    o.struct_size = 12;
    expect_refused(ss, &o, "remoteledger: rl_options.struct_size 12 is not a multiple of 8");

    const size_t big = sizeof(rl_options) + 16;
    unsigned char *buf = calloc(1, big);
    ((rl_options *)buf)->struct_size = big;
    buf[sizeof(rl_options) + 3] = 1; /* an option this library has never heard of */
    char want[256];
    snprintf(want, sizeof want,
             "remoteledger: rl_options.struct_size %zu sets options this library (%s, %zu bytes) does not know", big,
             rl_version_string(), sizeof(rl_options));
    expect_refused(ss, (rl_options *)buf, want);
    free(buf);

    assert_int_equal(ss_connections(ss), 0);
    ss_stop(ss);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_zeroed_options_are_the_defaults),
        cmocka_unit_test(test_old_size_options_accepted),
        cmocka_unit_test(test_newer_size_with_zero_tail_accepted),
        cmocka_unit_test(test_bad_struct_size_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
