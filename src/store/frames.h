/* SPDX-License-Identifier: Apache-2.0 */
/* The stored wire frames of a ring ledger, kept at frames_off in its segment's `frames-<base>.seg`
 * (docs/RING.md, "Stored wire frames"): the zstd payloads of the CHUNK messages the ledger was published with, concatenated
 * in chunk order, then an index of every chunk (codec and payload length) and a fixed trailer.
 * A raw (codec 0) chunk stores no payload: its bytes are the ledger's own, at chunk_size * k.
 * Replay sends the chunks as they went out live: same boundaries, same codecs, no compression.
 *
 *   payloads  the codec-1 payloads, in chunk order
 *   index     one 16-byte entry per chunk: codec:u8, three zero bytes, payload length:u32le,
 *             XXH3-64 of the payload (for a raw chunk, of the ledger's bytes it stands for):u64le
 *   trailer   "CSFRAME2", seq:u32le, chunks:u32le, chunk_size:u32le, four zero bytes
 *
 * A replay checks each chunk against its entry's hash before sending it, so a byte changed on
 * disk never leaves. The tail (index and trailer) is written last, so a writer streams the
 * payloads without knowing their lengths first. Frames of the older format ("CSFRAME1", 8-byte
 * entries without hashes, whose records are of version 2) are not read: the ring forgets them and
 * makes them again. Pure functions only: the file I/O is the ring's (store/ringframes.c,
 * store/ringread.c). */
#ifndef CS_STORE_FRAMES_H
#define CS_STORE_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#define CS_FRAMES_TRAILER_LEN 24
#define CS_FRAMES_ENTRY_LEN 16
#define CS_FRAMES1_ENTRY_LEN 8 /* the older format's, for the size its records promise */

/* Where chunk k's payload is: codec 1, at off in the frames file; codec 0, at off in the ledger. */
typedef struct cs_frame {
    uint64_t off;
    uint64_t xxh3; /* of the len bytes the chunk carries */
    uint32_t len;
    uint8_t codec;
} cs_frame;

/* Bytes of the tail of a ledger of `chunks` chunks. */
size_t cs_frames_tail_len(uint32_t chunks);

/* Writes entry k's 16 bytes. */
void cs_frames_put_entry(uint8_t out[CS_FRAMES_ENTRY_LEN], uint8_t codec, uint32_t len, uint64_t xxh3);
void cs_frames_put_trailer(uint8_t out[CS_FRAMES_TRAILER_LEN], uint32_t seq, uint32_t chunks, uint32_t chunk_size);

/* Parses the tail of a ledger's frames of file_len bytes (tail_len bytes read from their end; the
 * offsets in out count from the frames' first byte) for the
 * ledger described by seq, len, chunks and chunk_size (its integrity record), filling out[chunks].
 * Checks the trailer against the record (a "CSFRAME1" one: "frames of an older format"), every
 * codec (0 or 1), that a raw chunk has exactly the
 * ledger's length for that chunk and a zstd chunk a payload of 1..chunk_size bytes, and that the
 * zstd payloads fill exactly the bytes before the tail. Returns 0, or -1 with problem set (one
 * phrase naming what differed, for the ring's ERROR line). Never reads outside tail. */
int cs_frames_parse_tail(const uint8_t *tail, size_t tail_len, uint64_t file_len, uint32_t seq, uint64_t len,
                         uint32_t chunks, uint32_t chunk_size, cs_frame *out, char *problem, size_t plen);

#endif
