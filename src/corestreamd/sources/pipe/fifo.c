/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/sources/pipe/fifo.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/log.h"
#include "corestream/wire.h"
#include "corestreamd/sources/pipe/framereader.h"
#include "corestreamd/sources/pipe/xdrwalk.h"
#include "corestreamd/sources/rejoin.h"

#define FIFO_MODE 0620
#define SKIP_BLOCK (64u << 10)

typedef struct fifo_source {
    cs_source base;
    char *path;
    cs_ring *ring;
    cs_cancel *cancel;
    int fd;
    /* Opened and not yet readable: a FIFO without a writer reads as EOF, so nothing is read from
     * it until poll says a writer has written (or come and gone). */
    bool fresh;
    cs_frame_reader *fr;
    bool done; /* failed: next() and read() report the end */
    bool waiting; /* the writer went away: the listener was told, and waits to hear it is back */
    uint64_t reconnects;
    uint32_t last_seq; /* the last ledger handed to the source loop */
    /* The ledger in flight: its declared length, and the bytes of it handed out so far. */
    bool in_frame;
    uint32_t len;
    uint64_t handed;
    XXH64_state_t *handed_hash;
} fifo_source;

static int open_fifo(fifo_source *fs, cs_err *err)
{
    int fd = open(fs->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return cs_err_set(err, 0, "pipe source: open \"%s\": %s", fs->path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) {
        close(fd);
        return cs_err_set(err, 0, "pipe source: \"%s\" is not a FIFO", fs->path);
    }
    cs_frame_reader *fr;
    if (cs_frame_reader_new(&fr, fd, fs->cancel, CS_FRAME_BUFFER_DEFAULT, CS_MAX_PAYLOAD_SIZE, err) != 0) {
        close(fd);
        return cs_err_prefix(err, "pipe source: ");
    }
    cs_frame_reader_free(fs->fr);
    if (fs->fd >= 0)
        close(fs->fd);
    fs->fd = fd;
    fs->fr = fr;
    fs->fresh = true;
    return 0;
}

static int cancelled(cs_err *err)
{
    return cs_err_set(err, CS_ERR_CANCELLED, "context canceled");
}

static int failed(fifo_source *fs, cs_err *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int failed(fifo_source *fs, cs_err *err, const char *fmt, ...)
{
    fs->done = true;
    va_list ap;
    va_start(ap, fmt);
    cs_err_vset(err, 0, fmt, ap);
    va_end(ap);
    return -1;
}

/* The writer went away: the listener hears it, and the FIFO is reopened for the next one. */
static int writer_gone(fifo_source *fs, cs_err *err)
{
    cs_source_tell_reconnecting(&fs->base, true); /* before the line: whoever read it sees the state */
    fs->waiting = true;
    if (fs->in_frame)
        CS_LOG(CS_LOG_WARN, "pipe source: the FIFO's writer went away inside a ledger; waiting for the next one",
               KV_S("path", fs->path), KV_U("ledger", fs->last_seq), KV_U("bytes_sent", fs->handed),
               KV_U("bytes", fs->len));
    else
        CS_LOG(CS_LOG_WARN, "pipe source: the FIFO's writer went away; waiting for the next one",
               KV_S("path", fs->path), KV_U("after_ledger", fs->last_seq));
    if (open_fifo(fs, err) != 0) {
        fs->done = true;
        return -1;
    }
    fs->reconnects++;
    return 0;
}

/* The next marker, across writers: 1 with *len, or -1 with err (the end). A frame cut short by its
 * writer before its prefix was read is dropped with it. Once a marker arrives after a reconnect,
 * the listener hears the writer is back. */
static int next_marker(fifo_source *fs, uint32_t *len, const uint8_t **prefix, size_t *n, cs_err *err)
{
    for (;;) {
        if (fs->fresh) {
            if (cs_cancel_wait_readable(fs->cancel, fs->fd) != 0) {
                if (cs_cancel_is_set(fs->cancel))
                    return cancelled(err);
                return failed(fs, err, "pipe source: wait for a writer of \"%s\": %s", fs->path, strerror(errno));
            }
            fs->fresh = false;
        }
        cs_err e = {0};
        const char *stage = "marker";
        int r = cs_frame_reader_next(fs->fr, len, &e);
        if (r > 0) {
            stage = "prefix";
            r = cs_frame_reader_prefix(fs->fr, prefix, n, &e) == 0 ? 1 : -1;
        }
        if (r > 0)
            return 1;
        if (e.kind == CS_ERR_CANCELLED || cs_cancel_is_set(fs->cancel))
            return cancelled(err);
        if (r < 0 && e.kind != CS_FRAME_ERR_SHORT)
            return failed(fs, err, "pipe source: read frame %s: %s", stage, e.msg);
        if (writer_gone(fs, err) != 0)
            return -1;
    }
}

static int frame_seq(fifo_source *fs, const uint8_t *prefix, size_t n, uint32_t *seq, cs_err *err)
{
    cs_err e;
    if (cs_xdr_ledger_seq(prefix, n, seq, &e) != 0)
        return failed(fs, err, "pipe source: read ledger seq: %s", e.msg);
    return 0;
}

static void told_back(fifo_source *fs)
{
    if (!fs->waiting)
        return;
    fs->waiting = false;
    CS_LOG(CS_LOG_INFO, "pipe source: a writer reopened the FIFO", KV_S("path", fs->path),
           KV_U("reconnects", fs->reconnects));
    cs_source_tell_reconnecting(&fs->base, false);
}

/* The next frame's length and ledger, across writers (next_marker); the listener hears a writer
 * that is back. Returns 0, or -1 with err. */
static int next_frame(fifo_source *fs, uint32_t *len, uint32_t *seq, cs_err *err)
{
    const uint8_t *prefix;
    size_t n;
    if (next_marker(fs, len, &prefix, &n, err) != 1)
        return -1;
    told_back(fs);
    return frame_seq(fs, prefix, n, seq, err);
}

static int fifo_next(cs_source *s, cs_emission *em, cs_err *err)
{
    fifo_source *fs = (fifo_source *)s;
    em->seq = 0;
    em->declared_size = 0;
    if (fs->done)
        return failed(fs, err, "pipe source: the FIFO source already failed");
    uint32_t len, seq;
    if (next_frame(fs, &len, &seq, err) != 0)
        return -1;
    em->seq = seq;
    em->declared_size = len;
    fs->last_seq = seq;
    fs->in_frame = true;
    fs->len = len;
    fs->handed = 0;
    XXH64_reset(fs->handed_hash, 0);
    return 1;
}

static ssize_t frame_read(void *arg, uint8_t *buf, size_t len, cs_err *err)
{
    fifo_source *fs = arg;
    return cs_frame_reader_read(fs->fr, buf, len, err);
}

/* Reads past the first `handed` bytes of the ledger in flight as the new writer sends them again,
 * checking they hash as the ones handed out did. Returns 0 (the rest follows), 1 when this writer
 * went away too, or -1 with err. */
static int skip_handed(fifo_source *fs, cs_err *err)
{
    XXH64_state_t *h = XXH64_createState();
    uint8_t *buf = malloc(SKIP_BLOCK);
    if (!h || !buf) {
        XXH64_freeState(h);
        free(buf);
        return failed(fs, err, "source: out of memory");
    }
    XXH64_reset(h, 0);
    int rc = 0;
    for (uint64_t left = fs->handed; left > 0 && rc == 0;) {
        cs_err e;
        ssize_t k = cs_frame_reader_read(fs->fr, buf, left < SKIP_BLOCK ? (size_t)left : SKIP_BLOCK, &e);
        if (k > 0) {
            XXH64_update(h, buf, (size_t)k);
            left -= (uint64_t)k;
        } else if (k == 0) {
            rc = failed(fs, err, "pipe source: ledger %" PRIu32 " ended early", fs->last_seq); /* len is checked */
        } else if (e.kind == CS_ERR_CANCELLED || cs_cancel_is_set(fs->cancel)) {
            rc = cancelled(err);
        } else if (e.kind == CS_FRAME_ERR_SHORT) {
            rc = 1;
        } else {
            rc = failed(fs, err, "pipe source: read frame body: %s", e.msg);
        }
    }
    if (rc == 0 && XXH64_digest(h) != XXH64_digest(fs->handed_hash))
        rc = failed(fs, err,
                    "pipe source: the writer of \"%s\" restarted inside ledger %" PRIu32 ", then sent ledger %" PRIu32
                    " again with other bytes in its first %" PRIu64,
                    fs->path, fs->last_seq, fs->last_seq, fs->handed);
    XXH64_freeState(h);
    free(buf);
    return rc;
}

/* After a writer restarted inside the ledger in flight: its earlier ledgers are compared with the
 * ring, then the ledger in flight must come again, the same length, beginning with the bytes
 * already handed out, which are read past. Returns 0 (read on), or -1 with err. */
static int resume_frame(fifo_source *fs, cs_err *err)
{
    uint32_t want = fs->last_seq;
    for (;;) {
        uint32_t len, seq;
        if (next_frame(fs, &len, &seq, err) != 0)
            return -1;
        if (seq > want)
            return failed(fs, err, "pipe source: the writer of \"%s\" restarted inside ledger %" PRIu32
                                   ", then sent ledger %" PRIu32, fs->path, want, seq);
        if (seq < want) {
            cs_err e;
            if (cs_rejoin_compare(fs->ring, seq, frame_read, fs, &e) != 0) {
                if (e.kind == CS_ERR_CANCELLED || cs_cancel_is_set(fs->cancel))
                    return cancelled(err);
                if (e.kind == CS_FRAME_ERR_SHORT)
                    continue; /* gone again: next_marker waits for the next writer */
                return failed(fs, err, "pipe source: the writer of \"%s\" restarted inside ledger %" PRIu32 ": %s",
                              fs->path, want, e.msg);
            }
            continue;
        }
        if (len != fs->len)
            return failed(fs, err, "pipe source: the writer of \"%s\" restarted inside ledger %" PRIu32
                                   ", then sent ledger %" PRIu32 " again as %" PRIu32 " bytes, not %" PRIu32,
                          fs->path, want, want, len, fs->len);
        int r = skip_handed(fs, err);
        if (r <= 0)
            return r;
        /* r == 1: the writer went away again while the prefix was read past; start over. */
        if (writer_gone(fs, err) != 0)
            return -1;
    }
}

static ssize_t fifo_read(cs_source *s, uint8_t *buf, size_t len, cs_err *err)
{
    fifo_source *fs = (fifo_source *)s;
    if (fs->done)
        return failed(fs, err, "pipe source: the FIFO source already failed");
    for (;;) {
        cs_err e;
        ssize_t k = cs_frame_reader_read(fs->fr, buf, len, &e);
        if (k > 0) {
            XXH64_update(fs->handed_hash, buf, (size_t)k);
            fs->handed += (uint64_t)k;
            return k;
        }
        if (k == 0) {
            fs->in_frame = false;
            return 0;
        }
        if (e.kind == CS_ERR_CANCELLED || cs_cancel_is_set(fs->cancel))
            return cancelled(err);
        if (e.kind != CS_FRAME_ERR_SHORT)
            return failed(fs, err, "pipe source: read frame body: %s", e.msg);
        if (writer_gone(fs, err) != 0 || resume_frame(fs, err) != 0)
            return -1;
    }
}

static void fifo_destroy(cs_source *s)
{
    fifo_source *fs = (fifo_source *)s;
    if (!fs)
        return;
    cs_frame_reader_free(fs->fr);
    if (fs->fd >= 0)
        close(fs->fd);
    XXH64_freeState(fs->handed_hash);
    free(fs->path);
    free(fs);
}

static const cs_source_ops fifo_ops = {
    .next = fifo_next,
    .read = fifo_read,
    .destroy = fifo_destroy,
};

/* Creates the FIFO when the path does not exist (mode FIFO_MODE whatever the umask); an existing
 * path must be one. */
static int make_fifo(const char *path, cs_err *err)
{
    struct stat st;
    if (stat(path, &st) == 0) {
        if (!S_ISFIFO(st.st_mode))
            return cs_err_set(err, 0, "pipe source: \"%s\" is not a FIFO", path);
        return 0;
    }
    if (errno != ENOENT)
        return cs_err_set(err, 0, "pipe source: open \"%s\": %s", path, strerror(errno));
    if (mkfifo(path, FIFO_MODE) != 0 && errno != EEXIST)
        return cs_err_set(err, 0, "pipe source: create FIFO \"%s\": %s", path, strerror(errno));
    if (chmod(path, FIFO_MODE) != 0)
        return cs_err_set(err, 0, "pipe source: create FIFO \"%s\": chmod: %s", path, strerror(errno));
    CS_LOG(CS_LOG_INFO, "pipe source: created the FIFO", KV_S("path", path), KV_S("mode", "0620"));
    return 0;
}

int cs_fifo_source_new(cs_source **out, const char *path, cs_ring *ring, cs_cancel *cancel, cs_err *err)
{
    *out = NULL;
    if (make_fifo(path, err) != 0)
        return -1;
    fifo_source *fs = calloc(1, sizeof *fs);
    if (fs) {
        fs->path = strdup(path);
        fs->handed_hash = XXH64_createState();
    }
    if (!fs || !fs->path || !fs->handed_hash) {
        if (fs) {
            free(fs->path);
            XXH64_freeState(fs->handed_hash);
        }
        free(fs);
        return cs_err_set(err, 0, "source: out of memory");
    }
    fs->base.ops = &fifo_ops;
    fs->ring = ring;
    fs->cancel = cancel;
    fs->fd = -1;
    if (open_fifo(fs, err) != 0) {
        fifo_destroy(&fs->base);
        return -1;
    }
    *out = &fs->base;
    return 0;
}

uint64_t cs_fifo_source_reconnects(const cs_source *s)
{
    return ((const fifo_source *)s)->reconnects;
}
