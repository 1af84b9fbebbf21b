/* SPDX-License-Identifier: Apache-2.0 */
/* Stored wire frames: the writer that appends a ledger's frames to its segment, and attaching or
 * dropping them. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/log.h"
#include "store/frames.h"
#include "store/ledgerdir.h"
#include "store/ring_internal.h"

/* The frames of one ledger until they are appended: the zstd payloads (referenced, or copied when
 * the caller reuses its buffer), then the index and trailer. */
struct cs_frames_writer {
    cs_ring *ring;
    uint32_t seq, chunk_size, chunks;
    bool copy;
    int err;                /* the first error (errno), reported at finish */
    XXH3_state_t *hash;     /* of the frames, as they will be stored */
    XXH3_state_t *raw_hash; /* of the raw chunks' bytes */
    uint8_t *tail;          /* the index so far, then the trailer */
    size_t cap;
    struct iovec *iov; /* the payloads, in order (copy: one, into buf) */
    size_t niov, iov_cap;
    uint8_t *buf;
    size_t buf_cap;
    uint64_t bytes;
};

cs_frames_writer *rng_frames_writer_new(cs_ring *r, uint32_t seq, uint32_t chunk_size, bool copy)
{
    cs_frames_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->hash = XXH3_createState()) || !(w->raw_hash = XXH3_createState())) {
        if (w)
            XXH3_freeState(w->hash);
        free(w);
        return NULL;
    }
    XXH3_64bits_reset(w->hash);
    XXH3_64bits_reset(w->raw_hash);
    w->ring = r;
    w->seq = seq;
    w->chunk_size = chunk_size;
    w->copy = copy;
    return w;
}

int cs_ring_frames_begin(cs_ring *r, uint32_t seq, uint32_t chunk_size, cs_frames_writer **out, cs_err *err)
{
    *out = NULL;
    if (rng_settle(r, err) != 0)
        return -1;
    if (!(*out = rng_frames_writer_new(r, seq, chunk_size, true)))
        return cs_err_set(err, CS_RING_ERR_IO, "store: write ledger %" PRIu32 " frames: %s", seq, strerror(ENOMEM));
    return 0;
}

static bool grow(void **p, size_t *cap, size_t need, size_t unit)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *g = realloc(*p, c * unit);
    if (!g)
        return false;
    *p = g;
    *cap = c;
    return true;
}

/* Keeps a payload for the append: a reference, or a copy into buf. */
static int keep_payload(cs_frames_writer *w, const void *payload, size_t len)
{
    if (w->copy) {
        if (!grow((void **)&w->buf, &w->buf_cap, w->bytes + len, 1))
            return ENOMEM;
        memcpy(w->buf + w->bytes, payload, len);
        return 0;
    }
    if (!grow((void **)&w->iov, &w->iov_cap, w->niov + 1, sizeof *w->iov))
        return ENOMEM;
    w->iov[w->niov++] = (struct iovec){(void *)payload, len};
    return 0;
}

void cs_frames_writer_add(cs_frames_writer *w, uint8_t codec, const void *payload, size_t len)
{
    if (w->err)
        return;
    size_t need = cs_frames_tail_len(w->chunks + 1);
    if (!grow((void **)&w->tail, &w->cap, need, 1)) {
        w->err = ENOMEM;
        return;
    }
    cs_frames_put_entry(w->tail + (size_t)w->chunks * CS_FRAMES_ENTRY_LEN, codec, (uint32_t)len,
                        XXH3_64bits(payload, len));
    w->chunks++;
    if (codec == 0) {
        XXH3_64bits_update(w->raw_hash, payload, len);
        return;
    }
    XXH3_64bits_update(w->hash, payload, len);
    if ((w->err = keep_payload(w, payload, len)) == 0)
        w->bytes += len;
}

void rng_frames_writer_free(cs_frames_writer *w)
{
    XXH3_freeState(w->hash);
    XXH3_freeState(w->raw_hash);
    free(w->tail);
    free(w->iov);
    free(w->buf);
    free(w);
}

void cs_frames_writer_abort(cs_frames_writer *w)
{
    if (w)
        rng_frames_writer_free(w);
}

int rng_frames_finish(cs_frames_writer *w, cs_ledger_record *rec)
{
    if (!w->err && w->chunks != rec->chunks)
        w->err = EINVAL;
    if (!w->err && !grow((void **)&w->tail, &w->cap, cs_frames_tail_len(w->chunks), 1))
        w->err = ENOMEM;
    if (w->err) {
        errno = w->err;
        return -1;
    }
    uint8_t *t = w->tail + (size_t)w->chunks * CS_FRAMES_ENTRY_LEN;
    cs_frames_put_trailer(t, w->seq, w->chunks, w->chunk_size);
    size_t tail_len = cs_frames_tail_len(w->chunks);
    XXH3_64bits_update(w->hash, w->tail, tail_len);
    /* At most 64 iovecs a call: the append takes them in windows. */
    size_t n = w->copy ? 1 : w->niov;
    struct iovec *all = malloc((n + 1) * sizeof *all);
    if (!all) {
        errno = ENOMEM;
        return -1;
    }
    if (w->copy)
        all[0] = (struct iovec){w->buf, w->bytes};
    else if (n)
        memcpy(all, w->iov, n * sizeof *all);
    all[n] = (struct iovec){w->tail, tail_len};
    uint64_t off;
    int rc = rng_append_frames(w->ring, w->seq, all, (int)n + 1, &off);
    int e = errno;
    free(all);
    if (rc != 0) {
        errno = e;
        return -1;
    }
    rec->frames_len = w->bytes + tail_len;
    rec->frames_off = off;
    rec->frames_xxh3 = XXH3_64bits_digest(w->hash);
    rec->raw_xxh3 = XXH3_64bits_digest(w->raw_hash);
    return 0;
}

int cs_ring_frames_attach(cs_ring *r, const cs_ledger_ref *ref, cs_frames_writer *w, cs_err *err)
{
    uint32_t seq = ref->seq;
    cs_ledger_record rec = ref->rec;
    rec.chunk_size = w->chunk_size;
    rec.chunks = rec.len ? (uint32_t)((rec.len + w->chunk_size - 1) / w->chunk_size) : 0;
    pthread_mutex_lock(&r->wmu);
    /* Still the ledger the frames were made from: retained, the same file, the same record. */
    char name[CS_LEDGER_NAME_MAX], ignored[300];
    cs_ledger_name_format(name, sizeof name, seq);
    struct stat on_disk, held;
    cs_ledger_record now;
    bool same = rng_retained(r, seq) && fstatat(r->dfd, name, &on_disk, AT_SYMLINK_NOFOLLOW) == 0 &&
                fstat(ref->fd, &held) == 0 && on_disk.st_ino == held.st_ino && on_disk.st_dev == held.st_dev &&
                rng_read_record(r, seq, &now, NULL, ignored, sizeof ignored) == 0 && now.len == ref->rec.len &&
                now.xxh64 == ref->rec.xxh64 && now.frames_len == 0;
    int rc = 0;
    if (!same) {
        rc = cs_err_set(err, CS_RING_ERR_NOT_RETAINED, "store: ledger not retained: ledger %" PRIu32 " changed meanwhile",
                        seq);
    } else if (rng_frames_finish(w, &rec) != 0) {
        rc = cs_err_set(err, CS_RING_ERR_IO, "store: write ledger %" PRIu32 " frames: %s", seq, strerror(errno));
    } else if (rng_append_record(r, seq, &rec) != 0) {
        rc = cs_err_set(err, CS_RING_ERR_IO, "store: publish ledger %" PRIu32 " frames: %s", seq, strerror(errno));
    } else {
        rng_frames_bytes_adjust(r, (int64_t)rec.frames_len);
        rng_note_chunk_size(r, rec.chunk_size);
    }
    pthread_mutex_unlock(&r->wmu);
    rng_frames_writer_free(w);
    return rc;
}

void cs_ring_drop_frames(cs_ring *r, uint32_t seq, uint64_t frames_xxh3, const char *problem)
{
    pthread_mutex_lock(&r->wmu);
    rng_settle_locked(r, NULL); /* a failure here is the next write's to report */
    cs_ledger_record rec;
    char ignored[300];
    bool drop = rng_retained(r, seq) && rng_read_record(r, seq, &rec, NULL, ignored, sizeof ignored) == 0 &&
                rec.frames_len != 0 && rec.frames_xxh3 == frames_xxh3;
    if (drop)
        rng_forget_frames(r, seq, &rec);
    pthread_mutex_unlock(&r->wmu);
    if (drop)
        rng_log_frames_problem(r, seq, problem);
}
