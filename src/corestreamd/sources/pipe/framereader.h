/* SPDX-License-Identifier: Apache-2.0 */
/* RFC 5531 record-marked frames on a pipe, as stellar-core writes LedgerCloseMeta to its meta
 * stream (CAPTIVE.md 3.1): a 4-byte big-endian marker 0x80000000 | length, then length bytes.
 * Shared by the pipe tap and the captive source.
 *
 * A frame is consumed in three steps: the marker, a prefix of min(length, CS_FRAME_PREFIX_MAX)
 * bytes held by the reader (enough for the ledger-seq walk), then the body — prefix first, then
 * the rest of the frame read as it arrives, so the first piece can go out before the writer has
 * finished the frame. Body bytes the reader has not already buffered are read straight into the
 * caller's buffer.
 *
 * The fd must be non-blocking: every wait is a cs_cancel_wait_readable, so a cancel unblocks a
 * reader parked on a silent pipe at once. After the cancel, reads fail with kind CS_ERR_CANCELLED
 * and the message "context canceled" (bytes the reader already holds are still served). One
 * thread at a time. */
#ifndef CS_CORESTREAMD_FRAMEREADER_H
#define CS_CORESTREAMD_FRAMEREADER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"
#include "common/cancel.h"

#define CS_FRAME_PREFIX_MAX 4096
#define CS_FRAME_BUFFER_DEFAULT (1u << 20)

/* Error kinds (CS_ERR_CANCELLED for a cancellation). */
enum {
    CS_FRAME_ERR_MALFORMED = 110, /* marker without the last-fragment bit */
    CS_FRAME_ERR_TOO_BIG = 111,   /* length over the reader's cap */
    CS_FRAME_ERR_SHORT = 112,     /* EOF inside a marker, a prefix or a body */
};

typedef struct cs_frame_reader cs_frame_reader;

/* buffer_size 0 means CS_FRAME_BUFFER_DEFAULT; max_frame 0 means CS_MAX_PAYLOAD_SIZE (a frame of
 * exactly max_frame bytes is allowed). The reader does not own fd. Returns 0 or -1. */
int cs_frame_reader_new(cs_frame_reader **out, int fd, cs_cancel *cancel, size_t buffer_size,
                        uint32_t max_frame, cs_err *err);
void cs_frame_reader_free(cs_frame_reader *r);

/* Reads the next record marker. Whatever is left of the previous frame is read and dropped first.
 * Returns 1 with *len = marker & 0x7fffffff; 0 on EOF before any marker byte (the clean end of
 * the stream); -1 on error: "malformed XDR frame header", "frame is N bytes, over the M-byte
 * cap", "unexpected EOF" (1 to 3 marker bytes), a read error, or the cancellation. */
int cs_frame_reader_next(cs_frame_reader *r, uint32_t *len, cs_err *err);

/* Reads the current frame's prefix, min(len, CS_FRAME_PREFIX_MAX) bytes, and points *prefix at it
 * (valid until the next cs_frame_reader_next). Returns 0, or -1: "EOF" when the pipe ends before
 * the first prefix byte, "unexpected EOF" after some, a read error, or the cancellation. */
int cs_frame_reader_prefix(cs_frame_reader *r, const uint8_t **prefix, size_t *n, cs_err *err);

/* Reads up to len bytes of the current frame's body: the prefix bytes, then the rest of the
 * frame. Returns the count (at most what one read(2) delivered, never more than is left), 0 at
 * the end of the frame, -1 on error: "frame truncated K bytes short: unexpected EOF" (kind
 * CS_FRAME_ERR_SHORT) when the pipe ends early — never a clean, shorter body —, a read error, or
 * the cancellation (which also wins over an EOF seen during shutdown). */
ssize_t cs_frame_reader_read(cs_frame_reader *r, uint8_t *buf, size_t len, cs_err *err);

/* Body bytes of the current frame not yet returned by cs_frame_reader_read. */
uint64_t cs_frame_reader_remaining(const cs_frame_reader *r);

#endif
