/* SPDX-License-Identifier: Apache-2.0 */
/* Filling a gap from a lake or a peer: see backfill.h. */
#define _DEFAULT_SOURCE /* explicit_bzero */
#include "corestreamd/sources/backfill.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/secretfile.h"
#include "corestreamd/sources/backfill_from.h"
#include "corestreamd/sources/pipe/xdrwalk.h"

typedef struct backfill_source {
    cs_source base;
    cs_source *inner;
    cs_ring *ring;
    char *url;
    cs_bf_from *from;
    /* The gap being filled: the source's emission waits while next_fill..fill_end go first. */
    cs_emission held;
    bool holding;
    uint32_t gap_first, next_fill, fill_end;
    /* The filled ledger being emitted, borrowed from `from`, and how much of it has been read. */
    bool serving;
    const uint8_t *ledger;
    size_t off, end;
    uint64_t filled; /* over the run */
} backfill_source;

/* Ledger seq from the backfill source, checked to name its own sequence. 0, or -1 with err. */
static int fetch(backfill_source *bs, uint32_t seq, cs_err *err)
{
    const uint8_t *p;
    size_t n;
    if (bs->from->ops->get(bs->from, seq, &p, &n, err) != 0)
        return -1;
    uint32_t named = 0;
    if (cs_xdr_ledger_seq(p, n, &named, err) != 0)
        return cs_err_prefix(err, "ledger %" PRIu32 ": ", seq);
    if (named != seq)
        return cs_err_set(err, 0, "the ledger given for %" PRIu32 " is ledger %" PRIu32, seq, named);
    bs->ledger = p;
    bs->off = 0;
    bs->end = n;
    return 0;
}

/* The source's emission that waited behind the gap; past an unfilled part when some was filled. */
static int release_held(backfill_source *bs, cs_emission *em, bool short_of_gap)
{
    *em = bs->held;
    if (short_of_gap && bs->next_fill > bs->gap_first)
        em->after_gap = true;
    bs->holding = false;
    bs->serving = false;
    bs->from->ops->end(bs->from);
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
    *em = (cs_emission){.seq = bs->next_fill, .declared_size = bs->end};
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
    cs_err e = {0};
    if (bs->from->ops->begin(bs->from, bs->gap_first, bs->fill_end, &e) != 0) {
        CS_LOG(CS_LOG_WARN, "gap not filled: the backfill source could not give a ledger", KV_S("from", bs->url),
               KV_U("ledger", bs->next_fill), KV_S("error", e.msg));
        return release_held(bs, em, true);
    }
    return fill_next(bs, em);
}

static ssize_t backfill_read(cs_source *s, uint8_t *buf, size_t len, cs_err *err)
{
    backfill_source *bs = (backfill_source *)s;
    if (!bs->serving)
        return bs->inner->ops->read(bs->inner, buf, len, err);
    size_t n = bs->end - bs->off < len ? bs->end - bs->off : len;
    memcpy(buf, bs->ledger + bs->off, n);
    bs->off += n;
    return (ssize_t)n;
}

static void backfill_destroy(cs_source *s)
{
    backfill_source *bs = (backfill_source *)s;
    if (!bs)
        return;
    bs->inner->ops->destroy(bs->inner);
    cs_bf_from_destroy(bs->from);
    free(bs->url);
    free(bs);
}

static const cs_source_ops backfill_ops = {
    .next = backfill_next,
    .read = backfill_read,
    .destroy = backfill_destroy,
};

static bool is_peer(const char *url)
{
    return strncmp(url, "ws://", 5) == 0 || strncmp(url, "wss://", 6) == 0;
}

int cs_backfill_source_new(cs_source **out, cs_source *inner, cs_ring *ring, const cs_backfill_opts *o, cs_err *err)
{
    *out = NULL;
    backfill_source *bs = calloc(1, sizeof *bs);
    if (!bs || !(bs->url = strdup(o->url))) {
        free(bs);
        inner->ops->destroy(inner);
        return cs_err_set(err, 0, "source: out of memory");
    }
    bs->base.ops = &backfill_ops;
    bs->inner = inner;
    bs->ring = ring;
    char token[4096] = "";
    int rc = 0;
    if (o->token_file && *o->token_file && cs_read_secret_line(o->token_file, token, sizeof token, err) != 0)
        rc = cs_err_prefix(err, "--backfill-token-file %s: ", o->token_file);
    else
        rc = is_peer(o->url) ? cs_bf_peer_new(&bs->from, o, token, err) : cs_bf_lake_new(&bs->from, o, token, err);
    explicit_bzero(token, sizeof token);
    if (rc != 0) {
        backfill_destroy(&bs->base);
        return -1;
    }
    *out = &bs->base;
    return 0;
}

uint64_t cs_backfill_source_filled(const cs_source *s)
{
    return ((const backfill_source *)s)->filled;
}
