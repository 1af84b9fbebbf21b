/* SPDX-License-Identifier: Apache-2.0 */
/* Framing encode/decode for the v2 wire protocol (constants in corestream/wire.h). */
#ifndef CS_WIRE_WIRE_H
#define CS_WIRE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestream/wire.h"

/* The wire's integers, big-endian, for every codec of its messages (here, ledgersig.c, the
 * client's assembler). */
static inline void cs_wire_put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline void cs_wire_put_u64(uint8_t *p, uint64_t v)
{
    cs_wire_put_u32(p, (uint32_t)(v >> 32));
    cs_wire_put_u32(p + 4, (uint32_t)v);
}

static inline uint32_t cs_wire_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline uint64_t cs_wire_get_u64(const uint8_t *p)
{
    return (uint64_t)cs_wire_get_u32(p) << 32 | cs_wire_get_u32(p + 4);
}

/* Decode error kinds; the messages are the prototype's, word for word. */
enum {
    CS_WIRE_ERR_SHORT = 1,   /* "wire: message shorter than header: …" */
    CS_WIRE_ERR_VERSION = 2, /* "wire: unsupported protocol version: got 0x01, want 0x02" */
    CS_WIRE_ERR_TYPE = 3,    /* "wire: unknown message type: 0x7f" */
    CS_WIRE_ERR_CODEC = 4,   /* "wire: unknown chunk codec: 0x05" */
};

typedef struct cs_wire_msg {
    uint8_t type; /* CS_WIRE_TYPE_* */
    uint32_t seq;
    int64_t stamp;      /* BEGIN: emitStart; END: emitEnd */
    uint32_t chunk_idx; /* CHUNK */
    uint8_t codec;      /* CHUNK */
    const uint8_t *payload; /* CHUNK: aliases the decoded buffer; SIG: the whole message */
    size_t payload_len;
    uint32_t chunk_count; /* END */
    uint64_t total_len;   /* END */
    uint64_t checksum;    /* END */
} cs_wire_msg;

/* Each writes exactly its fixed length into out and returns it. */
size_t cs_wire_put_begin(uint8_t out[CS_WIRE_BEGIN_LEN], uint32_t seq, int64_t emit_start);
size_t cs_wire_put_end(uint8_t out[CS_WIRE_END_LEN], uint32_t seq, uint32_t chunk_count,
                       uint64_t total_len, int64_t emit_end, uint64_t checksum);

/* Frames a chunk header in place: out points at the CS_WIRE_CHUNK_HEADER_LEN bytes reserved in
 * front of a payload that is already in its buffer. */
void cs_wire_put_chunk_header(uint8_t out[CS_WIRE_CHUNK_HEADER_LEN], uint32_t seq, uint32_t idx,
                              uint8_t codec);

/* The appending form: header then payload copied into out (CS_WIRE_CHUNK_HEADER_LEN + len bytes).
 * Returns the message length. */
size_t cs_wire_append_chunk(uint8_t *out, uint32_t seq, uint32_t idx, uint8_t codec,
                            const uint8_t *payload, size_t len);

/* Decodes one message, checking in the spec's order: length ≥ 6, version, then per type the
 * exact length (BEGIN 14, CHUNK ≥ 11, END 34, SIG 200 to 263) and the chunk codec. A SIG's
 * fields are read by cs_sig_decode (wire/ledgersig.h). */
int cs_wire_decode(const uint8_t *buf, size_t len, cs_wire_msg *out, cs_err *err);

/* `chunk size N is outside [4096,8388608]` */
int cs_wire_validate_chunk_size(int64_t n, cs_err *err);

/* 4001 reason: `too far behind: oldest=%d latest=%d`. */
void cs_wire_format_too_far_behind(char *buf, size_t len, uint32_t oldest, uint32_t latest);

/* 4002 reason: `missing from the ring: first=%d last=%d`; parse: false (0/0) when it cannot be read. */
void cs_wire_format_ring_hole(char *buf, size_t len, uint32_t first, uint32_t last);
bool cs_wire_parse_ring_hole(const char *reason, size_t len, uint32_t *first, uint32_t *last);

/* Parses a 4001 reason with scanf semantics. Returns false (bounds left 0/0) when it cannot be
 * parsed, so an unreadable reason leaves the bounds unknown rather than wrong. */
bool cs_wire_parse_too_far_behind(const char *reason, size_t len, uint32_t *oldest, uint32_t *latest);

#endif
