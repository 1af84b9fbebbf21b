/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger: the assembler on its own (assemble.c), transport-free. BEGIN, CHUNK..., END
 * flows fed to it whole, in one call, and in fragments of 1, 7 and 4096 bytes must give the same
 * ledgers and the same errors: reassembly and the verification of count, length and XXH64, every
 * protocol violation and sequence gap word for word, the payload cap, ring redelivery (a second
 * BEGIN drops the partial), zstd chunks and their expansion bound, and the reuse of one buffer.
 * The numbers in comments (122-151) are the prototype's test cases these carry over. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <xxhash.h>
#include <zstd.h>

#include "common/synthetic.h"
#include "corestream/remoteledger.h"
#include "corestream/wire.h"
#include "remoteledger/assemble.h"
#include "remoteledger/endpoint.h"
#include "support/rlsuite.h"
#include "wire/wire.h"

typedef struct wmsg {
    uint8_t *p;
    size_t n;
} wmsg;

typedef struct script {
    wmsg m[256];
    size_t n;
} script;

static void sc_free(script *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->m[i].p);
    s->n = 0;
}

static void sc_raw(script *s, const void *p, size_t n)
{
    assert_true(s->n < sizeof s->m / sizeof s->m[0]);
    uint8_t *b = malloc(n ? n : 1);
    assert_non_null(b);
    if (n)
        memcpy(b, p, n);
    s->m[s->n++] = (wmsg){b, n};
}

static void sc_begin(script *s, uint32_t seq, int64_t stamp)
{
    uint8_t b[CS_WIRE_BEGIN_LEN];
    sc_raw(s, b, cs_wire_put_begin(b, seq, stamp));
}

static void sc_chunk(script *s, uint32_t seq, uint32_t idx, uint8_t codec, const void *p, size_t n)
{
    uint8_t *b = malloc(CS_WIRE_CHUNK_HEADER_LEN + n);
    assert_non_null(b);
    size_t len = cs_wire_append_chunk(b, seq, idx, codec, p, n);
    sc_raw(s, b, len);
    free(b);
}

static void sc_end(script *s, uint32_t seq, uint32_t count, uint64_t total, int64_t stamp, uint64_t sum)
{
    uint8_t b[CS_WIRE_END_LEN];
    sc_raw(s, b, cs_wire_put_end(b, seq, count, total, stamp, sum));
}

static void sc_flow(script *s, uint32_t seq, const char *a, const char *b)
{
    sc_begin(s, seq, 0);
    sc_chunk(s, seq, 0, CS_CODEC_RAW, a, strlen(a));
    size_t n = 1;
    XXH64_state_t *h = XXH64_createState();
    XXH64_reset(h, 0);
    XXH64_update(h, a, strlen(a));
    if (b) {
        sc_chunk(s, seq, 1, CS_CODEC_RAW, b, strlen(b));
        XXH64_update(h, b, strlen(b));
        n = 2;
    }
    sc_end(s, seq, (uint32_t)n, strlen(a) + (b ? strlen(b) : 0), 0, XXH64_digest(h));
    XXH64_freeState(h);
}

/* How a message is fed: whole, one msg_data call, or fragments of a fixed size. */
enum { FEED_WHOLE = 0, FEED_ONECALL = 1, FEED_FRAG1 = 2, FEED_FRAG7 = 3, FEED_FRAG4096 = 4, FEED_MODES };

static rli_asm_status feed(rli_asm *a, const uint8_t *p, size_t n, int mode, cs_err *err)
{
    if (mode == FEED_WHOLE)
        return rli_asm_message(a, p, n, err);
    size_t frag = mode == FEED_ONECALL ? (n ? n : 1) : mode == FEED_FRAG1 ? 1 : mode == FEED_FRAG7 ? 7 : 4096;
    rli_asm_msg_begin(a, mode == FEED_FRAG7 ? 0 : n);
    for (size_t off = 0; off < n; off += frag)
        rli_asm_msg_data(a, p + off, n - off < frag ? n - off : frag);
    return rli_asm_msg_end(a, err);
}

typedef struct run_out {
    rli_asm_status last;
    int ledgers;
    cs_err err;
    rl_ledger_info info[16];
    uint8_t *data[16];
    size_t len[16];
} run_out;

static void run_free(run_out *o)
{
    for (int i = 0; i < o->ledgers && i < 16; i++)
        free(o->data[i]);
}

/* Feeds every message until the first error; returns the assembler for further checks. */
static rli_asm *run_script(const script *s, int64_t cap, size_t bound, uint32_t from, int mode, run_out *o)
{
    memset(o, 0, sizeof *o);
    rli_asm *a = rli_asm_new(cap, bound);
    assert_non_null(a);
    rli_asm_reset(a, from);
    for (size_t i = 0; i < s->n; i++) {
        o->last = feed(a, s->m[i].p, s->m[i].n, mode, &o->err);
        if (o->last == RLI_ASM_ERROR)
            break;
        if (o->last == RLI_ASM_LEDGER) {
            size_t len;
            const uint8_t *d = rli_asm_ledger(a, &len, &o->info[o->ledgers < 16 ? o->ledgers : 15]);
            if (o->ledgers < 16) {
                o->data[o->ledgers] = malloc(len ? len : 1);
                memcpy(o->data[o->ledgers], d, len);
                o->len[o->ledgers] = len;
            }
            o->ledgers++;
        }
    }
    return a;
}

/* Runs the script in every feeding mode and checks they agree on the outcome. */
static void expect_error(const script *s, int64_t cap, size_t bound, uint32_t from, int kind, const char *msg,
                         int ledgers)
{
    for (int mode = 0; mode < FEED_MODES; mode++) {
        run_out o;
        rli_asm *a = run_script(s, cap, bound, from, mode, &o);
        if (o.last != RLI_ASM_ERROR)
            fail_msg("mode %d: no error, want \"%s\"", mode, msg);
        if (o.err.kind != kind || strcmp(o.err.msg, msg))
            fail_msg("mode %d: kind %d \"%s\", want kind %d \"%s\"", mode, o.err.kind, o.err.msg, kind, msg);
        assert_int_equal(o.ledgers, ledgers);
        run_free(&o);
        rli_asm_free(a);
    }
}

#define PV "remoteledger: protocol violation: "
#define GAP "remoteledger: ledger sequence gap: "

static void test_asm_reassembles(void **state)
{
    (void)state;
    for (int mode = 0; mode < FEED_MODES; mode++) {
        script s = {0};
        sc_begin(&s, 5, 1700000000000000000LL);
        sc_chunk(&s, 5, 0, CS_CODEC_RAW, "hello, ", 7);
        sc_chunk(&s, 5, 1, CS_CODEC_RAW, "world", 5);
        sc_end(&s, 5, 2, 12, 1700000000015000000LL, XXH64("hello, world", 12, 0));
        sc_flow(&s, 6, "ring-replayed", NULL);
        run_out o;
        rli_asm *a = run_script(&s, CS_MAX_PAYLOAD_SIZE, CS_MAX_CHUNK_SIZE, 5, mode, &o);
        assert_int_not_equal(o.last, RLI_ASM_ERROR);
        assert_int_equal(o.ledgers, 2);
        assert_int_equal(o.len[0], 12);
        assert_memory_equal(o.data[0], "hello, world", 12);
        assert_int_equal(o.info[0].sequence, 5);
        assert_int_equal(o.info[0].chunks, 2);
        assert_int_equal(o.info[0].size, 12);
        assert_int_equal(o.info[0].emit_start_unix_nano, 1700000000000000000LL);
        assert_int_equal(o.info[0].emit_end_unix_nano, 1700000000015000000LL);
        assert_int_equal(o.info[0].received_unix_nano, 0);
        assert_int_equal(o.info[0].discarded_partials, 0);
        assert_memory_equal(o.data[1], "ring-replayed", 13);
        assert_int_equal(o.info[1].emit_start_unix_nano, 0);
        assert_int_equal(rli_asm_expected(a), 7);
        assert_false(rli_asm_active(a, NULL));
        run_free(&o);
        rli_asm_free(a);
        sc_free(&s);
    }
}

/* Every violation of 3.3, word for word, in every feeding mode (135 and more). */
static void test_asm_violations(void **state)
{
    (void)state;
    script s = {0};
    uint64_t hx = XXH64("x", 1, 0);

    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 1, CS_CODEC_RAW, "x", 1);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "ledger 1 chunk 1 arrived, expected chunk 0", 0);
    sc_free(&s);

    sc_chunk(&s, 1, 0, CS_CODEC_RAW, "x", 1);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "CHUNK for ledger 1 outside its flow", 0);
    sc_free(&s);

    sc_begin(&s, 1, 0);
    sc_chunk(&s, 2, 0, CS_CODEC_RAW, "x", 1);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "CHUNK for ledger 2 outside its flow", 0);
    sc_free(&s);

    sc_end(&s, 1, 0, 0, 0, 0);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "END for ledger 1 outside its flow", 0);
    sc_free(&s);

    sc_begin(&s, 1, 0);
    sc_end(&s, 2, 0, 0, 0, XXH64(NULL, 0, 0));
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "END for ledger 2 outside its flow", 0);
    sc_free(&s);

    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_RAW, "x", 1);
    sc_end(&s, 1, 2, 1, 0, hx);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "ledger 1 END declares 2 chunks, 1 arrived", 0);
    sc_free(&s);

    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_RAW, "x", 1);
    sc_end(&s, 1, 1, 2, 0, hx);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "ledger 1 END declares 2 bytes, 1 assembled", 0);
    sc_free(&s);

    char want[CS_ERR_MSG_MAX + 64];
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_RAW, "x", 1);
    sc_end(&s, 1, 1, 1, 0, 0xbad);
    snprintf(want, sizeof want, PV "ledger 1 checksum mismatch: got 0x%016llx, want 0x0000000000000bad",
             (unsigned long long)hx);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, want, 0);
    sc_free(&s);

    sc_begin(&s, 1, 0);
    sc_begin(&s, 2, 0);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "BEGIN for ledger 2 while assembling 1", 0);
    sc_free(&s);

    /* 122: sequence rules */
    sc_flow(&s, 5, "a", NULL);
    sc_flow(&s, 6, "b", NULL);
    sc_flow(&s, 8, "c", NULL);
    expect_error(&s, -1, 0, 5, RL_ERR_GAP, GAP "got ledger 8, expected 7", 2);
    sc_free(&s);

    sc_flow(&s, 11, "a", NULL);
    expect_error(&s, -1, 0, 10, RL_ERR_GAP, GAP "got ledger 11, expected 10", 0);
    sc_free(&s);

    sc_flow(&s, MAXU32, "a", NULL);
    sc_flow(&s, 1, "b", NULL);
    expect_error(&s, -1, 0, 0, RL_ERR_GAP,
                 GAP "ledger 1 cannot follow 4294967295, the last representable sequence", 1);
    sc_free(&s);

    /* decode failures, wire wording */
    uint8_t two[2] = {CS_WIRE_VERSION, CS_WIRE_TYPE_BEGIN};
    sc_raw(&s, two, 2);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "wire: message shorter than header: got 2 bytes, want at least 6", 0);
    sc_free(&s);

    uint8_t b[64];
    cs_wire_put_begin(b, 1, 0);
    b[0] = 0x01;
    sc_raw(&s, b, CS_WIRE_BEGIN_LEN);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "wire: unsupported protocol version: got 0x01, want 0x02", 0);
    sc_free(&s);

    uint8_t e[1] = {0};
    sc_raw(&s, e, 0);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "wire: message shorter than header: got 0 bytes, want at least 6", 0);
    sc_free(&s);

    uint8_t chunk10[10] = {CS_WIRE_VERSION, CS_WIRE_TYPE_CHUNK, 0, 0, 0, 1, 0, 0, 0, 0};
    sc_raw(&s, chunk10, sizeof chunk10);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL,
                 PV "wire: message shorter than header: CHUNK is 10 bytes, want at least 11", 0);
    sc_free(&s);

    sc_begin(&s, 1, 0);
    uint8_t badcodec[12];
    cs_wire_append_chunk(badcodec, 1, 0, 5, (const uint8_t *)"x", 1);
    sc_raw(&s, badcodec, sizeof badcodec);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "wire: unknown chunk codec: 0x05", 0);
    sc_free(&s);

    uint8_t unknown[20] = {CS_WIRE_VERSION, 0x7f, 0, 0, 0, 1};
    sc_raw(&s, unknown, sizeof unknown);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "wire: unknown message type: 0x7f", 0);
    sc_free(&s);

    /* fixed-size messages with the wrong length, short and long: the same words as cs_wire_decode */
    static const struct {
        uint8_t type;
        size_t len;
    } lens[] = {{CS_WIRE_TYPE_BEGIN, 13}, {CS_WIRE_TYPE_BEGIN, 15}, {CS_WIRE_TYPE_BEGIN, 40},
                {CS_WIRE_TYPE_END, 33},   {CS_WIRE_TYPE_END, 35},   {CS_WIRE_TYPE_END, 100},
                {0x7f, 35},               {0x7f, 6}};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        uint8_t m[100] = {CS_WIRE_VERSION, lens[i].type, 0, 0, 0, 1};
        cs_wire_msg dm;
        cs_err werr;
        assert_int_equal(cs_wire_decode(m, lens[i].len, &dm, &werr), -1);
        snprintf(want, sizeof want, PV "%s", werr.msg);
        sc_raw(&s, m, lens[i].len);
        expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, want, 0);
        sc_free(&s);
        /* and a long message with a bad version byte */
        m[0] = 0x01;
        assert_int_equal(cs_wire_decode(m, lens[i].len, &dm, &werr), -1);
        snprintf(want, sizeof want, PV "%s", werr.msg);
        sc_raw(&s, m, lens[i].len);
        expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, want, 0);
        sc_free(&s);
    }
    uint8_t longchunk[60];
    cs_wire_append_chunk(longchunk, 1, 0, 9, longchunk, 0);
    memset(longchunk + 11, 0xAB, sizeof longchunk - 11);
    sc_raw(&s, longchunk, sizeof longchunk);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "wire: unknown chunk codec: 0x09", 0);
    sc_free(&s);
}

/* 138 and the order of checks inside a CHUNK */
static void test_asm_cap(void **state)
{
    (void)state;
    uint8_t a100[100], b100[100], b50[50];
    memset(a100, 1, sizeof a100);
    memset(b100, 2, sizeof b100);
    memset(b50, 2, sizeof b50);
    script s = {0};
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_RAW, a100, 100);
    sc_chunk(&s, 1, 1, CS_CODEC_RAW, b100, 100);
    expect_error(&s, 150, 0, 1, RL_ERR_PROTOCOL, PV "ledger 1 exceeds the 150-byte payload cap", 0);
    sc_free(&s);

    uint8_t both[150];
    memcpy(both, a100, 100);
    memcpy(both + 100, b50, 50);
    for (int mode = 0; mode < FEED_MODES; mode++) {
        sc_begin(&s, 1, 0);
        sc_chunk(&s, 1, 0, CS_CODEC_RAW, a100, 100);
        sc_chunk(&s, 1, 1, CS_CODEC_RAW, b50, 50);
        sc_end(&s, 1, 2, 150, 0, XXH64(both, 150, 0));
        run_out o;
        rli_asm *a = run_script(&s, 150, 0, 1, mode, &o);
        assert_int_equal(o.last, RLI_ASM_LEDGER);
        assert_int_equal(o.len[0], 150);
        assert_memory_equal(o.data[0], both, 150);
        run_free(&o);
        rli_asm_free(a);
        sc_free(&s);
    }

    /* a zstd chunk is measured after expansion */
    uint8_t z[256];
    size_t zn = ZSTD_compress(z, sizeof z, b100, 100, 1);
    assert_false(ZSTD_isError(zn));
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_RAW, a100, 100);
    sc_chunk(&s, 1, 1, CS_CODEC_ZSTD, z, zn);
    expect_error(&s, 150, 0, 1, RL_ERR_PROTOCOL, PV "ledger 1 exceeds the 150-byte payload cap", 0);
    sc_free(&s);

    /* the flow check comes before the cap */
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_RAW, a100, 100);
    sc_chunk(&s, 1, 2, CS_CODEC_RAW, b100, 100);
    expect_error(&s, 150, 0, 1, RL_ERR_PROTOCOL, PV "ledger 1 chunk 2 arrived, expected chunk 1", 0);
    sc_free(&s);

    /* a cap of 0 accepts empty ledgers only */
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_RAW, "", 0);
    sc_end(&s, 1, 1, 0, 0, XXH64("", 0, 0));
    sc_flow(&s, 2, "x", NULL);
    expect_error(&s, 0, 0, 1, RL_ERR_PROTOCOL, PV "ledger 2 exceeds the 0-byte payload cap", 1);
    sc_free(&s);
}

/* 134 at the assembler: a second BEGIN for the same ledger drops the partial */
static void test_asm_redelivery(void **state)
{
    (void)state;
    for (int mode = 0; mode < FEED_MODES; mode++) {
        script s = {0};
        sc_begin(&s, 9, 123456789);
        sc_chunk(&s, 9, 0, CS_CODEC_RAW, "partial that must v", 19);
        sc_chunk(&s, 9, 1, CS_CODEC_RAW, "anish", 5);
        sc_begin(&s, 9, 0);
        sc_begin(&s, 9, 0); /* twice: two discards, and no sequence check on either */
        sc_chunk(&s, 9, 0, CS_CODEC_RAW, "the complete", 12);
        sc_chunk(&s, 9, 1, CS_CODEC_RAW, " ledger", 7);
        sc_end(&s, 9, 2, 19, 0, XXH64("the complete ledger", 19, 0));
        sc_flow(&s, 10, "next", NULL);
        run_out o;
        rli_asm *a = run_script(&s, -1, 0, 9, mode, &o);
        assert_int_equal(o.ledgers, 2);
        assert_memory_equal(o.data[0], "the complete ledger", 19);
        assert_int_equal(o.info[0].discarded_partials, 2);
        assert_int_equal(o.info[0].emit_start_unix_nano, 0);
        assert_int_equal(o.info[1].discarded_partials, 0);
        run_free(&o);
        rli_asm_free(a);
        sc_free(&s);
    }
}

static void test_asm_tip_and_ceiling(void **state)
{
    (void)state;
    script s = {0};
    sc_flow(&s, 900, "a", NULL);
    sc_flow(&s, 901, "b", NULL);
    run_out o;
    rli_asm *a = run_script(&s, -1, 0, 0, FEED_WHOLE, &o);
    assert_int_equal(o.ledgers, 2);
    assert_int_equal(rli_asm_expected(a), 902);
    run_free(&o);
    rli_asm_free(a);
    sc_free(&s);

    /* the ceiling itself is deliverable (a tip subscription may land on it) */
    sc_flow(&s, MAXU32, "a", NULL);
    a = run_script(&s, -1, 0, MAXU32, FEED_WHOLE, &o);
    assert_int_equal(o.ledgers, 1);
    assert_int_equal(rli_asm_expected(a), 0);
    run_free(&o);
    rli_asm_free(a);
    sc_free(&s);
}

/* Raw bytes hashed incrementally, as they are appended, give XXH64 of the ledger. */
static void test_asm_incremental_hash(void **state)
{
    (void)state;
    const size_t L = 3u << 20;
    uint8_t *led = malloc(L);
    assert_non_null(led);
    cs_synthetic_fill(led, L, 42, false);
    uint64_t want = XXH64(led, L, 0);
    size_t sizes[] = {1, 4095, 262144, 1000003, 7};
    rli_asm *a = rli_asm_new(-1, 0);
    assert_non_null(a);
    unsigned seed = 1;
    for (int round = 0; round < 3; round++) {
        rli_asm_reset(a, 1);
        uint8_t b[CS_WIRE_BEGIN_LEN];
        cs_err err;
        assert_int_equal(rli_asm_message(a, b, cs_wire_put_begin(b, 1, 0), &err), RLI_ASM_MORE);
        size_t off = 0;
        uint32_t idx = 0;
        while (off < L) {
            size_t n = sizes[(idx + (size_t)round) % 5];
            if (n > L - off)
                n = L - off;
            uint8_t *m = malloc(CS_WIRE_CHUNK_HEADER_LEN + n);
            size_t ml = cs_wire_append_chunk(m, 1, idx, CS_CODEC_RAW, led + off, n);
            /* random fragmentation of the message */
            rli_asm_msg_begin(a, round == 1 ? 0 : ml);
            size_t p = 0;
            while (p < ml) {
                seed = seed * 1103515245u + 12345u;
                size_t f = 1 + (seed >> 8) % 70000;
                if (f > ml - p)
                    f = ml - p;
                rli_asm_msg_data(a, m + p, f);
                p += f;
            }
            assert_int_equal(rli_asm_msg_end(a, &err), RLI_ASM_MORE);
            free(m);
            off += n;
            idx++;
        }
        uint8_t e[CS_WIRE_END_LEN];
        rli_asm_status st = rli_asm_message(a, e, cs_wire_put_end(e, 1, idx, L, 0, want), &err);
        if (st != RLI_ASM_LEDGER)
            fail_msg("%s", err.msg);
        size_t len;
        const uint8_t *d = rli_asm_ledger(a, &len, NULL);
        assert_int_equal(len, L);
        assert_memory_equal(d, led, L);
        assert_int_equal(XXH64(d, len, 0), want);
    }
    rli_asm_free(a);
    free(led);
}

/* 148 at the assembler, and the buffer reuse: the second ledger lands in the same buffer. */
static void test_asm_mixed_codecs_and_reuse(void **state)
{
    (void)state;
    const size_t zlen = 100000, rlen = 40000;
    uint8_t *zsrc = malloc(zlen), *rsrc = malloc(rlen), *both = malloc(zlen + rlen);
    cs_synthetic_fill(zsrc, zlen, 3, true);
    cs_synthetic_fill(rsrc, rlen, 4, false);
    memcpy(both, zsrc, zlen);
    memcpy(both + zlen, rsrc, rlen);
    size_t cb = ZSTD_compressBound(zlen);
    uint8_t *z = malloc(cb);
    size_t zn = ZSTD_compress(z, cb, zsrc, zlen, 1);
    assert_false(ZSTD_isError(zn));
    assert_true(zn < zlen);
    uint64_t sum = XXH64(both, zlen + rlen, 0);
    for (int mode = 0; mode < FEED_MODES; mode++) {
        script s = {0};
        for (uint32_t seq = 1; seq <= 2; seq++) {
            sc_begin(&s, seq, 0);
            sc_chunk(&s, seq, 0, CS_CODEC_ZSTD, z, zn);
            sc_chunk(&s, seq, 1, CS_CODEC_RAW, rsrc, rlen);
            sc_end(&s, seq, 2, zlen + rlen, 0, sum);
        }
        rli_asm *a = rli_asm_new(-1, 0);
        rli_asm_reset(a, 1);
        cs_err err;
        const uint8_t *first = NULL;
        size_t cap_after_first = 0;
        for (size_t i = 0; i < s.n; i++) {
            rli_asm_status st = feed(a, s.m[i].p, s.m[i].n, mode, &err);
            if (st == RLI_ASM_ERROR)
                fail_msg("mode %d: %s", mode, err.msg);
            if (st == RLI_ASM_LEDGER) {
                size_t len;
                rl_ledger_info info;
                const uint8_t *d = rli_asm_ledger(a, &len, &info);
                assert_int_equal(len, zlen + rlen);
                assert_memory_equal(d, both, len);
                assert_int_equal(info.chunks, 2);
                if (!first) {
                    first = d;
                    cap_after_first = rli_asm_capacity(a);
                } else {
                    assert_ptr_equal(d, first);
                    assert_int_equal(rli_asm_capacity(a), cap_after_first);
                }
            }
        }
        rli_asm_free(a);
        sc_free(&s);
    }
    free(zsrc);
    free(rsrc);
    free(both);
    free(z);
}

/* 149 and the expansion bound */
static void test_asm_decompress_errors(void **state)
{
    (void)state;
    script s = {0};
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_ZSTD, "not a zstd frame", 16);
    run_out o;
    for (int mode = 0; mode < FEED_MODES; mode++) {
        rli_asm *a = run_script(&s, -1, 0, 1, mode, &o);
        assert_int_equal(o.last, RLI_ASM_ERROR);
        assert_int_equal(o.err.kind, RL_ERR_PROTOCOL);
        assert_contains(o.err.msg, PV "ledger 1 chunk 0: decompress: ");
        rli_asm_free(a);
    }
    sc_free(&s);

    /* a frame declaring more than the per-chunk bound: refused from its header */
    uint8_t src[8192], z[9000];
    cs_synthetic_fill(src, sizeof src, 1, true);
    size_t zn = ZSTD_compress(z, sizeof z, src, sizeof src, 1);
    assert_true(zn < 4096);
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_ZSTD, z, zn);
    expect_error(&s, -1, 4096, 1, RL_ERR_PROTOCOL,
                 PV "ledger 1 chunk 0 inflates to 8192 bytes, over the chunk bound of 4096 (max_chunk_size)", 0);
    sc_free(&s);

    /* a frame without a content size cannot be held to the bound before it is decoded: refused,
     * within the bound too (the server always writes the content size) */
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0);
    zn = ZSTD_compress2(cc, z, sizeof z, src, sizeof src);
    assert_false(ZSTD_isError(zn));
    assert_int_equal(ZSTD_getFrameContentSize(z, zn), ZSTD_CONTENTSIZE_UNKNOWN);
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_ZSTD, z, zn);
    expect_error(&s, -1, 4096, 1, RL_ERR_PROTOCOL,
                 PV "ledger 1 chunk 0 is a zstd frame without a content size, which the chunk bound of 4096 "
                    "(max_chunk_size) needs",
                 0);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL,
                 PV "ledger 1 chunk 0 is a zstd frame without a content size, which the chunk bound of 8388608 "
                    "(max_chunk_size) needs",
                 0);
    sc_free(&s);
    ZSTD_freeCCtx(cc);

    /* with its content size it expands fine, exactly at the bound too */
    zn = ZSTD_compress(z, sizeof z, src, sizeof src, 1);
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_ZSTD, z, zn);
    sc_end(&s, 1, 1, sizeof src, 0, XXH64(src, sizeof src, 0));
    for (int mode = 0; mode < FEED_MODES; mode++) {
        rli_asm *a = run_script(&s, -1, sizeof src, 1, mode, &o);
        assert_int_equal(o.last, RLI_ASM_LEDGER);
        assert_memory_equal(o.data[0], src, sizeof src);
        run_free(&o);
        rli_asm_free(a);
    }
    sc_free(&s);

    /* a frame cut short */
    zn = ZSTD_compress(z, sizeof z, src, sizeof src, 1);
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_ZSTD, z, zn - 3);
    for (int mode = 0; mode < FEED_MODES; mode++) {
        rli_asm *a = run_script(&s, -1, 0, 1, mode, &o);
        assert_int_equal(o.last, RLI_ASM_ERROR);
        assert_contains(o.err.msg, PV "ledger 1 chunk 0: decompress: ");
        rli_asm_free(a);
    }
    sc_free(&s);

    /* an empty zstd payload expands to nothing; two frames in one payload expand to both */
    uint8_t two[20000];
    size_t n1 = ZSTD_compress(two, sizeof two, src, 4096, 1);
    size_t n2 = ZSTD_compress(two + n1, sizeof two - n1, src + 4096, 4096, 1);
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_ZSTD, "", 0);
    sc_chunk(&s, 1, 1, CS_CODEC_ZSTD, two, n1 + n2);
    sc_end(&s, 1, 2, sizeof src, 0, XXH64(src, sizeof src, 0));
    for (int mode = 0; mode < FEED_MODES; mode++) {
        rli_asm *a = run_script(&s, -1, 0, 1, mode, &o);
        if (o.last != RLI_ASM_LEDGER)
            fail_msg("mode %d: %s", mode, o.err.msg);
        assert_memory_equal(o.data[0], src, sizeof src);
        run_free(&o);
        rli_asm_free(a);
    }
    sc_free(&s);
}

/* 151: the expansion bound is per chunk, not per assembly */
static void test_asm_bound_is_per_chunk(void **state)
{
    (void)state;
    const size_t piece_len = (256u << 10) / 18 * 18;
    uint8_t *piece = malloc(piece_len);
    for (size_t i = 0; i < piece_len; i += 18)
        memcpy(piece + i, "ledger-close-meta-", 18);
    size_t cb = ZSTD_compressBound(piece_len);
    uint8_t *frame = malloc(cb);
    size_t fn = ZSTD_compress(frame, cb, piece, piece_len, 1);
    assert_false(ZSTD_isError(fn));
    const int chunks = 80;
    XXH64_state_t *h = XXH64_createState();
    XXH64_reset(h, 0);
    for (int i = 0; i < chunks; i++)
        XXH64_update(h, piece, piece_len);
    uint64_t sum = XXH64_digest(h);
    XXH64_freeState(h);

    for (int mode = 0; mode < FEED_MODES; mode += 2) {
        rli_asm *a = rli_asm_new(-1, rli_expand_bound(CS_MAX_CHUNK_SIZE));
        rli_asm_reset(a, 1);
        cs_err err;
        uint8_t b[CS_WIRE_BEGIN_LEN];
        assert_int_equal(feed(a, b, cs_wire_put_begin(b, 1, 0), mode, &err), RLI_ASM_MORE);
        uint8_t *m = malloc(CS_WIRE_CHUNK_HEADER_LEN + fn);
        for (int i = 0; i < chunks; i++) {
            size_t ml = cs_wire_append_chunk(m, 1, (uint32_t)i, CS_CODEC_ZSTD, frame, fn);
            if (feed(a, m, ml, mode == FEED_FRAG1 ? FEED_FRAG4096 : mode, &err) != RLI_ASM_MORE)
                fail_msg("chunk %d: %s", i, err.msg);
        }
        free(m);
        uint8_t e[CS_WIRE_END_LEN];
        rli_asm_status st = feed(a, e, cs_wire_put_end(e, 1, chunks, piece_len * chunks, 0, sum), mode, &err);
        if (st != RLI_ASM_LEDGER)
            fail_msg("%s", err.msg);
        size_t len;
        const uint8_t *d = rli_asm_ledger(a, &len, NULL);
        assert_int_equal(len, piece_len * chunks);
        assert_true(len > 20u << 20 || len > (size_t)CS_MAX_CHUNK_SIZE * 2);
        assert_memory_equal(d, piece, piece_len);
        assert_memory_equal(d + len - piece_len, piece, piece_len);
        rli_asm_free(a);
    }
    free(piece);
    free(frame);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_asm_reassembles),
        cmocka_unit_test(test_asm_violations),
        cmocka_unit_test(test_asm_cap),
        cmocka_unit_test(test_asm_redelivery),
        cmocka_unit_test(test_asm_tip_and_ceiling),
        cmocka_unit_test(test_asm_incremental_hash),
        cmocka_unit_test(test_asm_mixed_codecs_and_reuse),
        cmocka_unit_test(test_asm_decompress_errors),
        cmocka_unit_test(test_asm_bound_is_per_chunk),
    };
    return RLSUITE_RUN(tests);
}
