/* SPDX-License-Identifier: Apache-2.0 */
#include "common/synthetic.h"

#include <endian.h>
#include <string.h>

/* Go math/rand/v2 PCG constants: the 128-bit LCG multiplier and increment. */
#define PCG_MUL (((unsigned __int128)2549297995355413924ULL << 64) | 4865540595714422341ULL)
#define PCG_INC (((unsigned __int128)6364136223846793005ULL << 64) | 1442695040888963407ULL)
#define PCG_DXSM_MUL 0xda942042e4dd58b5ULL

/* Low half of the RNG seed; the high half is the ledger sequence. */
#define SYNTHETIC_SEED_LO 0x5CE11A8ULL

#define TEMPLATE_DRAWS 32
#define RECORD_SIZE (TEMPLATE_DRAWS * 8)
#define TAIL_DRAWS 4

void cs_pcg_seed(cs_pcg *p, uint64_t hi, uint64_t lo)
{
    p->state = ((unsigned __int128)hi << 64) | lo;
}

uint64_t cs_pcg_next(cs_pcg *p)
{
    p->state = p->state * PCG_MUL + PCG_INC;
    uint64_t hi = (uint64_t)(p->state >> 64);
    uint64_t lo = (uint64_t)p->state;
    /* DXSM output permutation, as in Go's PCG.Uint64. */
    hi ^= hi >> 32;
    hi *= PCG_DXSM_MUL;
    hi ^= hi >> 48;
    hi *= lo | 1;
    return hi;
}

/* One 8-byte little-endian store; memcpy keeps it a single unaligned move. */
static inline void put_le64(uint8_t *dst, uint64_t v)
{
    v = htole64(v);
    memcpy(dst, &v, sizeof v);
}

/* The first n (< 8) bytes of the little-endian encoding, for a draw cut by the buffer end. */
static void put_le64_partial(uint8_t *dst, uint64_t v, size_t n)
{
    v = htole64(v);
    memcpy(dst, &v, n);
}

static void fill_incompressible(uint8_t *buf, size_t len, cs_pcg *rng)
{
    size_t i = 4;
    for (; len - i >= 8; i += 8)
        put_le64(buf + i, cs_pcg_next(rng));
    if (i < len)
        put_le64_partial(buf + i, cs_pcg_next(rng), len - i);
}

/* A 256-byte record template repeated through the buffer, each full-enough record ending in
 * 32 fresh random bytes: that mix is what makes the payload compress like ledger meta (~7x). */
static void fill_compressible(uint8_t *buf, size_t len, cs_pcg *rng)
{
    uint8_t tmpl[RECORD_SIZE];
    for (size_t i = 0; i < TEMPLATE_DRAWS; i++)
        put_le64(tmpl + i * 8, cs_pcg_next(rng));
    for (size_t off = 4; off < len; off += RECORD_SIZE) {
        size_t n = len - off < RECORD_SIZE ? len - off : RECORD_SIZE;
        memcpy(buf + off, tmpl, n);
        if (n < TAIL_DRAWS * 8)
            continue;
        uint8_t *tail = buf + off + n - TAIL_DRAWS * 8;
        for (size_t k = 0; k < TAIL_DRAWS; k++)
            put_le64(tail + k * 8, cs_pcg_next(rng));
    }
}

void cs_synthetic_fill(uint8_t *buf, size_t len, uint32_t seq, bool compressible)
{
    if (len < 4)
        return;
    uint32_t be = htobe32(seq);
    memcpy(buf, &be, sizeof be);
    cs_pcg rng;
    cs_pcg_seed(&rng, seq, SYNTHETIC_SEED_LO);
    if (compressible)
        fill_compressible(buf, len, &rng);
    else
        fill_incompressible(buf, len, &rng);
}
