/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/sources/rejoin.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <xxhash.h>

#include "common/log.h"

#define READ_BLOCK (64u << 10)

typedef struct rejoin_source {
    cs_source base;
    cs_source *inner;
    cs_ring *ring;
    /* The skips since the last ledger that passed through (episode 0: none). */
    uint32_t first, last;
    uint64_t episode;
    uint64_t skipped; /* over the run */
} rejoin_source;

static void end_episode(rejoin_source *rs)
{
    if (rs->episode == 0)
        return;
    CS_LOG(CS_LOG_INFO, "source re-emitted ledgers the ring holds; skipped them", KV_U("first", rs->first),
           KV_U("last", rs->last), KV_U("ledgers", rs->episode));
    rs->first = rs->last = 0;
    rs->episode = 0;
}

/* Reads the body whole into a hash. Returns 0, or -1 with err (the read's). */
static int hash_body(cs_rejoin_read_fn read, void *arg, uint64_t *len, uint64_t *sum, cs_err *err)
{
    uint8_t *buf = malloc(READ_BLOCK);
    XXH64_state_t *h = XXH64_createState();
    if (!buf || !h) {
        free(buf);
        XXH64_freeState(h);
        return cs_err_set(err, 0, "source: out of memory");
    }
    XXH64_reset(h, 0);
    *len = 0;
    int rc = 0;
    for (;;) {
        ssize_t n = read(arg, buf, READ_BLOCK, err);
        if (n <= 0) {
            rc = n < 0 ? -1 : 0;
            break;
        }
        XXH64_update(h, buf, (size_t)n);
        *len += (uint64_t)n;
    }
    *sum = XXH64_digest(h);
    XXH64_freeState(h);
    free(buf);
    return rc;
}

int cs_rejoin_compare(cs_ring *ring, uint32_t seq, cs_rejoin_read_fn read, void *arg, cs_err *err)
{
    uint32_t oldest, latest;
    bool held = cs_ring_bounds(ring, &oldest, &latest);
    if (held && seq < oldest)
        return cs_err_set(err, 0,
                          "ledger %" PRIu32 " is older than the ring's oldest ledger %" PRIu32
                          ", so it cannot be compared with it",
                          seq, oldest);
    if (!held || seq > latest)
        return cs_err_set(err, 0, "ledger %" PRIu32 " is not in the ring, so it cannot be compared with it", seq);
    cs_ledger_ref *ref;
    cs_err e;
    uint64_t len = 0, sum = 0;
    int got = cs_ring_get(ring, seq, &ref, &e);
    if (got != 0 && e.kind == CS_RING_ERR_CORRUPT) {
        /* A suspect ledger is judged; proven bad, it is a hole now, and asked again. */
        cs_ring_condemn(ring, seq, e.msg);
        got = cs_ring_get(ring, seq, &ref, &e);
    }
    if (got != 0) {
        if (e.kind != CS_RING_ERR_HOLE && e.kind != CS_RING_ERR_IO)
            return cs_err_set(err, 0, "ledger %" PRIu32 " is in the ring but cannot be compared with it: %s", seq,
                              e.msg);
        /* A hole, or a record that cannot be read now: nothing to compare with, and nothing wrong
         * with the source. The ring keeps what it has; the ledger passes as already published. */
        CS_LOG(CS_LOG_WARN, "source re-emitted a ledger the ring cannot compare; skipped it", KV_U("ledger", seq),
               KV_S("reason", e.msg));
        return hash_body(read, arg, &len, &sum, err);
    }
    cs_ledger_record rec = ref->rec;
    cs_ledger_ref_release(ref);
    if (hash_body(read, arg, &len, &sum, err) != 0)
        return -1;
    if (len != rec.len || sum != rec.xxh64)
        return cs_err_set(err, 0,
                          "ledger %" PRIu32 " differs from the ring's: the source sent %" PRIu64
                          " bytes hashing to %016" PRIx64 ", the ring holds %" PRIu64 " bytes hashing to %016" PRIx64,
                          seq, len, sum, rec.len, rec.xxh64);
    return 0;
}

static ssize_t inner_read(void *arg, uint8_t *buf, size_t len, cs_err *err)
{
    cs_source *inner = arg;
    return inner->ops->read(inner, buf, len, err);
}

static int rejoin_next(cs_source *s, cs_emission *em, cs_err *err)
{
    rejoin_source *rs = (rejoin_source *)s;
    rs->inner->reconnecting = s->reconnecting;
    rs->inner->reconnecting_arg = s->reconnecting_arg;
    for (;;) {
        int got = rs->inner->ops->next(rs->inner, em, err);
        if (got != 1) {
            end_episode(rs);
            return got;
        }
        uint32_t oldest, latest;
        if (!cs_ring_bounds(rs->ring, &oldest, &latest) || em->seq > latest) {
            end_episode(rs);
            return 1;
        }
        if (cs_rejoin_compare(rs->ring, em->seq, inner_read, rs->inner, err) != 0) {
            end_episode(rs);
            return -1;
        }
        if (rs->episode++ == 0)
            rs->first = em->seq;
        rs->last = em->seq;
        rs->skipped++;
    }
}

static ssize_t rejoin_read(cs_source *s, uint8_t *buf, size_t len, cs_err *err)
{
    rejoin_source *rs = (rejoin_source *)s;
    return rs->inner->ops->read(rs->inner, buf, len, err);
}

static void rejoin_destroy(cs_source *s)
{
    rejoin_source *rs = (rejoin_source *)s;
    if (!rs)
        return;
    rs->inner->ops->destroy(rs->inner);
    free(rs);
}

static const cs_source_ops rejoin_ops = {
    .next = rejoin_next,
    .read = rejoin_read,
    .destroy = rejoin_destroy,
};

int cs_rejoin_source_new(cs_source **out, cs_source *inner, cs_ring *ring, cs_err *err)
{
    *out = NULL;
    rejoin_source *rs = calloc(1, sizeof *rs);
    if (!rs) {
        inner->ops->destroy(inner);
        return cs_err_set(err, 0, "source: out of memory");
    }
    rs->base.ops = &rejoin_ops;
    rs->inner = inner;
    rs->ring = ring;
    *out = &rs->base;
    return 0;
}

uint64_t cs_rejoin_source_skipped(const cs_source *s)
{
    return ((const rejoin_source *)s)->skipped;
}
