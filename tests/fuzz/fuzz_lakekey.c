/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the lake's reading of a request path into a batch
 * (src/corestreamd/lake/lakekey.c), which a client's GET names.
 *
 * Input: one byte choosing a layout (of the public network's, SEP-54's example, batches of 64 and
 * 10, partitions of one batch, the largest partition), four bytes of a ledger sequence
 * (big-endian), then the path. Checked:
 *  - a path read as a batch is exactly "/lake/ledgers/" and the key cs_lake_key gives that batch,
 *    which is the batch cs_lake_batch_of gives for its start;
 *  - a refused path is CS_LAKE_KEY_ERR_NOT_KEY with a message, and leaves the batch alone;
 *  - the same path gives the same outcome twice;
 *  - the key of the batch holding the sequence (when there is one) reads back as that batch.
 *
 * Build and run: tests/fuzz/CMakeLists.txt (clang, -DCS_FUZZ=ON). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corestreamd/lake/lakekey.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_lakekey: property violated: %s\n", what);
        abort();
    }
}

static const cs_lake_layout k_layouts[] = {{1, 64000}, {2, 8}, {64, 10}, {10, 1}, {1, 1}, {65536, 65535}};

/* cs_lake_key_parse of an exact-size heap copy (ASan sees reads past it). */
static int parse(const cs_lake_layout *l, const uint8_t *path, size_t len, cs_lake_batch *b)
{
    char *copy = malloc(len ? len : 1);
    check(copy != NULL, "malloc");
    if (len)
        memcpy(copy, path, len);
    cs_err err = {0};
    int rc = cs_lake_key_parse(l, copy, len, b, &err);
    check(rc == 0 || (err.kind == CS_LAKE_KEY_ERR_NOT_KEY && err.msg[0] != '\0'), "a refusal says so");
    free(copy);
    return rc;
}

/* "/lake/ledgers/" and the key of b. */
static size_t path_of(const cs_lake_layout *l, cs_lake_batch b, char *buf, size_t len)
{
    char key[CS_LAKE_KEY_MAX];
    cs_lake_key(l, b, key);
    int n = snprintf(buf, len, "%s/%s", CS_LAKE_LEDGERS_PATH, key);
    check(n > 0 && (size_t)n < len, "a path fits");
    return (size_t)n;
}

static void check_path(const cs_lake_layout *l, const uint8_t *path, size_t len)
{
    cs_lake_batch b = {7, 7}, again = {7, 7};
    int rc = parse(l, path, len, &b);
    check(parse(l, path, len, &again) == rc, "deterministic");
    if (rc != 0) {
        check(b.start == 7 && b.end == 7, "a refusal leaves the batch alone");
        return;
    }
    check(again.start == b.start && again.end == b.end, "the same batch twice");
    cs_lake_batch want;
    check(cs_lake_batch_of(l, b.start, &want, NULL) == 0, "a batch read has a key");
    check(want.start == b.start && want.end == b.end, "the batch of its start");
    char buf[200];
    size_t n = path_of(l, b, buf, sizeof buf);
    check(n == len && memcmp(buf, path, len) == 0, "only the exact key is read");
}

static void check_round_trip(const cs_lake_layout *l, uint32_t seq)
{
    cs_lake_batch b, got = {0, 0};
    if (cs_lake_batch_of(l, seq, &b, NULL) != 0)
        return;
    check(b.start <= seq && seq <= b.end, "the batch holds its ledger");
    char buf[200];
    size_t n = path_of(l, b, buf, sizeof buf);
    check(parse(l, (const uint8_t *)buf, n, &got) == 0, "a key reads back");
    check(got.start == b.start && got.end == b.end, "as its batch");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5)
        return 0;
    const cs_lake_layout *l = &k_layouts[data[0] % (sizeof k_layouts / sizeof k_layouts[0])];
    uint32_t seq = (uint32_t)data[1] << 24 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 8 | data[4];
    check_round_trip(l, seq);
    check_path(l, data + 5, size - 5);
    return 0;
}
