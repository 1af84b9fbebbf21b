/* SPDX-License-Identifier: Apache-2.0 */
/* The broadcaster's lock-free reads (issue 41.2): every message is published with its WebSocket
 * frame header already in front of it, so the bytes a subscriber is sent are header and payload
 * with no sender writing anything; and a cursor inside the current flow reads the flow's published
 * chunks and END without the lock (cs_broadcast_peek), seeing what a watch would have shown, and is
 * told to watch again once the flow is replaced or the stream finished. The concurrent test (a
 * publisher against a reader that only peeks) is the ThreadSanitizer target. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "corestreamd/stream/broadcast.h"
#include "corestreamd/stream/message.h"
#include "support/wait.h"
#include "wire/wire.h"

static cs_msg *msg_len(uint8_t type, uint32_t seq, size_t n)
{
    cs_msg *m = cs_msg_new(n);
    assert_non_null(m);
    memset(m->data, 0xab, n);
    m->data[0] = CS_WIRE_VERSION;
    m->data[1] = type;
    m->data[2] = (uint8_t)(seq >> 24), m->data[3] = (uint8_t)(seq >> 16);
    m->data[4] = (uint8_t)(seq >> 8), m->data[5] = (uint8_t)seq;
    m->len = n;
    return m;
}

/* The frame a subscriber is sent, as cs_msg_ws_header gives it: hl bytes before data. */
static void assert_frame(cs_msg *m, const uint8_t *want, size_t wn)
{
    /* Sealed at publish: nobody has asked for the header, yet it is written. */
    assert_int_equal(atomic_load(&m->ws_header), 2);
    assert_memory_equal(m->data - wn, want, wn);
    assert_int_equal(cs_msg_ws_header(m), wn);
    assert_memory_equal(m->data - wn, want, wn);
}

static void test_published_messages_carry_their_frame_header(void **state)
{
    (void)state;
    cs_broadcaster *b = cs_broadcaster_new(NULL, NULL);
    cs_msg *begin = msg_len(CS_WIRE_TYPE_BEGIN, 7, CS_WIRE_BEGIN_LEN);
    cs_msg *small = msg_len(CS_WIRE_TYPE_CHUNK, 7, 300);
    cs_msg *big = msg_len(CS_WIRE_TYPE_CHUNK, 7, 70000);
    cs_msg *end = msg_len(CS_WIRE_TYPE_END, 7, CS_WIRE_END_LEN);
    assert_int_equal(cs_broadcast_begin(b, 7, cs_msg_retain(begin), NULL), 0);
    assert_int_equal(cs_broadcast_chunk(b, cs_msg_retain(small), NULL), 0);
    assert_int_equal(cs_broadcast_chunk(b, cs_msg_retain(big), NULL), 0);
    assert_int_equal(cs_broadcast_end(b, cs_msg_retain(end), NULL, NULL), 0);
    assert_frame(begin, (const uint8_t[]){0x82, CS_WIRE_BEGIN_LEN}, 2);
    assert_frame(small, (const uint8_t[]){0x82, 126, 0x01, 0x2c}, 4);
    assert_frame(big, (const uint8_t[]){0x82, 127, 0, 0, 0, 0, 0, 0x01, 0x11, 0x70}, 10);
    assert_frame(end, (const uint8_t[]){0x82, CS_WIRE_END_LEN}, 2);
    cs_msg_release(begin), cs_msg_release(small), cs_msg_release(big), cs_msg_release(end);
    cs_broadcaster_free(b);
}

static void test_an_unpublished_message_gets_its_header_on_first_use(void **state)
{
    (void)state;
    cs_msg *m = msg_len(CS_WIRE_TYPE_CHUNK, 1, 200); /* a replay's message: never published */
    assert_int_equal(atomic_load(&m->ws_header), 0);
    assert_int_equal(cs_msg_ws_header(m), 4);
    assert_memory_equal(m->data - 4, ((const uint8_t[]){0x82, 126, 0, 200}), 4);
    cs_msg_release(m);
}

static void test_peek_follows_the_current_flow(void **state)
{
    (void)state;
    cs_broadcaster *b = cs_broadcaster_new(NULL, NULL);
    size_t n = 99;
    cs_msg *end = (cs_msg *)1;
    assert_int_equal(cs_broadcast_begin(b, 3, msg_len(CS_WIRE_TYPE_BEGIN, 3, CS_WIRE_BEGIN_LEN), NULL), 0);
    cs_snap s;
    cs_broadcast_watch(b, &s);
    cs_flow *f = cs_flow_retain(s.flow);
    cs_snap_release(&s);
    assert_true(cs_broadcast_peek(b, f, &n, &end));
    assert_int_equal(n, 0);
    assert_null(end);
    cs_msg *c0 = msg_len(CS_WIRE_TYPE_CHUNK, 3, 100);
    assert_int_equal(cs_broadcast_chunk(b, cs_msg_retain(c0), NULL), 0);
    assert_true(cs_broadcast_peek(b, f, &n, &end));
    assert_int_equal(n, 1);
    assert_ptr_equal(cs_flow_chunk(f, 0), c0);
    assert_null(end);
    cs_msg *e = msg_len(CS_WIRE_TYPE_END, 3, CS_WIRE_END_LEN);
    assert_int_equal(cs_broadcast_end(b, cs_msg_retain(e), NULL, NULL), 0);
    assert_true(cs_broadcast_peek(b, f, &n, &end));
    assert_int_equal(n, 1);
    assert_ptr_equal(end, e);
    /* The next BEGIN replaces it: watch again. */
    assert_int_equal(cs_broadcast_begin(b, 4, msg_len(CS_WIRE_TYPE_BEGIN, 4, CS_WIRE_BEGIN_LEN), NULL), 0);
    assert_false(cs_broadcast_peek(b, f, &n, &end));
    /* The replaced flow's own state is still what was published. */
    cs_broadcast_flow_state(b, f, &n, &end);
    assert_int_equal(n, 1);
    assert_ptr_equal(end, e);
    /* A finished stream: watch again, even inside the current flow. */
    cs_broadcast_watch(b, &s);
    cs_flow *g = cs_flow_retain(s.flow);
    cs_snap_release(&s);
    assert_true(cs_broadcast_peek(b, g, &n, &end));
    cs_broadcast_finish(b, false);
    assert_false(cs_broadcast_peek(b, g, &n, &end));
    cs_flow_release(f), cs_flow_release(g);
    cs_msg_release(c0), cs_msg_release(e);
    cs_broadcaster_free(b);
}

/* ---- a publisher against a reader that only peeks inside the flow it holds ---- */

#define LEDGERS 300
#define CHUNKS 40

typedef struct race {
    cs_broadcaster *b;
    int bad;
    _Atomic unsigned long chunks_seen;
    unsigned long ends_seen;
} race;

static bool reader_saw_a_chunk(void *arg)
{
    return atomic_load(&((race *)arg)->chunks_seen) > 0;
}

static void *publisher(void *arg)
{
    race *r = arg;
    for (uint32_t seq = 1; seq <= LEDGERS; seq++) {
        cs_broadcast_begin(r->b, seq, msg_len(CS_WIRE_TYPE_BEGIN, seq, CS_WIRE_BEGIN_LEN), NULL);
        for (uint32_t i = 0; i < CHUNKS; i++) {
            cs_broadcast_chunk(r->b, msg_len(CS_WIRE_TYPE_CHUNK, seq, 64 + i), NULL);
            /* The first chunk waits for the reader to peek it, so the race always happens, however
             * the two threads are scheduled; from there on they run free. */
            if (seq == 1 && i == 0 && cs_wait_until(reader_saw_a_chunk, r, WAIT_MS) != 0)
                r->bad++;
        }
        cs_broadcast_end(r->b, msg_len(CS_WIRE_TYPE_END, seq, CS_WIRE_END_LEN), NULL, NULL);
    }
    cs_broadcast_finish(r->b, false);
    return NULL;
}

static void *reader(void *arg)
{
    race *r = arg;
    for (;;) {
        cs_snap s;
        cs_broadcast_watch(r->b, &s);
        bool ended = s.ended;
        cs_flow *f = s.flow ? cs_flow_retain(s.flow) : NULL;
        uint32_t seq = s.seq;
        cs_snap_release(&s);
        size_t sent = 0, n;
        cs_msg *end;
        while (f && cs_broadcast_peek(r->b, f, &n, &end)) {
            for (; sent < n; sent++) { /* what a cursor sends: header and payload, as published */
                cs_msg *m = cs_flow_chunk(f, sent);
                size_t hl = cs_msg_ws_header(m);
                if (m->len != 64 + sent || m->data[1] != CS_WIRE_TYPE_CHUNK || m->data[5] != (uint8_t)seq ||
                    hl != 2 || m->data[-2] != 0x82 || m->data[-1] != 64 + sent)
                    r->bad++;
                atomic_fetch_add(&r->chunks_seen, 1);
            }
            if (end) {
                if (n != CHUNKS || end->data[1] != CS_WIRE_TYPE_END || cs_msg_ws_header(end) != 2)
                    r->bad++;
                r->ends_seen++;
                break;
            }
        }
        cs_flow_release(f);
        if (ended)
            return NULL;
    }
}

static void test_peek_races_a_publisher(void **state)
{
    (void)state;
    race r = {.b = cs_broadcaster_new(NULL, NULL)};
    pthread_t p, q;
    assert_int_equal(pthread_create(&q, NULL, reader, &r), 0);
    assert_int_equal(pthread_create(&p, NULL, publisher, &r), 0);
    pthread_join(p, NULL);
    pthread_join(q, NULL);
    assert_int_equal(r.bad, 0);
    assert_true(atomic_load(&r.chunks_seen) > 0);
    cs_broadcaster_free(r.b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_published_messages_carry_their_frame_header),
        cmocka_unit_test(test_an_unpublished_message_gets_its_header_on_first_use),
        cmocka_unit_test(test_peek_follows_the_current_flow),
        cmocka_unit_test(test_peek_races_a_publisher),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
