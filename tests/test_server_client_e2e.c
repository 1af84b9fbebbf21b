/* SPDX-License-Identifier: Apache-2.0 */
/* corestreamd end to end through the real client library: an in-process server (on 127.0.0.1, an
 * ephemeral port) fed by a paced synthetic source, and libremoteledger's rl_stream_raw_ledgers as
 * the subscriber, as the prototype's internal/server/server_test.go drives it with its
 * remoteledger client. The shared server scenarios (server_scenarios.c) run here as "<name>/rl",
 * seen from the public API: exact result codes and messages, too-far-behind bounds, rl_ledger_info
 * and its accessors; below them, the cases only the library has (cancellation). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corestream/remoteledger.h"
#include "corestreamd/server/server.h"
#include "server_scenarios.h"
#include "support/event.h"
#include "support/serverharness.h"

/* ---- the driver: one subscriber of a scenario, through the library ---- */

typedef struct rl_sub {
    seen seen;            /* first: the shared checks read it */
    rl_ledger_info *info; /* beside seen.l, one per ledger */
    uint32_t info_cap;
    harness *h;
    event *release;       /* set: the callback of the first ledger blocks until it is set (a stall) */
    bool gate_timed_out;
    uint32_t signal_after; /* set `reached` once this many arrived (0: never) */
    event reached;
    rl_stream *s;
    rl_result res;
    pthread_t th;
} rl_sub;

static void rl_sub_init(rl_sub *u, harness *h, const scenario *sc)
{
    memset(u, 0, sizeof *u);
    seen_init(&u->seen, sc);
    u->h = h;
    event_init(&u->reached);
    char url[64];
    snprintf(url, sizeof url, "ws://127.0.0.1:%d", h->port);
    assert_int_equal(rl_stream_new(&u->s, url, NULL), RL_OK);
    assert_non_null(u->s);
    u->res = RL_ERR_INVALID;
}

/* Records the ledger; asserts nothing (a longjmp out of the library would leave it mid-call). */
static int on_ledger(const uint8_t *ledger, size_t len, const rl_ledger_info *info, void *ctx)
{
    rl_sub *u = ctx;
    const scenario *sc = u->seen.sc;
    if (u->seen.n == u->info_cap) {
        u->info_cap = u->info_cap ? u->info_cap * 2 : 64;
        u->info = realloc(u->info, u->info_cap * sizeof *u->info);
        if (!u->info)
            abort();
    }
    u->info[u->seen.n] = *info;
    seen_add(&u->seen, ledger,
             (seen_ledger){.seq = info->sequence, .len = len, .emit_start = info->emit_start_unix_nano,
                           .emit_end = info->emit_end_unix_nano, .received = info->received_unix_nano,
                           .chunks = info->chunks, .discarded = info->discarded_partials});
    if (u->release && u->seen.n == 1 && !event_wait(u->release, SCENARIO_STALL_NS))
        u->gate_timed_out = true;
    if (u->signal_after && u->seen.n == u->signal_after)
        event_set(&u->reached);
    if (sc->act && u->seen.n == sc->act_after)
        sc->act(u->h);
    return seen_done(&u->seen);
}

static rl_range request(const scenario *sc)
{
    if (sc->tip)
        return rl_unbounded_range(0);
    if (!sc->to)
        return rl_unbounded_range(sc->from);
    if (sc->from == sc->to)
        return rl_single_ledger_range(sc->from);
    return rl_bounded_range(sc->from, sc->to);
}

static void rl_sub_run(rl_sub *u)
{
    u->res = rl_stream_raw_ledgers(u->s, request(u->seen.sc), on_ledger, u);
}

static void *rl_sub_main(void *arg)
{
    rl_sub_run(arg);
    return NULL;
}

static void rl_sub_start(rl_sub *u)
{
    assert_int_equal(pthread_create(&u->th, NULL, rl_sub_main, u), 0);
}

static void expect_result(const rl_stream *s, rl_result got, rl_result want)
{
    if (got != want)
        fail_msg("got %s (%s), want %s", rl_result_name(got), rl_stream_error(s), rl_result_name(want));
}

/* Each rl_ledger_info as the API promises: size, and each accessor present exactly when its stamps
 * are, leaving *ns alone otherwise. */
static void expect_info(const rl_ledger_info *in, size_t len)
{
    const int64_t unset = 12345;
    int64_t delivery = unset, pipeline = unset, t_emit = unset;
    bool has_d = rl_info_delivery(in, &delivery), has_p = rl_info_pipeline(in, &pipeline),
         has_w = rl_info_emit_window(in, &t_emit);
    assert_int_equal(in->size, len);
    assert_true(in->received_unix_nano > 0);
    assert_int_equal(has_d, in->emit_end_unix_nano != 0);
    assert_int_equal(has_p, in->emit_start_unix_nano != 0);
    assert_int_equal(has_w, has_d && has_p);
    assert_int_equal(delivery, has_d ? in->received_unix_nano - in->emit_end_unix_nano : unset);
    assert_int_equal(pipeline, has_p ? in->received_unix_nano - in->emit_start_unix_nano : unset);
    assert_int_equal(t_emit, has_w ? in->emit_end_unix_nano - in->emit_start_unix_nano : unset);
    if (has_w) {
        assert_true(pipeline >= t_emit);
        assert_int_equal(pipeline - delivery, t_emit);
    }
}

/* The result and message the call ended with, the too-far-behind bounds exactly when due, and
 * every ledger's rl_ledger_info. */
static void rl_expect_end(const void *v)
{
    const rl_sub *u = v;
    const scenario *sc = u->seen.sc;
    assert_false(u->gate_timed_out);
    expect_result(u->s, u->res, sc->rl);
    assert_string_equal(rl_stream_error(u->s), sc->rl_error);
    uint32_t req = 0, oldest = 0, latest = 0;
    bool tfb = rl_stream_too_far_behind(u->s, &req, &oldest, &latest);
    assert_int_equal(tfb, sc->rl == RL_ERR_TOO_FAR_BEHIND);
    if (tfb) {
        assert_int_equal(req, sc->tfb_requested);
        assert_int_equal(oldest, sc->tfb_oldest);
        assert_int_equal(latest, sc->tfb_latest);
    }
    for (uint32_t k = 0; k < u->seen.n; k++)
        expect_info(&u->info[k], u->seen.l[k].len);
}

/* All subscribe: one on this thread, several on threads of their own; a stalled one (subs[0])
 * blocks in its first ledger's callback until the ring holds everything. */
static void rl_run(harness *h, const scenario *sc, void *v, int n)
{
    rl_sub *subs = v;
    for (int i = 0; i < n; i++)
        rl_sub_init(&subs[i], h, sc);
    if (n == 1) {
        rl_sub_run(&subs[0]);
        return;
    }
    event release;
    event_init(&release);
    if (sc->stall)
        subs[0].release = &release;
    for (int i = 0; i < n; i++)
        rl_sub_start(&subs[i]);
    bool all = !sc->stall || scenario_await_stall_end(h, sc);
    event_set(&release);
    for (int i = 0; i < n; i++)
        pthread_join(subs[i].th, NULL);
    event_destroy(&release);
    assert_true(all);
}

static void rl_release(void *v)
{
    rl_sub *u = v;
    rl_stream_free(u->s);
    free(u->info);
    event_destroy(&u->reached);
}

static const scenario_client rl_client = {
    .name = "rl", .sub_size = sizeof(rl_sub), .run = rl_run, .expect_end = rl_expect_end, .release = rl_release};

static void run_rl(void **state)
{
    scenario_run(*state, &rl_client);
}

/* ---- this client's own cases ---- */

/* 107: cancelled from another thread mid-stream. */
static void test_cancel_from_another_thread(void **state)
{
    (void)state;
    /* Unbounded, and no count of its own: it ends by the cancel. */
    static const scenario sc = {.name = "cancel", .opts = {.interval_ms = 1, .size = 8192, .chunk = 4096},
                                .from = 1, .first = 1, .last = UINT32_MAX - 1};
    harness h;
    scenario_begin(&h, &sc);
    rl_sub u;
    rl_sub_init(&u, &h, &sc);
    u.signal_after = 3;
    rl_sub_start(&u);
    bool reached = event_wait(&u.reached, 20 * T_SEC);
    rl_stream_cancel(u.s); /* also unblocks a stuck call, so the join below is bounded */
    pthread_join(u.th, NULL);
    assert_true(reached);
    expect_result(u.s, u.res, RL_ERR_CANCELLED);
    assert_string_equal(rl_stream_error(u.s), "context canceled");
    assert_true(u.seen.n >= 3);
    seen_expect_run(&u.seen, 1);
    /* Cancellation is sticky. */
    expect_result(u.s, rl_stream_raw_ledgers(u.s, rl_bounded_range(1, 2), on_ledger, &u), RL_ERR_CANCELLED);
    rl_release(&u);
    seen_free(&u.seen);
    scenario_finish(&h, &sc);
}

int main(void)
{
    static const struct CMUnitTest own[] = {
        cmocka_unit_test(test_cancel_from_another_thread),
    };
    return scenario_run_group("test_server_client_e2e", &rl_client, run_rl, own, sizeof own / sizeof own[0]);
}
