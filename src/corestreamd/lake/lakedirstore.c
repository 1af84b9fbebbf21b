/* SPDX-License-Identifier: Apache-2.0 */
/* The lake directory as the exporter's store: a thin adapter over cs_lake_dir_* (lakestore.h). */
#include <stdlib.h>

#include "corestreamd/lake/lakedir.h"
#include "corestreamd/lake/lakestore.h"

typedef struct dir_store {
    cs_lake_store base;
    cs_lake_dir *d;
} dir_store;

static int dir_newest(cs_lake_store *s, uint32_t ring_oldest, uint32_t ring_latest, cs_lake_batch *out, cs_err *err)
{
    (void)ring_oldest;
    (void)ring_latest;
    (void)err;
    return cs_lake_dir_newest(((dir_store *)s)->d, out) ? 1 : 0;
}

static bool dir_newest_known(const cs_lake_store *s, cs_lake_batch *out)
{
    return cs_lake_dir_newest(((const dir_store *)s)->d, out);
}

static int dir_settle(cs_lake_store *s, cs_err *err)
{
    return cs_lake_dir_settle(((dir_store *)s)->d, err);
}

static int dir_put(cs_lake_store *s, cs_lake_batch b, const uint8_t *obj, size_t len, cs_lake_put_outcome *outcome,
                   char *why, size_t why_len, cs_err *err)
{
    return cs_lake_dir_put(((dir_store *)s)->d, b, obj, len, outcome, why, why_len, err);
}

static int dir_put_sig(cs_lake_store *s, cs_lake_batch b, const uint8_t *sig, size_t len, cs_lake_put_outcome *outcome,
                       char *why, size_t why_len, cs_err *err)
{
    return cs_lake_dir_put_sig(((dir_store *)s)->d, b, sig, len, outcome, why, why_len, err);
}

static int dir_has_sig(cs_lake_store *s, cs_lake_batch b, cs_err *err)
{
    return cs_lake_dir_has_sig(((dir_store *)s)->d, b, err);
}

static void dir_object_name(const cs_lake_store *s, cs_lake_batch b, char *buf, size_t len)
{
    cs_lake_dir_object_path(((const dir_store *)s)->d, b, buf, len);
}

static const char *dir_name(const cs_lake_store *s)
{
    return cs_lake_dir_path(((const dir_store *)s)->d);
}

static void dir_close(cs_lake_store *s)
{
    cs_lake_dir_close(((dir_store *)s)->d);
    free(s);
}

static const cs_lake_store_ops dir_ops = {.kind = "dir",
                                          .newest = dir_newest,
                                          .newest_known = dir_newest_known,
                                          .settle = dir_settle,
                                          .put = dir_put,
                                          .put_sig = dir_put_sig,
                                          .has_sig = dir_has_sig,
                                          .object_name = dir_object_name,
                                          .name = dir_name,
                                          .close = dir_close};

int cs_lake_dir_store_open(cs_lake_store **out, const char *dir, const char *ring_dir, const char *passphrase,
                           const cs_lake_layout *l, cs_err *err)
{
    *out = NULL;
    dir_store *s = calloc(1, sizeof *s);
    if (!s)
        return cs_err_set(err, 0, "lake: out of memory");
    if (cs_lake_dir_open(&s->d, dir, ring_dir, passphrase, l, err) != 0) {
        free(s);
        return -1;
    }
    s->base.ops = &dir_ops;
    *out = &s->base;
    return 0;
}

void cs_lake_store_close(cs_lake_store *s)
{
    if (s)
        s->ops->close(s);
}
