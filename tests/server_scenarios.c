/* SPDX-License-Identifier: Apache-2.0 */
/* The server's end-to-end scenarios (server_scenarios.h): the table, and what every client's run
 * of one checks alike. Numbers in comments are the prototype's case numbers. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/synthetic.h"
#include "server_scenarios.h"
#include "support/wait.h"
#include "support/wsclient.h"

/* ---- server-side steps ---- */

/* 103: the source fails on its first ledger, so nothing is retained. */
static void nothing_retained(harness *h)
{
    assert_false(cs_server_wait_retained(h->srv, 1, 10 * T_SEC)); /* ends without retaining it */
    char body[512];
    assert_int_equal(cs_http_get("127.0.0.1", h->port, "/healthz", WAIT_MS, body, sizeof body, NULL, 0), 200);
    assert_non_null(strstr(body, "\"oldest\":0,\"latest\":0"));
}

static void run_failed_on_ledger_1(harness *h)
{
    cs_server_stop(h->srv);
    assert_int_equal(harness_join(h), -1);
    assert_non_null(strstr(h->run_err.msg, "ledger 1"));
    assert_non_null(strstr(h->run_err.msg, "4096"));
    assert_non_null(strstr(h->run_err.msg, "128"));
}

static void stop_server(harness *h)
{
    cs_server_stop(h->srv);
}

static void run_ended_cleanly(harness *h)
{
    assert_int_equal(harness_join(h), 0);
}

/* 10: the run ended by itself, and the listener went with it. */
static void listener_gone(harness *h)
{
    assert_int_equal(harness_join(h), 0);
    char body[128];
    assert_true(cs_http_get("127.0.0.1", h->port, "/healthz", 2000, body, sizeof body, NULL, 0) <= 0);
}

/* ---- the table ---- */

#define TRUNCATED "remoteledger: stream ended before the requested range was delivered: "
#define BEHIND "remoteledger: requested ledger is behind the server's retention: "
#define CLEAN_END(reason) .close_code = 1000, .close_reason = reason, .rl = RL_OK, .rl_error = ""
#define SOURCE_ENDED_SHORT(got, to)                                                                      \
    .close_code = 1001, .close_reason = "source ended before range complete", .rl = RL_ERR_TRUNCATED,    \
    .rl_error = TRUNCATED "got through ledger " #got ", requested through " #to
#define TOO_FAR_BEHIND(req, old, lat)                                                                   \
    .close_code = 4001, .close_reason = "too far behind: oldest=" #old " latest=" #lat,                \
    .rl = RL_ERR_TOO_FAR_BEHIND, .rl_error = BEHIND "requested " #req ", server retains [" #old "," #lat "]", \
    .tfb_requested = req, .tfb_oldest = old, .tfb_latest = lat
/* Both meet ledger 1 live; the stall lasts until the ring holds the last ledger, which a busy
 * machine's nice-19 ring writer can stretch past the default write timeout. */
#define STALL_OPTS .await_subscribers = 2, .write_timeout_s = 300
#define COMPRESSED_OPTS                                                                                  \
    .count = 6, .size = 24000, .chunk = 4096, .compress = true, .compressible = true, .interval_ms = 2

const scenario scenarios[] = {
    /* 96: replays carry no stamps. */
    {.name = "bounded_replay_from_retention", .opts = {.count = 10, .size = 512}, .retained = 10,
     .from = 3, .to = 7, .first = 3, .last = 7, .stamps = STAMPS_NONE, CLEAN_END("")},
    /* 97 */
    {.name = "replay_to_live_handoff", .opts = {.interval_ms = 2, .size = 2048, .chunk = 4096}, .retained = 5,
     .from = 1, .to = 25, .first = 1, .last = 25, CLEAN_END("")},
    /* 98 */
    {.name = "too_far_behind", .opts = {.count = 10, .retention = 3}, .retained = 10, .from = 1, .to = 10,
     .first = 1, .last = 0, TOO_FAR_BEHIND(1, 8, 10)},
    /* 99: the source ended (1001) before the bounded range was complete. */
    {.name = "bounded_range_beyond_source_is_truncated", .opts = {.count = 5}, .retained = 5, .from = 1,
     .to = 20, .first = 1, .last = 5, SOURCE_ENDED_SHORT(5, 20)},
    /* 100: a subscriber stranded mid-stream when a paced source ends short of its range. */
    {.name = "stranded_mid_stream_is_truncated", .opts = {.count = 6, .interval_ms = 5}, .from = 1, .to = 30,
     .first = 1, .last = 6, SOURCE_ENDED_SHORT(6, 30)},
    /* 101 */
    {.name = "unbounded_ends_cleanly_when_source_ends", .opts = {.count = 5, .interval_ms = 5}, .from = 1,
     .first = 1, .last = 5, CLEAN_END("source ended")},
    /* 102: serving 4294967295 leaves the cursor at 2^32 instead of wrapping. */
    {.name = "replay_terminates_at_the_sequence_ceiling", .opts = {.start = 4294967293u, .count = 3},
     .from = 4294967293u, .first = 4294967293u, .last = 4294967295u, CLEAN_END("source ended")},
    /* 103: a subscriber of a failed source learns it failed, distinctly from a clean end. */
    {.name = "source_loop_rejects_an_oversized_ledger", .opts = {.count = 3, .size = 4096, .max_payload = 128},
     .before = nothing_retained, .from = 1, .first = 1, .last = 0, .close_code = 1011,
     .close_reason = "source failed", .rl = RL_ERR_READ,
     .rl_error = "remoteledger: read: failed to get reader: received close frame: "
                 "status = StatusInternalError and reason = \"source failed\"",
     .after = run_failed_on_ledger_1},
    /* 104: a ledger missing inside the bounds costs only itself (docs/RING.md, failure table:
     * "removed while retained"): the ones before it are served, then a close names the hole. */
    {.name = "a_ledger_missing_from_the_ring_is_a_hole", .opts = {.count = 5}, .retained = 5, .unlink = 3,
     .from = 1, .to = 5, .first = 1, .last = 2, .close_code = 4002, .close_reason = "missing from the ring: first=3 last=3",
     .rl = RL_ERR_HOLE, .rl_error = "remoteledger: ledgers 3 to 3 are missing from the server's ring (requested 3)"},
    /* 105 */
    {.name = "start_ahead_of_retention_waits_for_live", .opts = {.interval_ms = 1}, .from = 20, .to = 24,
     .first = 20, .last = 24, CLEAN_END("")},
    /* 106: from the tip; the client stops after three. */
    {.name = "tip_subscription_skips_replay", .opts = {.interval_ms = 2}, .retained = 4, .tip = true,
     .take = 3, .above = 4, .rl = RL_OK, .rl_error = ""},
    /* 108: a stalled subscriber catches up from the ring without hurting a healthy one. */
    {.name = "stalled_subscriber_catches_up",
     .opts = {.count = 80, .interval_ms = 1, .size = 256 * 1024, .chunk = 64 * 1024, .retention = 200,
              STALL_OPTS},
     .stall = true, .from = 1, .to = 80, .first = 1, .last = 80, .stamps = STAMPS_SOME_REPLAYED,
     CLEAN_END("")},
    /* 116: a subscriber still inside a live flow when the next BEGIN comes is abandoned, and gets
     * that ledger again complete and stampless from the ring, dropping its partial assembly.
     * 8 MiB ledgers cannot fit in socket buffers, so the stall is always mid-ledger. */
    {.name = "slow_subscriber_is_abandoned_and_recovers_from_the_ring",
     .opts = {.count = 5, .window_ms = 50, .size = 8 << 20, .retention = 100, STALL_OPTS}, .stall = true,
     .from = 1, .to = 5, .first = 1, .last = 5, .stamps = STAMPS_SOME_REPLAYED, .redelivers = true,
     CLEAN_END("")},
    /* 110 */
    {.name = "many_subscribers_share_the_stream",
     .opts = {.count = 50, .interval_ms = 1, .window_ms = 2, .size = 4096, .chunk = 4096},
     .subscribers = 8, .from = 1, .to = 50, .first = 1, .last = 50, .stamps = STAMPS_SOME_LIVE,
     CLEAN_END("")},
    /* 111 */
    {.name = "large_ledger_round_trips", .opts = {.count = 2, .size = 12 << 20}, .from = 1, .to = 2,
     .first = 1, .last = 2, CLEAN_END("")},
    /* 112 */
    {.name = "completed_flow_served_to_late_arrival_is_stampless", .opts = {.count = 5}, .retained = 5,
     .from = 5, .to = 5, .first = 5, .last = 5, .stamps = STAMPS_NONE, CLEAN_END("")},
    /* 115: only a flow already complete at connect time is stampless. */
    {.name = "live_delivery_carries_flow_stamps",
     .opts = {.interval_ms = 100, .window_ms = 30, .size = 64 * 1024, .chunk = 4096}, .tip = true,
     .take = 3, .chunks = 16, .stamps = STAMPS_LIVE, .emit_min_ms = 15, .emit_max_ms = 300,
     .rl = RL_OK, .rl_error = ""},
    /* 63: compressed live delivery, byte-exact, in ceil(24000 / 4096) chunks. */
    {.name = "compressed_flow_round_trips", .opts = {COMPRESSED_OPTS}, .from = 1, .to = 6, .first = 1,
     .last = 6, .chunks = 6, .zstd = true, CLEAN_END("")},
    /* 65: ring replays are compressed too. */
    {.name = "compressed_ring_replay_round_trips", .opts = {COMPRESSED_OPTS}, .retained = 6, .from = 1,
     .to = 3, .first = 1, .last = 3, .chunks = 6, .zstd = true, .stamps = STAMPS_NONE, CLEAN_END("")},
    /* Shutdown sends every subscriber 1001 `server shutting down`: an unbounded stream's clean end. */
    {.name = "stop_closes_subscribers_with_1001", .opts = {.interval_ms = 1000}, .from = 1, .act_after = 1,
     .act = stop_server, .first = 1, .last = 1, .close_code = 1001, .close_reason = "server shutting down",
     .rl = RL_OK, .rl_error = "", .after = run_ended_cleanly},
    /* 10: a bounded source ends the run (without linger) after the close frames went out. */
    {.name = "run_stops_when_the_source_ends", .opts = {.count = 3, .interval_ms = 20, .no_linger = true},
     .from = 1, .first = 1, .last = 3, CLEAN_END("source ended"), .after = listener_gone},
};
const size_t n_scenarios = sizeof scenarios / sizeof scenarios[0];

/* ---- what a subscriber saw ---- */

static uint32_t expected_count(const scenario *sc)
{
    if (sc->take)
        return sc->take;
    return sc->last ? (uint32_t)((uint64_t)sc->last - sc->first + 1) : 0;
}

size_t scenario_size(const scenario *sc)
{
    return sc->opts.size ? (size_t)sc->opts.size : 256; /* the harness's default */
}

void seen_init(seen *s, const scenario *sc)
{
    memset(s, 0, sizeof *s);
    s->sc = sc;
    s->want = malloc(scenario_size(sc));
    if (!s->want)
        abort();
}

void seen_add(seen *s, const uint8_t *data, seen_ledger l)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->l = realloc(s->l, s->cap * sizeof *s->l);
        if (!s->l)
            abort();
    }
    size_t size = scenario_size(s->sc);
    l.exact = l.len == size;
    if (l.exact) {
        memset(s->want, 0, size);
        cs_synthetic_fill(s->want, size, l.seq, s->sc->opts.compressible);
        l.exact = memcmp(data, s->want, size) == 0;
    }
    s->l[s->n++] = l;
}

bool seen_done(const seen *s)
{
    if (s->sc->take)
        return s->n >= s->sc->take;
    return s->n > expected_count(s->sc);
}

void seen_expect_run(const seen *s, uint32_t first)
{
    for (uint32_t k = 0; k < s->n; k++) {
        const seen_ledger *l = &s->l[k];
        if (l->seq != (uint64_t)first + k)
            fail_msg("ledger %u: got sequence %u, want %llu", k, l->seq, (unsigned long long)first + k);
        if (!l->exact)
            fail_msg("ledger %u: %zu bytes, not its synthetic payload of %zu", l->seq, l->len,
                     scenario_size(s->sc));
        assert_true(l->received > 0);
    }
}

void seen_free(seen *s)
{
    free(s->l);
    free(s->want);
}

/* ---- checks ---- */

static void expect_stamps(const scenario *sc, const seen_ledger *l, uint32_t k)
{
    if (l->discarded)
        assert_int_equal(l->emit_end, 0); /* a redelivery replacing a partial is stampless */
    if (sc->stamps == STAMPS_NONE) {
        assert_int_equal(l->emit_start, 0);
        assert_int_equal(l->emit_end, 0);
    } else if (sc->stamps == STAMPS_LIVE) {
        if (l->emit_end == 0) {
            assert_int_equal(k, 0); /* only a flow already complete at connect time is stampless */
            return;
        }
        int64_t t_emit = l->emit_end - l->emit_start;
        if (t_emit < sc->emit_min_ms * T_MS || t_emit > sc->emit_max_ms * T_MS)
            fail_msg("ledger %u: emit window %lld ns", l->seq, (long long)t_emit);
        assert_true(l->received - l->emit_start >= t_emit);
    }
}

static void expect_ledgers(const scenario *sc, const seen *s)
{
    uint32_t want = expected_count(sc);
    if (s->n != want)
        fail_msg("%u ledgers, want %u", s->n, want);
    uint32_t first = sc->first;
    if (sc->tip && s->n > 0) {
        first = s->l[0].seq;
        assert_true(first > sc->above);
    }
    seen_expect_run(s, first);
    for (uint32_t k = 0; k < s->n; k++) {
        if (sc->chunks)
            assert_int_equal(s->l[k].chunks, sc->chunks);
        expect_stamps(sc, &s->l[k], k);
    }
}

static uint32_t count_stamped(const seen *s)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < s->n; i++)
        if (s->l[i].emit_end != 0)
            k++;
    return k;
}

static const seen *nth(const seen *subs, int i, size_t stride)
{
    return (const seen *)((const char *)subs + (size_t)i * stride);
}

void scenario_check(harness *h, const scenario *sc, const seen *subs, int n, size_t stride)
{
    uint32_t stamped = 0;
    for (int i = 0; i < n; i++) {
        expect_ledgers(sc, nth(subs, i, stride));
        stamped += count_stamped(nth(subs, i, stride));
    }
    if (sc->stamps == STAMPS_SOME_LIVE)
        assert_true(stamped > 0);
    if (sc->stamps == STAMPS_SOME_REPLAYED)
        assert_true(count_stamped(subs) < subs->n);
    if (sc->redelivers) {
        /* The stalled subscriber got every ledger (checked above) and some of them again from the
         * ring, whole and stampless. How it got there depends on where the socket buffers were
         * full when the next BEGIN came: inside a ledger, the live flow is abandoned (counted) and
         * the partial dropped; at a ledger's first byte, abandoned with nothing to drop; between
         * ledgers on a busy machine, it has fallen behind and catches up from the ring without an
         * abandon. A partial, when there is one, is checked to come back stampless. */
        unsigned discarded = 0;
        for (uint32_t k = 0; k < subs->n; k++) {
            discarded += subs->l[k].discarded;
            if (subs->l[k].discarded)
                assert_int_equal(subs->l[k].emit_end, 0);
        }
        unsigned long long abandons = (unsigned long long)cs_server_live_abandons(h->srv);
        uint32_t stampless = subs->n - count_stamped(subs);
        if (stampless == 0 || (discarded > 0 && abandons == 0))
            fail_msg("no redelivery: the server abandoned %llu live flows; the stalled subscriber got %u of its %u "
                     "ledgers stampless and discarded %u partials",
                     abandons, stampless, subs->n, discarded);
    }
}

/* ---- running ---- */

int scenario_subscribers(const scenario *sc)
{
    if (sc->stall)
        return 2;
    return sc->subscribers ? sc->subscribers : 1;
}

void scenario_begin(harness *h, const scenario *sc)
{
    harness_start(h, &sc->opts);
    if (sc->retained)
        assert_true(cs_server_wait_retained(h->srv, sc->retained, (int64_t)WAIT_MS * T_MS));
    if (sc->unlink) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/ledgers/ledger-%u.xdr", h->dir, sc->unlink);
        assert_int_equal(unlink(path), 0);
    }
    if (sc->before)
        sc->before(h);
}

bool scenario_await_stall_end(harness *h, const scenario *sc)
{
    return cs_server_wait_retained(h->srv, sc->opts.count, SCENARIO_STALL_NS);
}

void scenario_finish(harness *h, const scenario *sc)
{
    if (sc->after)
        sc->after(h);
    harness_stop(h);
}

void scenario_run(const scenario *sc, const scenario_client *client)
{
    harness h;
    scenario_begin(&h, sc);
    int n = scenario_subscribers(sc);
    assert_true(n <= SCENARIO_MAX_SUBSCRIBERS);
    char *subs = calloc((size_t)n, client->sub_size);
    assert_non_null(subs);
    client->run(&h, sc, subs, n);
    for (int i = 0; i < n; i++)
        client->expect_end(subs + (size_t)i * client->sub_size);
    scenario_check(&h, sc, (const seen *)subs, n, client->sub_size);
    for (int i = 0; i < n; i++) {
        client->release(subs + (size_t)i * client->sub_size);
        seen_free((seen *)(subs + (size_t)i * client->sub_size));
    }
    free(subs);
    scenario_finish(&h, sc);
}

int scenario_run_group(const char *group, const scenario_client *client, void (*run)(void **state),
                       const struct CMUnitTest *own, size_t n_own)
{
    FILE *null = fopen("/dev/null", "w");
    cs_log_init(null, CS_LOG_ERROR + 4);
    size_t n = n_scenarios + n_own;
    struct CMUnitTest *tests = calloc(n, sizeof *tests);
    char(*names)[128] = calloc(n_scenarios, sizeof *names);
    assert_non_null(tests);
    assert_non_null(names);
    for (size_t i = 0; i < n_scenarios; i++) {
        snprintf(names[i], sizeof names[i], "%s/%s", scenarios[i].name, client->name);
        tests[i] = (struct CMUnitTest){.name = names[i], .test_func = run, .initial_state = (void *)&scenarios[i]};
    }
    memcpy(tests + n_scenarios, own, n_own * sizeof *own);
    const char *only = getenv("CS_TEST_FILTER");
    if (only && *only)
        cmocka_set_test_filter(only);
    int rc = _cmocka_run_group_tests(group, tests, n, NULL, NULL);
    free(names);
    free(tests);
    fclose(null);
    return rc;
}
