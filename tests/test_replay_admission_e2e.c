/* SPDX-License-Identifier: Apache-2.0 */
/* Replay admission, end to end in process (issue 10): ring catch-ups beyond --max-replays (or its
 * per-address cap) wait their turn instead of being refused, start in arrival order once a slot
 * frees, leave the queue when they disconnect, and never hold back a live tip subscriber.
 *
 * A subscriber holds its slot while the test does not read it: its ledgers (10 MiB) far exceed
 * what the sockets can buffer with a 16 KiB receive buffer, so its replay cannot finish on its
 * own. Every ordering is observed through the server's counters or what arrives; nothing sleeps
 * to synchronise. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/synthetic.h"
#include "corestreamd/server/server.h"
#include "support/serverharness.h"
#include "support/wsclient.h"
#include "support/wait.h"

#define SIZE (256 * 1024)
#define FILLED 40 /* ledgers in the ring before the catch-ups connect: 10 MiB each */

static harness_opts ring_opts(void)
{
    /* A ledger every 20 ms keeps the live flow going; retention outlasts the test. */
    return (harness_opts){.start = 1, .size = SIZE, .interval_ms = 20, .retention = 3000};
}

static cs_ws *subscribe_from(const harness *h, const char *src_ip, const char *query)
{
    char path[128], body[512];
    int status = 0;
    snprintf(path, sizeof path, "/stream%s", query);
    cs_ws_opts wo = {.rcvbuf = 16384, .bind_addr = src_ip};
    cs_ws *ws = cs_ws_connect_opts("127.0.0.1", h->port, path, &wo, WAIT_MS, &status, body, sizeof body);
    if (!ws)
        fail_msg("connect %s from %s: status %d: %s", path, src_ip, status, body);
    return ws;
}

/* The counters change on the I/O thread with no event to wait on: polled until the deadline. */
static void wait_replays(const harness *h, uint32_t running, uint32_t waiting)
{
    int64_t deadline = cs_mono_ns() + WAIT_MS * T_MS;
    while ((cs_server_replays_running(h->srv) != running || cs_server_replays_waiting(h->srv) != waiting) &&
           cs_mono_ns() < deadline) {
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(cs_server_replays_running(h->srv), running);
    assert_int_equal(cs_server_replays_waiting(h->srv), waiting);
}

/* Ledgers from..to, each byte-exact, stampless (a replay), then the close of a finished range. */
static void expect_replay(cs_ws *ws, uint32_t from, uint32_t to)
{
    uint8_t *want = malloc(SIZE);
    assert_non_null(want);
    for (uint32_t seq = from; seq <= to; seq++) {
        cs_ledger l;
        char err[256];
        int r = cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err);
        if (r != 1)
            fail_msg("ledger %u: read_ledger=%d %s", seq, r, err);
        assert_int_equal(l.seq, seq);
        assert_int_equal(l.len, SIZE);
        assert_int_equal(l.emit_end, 0);
        cs_synthetic_fill(want, SIZE, seq, false);
        assert_memory_equal(l.data, want, SIZE);
        cs_ledger_free(&l);
    }
    free(want);
    int code = 0;
    cs_ledger l;
    assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, NULL, 0), 0);
    assert_int_equal(cs_ws_last_close(ws, &code, NULL, 0), 1);
    assert_int_equal(code, 1000);
}

/* A waiting subscriber is sent nothing. (A bounded look, not a synchronisation: the counters
 * already said it waits.) */
static void expect_nothing_yet(cs_ws *ws)
{
    cs_ws_msg m;
    assert_int_equal(cs_ws_read(ws, &m, 200), CS_WS_TIMEOUT);
}

/* ---- a live tip subscriber, read on its own thread ---- */

typedef struct tip {
    const harness *h;
    cs_ws *ws;
    pthread_t th;
    atomic_bool stop;
    atomic_int received; /* stamped live ledgers, in sequence */
    char failure[320];
} tip;

static void *tip_main(void *arg)
{
    tip *t = arg;
    uint32_t last = 0;
    while (!atomic_load(&t->stop)) {
        cs_ledger l;
        char err[200];
        int r = cs_ws_read_ledger(t->ws, &l, 1000, err, sizeof err);
        if (r == -1 && strstr(err, "timeout"))
            continue; /* a timeout keeps the assembly: look at stop, then read on */
        if (r != 1) {
            snprintf(t->failure, sizeof t->failure, "read_ledger=%d %s", r, err);
            break;
        }
        if (last && l.seq != last + 1)
            snprintf(t->failure, sizeof t->failure, "ledger %u after %u", l.seq, last);
        last = l.seq;
        if (l.emit_end != 0)
            atomic_fetch_add(&t->received, 1);
        cs_ledger_free(&l);
        if (t->failure[0])
            break;
    }
    return NULL;
}

static void tip_start(tip *t, const harness *h)
{
    memset(t, 0, sizeof *t);
    t->h = h;
    char body[512];
    int status = 0;
    t->ws = cs_ws_connect("127.0.0.1", h->port, "/stream", WAIT_MS, &status, body, sizeof body);
    if (!t->ws)
        fail_msg("tip connect: status %d: %s", status, body);
    assert_int_equal(pthread_create(&t->th, NULL, tip_main, t), 0);
}

/* Waits until the tip has n more live ledgers than before. */
static void tip_wait_more(tip *t, int n)
{
    int target = atomic_load(&t->received) + n;
    int64_t deadline = cs_mono_ns() + WAIT_MS * T_MS;
    while (atomic_load(&t->received) < target && !t->failure[0] && cs_mono_ns() < deadline) {
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_true(atomic_load(&t->received) >= target);
}

static void tip_stop(tip *t)
{
    atomic_store(&t->stop, true);
    pthread_join(t->th, NULL);
    if (t->failure[0])
        fail_msg("tip subscriber: %s", t->failure);
    cs_ws_close(t->ws);
}

/* ---- tests ---- */

/* --max-replays 1: the second catch-up waits for the first to finish, then gets every ledger;
 * the tip subscriber is served live all along and never counts as a replay. */
static void test_second_catch_up_waits_for_the_first(void **state)
{
    (void)state;
    harness h;
    harness_opts o = ring_opts();
    o.max_replays = 1;
    o.max_replays_per_ip = -1;
    harness_start(&h, &o);
    assert_true(cs_server_wait_retained(h.srv, FILLED, 20 * T_SEC));
    tip t;
    tip_start(&t, &h);
    tip_wait_more(&t, 1);
    wait_replays(&h, 0, 0);

    cs_ws *a = subscribe_from(&h, "127.0.0.1", "?start=1&end=40");
    wait_replays(&h, 1, 0);
    cs_ws *b = subscribe_from(&h, "127.0.0.2", "?start=1&end=40");
    wait_replays(&h, 1, 1);
    tip_wait_more(&t, 3); /* the live path keeps flowing while one replays and one waits */
    expect_nothing_yet(b);
    assert_int_equal(cs_server_replays_waiting(h.srv), 1);

    expect_replay(a, 1, FILLED);
    wait_replays(&h, 1, 0); /* a's slot went to b */
    expect_replay(b, 1, FILLED);
    wait_replays(&h, 0, 0);
    tip_wait_more(&t, 1);
    tip_stop(&t);
    cs_ws_close(a);
    cs_ws_close(b);
    harness_stop(&h);
}

/* --max-replays-per-ip 1: a second catch-up from the same address waits, one from another
 * address starts at once. */
static void test_per_address_cap(void **state)
{
    (void)state;
    harness h;
    harness_opts o = ring_opts();
    o.max_replays = -1;
    o.max_replays_per_ip = 1;
    harness_start(&h, &o);
    assert_true(cs_server_wait_retained(h.srv, FILLED, 20 * T_SEC));

    cs_ws *a1 = subscribe_from(&h, "127.0.0.1", "?start=1&end=40");
    wait_replays(&h, 1, 0);
    cs_ws *a2 = subscribe_from(&h, "127.0.0.1", "?start=1&end=40");
    wait_replays(&h, 1, 1);
    cs_ws *c = subscribe_from(&h, "127.0.0.2", "?start=1&end=40");
    wait_replays(&h, 2, 1);
    expect_replay(c, 1, FILLED); /* while a2 still waits */
    wait_replays(&h, 1, 1);
    expect_nothing_yet(a2);

    expect_replay(a1, 1, FILLED);
    wait_replays(&h, 1, 0);
    expect_replay(a2, 1, FILLED);
    wait_replays(&h, 0, 0);
    cs_ws_close(a1);
    cs_ws_close(a2);
    cs_ws_close(c);
    harness_stop(&h);
}

/* A waiter that disconnects leaves the queue; the others keep their order. */
static void test_waiter_that_disconnects_leaves_the_queue(void **state)
{
    (void)state;
    harness h;
    harness_opts o = ring_opts();
    o.max_replays = 1;
    o.max_replays_per_ip = -1;
    harness_start(&h, &o);
    assert_true(cs_server_wait_retained(h.srv, FILLED, 20 * T_SEC));

    cs_ws *a = subscribe_from(&h, "127.0.0.1", "?start=1&end=40");
    wait_replays(&h, 1, 0);
    cs_ws *b = subscribe_from(&h, "127.0.0.2", "?start=1&end=40");
    wait_replays(&h, 1, 1);
    cs_ws *c = subscribe_from(&h, "127.0.0.3", "?start=1&end=40");
    wait_replays(&h, 1, 2);
    cs_ws *d = subscribe_from(&h, "127.0.0.4", "?start=1&end=40");
    wait_replays(&h, 1, 3);
    cs_ws_close(c); /* mid-queue, no close frame */
    wait_replays(&h, 1, 2);

    expect_replay(a, 1, FILLED);
    wait_replays(&h, 1, 1); /* b, first in the queue, holds the slot now; d still waits */
    expect_nothing_yet(d);
    expect_replay(b, 1, FILLED);
    wait_replays(&h, 1, 0);
    expect_replay(d, 1, FILLED);
    wait_replays(&h, 0, 0);
    cs_ws_close(a);
    cs_ws_close(b);
    cs_ws_close(d);
    harness_stop(&h);
}

/* A waiter whose ledgers left the ring meanwhile is closed 4001 when its turn comes, which here
 * is when the holder of the slot disconnects. */
static void test_waiter_whose_ledgers_are_pruned_gets_4001(void **state)
{
    (void)state;
    harness h;
    harness_opts o = ring_opts();
    o.retention = 50;
    o.max_replays = 1;
    harness_start(&h, &o);
    assert_true(cs_server_wait_retained(h.srv, 50, 20 * T_SEC));

    /* Unbounded and unread, a stays behind the live flow and holds the slot; its ledgers leave
     * the ring only 30 ledgers (600 ms) from now. */
    cs_ws *a = subscribe_from(&h, "127.0.0.1", "?start=30");
    wait_replays(&h, 1, 0);
    cs_ws *b = subscribe_from(&h, "127.0.0.2", "?start=1&end=5");
    wait_replays(&h, 1, 1);
    assert_true(cs_server_wait_retained(h.srv, 56, 20 * T_SEC)); /* 1..6 are pruned */
    cs_ws_close(a);
    cs_ledger l;
    assert_int_equal(cs_ws_read_ledger(b, &l, WAIT_MS, NULL, 0), 0);
    int code = 0;
    char why[128];
    assert_int_equal(cs_ws_last_close(b, &code, why, sizeof why), 1);
    assert_int_equal(code, 4001);
    assert_true(strncmp(why, "too far behind: oldest=", 23) == 0);
    wait_replays(&h, 0, 0);
    cs_ws_close(b);
    harness_stop(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_second_catch_up_waits_for_the_first),
        cmocka_unit_test(test_per_address_cap),
        cmocka_unit_test(test_waiter_that_disconnects_leaves_the_queue),
        cmocka_unit_test(test_waiter_whose_ledgers_are_pruned_gets_4001),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
