/* SPDX-License-Identifier: Apache-2.0 */
/* SEP-54 object keys: see lakekey.h. */
#include "corestreamd/lake/lakekey.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/goquote.h"

/* How much of a refused path its error quotes. */
#define LAKE_PATH_QUOTED_MAX 200

cs_lake_layout cs_lake_layout_default(void)
{
    return (cs_lake_layout){CS_LAKE_LEDGERS_PER_BATCH_DEFAULT, CS_LAKE_BATCHES_PER_PARTITION_DEFAULT};
}

int cs_lake_layout_check(const cs_lake_layout *l, cs_err *err)
{
    if (l->ledgers_per_batch == 0)
        return cs_err_set(err, CS_LAKE_KEY_ERR_LAYOUT, "lake: ledgers per batch must be at least 1, got 0");
    if (l->batches_per_partition == 0)
        return cs_err_set(err, CS_LAKE_KEY_ERR_LAYOUT, "lake: batches per partition must be at least 1, got 0");
    uint64_t partition = (uint64_t)l->ledgers_per_batch * l->batches_per_partition;
    if (partition > UINT32_MAX)
        return cs_err_set(err, CS_LAKE_KEY_ERR_LAYOUT,
                          "lake: a partition of %" PRIu32 " batches of %" PRIu32
                          " ledgers holds %" PRIu64 " ledgers, more than 4294967295",
                          l->batches_per_partition, l->ledgers_per_batch, partition);
    return 0;
}

int cs_lake_batch_of(const cs_lake_layout *l, uint32_t seq, cs_lake_batch *out, cs_err *err)
{
    uint32_t n = l->ledgers_per_batch;
    uint32_t start = seq / n * n;
    if ((uint64_t)start + n - 1 > UINT32_MAX)
        return cs_err_set(err, CS_LAKE_KEY_ERR_CEILING,
                          "lake: ledger %" PRIu32 ": its batch of %" PRIu32 " ledgers would end past 4294967295",
                          seq, n);
    *out = (cs_lake_batch){start, start + (n - 1)};
    return 0;
}

size_t cs_lake_key(const cs_lake_layout *l, cs_lake_batch b, char key[CS_LAKE_KEY_MAX])
{
    int n = 0;
    if (l->batches_per_partition > 1) {
        uint32_t size = l->ledgers_per_batch * l->batches_per_partition;
        uint32_t first = b.start / size * size;
        uint32_t last = first + size - 1; /* wraps for the last partition, as the SDK's does */
        n = snprintf(key, CS_LAKE_KEY_MAX, "%08" PRIX32 "--%" PRIu32 "-%" PRIu32 "/", UINT32_MAX - first, first,
                     last);
    }
    n += snprintf(key + n, CS_LAKE_KEY_MAX - (size_t)n, "%08" PRIX32 "--%" PRIu32, UINT32_MAX - b.start, b.start);
    if (b.end != b.start)
        n += snprintf(key + n, CS_LAKE_KEY_MAX - (size_t)n, "-%" PRIu32, b.end);
    n += snprintf(key + n, CS_LAKE_KEY_MAX - (size_t)n, ".xdr.zst");
    return (size_t)n;
}

/* The batch start a key's file name states: the decimal after `XXXXXXXX--` in the last path
 * segment of key[len]. -1 when there is none or it passes 4294967295 (the caller compares the
 * whole key afterwards, so this only has to find the number). */
static int start_of_key(const char *key, size_t len, uint32_t *start)
{
    const char *name = key;
    for (size_t i = 0; i < len; i++)
        if (key[i] == '/')
            name = key + i + 1;
    size_t rest = len - (size_t)(name - key);
    if (rest < 11 || name[8] != '-' || name[9] != '-')
        return -1;
    size_t end = rest < 21 ? rest : 21; /* 11 digits at most: past 4294967295, never overflowing */
    uint64_t v = 0;
    size_t i = 10;
    for (; i < end && name[i] >= '0' && name[i] <= '9'; i++)
        v = v * 10 + (uint64_t)(name[i] - '0');
    if (i == 10 || v > UINT32_MAX)
        return -1;
    *start = (uint32_t)v;
    return 0;
}

static int not_a_key(const char *path, size_t len, cs_err *err)
{
    char quoted[4 * LAKE_PATH_QUOTED_MAX + 3];
    size_t cut = len > LAKE_PATH_QUOTED_MAX ? LAKE_PATH_QUOTED_MAX : len;
    cs_go_quote_n(quoted, sizeof quoted, path, cut);
    return cs_err_set(err, CS_LAKE_KEY_ERR_NOT_KEY, "lake: %s%s is not a ledger object key of this lake", quoted,
                      cut < len ? " (cut)" : "");
}

int cs_lake_key_parse(const cs_lake_layout *l, const char *path, size_t len, cs_lake_batch *out, cs_err *err)
{
    static const char prefix[] = CS_LAKE_LEDGERS_PATH "/";
    size_t plen = sizeof prefix - 1;
    if (len <= plen || memcmp(path, prefix, plen) != 0)
        return not_a_key(path, len, err);
    const char *key = path + plen;
    size_t klen = len - plen;
    uint32_t start;
    cs_lake_batch b;
    if (start_of_key(key, klen, &start) != 0 || cs_lake_batch_of(l, start, &b, NULL) != 0)
        return not_a_key(path, len, err);
    char want[CS_LAKE_KEY_MAX];
    size_t wlen = cs_lake_key(l, b, want);
    if (wlen != klen || memcmp(want, key, klen) != 0)
        return not_a_key(path, len, err);
    *out = b;
    return 0;
}
