/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the wire decoder every libremoteledger client runs on the server's bytes.
 *
 * Properties checked beyond "no crash, no out-of-bounds read" (the input is an exact-size heap
 * copy, so ASan sees a read one past the end):
 *  - a decode succeeds only for a known type, and its fields re-encode with cs_wire_put_begin,
 *    cs_wire_put_end or cs_wire_put_chunk_header to exactly the input's header bytes (all of it
 *    for BEGIN and END); a CHUNK's payload is the rest of the input, in place; a SIG (200 to 263
 *    bytes) is handed over whole, in place;
 *  - a decode fails with the error kind the spec's order of checks picks, a message starting
 *    "wire: ", and the same verdict with a NULL err.
 *
 * Build and run: tests/fuzz/CMakeLists.txt (clang, -DCS_FUZZ=ON). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_wire: property violated: %s\n", what);
        abort();
    }
}

/* The error kind the spec's checks give for this input, or 0 when it is a valid message. */
static int expected_kind(const uint8_t *b, size_t n)
{
    if (n < CS_WIRE_MIN_LEN)
        return CS_WIRE_ERR_SHORT;
    if (b[0] != CS_WIRE_VERSION)
        return CS_WIRE_ERR_VERSION;
    switch (b[1]) {
    case CS_WIRE_TYPE_BEGIN:
        return n == CS_WIRE_BEGIN_LEN ? 0 : CS_WIRE_ERR_SHORT;
    case CS_WIRE_TYPE_END:
        return n == CS_WIRE_END_LEN ? 0 : CS_WIRE_ERR_SHORT;
    case CS_WIRE_TYPE_CHUNK:
        if (n < CS_WIRE_CHUNK_HEADER_LEN)
            return CS_WIRE_ERR_SHORT;
        return b[10] == CS_CODEC_RAW || b[10] == CS_CODEC_ZSTD ? 0 : CS_WIRE_ERR_CODEC;
    case CS_WIRE_TYPE_SIG:
        return n > CS_WIRE_SIG_FIXED_LEN && n <= CS_WIRE_SIG_MAX_LEN ? 0 : CS_WIRE_ERR_SHORT;
    default:
        return CS_WIRE_ERR_TYPE;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    check(buf != NULL, "malloc");
    memcpy(buf, data, size);

    cs_wire_msg m;
    cs_err err = {0};
    int rc = cs_wire_decode(buf, size, &m, &err);
    int want = expected_kind(buf, size);
    cs_wire_msg m2;
    check(cs_wire_decode(buf, size, &m2, NULL) == rc, "the verdict does not depend on err");

    if (rc == 0) {
        check(want == 0, "success only for a valid message");
        uint8_t enc[CS_WIRE_END_LEN];
        switch (m.type) {
        case CS_WIRE_TYPE_BEGIN:
            check(cs_wire_put_begin(enc, m.seq, m.stamp) == size, "BEGIN length");
            check(memcmp(enc, buf, size) == 0, "BEGIN re-encodes to the input");
            break;
        case CS_WIRE_TYPE_END:
            check(cs_wire_put_end(enc, m.seq, m.chunk_count, m.total_len, m.stamp, m.checksum) == size,
                  "END length");
            check(memcmp(enc, buf, size) == 0, "END re-encodes to the input");
            break;
        case CS_WIRE_TYPE_CHUNK:
            check(m.codec == CS_CODEC_RAW || m.codec == CS_CODEC_ZSTD, "CHUNK codec known");
            cs_wire_put_chunk_header(enc, m.seq, m.chunk_idx, m.codec);
            check(memcmp(enc, buf, CS_WIRE_CHUNK_HEADER_LEN) == 0, "CHUNK header re-encodes");
            check(m.payload == buf + CS_WIRE_CHUNK_HEADER_LEN, "payload starts after the header");
            check(m.payload_len == size - CS_WIRE_CHUNK_HEADER_LEN, "payload runs to the input's end");
            break;
        case CS_WIRE_TYPE_SIG: /* its fields are cs_sig_decode's (wire/ledgersig.h) */
            check(m.payload == buf && m.payload_len == size, "a SIG is handed over whole, in place");
            break;
        default:
            check(false, "success only for BEGIN, CHUNK, END or SIG");
        }
    } else {
        check(rc == -1, "decode returns 0 or -1");
        check(err.kind == want, "error kind follows the spec's order of checks");
        check(memchr(err.msg, '\0', sizeof err.msg) != NULL, "message NUL-terminated");
        check(strncmp(err.msg, "wire: ", 6) == 0 && err.msg[6] != '\0', "message \"wire: ...\"");
    }
    free(buf);
    return 0;
}
