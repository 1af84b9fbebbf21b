/* SPDX-License-Identifier: Apache-2.0 */
#include "store/frames.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char MAGIC[8] = {'C', 'S', 'F', 'R', 'A', 'M', 'E', '2'};
static const char MAGIC1[8] = {'C', 'S', 'F', 'R', 'A', 'M', 'E', '1'};

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_u64(uint8_t *p, uint64_t v)
{
    put_u32(p, (uint32_t)v);
    put_u32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t get_u64(const uint8_t *p)
{
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

size_t cs_frames_tail_len(uint32_t chunks)
{
    return (size_t)chunks * CS_FRAMES_ENTRY_LEN + CS_FRAMES_TRAILER_LEN;
}

void cs_frames_put_entry(uint8_t out[CS_FRAMES_ENTRY_LEN], uint8_t codec, uint32_t len, uint64_t xxh3)
{
    out[0] = codec;
    out[1] = out[2] = out[3] = 0;
    put_u32(out + 4, len);
    put_u64(out + 8, xxh3);
}

void cs_frames_put_trailer(uint8_t out[CS_FRAMES_TRAILER_LEN], uint32_t seq, uint32_t chunks, uint32_t chunk_size)
{
    memcpy(out, MAGIC, sizeof MAGIC);
    put_u32(out + 8, seq);
    put_u32(out + 12, chunks);
    put_u32(out + 16, chunk_size);
    put_u32(out + 20, 0);
}

int cs_frames_parse_tail(const uint8_t *tail, size_t tail_len, uint64_t file_len, uint32_t seq, uint64_t len,
                         uint32_t chunks, uint32_t chunk_size, cs_frame *out, char *problem, size_t plen)
{
    if (tail_len != cs_frames_tail_len(chunks) || file_len < tail_len) {
        snprintf(problem, plen, "frames index is cut short");
        return -1;
    }
    const uint8_t *t = tail + tail_len - CS_FRAMES_TRAILER_LEN;
    if (memcmp(t, MAGIC1, sizeof MAGIC1) == 0) {
        snprintf(problem, plen, "frames of an older format (CSFRAME1)");
        return -1;
    }
    if (memcmp(t, MAGIC, sizeof MAGIC) != 0 || get_u32(t + 20) != 0) {
        snprintf(problem, plen, "frames trailer is unreadable");
        return -1;
    }
    if (get_u32(t + 8) != seq || get_u32(t + 12) != chunks || get_u32(t + 16) != chunk_size) {
        snprintf(problem, plen, "frames trailer (ledger %" PRIu32 ", %" PRIu32 " chunks of %" PRIu32
                 ") differs from the record", get_u32(t + 8), get_u32(t + 12), get_u32(t + 16));
        return -1;
    }
    if (chunk_size == 0) {
        snprintf(problem, plen, "frames trailer has no chunk size");
        return -1;
    }
    uint64_t stored = 0, payload_bytes = file_len - tail_len;
    for (uint32_t k = 0; k < chunks; k++) {
        const uint8_t *e = tail + (size_t)k * CS_FRAMES_ENTRY_LEN;
        uint8_t codec = e[0];
        uint32_t n = get_u32(e + 4);
        uint64_t at = (uint64_t)k * chunk_size;
        uint64_t raw = at >= len ? 0 : len - at < chunk_size ? len - at : chunk_size;
        if ((e[1] | e[2] | e[3]) != 0 || codec > 1) {
            snprintf(problem, plen, "frames index entry %" PRIu32 " is unreadable", k);
            return -1;
        }
        if (codec == 0 && n != raw) {
            snprintf(problem, plen, "frames index: raw chunk %" PRIu32 " is %" PRIu32 " bytes, the ledger's is %" PRIu64,
                     k, n, raw);
            return -1;
        }
        if (codec == 1 && (n == 0 || n > chunk_size || n > payload_bytes - stored)) {
            snprintf(problem, plen, "frames index: chunk %" PRIu32 " length %" PRIu32 " does not fit", k, n);
            return -1;
        }
        out[k].codec = codec;
        out[k].len = n;
        out[k].xxh3 = get_u64(e + 8);
        out[k].off = codec == 1 ? stored : at;
        if (codec == 1)
            stored += n;
    }
    if (stored != payload_bytes) {
        snprintf(problem, plen, "frames index covers %" PRIu64 " payload bytes, the file holds %" PRIu64, stored,
                 payload_bytes);
        return -1;
    }
    return 0;
}
