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
    XXH64_state_t *hash;
    uint8_t *buf; /* READ_BLOCK bytes: a skipped ledger's body, read and hashed */
    /* The skips since the last ledger that passed through (first 0: none). */
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

/* Reads the current emission's body whole into the hash. Returns 0, or -1 with err (the inner
 * source's, cancellation included). */
static int hash_body(rejoin_source *rs, uint64_t *len, uint64_t *sum, cs_err *err)
{
    XXH64_reset(rs->hash, 0);
    *len = 0;
    for (;;) {
        ssize_t n = rs->inner->ops->read(rs->inner, rs->buf, READ_BLOCK, err);
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        XXH64_update(rs->hash, rs->buf, (size_t)n);
        *len += (uint64_t)n;
    }
    *sum = XXH64_digest(rs->hash);
    return 0;
}

/* seq is one the ring holds: 1 when the source's copy is the ring's (skip it), -1 with err when it
 * differs or cannot be read. */
static int compare(rejoin_source *rs, uint32_t seq, cs_err *err)
{
    cs_ledger_ref *ref;
    cs_err e;
    if (cs_ring_get(rs->ring, seq, &ref, &e) != 0)
        return cs_err_set(err, 0, "ledger %" PRIu32 " is in the ring but cannot be compared with it: %s", seq, e.msg);
    cs_ledger_record rec = ref->rec;
    cs_ledger_ref_release(ref);
    uint64_t len, sum;
    if (hash_body(rs, &len, &sum, err) != 0)
        return -1;
    if (len != rec.len || sum != rec.xxh64)
        return cs_err_set(err, 0,
                          "ledger %" PRIu32 " differs from the ring's: the source sent %" PRIu64
                          " bytes hashing to %016" PRIx64 ", the ring holds %" PRIu64 " bytes hashing to %016" PRIx64,
                          seq, len, sum, rec.len, rec.xxh64);
    return 1;
}

static int rejoin_next(cs_source *s, cs_emission *em, cs_err *err)
{
    rejoin_source *rs = (rejoin_source *)s;
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
        if (em->seq < oldest) {
            end_episode(rs);
            return cs_err_set(err, 0,
                              "ledger %" PRIu32 " is older than the ring's oldest ledger %" PRIu32
                              ", so it cannot be compared with it",
                              em->seq, oldest);
        }
        if (compare(rs, em->seq, err) < 0) {
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
    XXH64_freeState(rs->hash);
    free(rs->buf);
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
    if (rs) {
        rs->hash = XXH64_createState();
        rs->buf = malloc(READ_BLOCK);
    }
    if (!rs || !rs->hash || !rs->buf) {
        if (rs) {
            XXH64_freeState(rs->hash);
            free(rs->buf);
        }
        free(rs);
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
