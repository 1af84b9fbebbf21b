/* SPDX-License-Identifier: Apache-2.0 */
/* The write path: a ledger's file (O_DIRECT when the parts allow it), its record and frames,
 * published by renames, then the bounds. */
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
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/log.h"
#include "store/frames.h"
#include "store/ledgerdir.h"
#include "store/ring_internal.h"
#include "wire/wire.h"

/* Writes all parts with writev, resuming after partial writes and EINTR. The iovec window only
 * copies descriptors; the ledger bytes are never joined. */
static int write_parts(int fd, const struct iovec *parts, size_t nparts)
{
    size_t i = 0, off = 0; /* next byte to write: parts[i].iov_base + off */
    for (;;) {
        while (i < nparts && off == parts[i].iov_len) {
            i++;
            off = 0;
        }
        if (i == nparts)
            return 0;
        struct iovec win[64];
        int cnt = 0;
        for (size_t j = i; j < nparts && cnt < (int)(sizeof win / sizeof win[0]); j++) {
            size_t skip = j == i ? off : 0;
            win[cnt].iov_base = (char *)parts[j].iov_base + skip;
            win[cnt].iov_len = parts[j].iov_len - skip;
            cnt++;
        }
        ssize_t w = writev(fd, win, cnt);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        if (w == 0) {
            /* Cannot happen for a regular file with bytes pending; guard against spinning. */
            errno = EIO;
            return -1;
        }
        for (size_t left = (size_t)w; left > 0;) {
            size_t room = parts[i].iov_len - off;
            size_t step = left < room ? left : room;
            off += step;
            left -= step;
            if (off == parts[i].iov_len) {
                i++;
                off = 0;
            }
        }
    }
}

void cs_ring_set_direct(cs_ring *r, bool on)
{
    CS_OWNED_DEBUG(&r->put_thread, RNG_PUT_THREAD);
    r->direct = on;
}

void cs_ring_take_put_thread(cs_ring *r)
{
    cs_owner_bind(&r->put_thread);
}

void cs_ring_leave_put_thread(cs_ring *r)
{
    cs_owner_release(&r->put_thread, RNG_PUT_THREAD);
}

void rng_start_writeback(int fd)
{
    (void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}

/* How long a put waits before it retries a write that met a transient shortage. */
#define RETRY_NS (5 * 1000 * 1000)

/* O_DIRECT wants the buffer, the length and the file offset on the device's block boundary; 4096
 * is a multiple of the block size of every file system the ring is meant for. */
#define DIRECT_ALIGN 4096

/* Every part starts on a block and all but the last are whole blocks: the ledger can go to the
 * disk straight from them. */
static bool direct_fits(const struct iovec *parts, size_t nparts)
{
    for (size_t i = 0; i < nparts; i++) {
        if ((uintptr_t)parts[i].iov_base % DIRECT_ALIGN != 0)
            return false;
        if (i + 1 < nparts && parts[i].iov_len % DIRECT_ALIGN != 0)
            return false;
    }
    return true;
}

static ssize_t writev_retry(int fd, const struct iovec *iov, int cnt)
{
    ssize_t w;
    do
        w = writev(fd, iov, cnt);
    while (w < 0 && errno == EINTR);
    return w;
}

/* Writes the ledger file with O_DIRECT: the whole blocks straight from the parts (no copy into
 * the page cache, whose cost per ledger was the ring thread's largest: see
 * bench/results/2026-12-sittings.md), the last partial block through a zero-padded bounce block,
 * then the file is cut to its length.
 * Returns 0 written, -1 failed (errno), 1 the file system refused O_DIRECT (EINVAL) or a write came
 * back short: the caller writes the file through the page cache instead. */
static int write_direct(cs_ring *r, const char *tmp, const struct iovec *parts, size_t nparts)
{
    int fd = openat(r->dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_DIRECT, 0644);
    if (fd < 0)
        return errno == EINVAL ? 1 : -1;
    size_t last = nparts ? parts[nparts - 1].iov_len : 0;
    size_t head = last - last % DIRECT_ALIGN, tail = last % DIRECT_ALIGN;
    uint64_t len = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < nparts;) {
        struct iovec win[64];
        int cnt = 0;
        size_t want = 0, next = i;
        for (; next < nparts && cnt < (int)(sizeof win / sizeof win[0]); next++) {
            size_t l = next + 1 == nparts ? head : parts[next].iov_len;
            if (l == 0)
                continue;
            win[cnt++] = (struct iovec){parts[next].iov_base, l};
            want += l;
        }
        i = next;
        if (cnt == 0)
            break;
        ssize_t w = writev_retry(fd, win, cnt);
        if (w < 0)
            rc = errno == EINVAL ? 1 : -1;
        else if ((size_t)w != want)
            rc = 1;
        else
            len += want;
    }
    if (rc == 0 && tail) {
        void *bounce = NULL;
        if (posix_memalign(&bounce, DIRECT_ALIGN, DIRECT_ALIGN) != 0) {
            errno = ENOMEM;
            rc = -1;
        } else {
            memset(bounce, 0, DIRECT_ALIGN);
            memcpy(bounce, (const uint8_t *)parts[nparts - 1].iov_base + head, tail);
            ssize_t w;
            do
                w = pwrite(fd, bounce, DIRECT_ALIGN, (off_t)len);
            while (w < 0 && errno == EINTR);
            rc = w == DIRECT_ALIGN ? 0 : w < 0 && errno != EINVAL ? -1 : 1;
            free(bounce);
            len += tail;
        }
    }
    if (rc == 0 && tail && ftruncate(fd, (off_t)len) != 0) /* the padding of the last block goes */
        rc = -1;
    int e = errno;
    if (close(fd) != 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    if (rc == 1 && !r->direct_refused) {
        r->direct_refused = true;
        CS_LOG(CS_LOG_WARN, "ring: O_DIRECT write refused; ledger files are written through the page cache",
               KV_S("dir", r->dir));
    }
    errno = e;
    return rc;
}

/* `store: write ledger S: <strerror>`, with errno left as e for the caller to judge. */
static int write_failed(cs_err *err, uint32_t seq, int e)
{
    cs_err_set(err, CS_RING_ERR_IO, "store: write ledger %" PRIu32 ": %s", seq, strerror(e));
    errno = e;
    return -1;
}

/* A shortage that a moment may end (a descriptor or memory freed by another thread). */
static bool transient(int e)
{
    return e == EMFILE || e == ENFILE || e == ENOMEM || e == EAGAIN || e == EINTR;
}

/* Writes `<final>.tmp` for the ledger; its rename into place is a separate step, so a failed
 * write changes nothing the ring serves. */
static int write_tmp(cs_ring *r, uint32_t seq, const struct iovec *parts, size_t nparts, cs_err *err)
{
    char tmp[CS_LEDGER_NAME_MAX];
    rng_tmp_name(tmp, seq);
    int rc = r->direct && !r->direct_refused && direct_fits(parts, nparts) ? write_direct(r, tmp, parts, nparts) : 1;
    int e = errno;
    if (rc == 1) {
        int fd = openat(r->dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
            return write_failed(err, seq, errno);
        rc = write_parts(fd, parts, nparts);
        e = errno;
        if (rc == 0)
            rng_start_writeback(fd);
        if (close(fd) != 0 && rc == 0) {
            rc = -1;
            e = errno;
        }
    }
    if (rc != 0) {
        unlinkat(r->dfd, tmp, 0);
        return write_failed(err, seq, e);
    }
    return 0;
}

/* Appends the ledger's frames (when chunks is given) and then its record to its segment, under
 * wmu: a record never claims frames that are not written. */
static int append_sidecars(cs_ring *r, uint32_t seq, const struct iovec *chunks, size_t nchunks,
                           cs_ledger_record *rec, cs_err *err)
{
    rec->frames_len = rec->frames_off = rec->frames_xxh3 = rec->raw_xxh3 = 0;
    if (chunks && rec->chunk_size) {
        cs_frames_writer *w = rng_frames_writer_new(r, seq, rec->chunk_size, false);
        if (!w)
            return write_failed(err, seq, ENOMEM);
        for (size_t i = 0; i < nchunks; i++) {
            const uint8_t *m = chunks[i].iov_base;
            cs_frames_writer_add(w, m[CS_WIRE_CHUNK_HEADER_LEN - 1], m + CS_WIRE_CHUNK_HEADER_LEN,
                                 chunks[i].iov_len - CS_WIRE_CHUNK_HEADER_LEN);
        }
        int rc = rng_frames_finish(w, rec);
        int e = errno;
        rng_frames_writer_free(w);
        if (rc != 0 && transient(e))
            return write_failed(err, seq, e); /* retried by the caller, frames and all */
        if (rc != 0) {
            /* Frames are derived from the ledger: a segment that will not take them costs the
             * frames (the ledger is replayed by re-encoding), never the ledger. */
            rng_frames_append_failed(r, seq, e);
            rec->frames_len = rec->frames_off = rec->frames_xxh3 = rec->raw_xxh3 = 0;
        }
    }
    if (rng_append_record(r, seq, rec) != 0)
        return write_failed(err, seq, errno);
    return 0;
}

/* A put that failed: counted, and remembered when it is the ledger after latest (or follows the
 * ones that failed before it), so the put that works again leaves a hole for it instead of
 * resetting the ring. */
static void put_failed(cs_ring *r, uint32_t seq)
{
    atomic_fetch_add(&r->write_failures, 1);
    atomic_store(&r->degraded, true);
    pthread_mutex_lock(&r->wmu);
    bool next = r->filled && r->latest < UINT32_MAX && seq == r->latest + 1;
    if (r->failed_first && seq == (uint64_t)r->failed_last + 1)
        r->failed_last = seq; /* the run of failures goes on */
    else if (next)
        r->failed_first = r->failed_last = seq;
    else if (!r->failed_first || seq != r->failed_last) /* not a retry of the last one */
        r->failed_first = r->failed_last = 0;
    pthread_mutex_unlock(&r->wmu);
}

/* Whether seq follows a run of failed puts that began right after latest. */
static bool follows_failed_puts(const cs_ring *r, uint32_t seq)
{
    return r->filled && r->failed_first && r->failed_first == (uint64_t)r->latest + 1 && seq > r->failed_first &&
           (uint64_t)r->failed_last + 1 >= seq;
}

int cs_ring_put(cs_ring *r, uint32_t seq, const struct iovec *parts, size_t nparts, const struct iovec *chunks,
                size_t nchunks, const cs_ledger_record *rec_in, bool *reset, cs_err *err)
{
    CS_OWNED(&r->put_thread, RNG_PUT_THREAD);
    if (reset)
        *reset = false;
    if (seq == 0)
        return cs_err_set(err, CS_RING_ERR_INVALID_SEQ,
                          "store: invalid ledger sequence: ledger sequences start at 1, so 0 means a "
                          "wrapped counter");
    if (rng_settle(r, err) != 0) {
        put_failed(r, seq);
        return -1;
    }
    /* The new ledger is written before anything is reset: a write that fails leaves the ring
     * serving what it held (the ledger it misses is a hole once a write works again). */
    int wrc = write_tmp(r, seq, parts, nparts, err);
    if (wrc != 0 && transient(errno)) {
        /* Retried once, a few milliseconds on: only the put thread waits, and the ledger is
         * counted once whatever the retry does. */
        nanosleep(&(struct timespec){.tv_nsec = RETRY_NS}, NULL);
        wrc = write_tmp(r, seq, parts, nparts, err);
    }
    if (wrc != 0) {
        put_failed(r, seq);
        return -1;
    }
    pthread_mutex_lock(&r->wmu);
    /* Ledgers the ring failed to write are a hole, not a reason to forget the ones before them. */
    uint32_t skipped = follows_failed_puts(r, seq) ? r->failed_first : 0;
    r->failed_first = r->failed_last = 0;
    /* The bounds reach the hole's end at once (readers meet the hole there), seq once published. */
    if (skipped && rng_hole_add_bounds(r, skipped, seq - 1, true, r->oldest, seq - 1) != 0)
        skipped = 0; /* no memory to record the hole: the ring resets to seq, as for any gap */
    if (!skipped && r->filled && (r->latest == UINT32_MAX || seq != r->latest + 1)) {
        uint32_t oldest = r->oldest, latest = r->latest;
        /* Empty the bounds first so no reader is sent to a file about to disappear; the segments
         * go with the ledgers, so the new ledger's record starts a log of its own. */
        rng_set_bounds(r, false, 0, 0);
        rng_unlink_range(r, oldest, latest);
        rng_seg_remove_all(r);
        if (reset)
            *reset = true;
    }
    cs_ledger_record rec = *rec_in;
    uint64_t log_end = rng_log_end(r, seq);
    int arc = append_sidecars(r, seq, chunks, nchunks, &rec, err);
    if (arc != 0 && transient(errno)) {
        nanosleep(&(struct timespec){.tv_nsec = RETRY_NS}, NULL);
        rec = *rec_in;
        arc = append_sidecars(r, seq, chunks, nchunks, &rec, err);
    }
    char name[CS_LEDGER_NAME_MAX], tmp[CS_LEDGER_NAME_MAX];
    cs_ledger_name_format(name, sizeof name, seq);
    rng_tmp_name(tmp, seq);
    if (arc == 0 && renameat(r->dfd, tmp, r->dfd, name) != 0) {
        arc = cs_err_set(err, CS_RING_ERR_IO, "store: publish ledger %" PRIu32 ": %s", seq, strerror(errno));
        rng_unappend_record(r, seq, log_end);
    }
    if (arc != 0) {
        unlinkat(r->dfd, tmp, 0);
        pthread_mutex_unlock(&r->wmu); /* the hole stays; put_failed begins a new run at seq */
        put_failed(r, seq);
        return -1;
    }
    atomic_store(&r->degraded, false);
    rng_bytes_adjust(r, (int64_t)rec.len);
    rng_frames_bytes_adjust(r, (int64_t)rec.frames_len);
    rng_note_chunk_size(r, rec.chunk_size);
    uint32_t oldest = r->filled ? r->oldest : seq;
    uint32_t keep = rng_pruned_oldest(r, oldest, seq);
    rng_set_bounds(r, true, keep, seq);
    if (skipped)
        CS_LOG(CS_LOG_WARN, "ring: ledgers whose writes failed are a hole; the ledgers before them stay",
               KV_U("first", skipped), KV_U("last", seq - 1), KV_U("ledger", seq));
    if (keep != oldest)
        rng_unlink_range(r, oldest, keep - 1);
    pthread_mutex_unlock(&r->wmu);
    return 0;
}
