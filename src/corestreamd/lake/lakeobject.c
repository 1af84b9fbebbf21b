/* A SEP-54 object made from the ring: see lakeobject.h. */
#include "corestreamd/lake/lakeobject.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <xxhash.h>
#include <zstd.h>

/* How much of a ledger is read and compressed at a time. */
#define LAKE_PIECE (256u * 1024u)

/* One object being made: the compressor, its growing output, the read buffer and the hash of the
 * ledger being read. */
typedef struct obj_build {
    cs_ring *ring;
    cs_lake_batch batch;
    ZSTD_CCtx *cctx;
    XXH64_state_t *hash;
    uint8_t *piece;
    uint8_t *out;
    size_t len;
    size_t cap;
    int64_t modified; /* the newest ledger file's mtime */
} obj_build;

static int failed(const obj_build *o, cs_err *err, const char *what)
{
    return cs_err_set(err, CS_LAKE_OBJ_ERR_IO, "lake: batch %" PRIu32 "-%" PRIu32 ": %s", o->batch.start,
                      o->batch.end, what);
}

/* Compresses n bytes of src into the output, growing it; end closes the frame. */
static int feed(obj_build *o, const void *src, size_t n, ZSTD_EndDirective end, cs_err *err)
{
    ZSTD_inBuffer in = {src, n, 0};
    for (;;) {
        if (o->cap - o->len < ZSTD_CStreamOutSize()) {
            size_t cap = o->cap ? o->cap * 2 : ZSTD_CStreamOutSize();
            uint8_t *p = realloc(o->out, cap);
            if (!p)
                return failed(o, err, "out of memory");
            o->out = p;
            o->cap = cap;
        }
        ZSTD_outBuffer ob = {o->out, o->cap, o->len};
        size_t left = ZSTD_compressStream2(o->cctx, &ob, &in, end);
        o->len = ob.pos;
        if (ZSTD_isError(left))
            return failed(o, err, ZSTD_getErrorName(left));
        if (end == ZSTD_e_end ? left == 0 : in.pos == in.size)
            return 0;
    }
}

/* Why the ring does not hold all of batch b now, in why; false when it does. */
static bool batch_missing(cs_ring *r, cs_lake_batch b, char *why, size_t n)
{
    uint32_t oldest, latest, first, last;
    if (!cs_ring_bounds(r, &oldest, &latest)) {
        snprintf(why, n, "the ring is empty");
        return true;
    }
    if (b.start < oldest || b.end > latest) {
        snprintf(why, n, "it holds ledgers %" PRIu32 " to %" PRIu32, oldest, latest);
        return true;
    }
    for (uint64_t s = b.start; s <= b.end; s++) {
        if (cs_ring_hole(r, (uint32_t)s, &first, &last)) {
            snprintf(why, n, "ledgers %" PRIu32 " to %" PRIu32 " are missing from it", first, last);
            return true;
        }
    }
    return false;
}

int cs_lake_batch_available(cs_ring *r, cs_lake_batch b, cs_err *err)
{
    char why[128];
    if (!batch_missing(r, b, why, sizeof why))
        return 0;
    return cs_err_set(err, CS_LAKE_OBJ_ERR_NOT_AVAILABLE,
                      "lake: batch %" PRIu32 "-%" PRIu32 " is not wholly in the ring: %s", b.start, b.end, why);
}

/* What a ledger the ring would not give (or gave bytes its record denies) means for the batch: a
 * suspect ledger is judged first; gone or bad, the batch is not available; anything else is a
 * failure to retry. */
static int ledger_failed(obj_build *o, uint32_t seq, cs_err *err)
{
    int kind = err->kind;
    if (kind == CS_RING_ERR_CORRUPT) {
        int verdict = cs_ring_condemn(o->ring, seq, err->msg);
        kind = verdict == CS_RING_VERDICT_BAD || verdict == CS_RING_VERDICT_GONE ? CS_RING_ERR_HOLE : CS_RING_ERR_IO;
    }
    if (kind == CS_RING_ERR_IO) {
        cs_err_prefix(err, "lake: batch %" PRIu32 "-%" PRIu32 ": ", o->batch.start, o->batch.end);
        err->kind = CS_LAKE_OBJ_ERR_IO;
    } else {
        cs_err_prefix(err, "lake: batch %" PRIu32 "-%" PRIu32 " is not wholly in the ring: ", o->batch.start,
                      o->batch.end);
        err->kind = CS_LAKE_OBJ_ERR_NOT_AVAILABLE;
    }
    return -1;
}

/* Appends ledger seq's bytes, read piece by piece and hashed against its record. */
static int add_ledger(obj_build *o, uint32_t seq, cs_err *err)
{
    cs_ledger_ref *ref = NULL;
    if (cs_ring_get(o->ring, seq, &ref, err) != 0)
        return ledger_failed(o, seq, err);
    struct stat st;
    if (fstat(ref->fd, &st) == 0 && st.st_mtime > o->modified)
        o->modified = st.st_mtime;
    XXH64_reset(o->hash, 0);
    int rc = 0;
    for (uint64_t off = 0; off < ref->rec.len && rc == 0; off += LAKE_PIECE) {
        size_t n = ref->rec.len - off < LAKE_PIECE ? (size_t)(ref->rec.len - off) : LAKE_PIECE;
        rc = cs_ledger_read(ref, off, o->piece, n, err);
        if (rc != 0)
            rc = ledger_failed(o, seq, err);
        else {
            XXH64_update(o->hash, o->piece, n);
            rc = feed(o, o->piece, n, ZSTD_e_continue, err);
        }
    }
    uint64_t got = XXH64_digest(o->hash);
    if (rc == 0 && got != ref->rec.xxh64) {
        cs_err_set(err, CS_RING_ERR_CORRUPT,
                   "store: ledger %" PRIu32 " failed its integrity check: its bytes hash to %016" PRIx64
                   ", its record says %016" PRIx64, seq, got, ref->rec.xxh64);
        rc = ledger_failed(o, seq, err);
    }
    cs_ledger_ref_release(ref);
    return rc;
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* The object's bytes: the batch header, every ledger, the frame's end. */
static int build(obj_build *o, int level, cs_err *err)
{
    if (!o->cctx || !o->hash || !o->piece)
        return failed(o, err, "out of memory");
    size_t set = ZSTD_CCtx_setParameter(o->cctx, ZSTD_c_compressionLevel, level);
    if (ZSTD_isError(set))
        return failed(o, err, ZSTD_getErrorName(set));
    if (cs_lake_batch_available(o->ring, o->batch, err) != 0)
        return -1;
    uint8_t head[12];
    put_be32(head, o->batch.start);
    put_be32(head + 4, o->batch.end);
    put_be32(head + 8, o->batch.end - o->batch.start + 1);
    if (feed(o, head, sizeof head, ZSTD_e_continue, err) != 0)
        return -1;
    for (uint64_t s = o->batch.start; s <= o->batch.end; s++)
        if (add_ledger(o, (uint32_t)s, err) != 0)
            return -1;
    return feed(o, NULL, 0, ZSTD_e_end, err);
}

int cs_lake_object_build(cs_ring *r, cs_lake_batch b, int level, uint8_t **out, size_t *len, int64_t *modified,
                         cs_err *err)
{
    obj_build o = {.ring = r, .batch = b};
    cs_err e = {0}; /* the ring's errors are read back, so never NULL */
    o.cctx = ZSTD_createCCtx();
    o.hash = XXH64_createState();
    o.piece = malloc(LAKE_PIECE);
    int rc = build(&o, level, &e);
    ZSTD_freeCCtx(o.cctx);
    XXH64_freeState(o.hash);
    free(o.piece);
    if (rc != 0) {
        free(o.out);
        if (err)
            *err = e;
        return -1;
    }
    *out = o.out;
    *len = o.len;
    if (modified)
        *modified = o.modified;
    return 0;
}
