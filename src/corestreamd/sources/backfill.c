/* Filling a gap from a lake: see backfill.h. */
#include "corestreamd/sources/backfill.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "corestreamd/lake/lakereader.h"
#include "corestreamd/sources/pipe/xdrwalk.h"

#define FETCH_TRIES 3
#define FETCH_PAUSE_NS (1000 * 1000000LL)

typedef struct backfill_source {
    cs_source base;
    cs_source *inner;
    cs_ring *ring;
    cs_cancel *cancel;
    char *url;
    cs_lake_reader *lake; /* opened at the first gap */
    /* The gap being filled: the source's emission waits while next_fill..fill_end go first. */
    cs_emission held;
    bool holding;
    uint32_t gap_first, next_fill, fill_end;
    /* The filled ledger being emitted: its batch's bytes, the ledger's part of them. */
    bool serving;
    uint8_t *batch;
    size_t off, end;
    uint64_t filled; /* over the run */
} backfill_source;

/* Ledger seq from the lake into bs->batch[off..end). 0, or -1 with err. */
static int fetch_once(backfill_source *bs, uint32_t seq, cs_err *err)
{
    if (!bs->lake) {
        cs_lake_reader_opts o = {.url = bs->url};
        if (cs_lake_reader_open(&bs->lake, &o, err) != 0)
            return -1;
    }
    const cs_lake_layout *l = cs_lake_reader_layout(bs->lake);
    if (l->ledgers_per_batch != 1)
        return cs_err_set(err, CS_LAKE_READ_ERR_FORMAT,
                          "lake: %s holds %" PRIu32 " ledgers per batch; a backfill source must hold one", bs->url,
                          l->ledgers_per_batch);
    cs_lake_batch b;
    uint8_t *xdr;
    size_t len;
    if (cs_lake_reader_get(bs->lake, seq, &b, &xdr, &len, err) != 0)
        return -1;
    uint32_t named = 0;
    if (cs_xdr_ledger_seq(xdr + 12, len - 12, &named, err) != 0) {
        cs_err_prefix(err, "lake: %s: ledger %" PRIu32 ": ", bs->url, seq);
        err->kind = CS_LAKE_READ_ERR_FORMAT;
    } else if (named != seq) {
        cs_err_set(err, CS_LAKE_READ_ERR_FORMAT, "lake: %s: the object of ledger %" PRIu32 " holds ledger %" PRIu32,
                   bs->url, seq, named);
    }
    if (err->msg[0]) {
        free(xdr);
        return -1;
    }
    free(bs->batch);
    bs->batch = xdr;
    bs->off = 12;
    bs->end = len;
    return 0;
}

/* fetch_once, tried again a second later while the lake's failure may pass. */
static int fetch(backfill_source *bs, uint32_t seq, cs_err *err)
{
    for (int tries = 1;; tries++) {
        cs_err_clear(err);
        if (fetch_once(bs, seq, err) == 0)
            return 0;
        if (err->kind != CS_LAKE_READ_ERR_IO || tries == FETCH_TRIES ||
            cs_cancel_sleep_until(bs->cancel, cs_mono_ns() + FETCH_PAUSE_NS) != 0)
            return -1;
    }
}

/* The source's emission that waited behind the gap; past an unfilled part when some was filled. */
static int release_held(backfill_source *bs, cs_emission *em, bool short_of_gap)
{
    *em = bs->held;
    if (short_of_gap && bs->next_fill > bs->gap_first)
        em->after_gap = true;
    bs->holding = false;
    bs->serving = false;
    return 1;
}

static int fill_next(backfill_source *bs, cs_emission *em)
{
    if (bs->next_fill > bs->fill_end) {
        CS_LOG(CS_LOG_INFO, "gap filled from the backfill source", KV_S("from", bs->url), KV_U("first", bs->gap_first),
               KV_U("last", bs->fill_end), KV_U("ledgers", (uint64_t)bs->fill_end - bs->gap_first + 1));
        return release_held(bs, em, false);
    }
    cs_err e = {0};
    if (fetch(bs, bs->next_fill, &e) != 0) {
        CS_LOG(CS_LOG_WARN, "gap not filled: the backfill source could not give a ledger", KV_S("from", bs->url),
               KV_U("ledger", bs->next_fill), KV_S("error", e.msg));
        return release_held(bs, em, true);
    }
    *em = (cs_emission){.seq = bs->next_fill, .declared_size = bs->end - bs->off};
    bs->next_fill++;
    bs->filled++;
    bs->serving = true;
    return 1;
}

static int backfill_next(cs_source *s, cs_emission *em, cs_err *err)
{
    backfill_source *bs = (backfill_source *)s;
    bs->inner->reconnecting = s->reconnecting;
    bs->inner->reconnecting_arg = s->reconnecting_arg;
    if (bs->holding)
        return fill_next(bs, em);
    bs->serving = false;
    int got = bs->inner->ops->next(bs->inner, em, err);
    uint32_t oldest, latest;
    if (got != 1 || !cs_ring_bounds(bs->ring, &oldest, &latest) || em->seq <= (uint64_t)latest + 1)
        return got;
    bs->held = *em;
    bs->holding = true;
    bs->gap_first = bs->next_fill = latest + 1;
    bs->fill_end = em->seq - 1;
    CS_LOG(CS_LOG_INFO, "filling a gap from the backfill source", KV_S("from", bs->url), KV_U("first", bs->gap_first),
           KV_U("last", bs->fill_end));
    return fill_next(bs, em);
}

static ssize_t backfill_read(cs_source *s, uint8_t *buf, size_t len, cs_err *err)
{
    backfill_source *bs = (backfill_source *)s;
    if (!bs->serving)
        return bs->inner->ops->read(bs->inner, buf, len, err);
    size_t n = bs->end - bs->off < len ? bs->end - bs->off : len;
    memcpy(buf, bs->batch + bs->off, n);
    bs->off += n;
    return (ssize_t)n;
}

static void backfill_destroy(cs_source *s)
{
    backfill_source *bs = (backfill_source *)s;
    if (!bs)
        return;
    bs->inner->ops->destroy(bs->inner);
    cs_lake_reader_free(bs->lake);
    free(bs->batch);
    free(bs->url);
    free(bs);
}

static const cs_source_ops backfill_ops = {
    .next = backfill_next,
    .read = backfill_read,
    .destroy = backfill_destroy,
};

int cs_backfill_source_new(cs_source **out, cs_source *inner, cs_ring *ring, const char *url, cs_cancel *cancel,
                           cs_err *err)
{
    *out = NULL;
    backfill_source *bs = calloc(1, sizeof *bs);
    if (!bs || !(bs->url = strdup(url))) {
        free(bs);
        inner->ops->destroy(inner);
        return cs_err_set(err, 0, "source: out of memory");
    }
    bs->base.ops = &backfill_ops;
    bs->inner = inner;
    bs->ring = ring;
    bs->cancel = cancel;
    *out = &bs->base;
    return 0;
}

uint64_t cs_backfill_source_filled(const cs_source *s)
{
    return ((const backfill_source *)s)->filled;
}
