/* SPDX-License-Identifier: Apache-2.0 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "corestreamd/sources/pace.h"
#include "corestreamd/sources/synthetic.h"
#include "support/serverharness.h"

static void *run_server(void *arg)
{
    harness *h = arg;
    h->run_rc = cs_server_run(h->srv, &h->run_err);
    return NULL;
}

/* Prepares the scratch directory and the run's cancellation, which sources are built against. */
void harness_begin(harness *h)
{
    memset(h, 0, sizeof *h);
    assert_int_equal(cs_tmpdir_make(&h->tmp, "e2e"), 0);
    h->dir = h->tmp.path;
    assert_int_equal(cs_cancel_init(&h->cancel), 0);
}

void harness_launch(harness *h, const harness_opts *o, cs_source *src, cs_range range)
{
    cs_ring *ring;
    cs_err err;
    char ringdir[PATH_MAX + 16];
    snprintf(ringdir, sizeof ringdir, "%s/ledgers", h->dir);
    assert_int_equal(cs_ring_open(&ring, ringdir, o->retention ? o->retention : 1000, &err), 0);
    cs_server_config sc = {
        .listen = "127.0.0.1:0",
        .source_name = "synthetic",
        .source = src,
        .range = range,
        .ring = ring,
        .cancel = &h->cancel,
        .chunk_size = o->chunk,
        .compress = o->compress,
        .compress_level = o->compress_level,
        .max_payload = o->max_payload,
        .linger = !o->no_linger,
        .max_connections = o->max_connections,
        .max_connections_per_ip = o->max_connections_per_ip,
        .header_timeout_s = o->header_timeout_s,
        .max_replays = o->max_replays,
        .max_replays_per_ip = o->max_replays_per_ip,
        .auth_tokens = o->auth_tokens,
        .auth_healthz = o->auth_healthz,
        .tls_cert = o->tls_cert,
        .tls_key = o->tls_key,
        .tls_client_ca = o->tls_client_ca,
        .write_timeout_s = o->write_timeout_s,
    };
    assert_int_equal(cs_server_new(&h->srv, &sc, &err), 0);
    assert_int_equal(cs_server_listen(h->srv, &err), 0);
    if (o->run)
        cs_server_set_run(h->srv, o->run);
    const char *colon = strrchr(cs_server_addr(h->srv), ':');
    h->port = atoi(colon + 1);
    assert_int_equal(pthread_create(&h->th, NULL, run_server, h), 0);
}

/* A ledger stream whose first pull waits for the harness's subscribers, then passes through. */
typedef struct awaiting_stream {
    cs_ledger_stream base;
    cs_ledger_stream *inner;
    harness *h;
    int want;
    bool met;
} awaiting_stream;

static int awaiting_pull(cs_ledger_stream *ls, uint32_t seq, const uint8_t **data, size_t *len, cs_err *err)
{
    awaiting_stream *a = (awaiting_stream *)ls;
    int64_t deadline = cs_mono_ns() + 60 * T_SEC;
    while (!a->met) {
        a->met = cs_server_subscribers(a->h->srv) >= a->want;
        if (a->met)
            break;
        if (cs_mono_ns() > deadline)
            return cs_err_set(err, 0, "harness: %d subscribers never came", a->want);
        if (cs_cancel_sleep_until(&a->h->cancel, cs_mono_ns() + T_MS) != 0)
            return cs_err_set(err, CS_ERR_CANCELLED, "harness: cancelled");
    }
    return a->inner->ops->pull(a->inner, seq, data, len, err);
}

static void awaiting_destroy(cs_ledger_stream *ls)
{
    awaiting_stream *a = (awaiting_stream *)ls;
    a->inner->ops->destroy(a->inner);
    free(a);
}

static const cs_ledger_stream_ops k_awaiting_ops = {.pull = awaiting_pull, .destroy = awaiting_destroy};

void harness_start(harness *h, const harness_opts *o)
{
    harness_begin(h);
    cs_range range = cs_counted_range(o->start ? o->start : 1, o->count);
    cs_ledger_stream *ls = cs_synthetic_stream_new(o->size ? o->size : 256, o->compressible, &h->cancel);
    if (o->await_subscribers > 0) {
        awaiting_stream *a = calloc(1, sizeof *a);
        assert_non_null(a);
        *a = (awaiting_stream){.base = {.ops = &k_awaiting_ops}, .inner = ls, .h = h, .want = o->await_subscribers};
        ls = &a->base;
    }
    cs_source *src = cs_paced_source_new(ls, range, o->window_ms * T_MS, o->interval_ms * T_MS, &h->cancel);
    harness_launch(h, o, src, range);
}

int harness_join(harness *h)
{
    if (!h->joined) {
        pthread_join(h->th, NULL);
        h->joined = true;
    }
    return h->run_rc;
}

void harness_stop(harness *h)
{
    cs_server_stop(h->srv);
    harness_join(h);
    cs_server_free(h->srv);
    cs_cancel_destroy(&h->cancel);
    cs_tmpdir_remove(&h->tmp);
}

