/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the ring's parsers of its own files, which anyone with write access to the
 * data dir (or a bad disk) can change: the integrity record line, the records log it is a line of
 * (`records-<base>.log`) and the stored frames' index and trailer (store/frames.h).
 *
 * The first input byte picks the parser (its value mod 3); the rest is its input.
 *  - record (0): parsed as ledger 7. A record that parses is consistent (chunks match len and
 *    chunk_size; frames need chunk_size and hold their index) and formats back to the exact input
 *    when it is of this version (5);
 *  - records log (2): scanned as the log of segment 1024. Every line index it sets points at the
 *    start of a line of the text that names that sequence, the text is left as it was, and it says
 *    the log was cut short exactly when the text does not end with a newline;
 *  - frames tail (1): 20 bytes of parameters (len:u64, chunks:u16, chunk_size:u16 << 4,
 *    file_len:u64), then the tail. Parsed as ledger 5. A tail that parses accounts for the whole
 *    file: every zstd payload lies inside the bytes before the tail, back to back, and every raw
 *    chunk is the ledger's chunk at its offset.
 * Build and run: tests/fuzz/CMakeLists.txt (clang, -DCS_FUZZ=ON). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/frames.h"
#include "store/ring.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_ringfiles: property violated: %s\n", what);
        abort();
    }
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void fuzz_record(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    cs_ledger_record rec;
    char problem[200];
    if (cs_ring_record_parse(text, 7, &rec, problem, sizeof problem) == 0) {
        if (rec.chunk_size)
            check(rec.chunks == (rec.len + rec.chunk_size - 1) / rec.chunk_size, "chunks agree with len");
        else
            check(rec.chunks == 0, "no chunking, no chunks");
        if (rec.frames_len)
            check(rec.chunk_size && rec.frames_len >= cs_frames_tail_len(rec.chunks), "frames hold their index");
        if (strncmp(text, "corestream-ring-record 5 ", 25) == 0) {
            char again[1024];
            cs_ring_record_format(again, sizeof again, 7, &rec);
            check(strcmp(again, text) == 0, "a record of this version formats back to itself");
        }
    } else {
        check(problem[0] != '\0', "a refusal says why");
    }
    free(text);
}

static void fuzz_tail(const uint8_t *data, size_t size)
{
    if (size < 20)
        return;
    uint64_t len = get_u64(data) % (1u << 24);
    uint32_t chunks = (uint32_t)(data[8] | data[9] << 8);
    uint32_t chunk_size = (uint32_t)(data[10] | data[11] << 8) << 4;
    uint64_t file_len = get_u64(data + 12) % (1u << 26);
    size_t tail_len = size - 20;
    uint8_t *tail = malloc(tail_len ? tail_len : 1);
    memcpy(tail, data + 20, tail_len);
    cs_frame *out = malloc((chunks ? chunks : 1) * sizeof *out);
    char problem[200];
    if (cs_frames_parse_tail(tail, tail_len, file_len, 5, len, chunks, chunk_size, out, problem, sizeof problem) == 0) {
        check(tail_len == cs_frames_tail_len(chunks) && file_len >= tail_len, "the tail is whole");
        uint64_t next = 0;
        for (uint32_t k = 0; k < chunks; k++) {
            check(out[k].codec <= 1, "a known codec");
            if (out[k].codec == 1) {
                check(out[k].off == next && out[k].len > 0 && out[k].len <= chunk_size, "zstd back to back");
                next += out[k].len;
            } else {
                uint64_t at = (uint64_t)k * chunk_size;
                check(out[k].off == at && at + out[k].len <= (len > at ? len : at), "raw is the ledger's chunk");
            }
        }
        check(next == file_len - tail_len, "the payloads fill the file");
    } else {
        check(problem[0] != '\0', "a refusal says why");
    }
    free(out);
    free(tail);
}

static void fuzz_log(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    uint32_t line[CS_RING_SEG_LEDGERS];
    for (uint32_t k = 0; k < CS_RING_SEG_LEDGERS; k++)
        line[k] = UINT32_MAX; /* untouched */
    bool torn = cs_ring_log_scan(text, size, 1024, line);
    check(memcmp(text, data, size) == 0, "the text is left as it was");
    check(torn == (size > 0 && text[size - 1] != '\n'), "cut short exactly without a last newline");
    for (uint32_t k = 0; k < CS_RING_SEG_LEDGERS; k++) {
        if (line[k] == UINT32_MAX || line[k] == 0)
            continue;
        size_t at = line[k] - 1;
        check(at < size && (at == 0 || text[at - 1] == '\n'), "an index is the start of a line");
        char want[32];
        snprintf(want, sizeof want, " seq=%u ", 1024 + k);
        const char *nl = memchr(text + at, '\n', size - at);
        check(nl != NULL, "an indexed line is whole");
        char *copy = strndup(text + at, (size_t)(nl - (text + at)));
        check(strstr(copy, want) != NULL, "the line names its sequence");
        free(copy);
    }
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] % 3 == 0)
        fuzz_record(data + 1, size - 1);
    else if (data[0] % 3 == 1)
        fuzz_tail(data + 1, size - 1);
    else
        fuzz_log(data + 1, size - 1);
    return 0;
}
