/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the client's ledger assembler (remoteledger/assemble.c).
 *
 * Input: byte 0 sets the payload cap (0xFF: none, else 16 × the byte), byte 1 the zstd expansion
 * bound (16 × (byte + 1)), byte 2 the first ledger expected (0: any). Then each message is an
 * opcode byte and its arguments:
 *   low 3 bits  0-1 BEGIN, 2 raw CHUNK, 3 zstd CHUNK (compressed here from input bytes or from a
 *               run of one byte, with or without the content size, optionally corrupted), 4 END
 *               with the totals of the flow so far, 5 arbitrary bytes, 6 a truncated END, 7 a SIG
 *               of the open ledger (any length from 190 to 269 bytes, its fields from the input);
 *   bit 3       perturbs the message (sequence, index or END field off by one, repetitive zstd);
 *   bit 7       feeds it in fragments (piece size, size hint and whether pieces are received in
 *               place, into rli_asm_recv_slot's slot, from the next byte).
 * The sequence is fed twice to fresh assemblers, every message whole and then as the input says;
 * after an error the assembler is reset to the first ledger, as the stream does. Checked:
 *  - both runs agree message by message: status, error kind and text, ledger bytes and info;
 *  - a ledger's length is its END's total, its XXH64 is END's checksum, its sequence END's, and
 *    it fits the cap; errors carry a kind and a "remoteledger: " message;
 *  - the assembly buffer stays within the cap, and all the assembler holds within the cap plus
 *    one chunk bound plus its fixed state (assemble.h, "Memory").
 *
 * Build and run: tests/fuzz/CMakeLists.txt (clang, -DCS_FUZZ=ON). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>
#include <zstd.h>

#include "remoteledger/assemble.h"
#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_MSGS 64
#define MIN_BUFFER (64u << 10) /* assemble.c's smallest assembly and scratch buffer */
/* The assembler's own state and the zstd decoder's, besides its buffers; the scratch buffer
 * starts at MIN_BUFFER even when the bound is smaller. */
#define STATE_MAX ((256u << 10) + MIN_BUFFER)

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_assemble: property violated: %s\n", what);
        abort();
    }
}

typedef struct src {
    const uint8_t *p;
    size_t n;
} src;

static uint8_t byte(src *s)
{
    if (!s->n)
        return 0;
    s->n--;
    return *s->p++;
}

typedef struct msg {
    uint8_t *p;
    size_t n;
    size_t piece; /* 0: whole; otherwise fed in pieces of this size */
    uint64_t hint;
    bool in_place; /* the pieces are received into rli_asm_recv_slot's slot whenever it offers one */
} msg;

/* The flow the generator is building, so that well-formed flows are likely. */
typedef struct model {
    uint32_t next, seq, chunks;
    uint64_t total;
    XXH64_state_t *h;
} model;

static uint8_t *chunk(uint32_t seq, uint32_t idx, uint8_t codec, const uint8_t *p, size_t n, size_t *len)
{
    uint8_t *m = malloc(CS_WIRE_CHUNK_HEADER_LEN + n);
    check(m != NULL, "malloc");
    *len = cs_wire_append_chunk(m, seq, idx, codec, p, n);
    return m;
}

static void gen(src *s, model *md, ZSTD_CCtx *cc, int64_t cap, msg *out)
{
    uint8_t op = byte(s);
    bool perturb = op & 0x08;
    uint8_t buf[4096];
    memset(out, 0, sizeof *out);
    switch (op & 7) {
    case 0:
    case 1: {
        uint32_t seq = md->next + (perturb ? (uint32_t)(int8_t)byte(s) : 0);
        out->p = malloc(CS_WIRE_BEGIN_LEN);
        check(out->p != NULL, "malloc");
        out->n = cs_wire_put_begin(out->p, seq, 1000);
        md->seq = seq;
        md->chunks = 0;
        md->total = 0;
        XXH64_reset(md->h, 0);
        break;
    }
    case 2: {
        size_t n = byte(s);
        n = n < s->n ? n : s->n;
        uint32_t idx = md->chunks + (perturb ? 1 : 0);
        out->p = chunk(md->seq, idx, CS_CODEC_RAW, s->p, n, &out->n);
        XXH64_update(md->h, s->p, n);
        s->p += n;
        s->n -= n;
        md->chunks++;
        md->total += n;
        break;
    }
    case 3: {
        uint8_t how = byte(s);
        size_t n;
        if (perturb) { /* a run of one byte: expands far past its compressed size */
            n = (size_t)byte(s) * 16;
            memset(buf, byte(s), n);
        } else {
            n = byte(s);
            n = n < s->n ? n : s->n;
            memcpy(buf, s->p, n);
            s->p += n;
            s->n -= n;
        }
        uint8_t z[4096 + 512];
        ZSTD_CCtx_reset(cc, ZSTD_reset_session_and_parameters);
        ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, how & 1);
        size_t zn = ZSTD_compress2(cc, z, sizeof z, buf, n);
        check(!ZSTD_isError(zn), "compress");
        if ((how & 6) == 6 && zn) /* corrupt one byte */
            z[byte(s) % zn] ^= (uint8_t)(byte(s) | 1);
        else if ((how & 6) == 4 && zn > 1) /* cut short */
            zn -= 1 + byte(s) % (zn - 1);
        out->p = chunk(md->seq, md->chunks, CS_CODEC_ZSTD, z, zn, &out->n);
        XXH64_update(md->h, buf, n);
        md->chunks++;
        md->total += n;
        break;
    }
    case 4:
    case 6: {
        uint32_t seq = md->seq, count = md->chunks;
        uint64_t total = md->total, sum = XXH64_digest(md->h);
        if (perturb) {
            switch (byte(s) & 3) {
            case 0: seq++; break;
            case 1: count++; break;
            case 2: total++; break;
            default: sum++; break;
            }
        }
        out->p = malloc(CS_WIRE_END_LEN);
        check(out->p != NULL, "malloc");
        out->n = cs_wire_put_end(out->p, seq, count, total, 2000, sum);
        if ((op & 7) == 6)
            out->n = byte(s) % CS_WIRE_END_LEN;
        else if (seq == md->seq)
            md->next = md->seq + 1;
        break;
    }
    case 7: { /* a SIG of the open ledger, 190 to 269 bytes (200 to 263 are valid), fields from input */
        uint32_t seq = md->seq + (perturb ? 1 : 0);
        size_t n = 190 + byte(s) % 80;
        out->p = calloc(1, n);
        check(out->p != NULL, "malloc");
        uint8_t *p = out->p;
        p[0] = CS_WIRE_VERSION;
        p[1] = CS_WIRE_TYPE_SIG;
        p[2] = (uint8_t)(seq >> 24), p[3] = (uint8_t)(seq >> 16), p[4] = (uint8_t)(seq >> 8), p[5] = (uint8_t)seq;
        for (size_t i = 6; i < n && s->n; i++)
            p[i] = byte(s);
        out->n = n;
        break;
    }
    default: {
        size_t n = byte(s);
        n = n < s->n ? n : s->n;
        out->p = malloc(n ? n : 1);
        check(out->p != NULL, "malloc");
        if (n)
            memcpy(out->p, s->p, n);
        out->n = n;
        s->p += n;
        s->n -= n;
        break;
    }
    }
    if (op & 0x80) {
        uint8_t f = byte(s);
        out->piece = (size_t)(f & 15) + 1;
        out->in_place = f & 0x40;
        switch (f >> 4 & 3) {
        case 0: out->hint = 0; break;
        case 1: out->hint = out->n; break;
        case 2: out->hint = out->n + 100; break;
        /* A transport's claim, not the truth; without a cap nothing bounds it but memory. */
        default: out->hint = cap >= 0 ? UINT64_MAX / 2 : out->n; break;
        }
    }
}

typedef struct result {
    rli_asm_status st;
    cs_err err;
    uint8_t *ledger;
    size_t len;
    rl_ledger_info info;
} result;

/* Keeps a copy of a completed ledger, which the next feed may overwrite. */
static void take_ledger(const rli_asm *a, result *r)
{
    if (r->st != RLI_ASM_LEDGER)
        return;
    const uint8_t *l = rli_asm_ledger(a, &r->len, &r->info);
    r->ledger = malloc(r->len ? r->len : 1);
    check(r->ledger != NULL, "malloc");
    if (r->len)
        memcpy(r->ledger, l, r->len);
}

/* Feeds one message as an exact-size heap copy (or copies of each piece). */
static void feed(rli_asm *a, const msg *m, bool as_given, result *r)
{
    memset(r, 0, sizeof *r);
    if (!as_given || m->piece == 0) {
        uint8_t *copy = malloc(m->n ? m->n : 1);
        check(copy != NULL, "malloc");
        if (m->n)
            memcpy(copy, m->p, m->n);
        r->st = rli_asm_message(a, copy, m->n, &r->err);
        take_ledger(a, r);
        free(copy);
        return;
    }
    rli_asm_msg_begin(a, m->hint);
    for (size_t off = 0; off < m->n;) {
        size_t k = m->n - off < m->piece ? m->n - off : m->piece;
        size_t room = 0;
        uint8_t *slot = m->in_place ? rli_asm_recv_slot(a, k, &room) : NULL;
        if (slot) { /* as the client's in-place read: the bytes land in the slot, then are fed */
            check(room >= 1 && room <= k, "a slot of 1..want bytes");
            memcpy(slot, m->p + off, room);
            rli_asm_msg_data(a, slot, room);
            off += room; /* a short slot (the cap): the rest comes through the next piece */
            continue;
        }
        uint8_t *copy = malloc(k);
        check(copy != NULL, "malloc");
        memcpy(copy, m->p + off, k);
        rli_asm_msg_data(a, copy, k);
        free(copy);
        off += k;
    }
    r->st = rli_asm_msg_end(a, &r->err);
    take_ledger(a, r);
}

static bool same_info(const rl_ledger_info *x, const rl_ledger_info *y)
{
    return x->sequence == y->sequence && x->emit_start_unix_nano == y->emit_start_unix_nano &&
           x->emit_end_unix_nano == y->emit_end_unix_nano && x->size == y->size && x->chunks == y->chunks &&
           x->discarded_partials == y->discarded_partials;
}

static void check_result(const msg *m, const result *r, int64_t cap)
{
    check(r->st == RLI_ASM_ERROR || r->st == RLI_ASM_MORE || r->st == RLI_ASM_LEDGER, "status");
    if (r->st == RLI_ASM_ERROR) {
        check(r->err.kind == RL_ERR_PROTOCOL || r->err.kind == RL_ERR_GAP || r->err.kind == RL_ERR_NOMEM,
              "error kind");
        check(strncmp(r->err.msg, "remoteledger: ", 14) == 0, "error message");
        return;
    }
    if (r->st != RLI_ASM_LEDGER)
        return;
    cs_wire_msg w;
    cs_err werr;
    check(cs_wire_decode(m->p, m->n, &w, &werr) == 0 && w.type == CS_WIRE_TYPE_END, "a ledger ends at an END");
    check(r->len == w.total_len, "the ledger is END's total long");
    check(XXH64(r->ledger, r->len, 0) == w.checksum, "the ledger hashes to END's checksum");
    check(r->info.sequence == w.seq && r->info.size == r->len && r->info.chunks == w.chunk_count,
          "the info is END's");
    if (cap >= 0)
        check(r->len <= (uint64_t)cap, "the ledger fits the cap");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    int64_t cap = data[0] == 0xFF ? -1 : (int64_t)data[0] * 16;
    size_t bound = ((size_t)data[1] + 1) * 16;
    uint32_t from = data[2] == 0xFF ? CS_LAST_SEQUENCE - 1 : data[2] % 4;
    src s = {data + 3, size - 3};

    static ZSTD_CCtx *cc;
    static XXH64_state_t *h;
    if (!cc) {
        cc = ZSTD_createCCtx();
        h = XXH64_createState();
        check(cc && h, "contexts");
    }
    model md = {.next = from ? from : 7, .h = h};
    md.seq = md.next;
    XXH64_reset(h, 0);
    msg msgs[MAX_MSGS];
    size_t n = 0;
    while (s.n && n < MAX_MSGS)
        gen(&s, &md, cc, cap, &msgs[n++]);

    rli_asm *a = rli_asm_new(cap, bound), *b = rli_asm_new(cap, bound);
    check(a && b, "rli_asm_new");
    rli_asm_reset(a, from);
    rli_asm_reset(b, from);
    /* Growth doubles from MIN_BUFFER, clamped to the cap; the scratch buffer to the bound. */
    uint64_t most = cap >= 0 ? (uint64_t)cap : UINT64_MAX;
    uint64_t held = cap >= 0 ? (uint64_t)cap + bound + STATE_MAX : UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        result ra, rb;
        feed(a, &msgs[i], false, &ra);
        feed(b, &msgs[i], true, &rb);
        check_result(&msgs[i], &ra, cap);
        check_result(&msgs[i], &rb, cap);
        check(ra.st == rb.st, "the same status whole or in fragments");
        if (ra.st == RLI_ASM_ERROR) {
            check(ra.err.kind == rb.err.kind && strcmp(ra.err.msg, rb.err.msg) == 0,
                  "the same error whole or in fragments");
            rli_asm_reset(a, from);
            rli_asm_reset(b, from);
        } else if (ra.st == RLI_ASM_LEDGER) {
            check(ra.len == rb.len && memcmp(ra.ledger, rb.ledger, ra.len) == 0 &&
                      same_info(&ra.info, &rb.info),
                  "the same ledger whole or in fragments");
        }
        check(rli_asm_capacity(a) <= most && rli_asm_capacity(b) <= most, "the buffer within the cap");
        check(rli_asm_footprint(a) <= held && rli_asm_footprint(b) <= held, "the memory within cap + bound");
        free(ra.ledger);
        free(rb.ledger);
    }
    rli_asm_free(a);
    rli_asm_free(b);
    for (size_t i = 0; i < n; i++)
        free(msgs[i].p);
    return 0;
}
