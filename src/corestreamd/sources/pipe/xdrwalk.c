/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/sources/pipe/xdrwalk.h"

#include <stdio.h>

/* A forward cursor. Every read checks the remaining length first; "off <= len" always holds, so
 * "len - off" cannot wrap. */
typedef struct cursor {
    const uint8_t *b;
    size_t len, off;
    cs_err *err;
} cursor;

static int short_prefix(cursor *c)
{
    return cs_err_set(c->err, 0, "xdr: prefix ends at byte %zu before ledgerSeq", c->len);
}

static int need(cursor *c, size_t n)
{
    return c->len - c->off < n ? short_prefix(c) : 0;
}

static int u32(cursor *c, uint32_t *v)
{
    if (need(c, 4) != 0)
        return -1;
    const uint8_t *p = c->b + c->off;
    *v = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
    c->off += 4;
    return 0;
}

static int skip(cursor *c, size_t n)
{
    if (need(c, n) != 0)
        return -1;
    c->off += n;
    return 0;
}

/* XDR discriminants are signed ints: they are printed as such. */
static int32_t as_int(uint32_t v)
{
    return (int32_t)v;
}

/* A variable-length opaque<max>: u32 length, the data, zero padding to a multiple of 4. what
 * names it in messages ("upgrade 2", "signature"). */
static int opaque(cursor *c, uint32_t max, const char *what)
{
    uint32_t n;
    if (u32(c, &n) != 0)
        return -1;
    if (n > max)
        return cs_err_set(c->err, 0, "xdr: %s is %u bytes, over the %u-byte maximum", what, n, max);
    size_t pad = (4 - (n & 3)) & 3;
    size_t data_at = c->off;
    if (skip(c, (size_t)n + pad) != 0)
        return -1;
    for (size_t i = 0; i < pad; i++)
        if (c->b[data_at + n + i] != 0)
            return cs_err_set(c->err, 0, "xdr: %s padding byte %zu is 0x%02x, not zero", what,
                              data_at + n + i, c->b[data_at + n + i]);
    return 0;
}

int cs_xdr_ledger_seq(const uint8_t *buf, size_t len, uint32_t *seq, cs_err *err)
{
    cursor c = {.b = buf, .len = len, .off = 0, .err = err};
    uint32_t v;

    /* union LedgerCloseMeta switch (int v): 0 → V0, 1 → V1, 2 → V2. */
    if (u32(&c, &v) != 0)
        return -1;
    if (v > 2)
        return cs_err_set(err, 0, "xdr: LedgerCloseMeta version %d is not 0, 1 or 2", as_int(v));
    if (v >= 1) {
        /* V1 and V2 open with LedgerCloseMetaExt ext: 0 → void, 1 → LedgerCloseMetaExtV1
         * { ExtensionPoint ext; int64 sorobanFeeWrite1KB; }, ExtensionPoint having arm 0 only. */
        uint32_t ext;
        if (u32(&c, &ext) != 0)
            return -1;
        if (ext > 1)
            return cs_err_set(err, 0, "xdr: LedgerCloseMetaExt version %d is not 0 or 1", as_int(ext));
        if (ext == 1) {
            uint32_t ep;
            if (u32(&c, &ep) != 0)
                return -1;
            if (ep != 0)
                return cs_err_set(err, 0, "xdr: LedgerCloseMetaExtV1 ExtensionPoint version %d is not 0",
                                  as_int(ep));
            if (skip(&c, 8) != 0) /* sorobanFeeWrite1KB */
                return -1;
        }
    }

    /* LedgerHeaderHistoryEntry.hash; LedgerHeader.ledgerVersion, previousLedgerHash;
     * StellarValue.txSetHash, closeTime. */
    if (skip(&c, 32 + 4 + 32 + 32 + 8) != 0)
        return -1;

    uint32_t n;
    if (u32(&c, &n) != 0)
        return -1;
    if (n > CS_XDR_MAX_UPGRADES)
        return cs_err_set(err, 0, "xdr: StellarValue has %u upgrades, over the %d-upgrade maximum", n,
                          CS_XDR_MAX_UPGRADES);
    for (uint32_t i = 0; i < n; i++) {
        char what[32];
        snprintf(what, sizeof what, "upgrade %u", i);
        if (opaque(&c, CS_XDR_MAX_UPGRADE_LEN, what) != 0)
            return -1;
    }

    /* StellarValue.ext: STELLAR_VALUE_BASIC (0) → void; STELLAR_VALUE_SIGNED (1) →
     * LedgerCloseValueSignature { NodeID nodeID; Signature signature; }, NodeID being a PublicKey
     * whose only arm is PUBLIC_KEY_TYPE_ED25519 (0) → uint256. */
    uint32_t svt;
    if (u32(&c, &svt) != 0)
        return -1;
    if (svt > 1)
        return cs_err_set(err, 0, "xdr: StellarValueType %d is not 0 (basic) or 1 (signed)", as_int(svt));
    if (svt == 1) {
        uint32_t kt;
        if (u32(&c, &kt) != 0)
            return -1;
        if (kt != 0)
            return cs_err_set(err, 0, "xdr: NodeID PublicKeyType %d is not 0 (ed25519)", as_int(kt));
        if (skip(&c, 32) != 0)
            return -1;
        if (opaque(&c, CS_XDR_MAX_SIGNATURE_LEN, "signature") != 0)
            return -1;
    }

    /* txSetResultHash, bucketListHash, then the target. */
    if (skip(&c, 32 + 32) != 0)
        return -1;
    return u32(&c, seq);
}
