/* SPDX-License-Identifier: Apache-2.0 */
/* A SEP-54 object made from the ring: see lakeobject.h. */
#include "corestreamd/lake/lakeobject.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    XXH3_state_t *fhash, *rawhash; /* stored frames: the file's bytes, the raw chunks' */
    uint8_t *piece;
    size_t piece_cap;
    bool open; /* a zstd frame is being written */
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

/* Ends the zstd frame being written, if any, so that bytes can be appended as they are. */
static int close_frame(obj_build *o, cs_err *err)
{
    if (!o->open)
        return 0;
    o->open = false;
    return feed(o, NULL, 0, ZSTD_e_end, err);
}

static int compress(obj_build *o, const void *src, size_t n, cs_err *err)
{
    o->open = true;
    return feed(o, src, n, ZSTD_e_continue, err);
}

/* Appends bytes that are already whole zstd frames. */
static int append(obj_build *o, const void *src, size_t n, cs_err *err)
{
    if (close_frame(o, err) != 0)
        return -1;
    if (o->cap - o->len < n) {
        size_t cap = o->cap ? o->cap : ZSTD_CStreamOutSize();
        while (cap - o->len < n)
            cap *= 2;
        uint8_t *p = realloc(o->out, cap);
        if (!p)
            return failed(o, err, "out of memory");
        o->out = p;
        o->cap = cap;
    }
    memcpy(o->out + o->len, src, n);
    o->len += n;
    return 0;
}

/* The read buffer, at least n bytes. */
static int piece_for(obj_build *o, size_t n, cs_err *err)
{
    if (n <= o->piece_cap)
        return 0;
    uint8_t *p = realloc(o->piece, n);
    if (!p)
        return failed(o, err, "out of memory");
    o->piece = p;
    o->piece_cap = n;
    return 0;
}

/* Compresses the whole ledger into the object, read piece by piece and checked against its
 * record's XXH64. */
static int compress_ledger(obj_build *o, const cs_ledger_ref *ref, cs_err *err)
{
    XXH64_reset(o->hash, 0);
    for (uint64_t off = 0; off < ref->rec.len; off += LAKE_PIECE) {
        size_t n = ref->rec.len - off < LAKE_PIECE ? (size_t)(ref->rec.len - off) : LAKE_PIECE;
        if (cs_ledger_read(ref, off, o->piece, n, err) != 0)
            return ledger_failed(o, ref->seq, err);
        XXH64_update(o->hash, o->piece, n);
        if (compress(o, o->piece, n, err) != 0)
            return -1;
    }
    uint64_t got = XXH64_digest(o->hash);
    if (got == ref->rec.xxh64)
        return 0;
    cs_err_set(err, CS_RING_ERR_CORRUPT,
               "store: ledger %" PRIu32 " failed its integrity check: its bytes hash to %016" PRIx64
               ", its record says %016" PRIx64, ref->seq, got, ref->rec.xxh64);
    return ledger_failed(o, ref->seq, err);
}

/* Stored frames that failed a check: dropped (the ledger stays), and whatever of this ledger went
 * into the object since mark taken out again. */
static int frames_failed(obj_build *o, const cs_ledger_ref *ref, size_t mark, const char *problem)
{
    cs_ring_drop_frames(o->ring, ref->seq, ref->rec.frames_xxh3, problem);
    ZSTD_CCtx_reset(o->cctx, ZSTD_reset_session_only);
    o->open = false;
    o->len = mark;
    return 1;
}

/* Appends the ledger's stored frames: each zstd chunk as stored, each raw one compressed. They are
 * checked as a replay checks them (docs/RING.md): every chunk against its index entry before it
 * goes in, then the frames file (payloads and index) against the record's frames_xxh3 and the raw
 * chunks against its raw_xxh3; the ledger's own bytes are read for the raw chunks only. 1 when a
 * check fails: the frames were dropped and nothing of this ledger is in the object. */
static int copy_frames(obj_build *o, const cs_ledger_ref *ref, cs_err *err)
{
    if (close_frame(o, err) != 0)
        return -1;
    size_t mark = o->len;
    XXH3_64bits_reset(o->fhash);
    XXH3_64bits_reset(o->rawhash);
    char problem[128];
    for (uint32_t k = 0; k < ref->rec.chunks; k++) {
        const cs_frame *f = &ref->frames[k];
        if (piece_for(o, f->len, err) != 0)
            return -1;
        if (cs_frame_read(ref, k, o->piece, err) != 0)
            return ledger_failed(o, ref->seq, err);
        if (XXH3_64bits(o->piece, f->len) != f->xxh3) {
            snprintf(problem, sizeof problem, "chunk %" PRIu32 " does not hash to its index entry", k);
            return frames_failed(o, ref, mark, problem);
        }
        XXH3_64bits_update(f->codec == 0 ? o->rawhash : o->fhash, o->piece, f->len);
        if ((f->codec == 0 ? compress(o, o->piece, f->len, err) : append(o, o->piece, f->len, err)) != 0)
            return -1;
    }
    XXH3_64bits_update(o->fhash, ref->frames_tail, ref->frames_tail_len);
    if (XXH3_64bits_digest(o->fhash) != ref->rec.frames_xxh3)
        return frames_failed(o, ref, mark, "the frames file does not hash to its record's frames_xxh3");
    if (XXH3_64bits_digest(o->rawhash) != ref->rec.raw_xxh3)
        return frames_failed(o, ref, mark, "the raw chunks do not hash to the record's raw_xxh3");
    return 0;
}

/* Appends ledger seq, checked against its record: its stored frames where it has them, else its
 * bytes compressed. */
static int add_ledger(obj_build *o, uint32_t seq, cs_err *err)
{
    cs_ledger_ref *ref = NULL;
    if (cs_ring_get(o->ring, seq, &ref, err) != 0)
        return ledger_failed(o, seq, err);
    struct stat st;
    if (fstat(ref->fd, &st) == 0 && st.st_mtime > o->modified)
        o->modified = st.st_mtime;
    if (ref->frames_problem[0])
        cs_ring_drop_frames(o->ring, seq, ref->frames_claimed_xxh3, ref->frames_problem);
    int rc = ref->frames_fd >= 0 ? copy_frames(o, ref, err) : 1;
    if (rc == 1)
        rc = compress_ledger(o, ref, err);
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
    if (!o->cctx || !o->hash || !o->fhash || !o->rawhash || !o->piece)
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
    if (compress(o, head, sizeof head, err) != 0)
        return -1;
    for (uint64_t s = o->batch.start; s <= o->batch.end; s++)
        if (add_ledger(o, (uint32_t)s, err) != 0)
            return -1;
    return close_frame(o, err);
}

int cs_lake_object_build(cs_ring *r, cs_lake_batch b, int level, uint8_t **out, size_t *len, int64_t *modified,
                         cs_err *err)
{
    obj_build o = {.ring = r, .batch = b};
    cs_err e = {0}; /* the ring's errors are read back, so never NULL */
    o.cctx = ZSTD_createCCtx();
    o.hash = XXH64_createState();
    o.fhash = XXH3_createState();
    o.rawhash = XXH3_createState();
    o.piece = malloc(LAKE_PIECE);
    o.piece_cap = o.piece ? LAKE_PIECE : 0;
    int rc = build(&o, level, &e);
    ZSTD_freeCCtx(o.cctx);
    XXH64_freeState(o.hash);
    XXH3_freeState(o.fhash);
    XXH3_freeState(o.rawhash);
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

int cs_lake_sig_build(cs_ring *r, cs_lake_batch b, uint8_t **out, size_t *len, cs_err *err)
{
    obj_build o = {.ring = r, .batch = b};
    cs_err e = {0};
    int rc = cs_lake_batch_available(r, b, &e);
    for (uint64_t s = b.start; rc == 0 && s <= b.end; s++) {
        cs_ledger_ref *ref = NULL;
        if (cs_ring_get(r, (uint32_t)s, &ref, &e) != 0) {
            rc = ledger_failed(&o, (uint32_t)s, &e);
            break;
        }
        uint8_t n[2] = {(uint8_t)(ref->rec.sig_len >> 8), (uint8_t)ref->rec.sig_len};
        if (ref->rec.sig_len == 0)
            rc = cs_err_set(&e, CS_LAKE_OBJ_ERR_NOT_AVAILABLE,
                            "lake: batch %" PRIu32 "-%" PRIu32 " has no signatures: ledger %" PRIu64 " is unsigned",
                            b.start, b.end, s);
        else if (append(&o, n, sizeof n, &e) != 0 || append(&o, ref->rec.sig, ref->rec.sig_len, &e) != 0)
            rc = -1;
        cs_ledger_ref_release(ref);
    }
    if (rc != 0) {
        free(o.out);
        if (err)
            *err = e;
        return -1;
    }
    *out = o.out;
    *len = o.len;
    return 0;
}
