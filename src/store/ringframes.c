/* SPDX-License-Identifier: Apache-2.0 */
/* Stored wire frames: the writer that makes ledger-<seq>.frames, and attaching or dropping
 * them. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/fdio.h"
#include "common/log.h"
#include "store/frames.h"
#include "store/ledgerdir.h"
#include "store/ring_internal.h"

struct cs_frames_writer {
    cs_ring *ring;
    uint32_t seq, chunk_size, chunks;
    int fd;
    int err; /* the first write error (errno), reported at finish */
    XXH3_state_t *hash;     /* of the frames file, as written */
    XXH3_state_t *raw_hash; /* of the raw chunks' bytes */
    uint8_t *tail; /* the index so far, then the trailer */
    size_t cap;
    uint64_t bytes;
};

int cs_ring_frames_begin(cs_ring *r, uint32_t seq, uint32_t chunk_size, cs_frames_writer **out, cs_err *err)
{
    *out = NULL;
    if (rng_settle(r, err) != 0)
        return -1;
    cs_frames_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->hash = XXH3_createState()) || !(w->raw_hash = XXH3_createState())) {
        if (w)
            XXH3_freeState(w->hash);
        free(w);
        return cs_err_set(err, CS_RING_ERR_IO, "store: write ledger %" PRIu32 " frames: %s", seq, strerror(ENOMEM));
    }
    XXH3_64bits_reset(w->hash);
    XXH3_64bits_reset(w->raw_hash);
    w->ring = r;
    w->seq = seq;
    w->chunk_size = chunk_size;
    char tmp[CS_LEDGER_NAME_MAX];
    rng_frames_tmp_name(tmp, seq);
    w->fd = openat(r->dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        int e = errno;
        XXH3_freeState(w->hash);
        XXH3_freeState(w->raw_hash);
        free(w);
        return cs_err_set(err, CS_RING_ERR_IO, "store: write ledger %" PRIu32 " frames: %s", seq, strerror(e));
    }
    *out = w;
    return 0;
}

void cs_frames_writer_add(cs_frames_writer *w, uint8_t codec, const void *payload, size_t len)
{
    if (w->err)
        return;
    size_t need = cs_frames_tail_len(w->chunks + 1);
    if (need > w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64 * CS_FRAMES_ENTRY_LEN + CS_FRAMES_TRAILER_LEN;
        uint8_t *grown = cap >= need ? realloc(w->tail, cap) : NULL;
        if (!grown) {
            w->err = ENOMEM;
            return;
        }
        w->tail = grown;
        w->cap = cap;
    }
    cs_frames_put_entry(w->tail + (size_t)w->chunks * CS_FRAMES_ENTRY_LEN, codec, (uint32_t)len,
                        XXH3_64bits(payload, len));
    w->chunks++;
    if (codec == 0) {
        XXH3_64bits_update(w->raw_hash, payload, len);
    } else {
        XXH3_64bits_update(w->hash, payload, len);
        if (cs_write_all(w->fd, payload, len) != 0)
            w->err = errno;
        w->bytes += len;
    }
}

void rng_frames_writer_free(cs_frames_writer *w, bool remove_tmp)
{
    if (w->fd >= 0)
        close(w->fd);
    if (remove_tmp) {
        char tmp[CS_LEDGER_NAME_MAX];
        rng_frames_tmp_name(tmp, w->seq);
        unlinkat(w->ring->dfd, tmp, 0);
    }
    XXH3_freeState(w->hash);
    XXH3_freeState(w->raw_hash);
    free(w->tail);
    free(w);
}

void cs_frames_writer_abort(cs_frames_writer *w)
{
    if (w)
        rng_frames_writer_free(w, true);
}

int rng_frames_finish(cs_frames_writer *w, cs_ledger_record *rec)
{
    if (!w->err && w->chunks != rec->chunks)
        w->err = EINVAL;
    if (!w->err && !w->tail && !(w->tail = malloc(CS_FRAMES_TRAILER_LEN)))
        w->err = ENOMEM;
    if (w->err) {
        errno = w->err;
        return -1;
    }
    uint8_t *t = w->tail + (size_t)w->chunks * CS_FRAMES_ENTRY_LEN;
    cs_frames_put_trailer(t, w->seq, w->chunks, w->chunk_size);
    size_t tail_len = cs_frames_tail_len(w->chunks);
    XXH3_64bits_update(w->hash, w->tail, tail_len);
    int rc = cs_write_all(w->fd, w->tail, tail_len);
    int e = errno;
    if (rc == 0)
        rng_start_writeback(w->fd);
    if (close(w->fd) != 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    w->fd = -1;
    if (rc != 0) {
        errno = e;
        return -1;
    }
    rec->frames_len = w->bytes + tail_len;
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
    if (rng_frames_finish(w, &rec) != 0) {
        int e = errno;
        rng_frames_writer_free(w, true);
        return cs_err_set(err, CS_RING_ERR_IO, "store: write ledger %" PRIu32 " frames: %s", seq, strerror(e));
    }
    pthread_mutex_lock(&r->wmu);
    /* Still the ledger the frames were made from: retained, the same file, the same record. */
    char name[CS_LEDGER_NAME_MAX], fname[CS_LEDGER_NAME_MAX], ftmp[CS_LEDGER_NAME_MAX], ignored[300];
    cs_ledger_name_format(name, sizeof name, seq);
    struct stat on_disk, held;
    cs_ledger_record now;
    bool same = rng_retained(r, seq) && fstatat(r->dfd, name, &on_disk, AT_SYMLINK_NOFOLLOW) == 0 &&
                fstat(ref->fd, &held) == 0 && on_disk.st_ino == held.st_ino && on_disk.st_dev == held.st_dev &&
                rng_read_record(r->dfd, seq, &now, ignored, sizeof ignored) == 0 && now.len == ref->rec.len &&
                now.xxh64 == ref->rec.xxh64 && now.frames_len == 0;
    int rc = 0;
    rng_frames_name(fname, seq);
    rng_frames_tmp_name(ftmp, seq);
    if (!same) {
        rc = cs_err_set(err, CS_RING_ERR_NOT_RETAINED, "store: ledger not retained: ledger %" PRIu32 " changed meanwhile",
                        seq);
    } else if (renameat(r->dfd, ftmp, r->dfd, fname) != 0 || rng_write_record(r->dfd, seq, &rec) != 0) {
        rc = cs_err_set(err, CS_RING_ERR_IO, "store: publish ledger %" PRIu32 " frames: %s", seq, strerror(errno));
        unlinkat(r->dfd, fname, 0);
    } else {
        rng_frames_bytes_adjust(r, (int64_t)rec.frames_len);
        rng_note_chunk_size(r, rec.chunk_size);
    }
    pthread_mutex_unlock(&r->wmu);
    rng_frames_writer_free(w, rc != 0);
    return rc;
}

void cs_ring_drop_frames(cs_ring *r, uint32_t seq, uint64_t frames_xxh3, const char *problem)
{
    pthread_mutex_lock(&r->wmu);
    rng_settle_locked(r, NULL); /* a failure here is the next write's to report */
    cs_ledger_record rec;
    char ignored[300];
    bool drop = rng_retained(r, seq) && rng_read_record(r->dfd, seq, &rec, ignored, sizeof ignored) == 0 &&
                rec.frames_len != 0 && rec.frames_xxh3 == frames_xxh3;
    if (drop)
        rng_forget_frames(r, seq, &rec);
    pthread_mutex_unlock(&r->wmu);
    if (drop)
        rng_log_frames_problem(r, seq, problem);
}
