/* SPDX-License-Identifier: Apache-2.0 */
/* A gap's ledgers from another corestreamd's stream, through libremoteledger's public API (the
 * daemon links libremoteledger.a, whose internals are local to it): see backfill_from.h. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "corestream/remoteledger.h"
#include "corestreamd/sources/backfill_from.h"

#define WAIT_SLICE_NS 250000000LL    /* how soon a cancel is seen while a ledger is awaited */
#define IDLE_TIMEOUT_NS 30000000000LL /* a peer silent this long mid-range has failed */
#define RESUME_RETRIES 2
#define RESUME_BACKOFF_NS 1000000000LL

typedef struct bf_peer {
    cs_bf_from base;
    rl_stream *s;
    cs_cancel *cancel;
    bool open;               /* a session of begin's range */
    uint32_t oldest, latest; /* what the peer held at begin */
    uint32_t until;          /* the last ledger of the session's range */
} bf_peer;

static int peer_begin(cs_bf_from *f, uint32_t first, uint32_t last, cs_err *err)
{
    bf_peer *p = (bf_peer *)f;
    if (rl_stream_bounds(p->s, &p->oldest, &p->latest) != RL_OK)
        return cs_err_set(err, 0, "%s", rl_stream_error(p->s));
    if (p->latest == 0 || first < p->oldest || first > p->latest)
        return 0; /* get says why */
    p->until = last < p->latest ? last : p->latest;
    if (rl_stream_open(p->s, rl_bounded_range(first, p->until)) != RL_OK)
        return cs_err_set(err, 0, "%s", rl_stream_error(p->s));
    p->open = true;
    return 0;
}

static int peer_get(cs_bf_from *f, uint32_t seq, const uint8_t **ledger, size_t *len, cs_err *err)
{
    bf_peer *p = (bf_peer *)f;
    if (!p->open || seq > p->until) {
        if (p->latest == 0)
            return cs_err_set(err, 0, "the peer holds no ledgers");
        return cs_err_set(err, 0, "the peer holds ledgers %" PRIu32 " to %" PRIu32, p->oldest, p->latest);
    }
    rl_ledger_info info;
    rl_result r;
    while ((r = rl_stream_next(p->s, WAIT_SLICE_NS, ledger, len, &info)) == RL_AGAIN)
        if (cs_cancel_is_set(p->cancel))
            return cs_err_set(err, 0, "the daemon is stopping");
    if (r == RL_END)
        return cs_err_set(err, 0, "the peer ended the range before ledger %" PRIu32, seq);
    if (r != RL_OK)
        return cs_err_set(err, 0, "%s", rl_stream_error(p->s));
    if (info.sequence != seq)
        return cs_err_set(err, 0, "the peer sent ledger %" PRIu32 " for ledger %" PRIu32, info.sequence, seq);
    return 0;
}

static void peer_end(cs_bf_from *f)
{
    bf_peer *p = (bf_peer *)f;
    rl_stream_close(p->s);
    p->open = false;
}

static void peer_destroy(cs_bf_from *f)
{
    bf_peer *p = (bf_peer *)f;
    rl_stream_free(p->s);
    free(p);
}

static const cs_bf_from_ops peer_ops = {
    .begin = peer_begin,
    .get = peer_get,
    .end = peer_end,
    .destroy = peer_destroy,
};

int cs_bf_peer_new(cs_bf_from **out, const cs_backfill_opts *bo, const char *token, cs_err *err)
{
    *out = NULL;
    bf_peer *p = calloc(1, sizeof *p);
    if (!p)
        return cs_err_set(err, 0, "source: out of memory");
    rl_options o;
    rl_options_init(&o);
    o.idle_timeout_ns = IDLE_TIMEOUT_NS;
    o.resume_retries = RESUME_RETRIES;
    o.resume_backoff_ns = RESUME_BACKOFF_NS;
    o.trusted_keys_file = bo->trusted_keys;
    o.tls_ca_file = bo->ca_file;
    o.bearer_token = token;
    rl_result r = rl_stream_new(&p->s, bo->url, &o);
    if (r != RL_OK) {
        cs_err_set(err, 0, "--backfill-from %.200s: %s", bo->url,
                   r == RL_ERR_NOMEM ? "out of memory" : rl_stream_error(p->s));
        peer_destroy(&p->base);
        return -1;
    }
    p->base.ops = &peer_ops;
    p->cancel = bo->cancel;
    *out = &p->base;
    return 0;
}
