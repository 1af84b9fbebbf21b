/* SPDX-License-Identifier: Apache-2.0 */
/* What the lake export's end-to-end tests share: see lakee2e.h. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/synthetic.h"
#include "support/files.h"
#include "support/lakee2e.h"

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

char *cs_lakee2e_key(uint32_t seq, char *buf, size_t len)
{
    uint32_t part = seq / 64000 * 64000;
    snprintf(buf, len, "ledgers/%08X--%" PRIu32 "-%" PRIu32 "/%08X--%" PRIu32 ".xdr.zst", UINT32_MAX - part, part,
             part + 63999, UINT32_MAX - seq, seq);
    return buf;
}

void cs_lakee2e_expect_synthetic(const uint8_t *z, size_t zlen, uint32_t seq)
{
    size_t len;
    uint8_t *raw = cs_unzstd(z, zlen, &len);
    assert_non_null(raw);
    assert_int_equal(len, 12 + CS_LAKEE2E_SYN_SIZE);
    assert_int_equal(be32(raw), seq);
    assert_int_equal(be32(raw + 4), seq);
    assert_int_equal(be32(raw + 8), 1);
    uint8_t want[CS_LAKEE2E_SYN_SIZE];
    cs_synthetic_fill(want, sizeof want, seq, false);
    assert_memory_equal(raw + 12, want, CS_LAKEE2E_SYN_SIZE);
    free(raw);
}

uint32_t cs_lakee2e_newest(const cs_lakee2e_lake *l, uint32_t from)
{
    uint32_t s = from;
    while (s < 1000000 && l->exists(l->arg, s + 1))
        s++;
    return s;
}

struct stat *cs_lakee2e_stat_run(const cs_lakee2e_lake *l, uint32_t end)
{
    struct stat *st = calloc(end + 1, sizeof *st);
    assert_non_null(st);
    for (uint32_t s = 1; s <= end; s++)
        l->stat(l->arg, s, &st[s]);
    return st;
}

void cs_lakee2e_expect_kept(const cs_lakee2e_lake *l, uint32_t end, const struct stat *before, uint32_t first_end)
{
    for (uint32_t s = 1; s <= end; s++) {
        size_t zlen;
        uint8_t *z = l->object(l->arg, s, &zlen);
        cs_lakee2e_expect_synthetic(z, zlen, s);
        free(z);
    }
    for (uint32_t s = 1; s <= first_end; s++) {
        struct stat now;
        l->stat(l->arg, s, &now);
        assert_int_equal(now.st_ino, before[s].st_ino);
        assert_int_equal(now.st_mtim.tv_sec, before[s].st_mtim.tv_sec);
        assert_int_equal(now.st_mtim.tv_nsec, before[s].st_mtim.tv_nsec);
    }
    assert_false(l->exists(l->arg, end + 1));
}
