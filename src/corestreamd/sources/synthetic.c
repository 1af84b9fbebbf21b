/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/sources/synthetic.h"

#include <stdlib.h>

#include "common/synthetic.h"

typedef struct synthetic {
    cs_ledger_stream base;
    uint8_t *buf; /* one buffer refilled per pull: the yielded ledger is borrowed */
    size_t size;
    bool compressible;
    cs_cancel *cancel;
} synthetic;

static int synthetic_pull(cs_ledger_stream *ls, uint32_t seq, const uint8_t **data, size_t *len,
                          cs_err *err)
{
    synthetic *s = (synthetic *)ls;
    if (cs_cancel_is_set(s->cancel))
        return cs_err_set(err, CS_ERR_CANCELLED, "context canceled");
    cs_synthetic_fill(s->buf, s->size, seq, s->compressible);
    *data = s->buf;
    *len = s->size;
    return 1;
}

static void synthetic_destroy(cs_ledger_stream *ls)
{
    synthetic *s = (synthetic *)ls;
    free(s->buf);
    free(s);
}

static const cs_ledger_stream_ops synthetic_ops = {
    .pull = synthetic_pull,
    .destroy = synthetic_destroy,
};

cs_ledger_stream *cs_synthetic_stream_new(int64_t size, bool compressible, cs_cancel *cancel)
{
    if (size <= 0)
        size = CS_SYNTHETIC_DEFAULT_SIZE;
    synthetic *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    /* Zeroed: a ledger shorter than the 4-byte sequence field is never written by the fill, and
     * must read as zeros like a fresh buffer in the prototype. */
    s->buf = calloc((size_t)size, 1);
    if (!s->buf) {
        free(s);
        return NULL;
    }
    s->base.ops = &synthetic_ops;
    s->size = (size_t)size;
    s->compressible = compressible;
    s->cancel = cancel;
    return &s->base;
}
