/* SPDX-License-Identifier: Apache-2.0 */
/* A gap's ledgers from a SEP-54 lake: see backfill_from.h. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "corestreamd/lake/lakereader.h"
#include "corestreamd/sources/backfill_from.h"

#define FETCH_TRIES 3
#define FETCH_PAUSE_NS (1000 * 1000000LL)

typedef struct bf_lake {
    cs_bf_from base;
    char *url, *token, *ca_file; /* token, ca_file: NULL for none */
    cs_sig_keyset *keys;         /* --trusted-keys: the .sig objects checked; NULL: not */
    cs_sig_chain chain;          /* the gap's signatures so far */
    cs_cancel *cancel;
    cs_lake_reader *lake; /* opened at the first gap */
    uint8_t *batch;       /* the last object's LedgerCloseMetaBatch */
} bf_lake;

/* Ledger seq's batch into l->batch. 0, or -1 with err (its kind the lake reader's). */
static int fetch_once(bf_lake *l, uint32_t seq, size_t *len, cs_err *err)
{
    if (!l->lake) {
        cs_lake_reader_opts o = {.url = l->url, .bearer_token = l->token, .ca_file = l->ca_file};
        if (cs_lake_reader_open(&l->lake, &o, err) != 0)
            return -1;
    }
    const cs_lake_layout *lay = cs_lake_reader_layout(l->lake);
    if (lay->ledgers_per_batch != 1)
        return cs_err_set(err, CS_LAKE_READ_ERR_FORMAT,
                          "lake: %s holds %" PRIu32 " ledgers per batch; a backfill source must hold one", l->url,
                          lay->ledgers_per_batch);
    cs_lake_batch b;
    uint8_t *xdr;
    if (cs_lake_reader_get(l->lake, seq, &b, &xdr, len, err) != 0)
        return -1;
    free(l->batch);
    l->batch = xdr;
    return 0;
}

static int lake_begin(cs_bf_from *f, uint32_t first, uint32_t last, cs_err *err)
{
    (void)first, (void)last, (void)err;
    bf_lake *l = (bf_lake *)f;
    l->chain = (cs_sig_chain){0};
    return 0;
}

/* fetch_once, tried again a second later while the lake's failure may pass. The batch's one
 * ledger follows its 12-byte header (start, end, count; checked by the reader). */
static int lake_get(cs_bf_from *f, uint32_t seq, const uint8_t **ledger, size_t *len, cs_err *err)
{
    bf_lake *l = (bf_lake *)f;
    for (int tries = 1;; tries++) {
        cs_err_clear(err);
        size_t n;
        if (fetch_once(l, seq, &n, err) == 0 &&
            (!l->keys || cs_lake_reader_check_sig(l->lake, l->keys, &l->chain, seq, l->batch + 12, n - 12, err) == 0)) {
            *ledger = l->batch + 12;
            *len = n - 12;
            return 0;
        }
        if (err->kind != CS_LAKE_READ_ERR_IO || tries == FETCH_TRIES ||
            cs_cancel_sleep_until(l->cancel, cs_mono_ns() + FETCH_PAUSE_NS) != 0)
            return -1;
    }
}

static void lake_end(cs_bf_from *f)
{
    bf_lake *l = (bf_lake *)f;
    free(l->batch);
    l->batch = NULL;
}

static void lake_destroy(cs_bf_from *f)
{
    bf_lake *l = (bf_lake *)f;
    cs_lake_reader_free(l->lake);
    cs_sig_keyset_free(l->keys);
    free(l->batch);
    free(l->url);
    free(l->token);
    free(l->ca_file);
    free(l);
}

static const cs_bf_from_ops lake_ops = {
    .begin = lake_begin,
    .get = lake_get,
    .end = lake_end,
    .destroy = lake_destroy,
};

/* A copy of s, or NULL for none; false when out of memory. */
static bool copy_opt(const char *s, char **out)
{
    *out = s && *s ? strdup(s) : NULL;
    return !(s && *s) || *out;
}

int cs_bf_lake_new(cs_bf_from **out, const cs_backfill_opts *o, const char *token, cs_err *err)
{
    *out = NULL;
    bf_lake *l = calloc(1, sizeof *l);
    if (!l)
        return cs_err_set(err, 0, "source: out of memory");
    l->base.ops = &lake_ops;
    if (!(l->url = strdup(o->url)) || !copy_opt(token, &l->token) || !copy_opt(o->ca_file, &l->ca_file)) {
        lake_destroy(&l->base);
        return cs_err_set(err, 0, "source: out of memory");
    }
    if (o->trusted_keys && *o->trusted_keys && cs_sig_keyset_load(o->trusted_keys, &l->keys, err) != 0) {
        lake_destroy(&l->base);
        return -1;
    }
    l->cancel = o->cancel;
    *out = &l->base;
    return 0;
}
