/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger: what a session may hold in memory, whatever the server sends. The chunk bound
 * (rl_options.max_chunk_size) holds every CHUNK: its raw payload, its compressed payload, and
 * what a zstd payload inflates to, refused from the frame's header before any room is made for
 * it; the assembly buffer never grows past the ledger cap (max_message_size). The attack these
 * guard against: about 9 KB on the wire, CHUNKs of ~270-byte zstd frames that each inflate to
 * 8 MiB, which made one session allocate 512 MiB for a 256 MiB cap.
 *
 * What a session holds is measured as the assembler's footprint (rli_asm_footprint: its buffers,
 * which never shrink, and the zstd decoder's state) once the run is over: deterministic, unlike
 * the process's peak RSS. */
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
#include "remoteledger/stream_internal.h"
#include "support/rlclient.h"
#include "support/rlsuite.h"
#include "support/scriptserver.h"
#include "wire/wire.h"

#define PV "remoteledger: protocol violation: "
#define MIB (1u << 20)
#define BOMB_CHUNKS 40
/* The assembler's own state and the zstd decoder's, besides its buffers: well under this. */
#define STATE_SLACK (256u << 10)

/* A zstd frame (with its content size) of n zero bytes, as small as zstd makes it. */
static uint8_t *zeros_frame(size_t n, size_t *zn)
{
    uint8_t *src = calloc(1, n ? n : 1);
    size_t cb = ZSTD_compressBound(n);
    uint8_t *z = malloc(cb);
    assert_non_null(src);
    assert_non_null(z);
    *zn = ZSTD_compress(z, cb, src, n, 19);
    assert_false(ZSTD_isError(*zn));
    free(src);
    return z;
}

/* One CHUNK message of seq, idx and codec around p[0..n); *len its length. */
static uint8_t *chunk_msg(uint32_t seq, uint32_t idx, uint8_t codec, const void *p, size_t n, size_t *len)
{
    uint8_t *m = malloc(CS_WIRE_CHUNK_HEADER_LEN + n);
    assert_non_null(m);
    *len = cs_wire_append_chunk(m, seq, idx, codec, p, n);
    return m;
}

/* Feeds a message whole (frag 0) or in fragments of frag bytes with the size hint. */
static rli_asm_status feed(rli_asm *a, const uint8_t *p, size_t n, size_t frag, cs_err *err)
{
    if (frag == 0)
        return rli_asm_message(a, p, n, err);
    rli_asm_msg_begin(a, n);
    for (size_t off = 0; off < n; off += frag)
        rli_asm_msg_data(a, p + off, n - off < frag ? n - off : frag);
    return rli_asm_msg_end(a, err);
}

/* BEGIN 10, then the bomb's chunks until the first error; returns the chunks accepted. */
static int feed_bomb(rli_asm *a, const uint8_t *z, size_t zn, size_t frag, cs_err *err)
{
    uint8_t b[CS_WIRE_BEGIN_LEN];
    rli_asm_reset(a, 10);
    assert_int_equal(feed(a, b, cs_wire_put_begin(b, 10, 0), frag, err), RLI_ASM_MORE);
    for (uint32_t i = 0; i < BOMB_CHUNKS; i++) {
        size_t ml;
        uint8_t *m = chunk_msg(10, i, CS_CODEC_ZSTD, z, zn, &ml);
        rli_asm_status st = feed(a, m, ml, frag, err);
        free(m);
        if (st == RLI_ASM_ERROR)
            return (int)i;
        assert_int_equal(st, RLI_ASM_MORE);
    }
    return BOMB_CHUNKS;
}

static const size_t frags[] = {0, 1, 7, 4096};

/* The bomb against a chunk bound of 256 KiB: refused at its first chunk, from the frame header,
 * with nothing allocated for it. */
static void test_asm_bomb_refused_at_first_chunk(void **state)
{
    (void)state;
    size_t zn;
    uint8_t *z = zeros_frame(8 * MIB, &zn);
    assert_true(zn < 400); /* ~9 KB on the wire for the 31-40 chunks of the attack */
    for (size_t f = 0; f < sizeof frags / sizeof frags[0]; f++) {
        rli_asm *a = rli_asm_new(RL_DEFAULT_MAX_MESSAGE_SIZE, 262144);
        cs_err err;
        assert_int_equal(feed_bomb(a, z, zn, frags[f], &err), 0);
        assert_int_equal(err.kind, RL_ERR_PROTOCOL);
        assert_string_equal(err.msg, PV "ledger 10 chunk 0 inflates to 8388608 bytes, over the chunk bound of "
                                        "262144 (max_chunk_size)");
        assert_int_equal(rli_asm_capacity(a), 0);
        assert_true(rli_asm_footprint(a) < (64u << 10) + STATE_SLACK);
        rli_asm_free(a);
    }
    free(z);
}

/* The bomb within the default bound (each chunk is a legal 8 MiB piece) stops at the ledger cap,
 * refused from the frame header of the chunk that would cross it, and the buffer is the cap, not
 * the next power of two past it. */
static void test_asm_bomb_stops_at_cap(void **state)
{
    (void)state;
    const int64_t cap = 20 * MIB; /* not a power of two: growth is clamped to it */
    size_t zn;
    uint8_t *z = zeros_frame(8 * MIB, &zn);
    for (size_t f = 0; f < sizeof frags / sizeof frags[0]; f += 3) {
        rli_asm *a = rli_asm_new(cap, 0);
        cs_err err;
        assert_int_equal(feed_bomb(a, z, zn, frags[f], &err), 2);
        assert_int_equal(err.kind, RL_ERR_PROTOCOL);
        assert_string_equal(err.msg, PV "ledger 10 exceeds the 20971520-byte payload cap");
        assert_true(rli_asm_capacity(a) <= (size_t)cap);
        assert_true(rli_asm_footprint(a) <= (size_t)cap + (64u << 10) + STATE_SLACK);
        rli_asm_free(a);
    }
    free(z);
}

/* A chunk exactly at the bound passes, raw or inflated; one byte more is refused, raw, inflated
 * or compressed. */
static void test_asm_chunk_at_bound(void **state)
{
    (void)state;
    const size_t bound = 4096;
    uint8_t raw[4097];
    cs_synthetic_fill(raw, sizeof raw, 7, false);
    size_t zn, zn1, cn;
    uint8_t *z = zeros_frame(bound, &zn), *z1 = zeros_frame(bound + 1, &zn1);
    uint8_t *cz = malloc(ZSTD_compressBound(sizeof raw)); /* incompressible: more than the bound */
    cn = ZSTD_compress(cz, ZSTD_compressBound(sizeof raw), raw, sizeof raw, 1);
    assert_true(cn > bound);
    uint8_t zeros[4096] = {0};
    for (size_t f = 0; f < sizeof frags / sizeof frags[0]; f++) {
        rli_asm *a = rli_asm_new(-1, bound);
        cs_err err;
        uint8_t b[CS_WIRE_END_LEN];
        rli_asm_reset(a, 1);
        assert_int_equal(feed(a, b, cs_wire_put_begin(b, 1, 0), frags[f], &err), RLI_ASM_MORE);
        size_t ml;
        uint8_t *m = chunk_msg(1, 0, CS_CODEC_RAW, raw, bound, &ml);
        assert_int_equal(feed(a, m, ml, frags[f], &err), RLI_ASM_MORE);
        free(m);
        m = chunk_msg(1, 1, CS_CODEC_ZSTD, z, zn, &ml);
        assert_int_equal(feed(a, m, ml, frags[f], &err), RLI_ASM_MORE);
        free(m);
        XXH64_state_t *h = XXH64_createState();
        XXH64_reset(h, 0);
        XXH64_update(h, raw, bound);
        XXH64_update(h, zeros, bound);
        size_t el = cs_wire_put_end(b, 1, 2, 2 * bound, 0, XXH64_digest(h));
        XXH64_freeState(h);
        if (feed(a, b, el, frags[f], &err) != RLI_ASM_LEDGER)
            fail_msg("frag %zu: %s", frags[f], err.msg);

        const struct {
            uint8_t codec;
            const uint8_t *p;
            size_t n;
            const char *msg;
        } over[] = {
            {CS_CODEC_RAW, raw, bound + 1, PV "ledger 2 chunk 0 carries more bytes than the chunk bound of 4096 (max_chunk_size)"},
            {CS_CODEC_ZSTD, z1, zn1, PV "ledger 2 chunk 0 inflates to 4097 bytes, over the chunk bound of 4096 (max_chunk_size)"},
            {CS_CODEC_ZSTD, cz, cn, PV "ledger 2 chunk 0 carries more bytes than the chunk bound of 4096 (max_chunk_size)"},
        };
        for (size_t i = 0; i < sizeof over / sizeof over[0]; i++) {
            rli_asm_reset(a, 2);
            assert_int_equal(feed(a, b, cs_wire_put_begin(b, 2, 0), frags[f], &err), RLI_ASM_MORE);
            m = chunk_msg(2, 0, over[i].codec, over[i].p, over[i].n, &ml);
            assert_int_equal(feed(a, m, ml, frags[f], &err), RLI_ASM_ERROR);
            free(m);
            assert_int_equal(err.kind, RL_ERR_PROTOCOL);
            assert_string_equal(err.msg, over[i].msg);
        }
        rli_asm_free(a);
    }
    free(z);
    free(z1);
    free(cz);
}

/* Raw chunks fill a ledger of exactly the cap: the buffer is the cap, not 2^n past it. */
static void test_asm_growth_clamped_to_cap(void **state)
{
    (void)state;
    const size_t cap = 300000, piece = 60000;
    uint8_t *raw = malloc(cap);
    cs_synthetic_fill(raw, cap, 9, false);
    for (size_t f = 0; f < sizeof frags / sizeof frags[0]; f++) {
        rli_asm *a = rli_asm_new((int64_t)cap, 0);
        cs_err err;
        uint8_t b[CS_WIRE_END_LEN];
        rli_asm_reset(a, 1);
        assert_int_equal(feed(a, b, cs_wire_put_begin(b, 1, 0), frags[f], &err), RLI_ASM_MORE);
        for (uint32_t i = 0; i < cap / piece; i++) {
            size_t ml;
            uint8_t *m = chunk_msg(1, i, CS_CODEC_RAW, raw + i * piece, piece, &ml);
            assert_int_equal(feed(a, m, ml, frags[f], &err), RLI_ASM_MORE);
            free(m);
        }
        size_t el = cs_wire_put_end(b, 1, (uint32_t)(cap / piece), cap, 0, XXH64(raw, cap, 0));
        assert_int_equal(feed(a, b, el, frags[f], &err), RLI_ASM_LEDGER);
        assert_int_equal(rli_asm_capacity(a), cap);
        rli_asm_free(a);
    }
    free(raw);
}

/* ---- through a session ------------------------------------------------------------------------ */

/* The scripted server sends BEGIN 10 and the bomb's chunks; the client's outcome and what its
 * assembler held afterwards. */
/* The session bomb against a server whose 101 says head (NULL: the standard one). */
static void session_bomb_from(const char *head, rl_options *o, collected *c, size_t *footprint)
{
    size_t zn;
    uint8_t *z = zeros_frame(8 * MIB, &zn);
    ss_server *ss = ss_start();
    if (head)
        ss_handshake_with(ss, head);
    ss_begin(ss, 10, 0);
    for (uint32_t i = 0; i < BOMB_CHUNKS; i++)
        ss_chunk(ss, 10, i, CS_CODEC_ZSTD, z, zn);
    ss_stall(ss);
    free(z);
    drain_url(ss_url(ss), o, rl_unbounded_range(10), c);
    assert_non_null(c->s->asm_);
    *footprint = rli_asm_footprint(c->s->asm_);
    drain_done(ss, c);
    ss_stop(ss);
}

static void session_bomb(rl_options *o, collected *c, size_t *footprint)
{
    session_bomb_from(NULL, o, c, footprint);
}

static void test_session_bomb_refused(void **state)
{
    (void)state;
    rl_options o;
    rl_options_init(&o);
    o.max_chunk_size = 262144;
    collected c = {0};
    size_t footprint;
    session_bomb(&o, &c, &footprint);
    expect(&c, RL_ERR_PROTOCOL, 0);
    assert_string_equal(c.err, PV "ledger 10 chunk 0 inflates to 8388608 bytes, over the chunk bound of 262144 "
                                  "(max_chunk_size)");
    assert_true(footprint < (64u << 10) + STATE_SLACK);
    collected_free(&c);
}

static void test_session_bomb_stops_at_cap(void **state)
{
    (void)state;
    rl_options o;
    rl_options_init(&o);
    o.max_message_size = 20 * MIB;
    collected c = {0};
    size_t footprint;
    session_bomb(&o, &c, &footprint);
    expect(&c, RL_ERR_PROTOCOL, 0);
    assert_string_equal(c.err, PV "ledger 10 exceeds the 20971520-byte payload cap");
    assert_true(footprint <= 20 * MIB + RL_DEFAULT_MAX_CHUNK_SIZE + STATE_SLACK);
    collected_free(&c);
}

/* With the default bound, a server that announces its chunk size (corestreamd's 101 says
 * X-Corestream-Chunk-Size) bounds the chunks to it: the bomb is refused at its first chunk, naming
 * the server's bound; a bound the caller set lower still wins, and an announcement that is not a
 * chunk size is ignored (the bomb then reaches the ledger cap). */
static void test_session_bomb_refused_by_the_servers_bound(void **state)
{
    (void)state;
    static const char *const heads[] = {
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Accept: %s\r\nX-Corestream-Chunk-Size: 262144\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Accept: %s\r\nX-Corestream-Chunk-Size: 262144x\r\n\r\n",
    };
    rl_options o;
    rl_options_init(&o);
    collected c = {0};
    size_t footprint;
    session_bomb_from(heads[0], &o, &c, &footprint);
    expect(&c, RL_ERR_PROTOCOL, 0);
    assert_string_equal(c.err, PV "ledger 10 chunk 0 inflates to 8388608 bytes, over the chunk bound of 262144 "
                                  "(the server's X-Corestream-Chunk-Size)");
    assert_true(footprint < (64u << 10) + STATE_SLACK);
    collected_reset(&c);
    o.max_chunk_size = 65536;
    session_bomb_from(heads[0], &o, &c, &footprint);
    assert_string_equal(c.err, PV "ledger 10 chunk 0 inflates to 8388608 bytes, over the chunk bound of 65536 "
                                  "(max_chunk_size)");
    collected_reset(&c);
    o.max_chunk_size = 0;
    o.max_message_size = 20 * MIB;
    session_bomb_from(heads[1], &o, &c, &footprint);
    assert_string_equal(c.err, PV "ledger 10 exceeds the 20971520-byte payload cap");
    collected_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_asm_bomb_refused_at_first_chunk),
        cmocka_unit_test(test_asm_bomb_stops_at_cap),
        cmocka_unit_test(test_asm_chunk_at_bound),
        cmocka_unit_test(test_asm_growth_clamped_to_cap),
        cmocka_unit_test(test_session_bomb_refused),
        cmocka_unit_test(test_session_bomb_stops_at_cap),
        cmocka_unit_test(test_session_bomb_refused_by_the_servers_bound),
    };
    return RLSUITE_RUN(tests);
}
