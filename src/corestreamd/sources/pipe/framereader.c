/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/sources/pipe/framereader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "corestream/wire.h"
#include "corestreamd/sources/source.h"

typedef enum frame_state {
    FRAME_NONE,   /* between frames: the next thing on the pipe is a marker */
    FRAME_MARKED, /* marker read, prefix not yet */
    FRAME_BODY,   /* prefix held; body being served */
} frame_state;

struct cs_frame_reader {
    int fd;
    cs_cancel *cancel;
    uint32_t max_frame;
    uint8_t *buf; /* read-ahead: bytes [pos, end) are unconsumed pipe bytes */
    size_t cap, pos, end;

    frame_state state;
    uint32_t len;       /* current frame length */
    uint64_t left;      /* frame bytes still on the pipe or in buf, past the prefix */
    size_t prefix_len;  /* bytes held in prefix */
    size_t prefix_off;  /* prefix bytes already served as body */
    uint8_t prefix[CS_FRAME_PREFIX_MAX];
};

static int cancelled(cs_err *err)
{
    return cs_err_set(err, CS_ERR_CANCELLED, "context canceled");
}

/* One read(2) of at most n bytes into dst, waiting for readability (or the cancel) when the pipe
 * is empty. Returns the count, 0 at EOF, -1 on error. A cancel is checked before every read and
 * wins over any failure, so a shutdown reports itself rather than whatever it caused. */
static ssize_t sys_read(cs_frame_reader *r, uint8_t *dst, size_t n, cs_err *err)
{
    for (;;) {
        if (cs_cancel_is_set(r->cancel))
            return cancelled(err);
        ssize_t k = read(r->fd, dst, n);
        if (k >= 0)
            return k;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (cs_cancel_wait_readable(r->cancel, r->fd) == 0)
                continue;
            if (cs_cancel_is_set(r->cancel))
                return cancelled(err);
            return cs_err_set(err, 0, "wait for the pipe: %s", strerror(errno));
        }
        int e = errno;
        if (cs_cancel_is_set(r->cancel))
            return cancelled(err);
        return cs_err_set(err, 0, "%s", strerror(e));
    }
}

/* Refills the empty read-ahead buffer. Returns the byte count, 0 at EOF, -1 on error. */
static ssize_t refill(cs_frame_reader *r, cs_err *err)
{
    r->pos = r->end = 0;
    ssize_t k = sys_read(r, r->buf, r->cap, err);
    if (k > 0)
        r->end = (size_t)k;
    return k;
}

/* Reads exactly n bytes into dst through the buffer. Returns the count read before EOF (n when
 * complete), or -1 on error. */
static ssize_t read_full(cs_frame_reader *r, uint8_t *dst, size_t n, cs_err *err)
{
    size_t got = 0;
    while (got < n) {
        if (r->pos == r->end) {
            ssize_t k = refill(r, err);
            if (k < 0)
                return -1;
            if (k == 0)
                break;
        }
        size_t t = r->end - r->pos;
        if (t > n - got)
            t = n - got;
        memcpy(dst + got, r->buf + r->pos, t);
        r->pos += t;
        got += t;
    }
    return (ssize_t)got;
}

/* Drops what is left of the current frame (a consumer that stopped reading a body early). */
static int skip_rest(cs_frame_reader *r, cs_err *err)
{
    if (r->state == FRAME_MARKED) {
        const uint8_t *p;
        size_t n;
        if (cs_frame_reader_prefix(r, &p, &n, err) != 0)
            return -1;
    }
    while (r->left > 0) {
        if (r->pos == r->end) {
            ssize_t k = refill(r, err);
            if (k < 0)
                return -1;
            if (k == 0)
                return cs_err_set(err, CS_FRAME_ERR_SHORT,
                                  "frame truncated %llu bytes short: unexpected EOF",
                                  (unsigned long long)r->left);
        }
        size_t t = r->end - r->pos;
        if (t > r->left)
            t = (size_t)r->left;
        r->pos += t;
        r->left -= t;
    }
    r->state = FRAME_NONE;
    return 0;
}

int cs_frame_reader_new(cs_frame_reader **out, int fd, cs_cancel *cancel, size_t buffer_size,
                        uint32_t max_frame, cs_err *err)
{
    *out = NULL;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0))
        return cs_err_set(err, 0, "frame reader: set O_NONBLOCK: %s", strerror(errno));
    cs_frame_reader *r = calloc(1, sizeof *r);
    size_t cap = buffer_size ? buffer_size : CS_FRAME_BUFFER_DEFAULT;
    uint8_t *buf = r ? malloc(cap) : NULL;
    if (!buf) {
        free(r);
        return cs_err_set(err, 0, "frame reader: out of memory");
    }
    r->fd = fd;
    r->cancel = cancel;
    r->max_frame = max_frame ? max_frame : CS_MAX_PAYLOAD_SIZE;
    r->buf = buf;
    r->cap = cap;
    r->state = FRAME_NONE;
    *out = r;
    return 0;
}

void cs_frame_reader_free(cs_frame_reader *r)
{
    if (!r)
        return;
    free(r->buf);
    free(r);
}

int cs_frame_reader_next(cs_frame_reader *r, uint32_t *len, cs_err *err)
{
    if (r->state != FRAME_NONE && skip_rest(r, err) != 0)
        return -1;
    uint8_t m[4];
    ssize_t got = read_full(r, m, sizeof m, err);
    if (got < 0)
        return -1;
    if (got == 0)
        return 0;
    if (got < 4)
        return cs_err_set(err, CS_FRAME_ERR_SHORT, "unexpected EOF");
    uint32_t marker = (uint32_t)m[0] << 24 | (uint32_t)m[1] << 16 | (uint32_t)m[2] << 8 | m[3];
    /* Core writes every record as one last fragment; multi-fragment records are not supported. */
    if (!(marker & 0x80000000u))
        return cs_err_set(err, CS_FRAME_ERR_MALFORMED, "malformed XDR frame header");
    uint32_t n = marker & 0x7fffffffu;
    if (n > r->max_frame)
        return cs_err_set(err, CS_FRAME_ERR_TOO_BIG, "frame is %u bytes, over the %u-byte cap", n,
                          r->max_frame);
    r->len = n;
    r->left = n;
    r->prefix_len = r->prefix_off = 0;
    r->state = FRAME_MARKED;
    *len = n;
    return 1;
}

int cs_frame_reader_prefix(cs_frame_reader *r, const uint8_t **prefix, size_t *n, cs_err *err)
{
    if (r->state == FRAME_BODY) {
        *prefix = r->prefix;
        *n = r->prefix_len;
        return 0;
    }
    if (r->state != FRAME_MARKED)
        return cs_err_set(err, 0, "frame reader: no frame started");
    size_t want = r->len < CS_FRAME_PREFIX_MAX ? r->len : CS_FRAME_PREFIX_MAX;
    ssize_t got = read_full(r, r->prefix, want, err);
    if (got < 0)
        return -1;
    if ((size_t)got < want) {
        /* io.ReadFull's distinction: nothing at all is a plain EOF. */
        r->state = FRAME_NONE;
        r->left = 0;
        return cs_err_set(err, CS_FRAME_ERR_SHORT, got == 0 ? "EOF" : "unexpected EOF");
    }
    r->prefix_len = want;
    r->prefix_off = 0;
    r->left -= want;
    r->state = FRAME_BODY;
    *prefix = r->prefix;
    *n = want;
    return 0;
}

ssize_t cs_frame_reader_read(cs_frame_reader *r, uint8_t *buf, size_t len, cs_err *err)
{
    if (r->state == FRAME_MARKED) {
        const uint8_t *p;
        size_t n;
        if (cs_frame_reader_prefix(r, &p, &n, err) != 0)
            return -1;
    }
    if (r->state != FRAME_BODY || len == 0)
        return 0;
    if (r->prefix_off < r->prefix_len) {
        size_t t = r->prefix_len - r->prefix_off;
        if (t > len)
            t = len;
        memcpy(buf, r->prefix + r->prefix_off, t);
        r->prefix_off += t;
        return (ssize_t)t;
    }
    if (r->left == 0)
        return 0;
    size_t want = len;
    if (want > r->left)
        want = (size_t)r->left;
    if (r->pos < r->end) {
        /* Bytes that arrived with the marker or the prefix read. */
        size_t t = r->end - r->pos;
        if (t > want)
            t = want;
        memcpy(buf, r->buf + r->pos, t);
        r->pos += t;
        r->left -= t;
        return (ssize_t)t;
    }
    /* Nothing buffered: straight from the pipe into the caller's buffer, bounded by the frame so
     * the next marker is never consumed here. */
    ssize_t k = sys_read(r, buf, want, err);
    if (k < 0)
        return -1;
    if (k == 0) {
        if (cs_cancel_is_set(r->cancel))
            return cancelled(err);
        return cs_err_set(err, CS_FRAME_ERR_SHORT, "frame truncated %llu bytes short: unexpected EOF",
                          (unsigned long long)r->left);
    }
    r->left -= (uint64_t)k;
    return k;
}

uint64_t cs_frame_reader_remaining(const cs_frame_reader *r)
{
    if (r->state == FRAME_NONE)
        return 0;
    return (uint64_t)(r->prefix_len - r->prefix_off) + r->left;
}
