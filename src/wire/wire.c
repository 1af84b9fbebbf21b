/* SPDX-License-Identifier: Apache-2.0 */
#include "wire/wire.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

size_t cs_wire_put_begin(uint8_t out[CS_WIRE_BEGIN_LEN], uint32_t seq, int64_t emit_start)
{
    out[0] = CS_WIRE_VERSION;
    out[1] = CS_WIRE_TYPE_BEGIN;
    cs_wire_put_u32(out + 2, seq);
    cs_wire_put_u64(out + 6, (uint64_t)emit_start);
    return CS_WIRE_BEGIN_LEN;
}

size_t cs_wire_put_end(uint8_t out[CS_WIRE_END_LEN], uint32_t seq, uint32_t chunk_count,
                       uint64_t total_len, int64_t emit_end, uint64_t checksum)
{
    out[0] = CS_WIRE_VERSION;
    out[1] = CS_WIRE_TYPE_END;
    cs_wire_put_u32(out + 2, seq);
    cs_wire_put_u32(out + 6, chunk_count);
    cs_wire_put_u64(out + 10, total_len);
    cs_wire_put_u64(out + 18, (uint64_t)emit_end);
    cs_wire_put_u64(out + 26, checksum);
    return CS_WIRE_END_LEN;
}

void cs_wire_put_chunk_header(uint8_t out[CS_WIRE_CHUNK_HEADER_LEN], uint32_t seq, uint32_t idx,
                              uint8_t codec)
{
    out[0] = CS_WIRE_VERSION;
    out[1] = CS_WIRE_TYPE_CHUNK;
    cs_wire_put_u32(out + 2, seq);
    cs_wire_put_u32(out + 6, idx);
    out[10] = codec;
}

size_t cs_wire_append_chunk(uint8_t *out, uint32_t seq, uint32_t idx, uint8_t codec,
                            const uint8_t *payload, size_t len)
{
    cs_wire_put_chunk_header(out, seq, idx, codec);
    if (len)
        memcpy(out + CS_WIRE_CHUNK_HEADER_LEN, payload, len);
    return CS_WIRE_CHUNK_HEADER_LEN + len;
}

int cs_wire_decode(const uint8_t *buf, size_t len, cs_wire_msg *m, cs_err *err)
{
    if (len < CS_WIRE_MIN_LEN)
        return cs_err_set(err, CS_WIRE_ERR_SHORT,
                          "wire: message shorter than header: got %zu bytes, want at least %d", len,
                          CS_WIRE_MIN_LEN);
    if (buf[0] != CS_WIRE_VERSION)
        return cs_err_set(err, CS_WIRE_ERR_VERSION,
                          "wire: unsupported protocol version: got 0x%02x, want 0x%02x", buf[0],
                          CS_WIRE_VERSION);
    memset(m, 0, sizeof *m);
    m->type = buf[1];
    m->seq = cs_wire_get_u32(buf + 2);
    switch (m->type) {
    case CS_WIRE_TYPE_BEGIN:
        if (len != CS_WIRE_BEGIN_LEN)
            return cs_err_set(err, CS_WIRE_ERR_SHORT,
                              "wire: message shorter than header: BEGIN is %zu bytes, want %d", len,
                              CS_WIRE_BEGIN_LEN);
        m->stamp = (int64_t)cs_wire_get_u64(buf + 6);
        return 0;
    case CS_WIRE_TYPE_CHUNK:
        if (len < CS_WIRE_CHUNK_HEADER_LEN)
            return cs_err_set(err, CS_WIRE_ERR_SHORT,
                              "wire: message shorter than header: CHUNK is %zu bytes, want at least %d",
                              len, CS_WIRE_CHUNK_HEADER_LEN);
        m->chunk_idx = cs_wire_get_u32(buf + 6);
        m->codec = buf[10];
        if (m->codec != CS_CODEC_RAW && m->codec != CS_CODEC_ZSTD)
            return cs_err_set(err, CS_WIRE_ERR_CODEC, "wire: unknown chunk codec: 0x%02x", m->codec);
        m->payload = buf + CS_WIRE_CHUNK_HEADER_LEN;
        m->payload_len = len - CS_WIRE_CHUNK_HEADER_LEN;
        return 0;
    case CS_WIRE_TYPE_END:
        if (len != CS_WIRE_END_LEN)
            return cs_err_set(err, CS_WIRE_ERR_SHORT,
                              "wire: message shorter than header: END is %zu bytes, want %d", len,
                              CS_WIRE_END_LEN);
        m->chunk_count = cs_wire_get_u32(buf + 6);
        m->total_len = cs_wire_get_u64(buf + 10);
        m->stamp = (int64_t)cs_wire_get_u64(buf + 18);
        m->checksum = cs_wire_get_u64(buf + 26);
        return 0;
    case CS_WIRE_TYPE_SIG:
        if (len <= CS_WIRE_SIG_FIXED_LEN || len > CS_WIRE_SIG_MAX_LEN)
            return cs_err_set(err, CS_WIRE_ERR_SHORT, "wire: SIG is %zu bytes, want %d to %d", len,
                              CS_WIRE_SIG_FIXED_LEN + 1, CS_WIRE_SIG_MAX_LEN);
        m->payload = buf; /* the whole message: cs_sig_decode (wire/ledgersig.h) reads it */
        m->payload_len = len;
        return 0;
    default:
        return cs_err_set(err, CS_WIRE_ERR_TYPE, "wire: unknown message type: 0x%02x", m->type);
    }
}

int cs_wire_validate_chunk_size(int64_t n, cs_err *err)
{
    if (n < CS_MIN_CHUNK_SIZE || n > CS_MAX_CHUNK_SIZE)
        return cs_err_set(err, 0, "chunk size %lld is outside [%d,%d]", (long long)n,
                          CS_MIN_CHUNK_SIZE, CS_MAX_CHUNK_SIZE);
    return 0;
}

#define TOO_FAR_PREFIX "too far behind: oldest="
#define TOO_FAR_MIDDLE "latest="

void cs_wire_format_too_far_behind(char *buf, size_t len, uint32_t oldest, uint32_t latest)
{
    snprintf(buf, len, TOO_FAR_PREFIX "%u " TOO_FAR_MIDDLE "%u", oldest, latest);
}

/* One %d into a uint32, as Go's fmt scanning does it: leading spaces skipped, an optional '+',
 * decimal digits; a '-' or a value over 32 bits is an error. */
static bool scan_u32(const char **p, const char *end, uint32_t *out)
{
    const char *s = *p;
    while (s < end && *s == ' ')
        s++;
    if (s < end && *s == '+')
        s++;
    uint64_t v = 0;
    const char *digits = s;
    while (s < end && isdigit((unsigned char)*s)) {
        v = v * 10 + (uint64_t)(*s - '0');
        if (v > UINT32_MAX)
            return false;
        s++;
    }
    if (s == digits)
        return false;
    *out = (uint32_t)v;
    *p = s;
    return true;
}

/* "<prefix>%d <middle>%d" with scanf semantics: the two reasons that carry two sequences. */
static bool parse_two(const char *reason, size_t len, const char *prefix, const char *middle, uint32_t *a,
                      uint32_t *b)
{
    const char *p = reason, *end = reason + len;
    uint32_t o, l;
    *a = *b = 0;
    size_t plen = strlen(prefix), mlen = strlen(middle);
    if (len < plen || memcmp(p, prefix, plen) != 0)
        return false;
    p += plen;
    if (!scan_u32(&p, end, &o))
        return false;
    /* A space in a scanf format matches any run of spaces, including none. */
    while (p < end && *p == ' ')
        p++;
    if ((size_t)(end - p) < mlen || memcmp(p, middle, mlen) != 0)
        return false;
    p += mlen;
    if (!scan_u32(&p, end, &l))
        return false;
    *a = o;
    *b = l;
    return true;
}

bool cs_wire_parse_too_far_behind(const char *reason, size_t len, uint32_t *oldest, uint32_t *latest)
{
    return parse_two(reason, len, TOO_FAR_PREFIX, TOO_FAR_MIDDLE, oldest, latest);
}

#define HOLE_PREFIX "missing from the ring: first="
#define HOLE_MIDDLE "last="

void cs_wire_format_ring_hole(char *buf, size_t len, uint32_t first, uint32_t last)
{
    snprintf(buf, len, HOLE_PREFIX "%u " HOLE_MIDDLE "%u", first, last);
}

bool cs_wire_parse_ring_hole(const char *reason, size_t len, uint32_t *first, uint32_t *last)
{
    return parse_two(reason, len, HOLE_PREFIX, HOLE_MIDDLE, first, last);
}
