/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger's in-place receive path (issue 12): a raw CHUNK's payload read straight into the
 * assembly buffer, a fragmented zstd CHUNK's into the gathered compressed bytes, wherever the
 * frame parser says the next bytes are all payload (rli_ws_payload_left) and the assembler offers
 * a slot (rli_asm_recv_slot).
 *
 * The unit cases drive the parser and the assembler with the glue conn_input.c and conn.c have
 * (on_frames, and the choice of where each read lands), reading a server's byte stream cut at
 * every byte boundary, in place and through a receive buffer only, and require the same
 * transcript: the same ledgers (length, XXH64, info), control frames and errors, word for word.
 * The end-to-end cases run the real client against the scripted server: large raw and compressed
 * ledgers, fragmented with a ping between fragments, with busy-polling on and off, and the
 * busy-poll option's bound. */
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
#include "remoteledger/wsframe.h"
#include "support/rlclient.h"
#include "support/scriptserver.h"
#include "wire/wire.h"

/* ==== the receive glue, as conn_input.c has it ================================================= */

#define RBUF 4096

typedef struct rx {
    rli_ws_parser p;
    rli_asm *a;
    bool in_msg, failed;
    uint64_t hint;
    uint8_t *rbuf;
    size_t in_place, via_rbuf; /* bytes read to each destination */
    char out[8192];
    size_t out_len;
} rx;

static void say(rx *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(rx *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(r->out + r->out_len, sizeof r->out - r->out_len, fmt, ap);
    va_end(ap);
    assert_true(k >= 0 && (size_t)k < sizeof r->out - r->out_len);
    r->out_len += (size_t)k;
}

/* conn_input.c's on_frames, less what is the connection's (the read limit, text, closing). */
static void rx_feed(rx *r, const uint8_t *in, size_t len)
{
    static const uint8_t empty[1];
    size_t off = 0;
    while (!r->failed) {
        rli_ws_event ev;
        off += rli_ws_parse(&r->p, in + off, len - off, &ev);
        assert_true(off <= len);
        switch (ev.kind) {
        case RLI_WS_EV_NONE:
            assert_int_equal(off, len);
            return;
        case RLI_WS_EV_FRAME:
            if (ev.first) {
                r->in_msg = true;
                r->hint = ev.fin ? ev.frame_len : 0;
            }
            continue;
        case RLI_WS_EV_DATA: {
            cs_err err;
            rli_asm_status st;
            if (ev.msg_start && ev.msg_end) {
                st = rli_asm_message(r->a, ev.len ? ev.data : empty, ev.len, &err);
            } else {
                if (ev.msg_start)
                    rli_asm_msg_begin(r->a, r->hint);
                if (ev.len)
                    rli_asm_msg_data(r->a, ev.data, ev.len);
                if (!ev.msg_end)
                    continue;
                st = rli_asm_msg_end(r->a, &err);
            }
            r->in_msg = false;
            if (st == RLI_ASM_ERROR) {
                say(r, "error %d %s\n", err.kind, err.msg);
                r->failed = true;
                return;
            }
            if (st == RLI_ASM_LEDGER) {
                size_t n;
                rl_ledger_info info;
                const uint8_t *l = rli_asm_ledger(r->a, &n, &info);
                say(r, "ledger %u len=%zu xxh=%016llx chunks=%u\n", info.sequence, n,
                    (unsigned long long)XXH64(l, n, 0), info.chunks);
            }
            continue;
        }
        case RLI_WS_EV_CONTROL:
            say(r, "control %u %.*s\n", ev.opcode, (int)ev.len, (const char *)ev.data);
            continue;
        case RLI_WS_EV_ERROR:
        default:
            say(r, "ws error %s\n", ev.err);
            r->failed = true;
            return;
        }
    }
}

/* Where the next read lands: conn_input.c's rli_conn_rx_slot. */
static uint8_t *rx_slot(rx *r, size_t *room)
{
    uint64_t left = rli_ws_payload_left(&r->p);
    if (!r->in_msg || left == 0)
        return NULL;
    return rli_asm_recv_slot(r->a, left < (1u << 20) ? (size_t)left : (1u << 20), room);
}

/* Reads s[0..n) as a socket would deliver it: never past `cut` in the first read (0: no cut), at
 * most max_read bytes a read, and each read either in place (when in_place and a slot is offered)
 * or into the receive buffer (at most head bytes at a frame boundary, when head is not 0). */
static void rx_run(rx *r, const uint8_t *s, size_t n, int64_t cap, bool in_place, size_t cut, size_t max_read,
                   size_t head)
{
    memset(r, 0, sizeof *r);
    rli_ws_parser_init(&r->p);
    r->a = rli_asm_new(cap, CS_MAX_CHUNK_SIZE);
    r->rbuf = malloc(RBUF);
    assert_non_null(r->a);
    assert_non_null(r->rbuf);
    rli_asm_reset(r->a, 0);
    size_t pos = 0;
    for (int guard = 0; pos < n && !r->failed; guard++) {
        assert_true(guard < 1000000);
        size_t room = 0;
        uint8_t *slot = in_place ? rx_slot(r, &room) : NULL;
        size_t want = slot ? room : head && rli_ws_payload_left(&r->p) == 0 ? head : RBUF;
        if (want > max_read)
            want = max_read;
        if (cut && pos < cut && want > cut - pos)
            want = cut - pos;
        if (want > n - pos)
            want = n - pos;
        uint8_t *dst = slot ? slot : r->rbuf;
        memcpy(dst, s + pos, want); /* the recv() */
        pos += want;
        if (slot)
            r->in_place += want;
        else
            r->via_rbuf += want;
        rx_feed(r, dst, want);
    }
    if (!r->failed && r->in_msg)
        say(r, "open message\n");
    rli_asm_free(r->a);
    free(r->rbuf);
}

/* Every way of reading s gives the transcript of reading it whole through the receive buffer;
 * returns the bytes the byte-at-a-time in-place run received in place. */
static size_t expect_same_everywhere(const uint8_t *s, size_t n, int64_t cap, const char *want_substr)
{
    static rx ref, r;
    rx_run(&ref, s, n, cap, false, 0, SIZE_MAX, 0);
    if (want_substr && !strstr(ref.out, want_substr))
        fail_msg("reference transcript lacks \"%s\":\n%s", want_substr, ref.out);
    for (size_t cut = 1; cut < n; cut++) {
        rx_run(&r, s, n, cap, true, cut, SIZE_MAX, 0);
        if (strcmp(r.out, ref.out) != 0)
            fail_msg("cut at %zu differs:\n%s\nwant:\n%s", cut, r.out, ref.out);
        if (!r.failed) /* else reading stopped at the error */
            assert_int_equal(r.in_place + r.via_rbuf, n);
    }
    rx_run(&r, s, n, cap, true, 0, SIZE_MAX, 64); /* conn.c's RLI_HEAD_READ policy */
    assert_string_equal(r.out, ref.out);
    rx_run(&r, s, n, cap, true, 0, 1, 0);
    assert_string_equal(r.out, ref.out);
    size_t one_by_one = r.in_place;
    rx_run(&r, s, n, cap, false, 0, 1, 0);
    assert_string_equal(r.out, ref.out);
    assert_int_equal(r.in_place, 0);
    return one_by_one;
}

static size_t frame(uint8_t *out, uint8_t b0, const void *p, size_t n, int enc)
{
    size_t h = 0;
    out[h++] = b0;
    if (enc == 0 && n < 126) {
        out[h++] = (uint8_t)n;
    } else if (enc != 8 && n <= 0xFFFF) {
        out[h++] = 126;
        out[h++] = (uint8_t)(n >> 8);
        out[h++] = (uint8_t)n;
    } else {
        out[h++] = 127;
        for (int i = 7; i >= 0; i--)
            out[h++] = (uint8_t)((uint64_t)n >> (8 * i));
    }
    if (n)
        memcpy(out + h, p, n);
    return h + n;
}

/* One message as one binary frame. */
static size_t msg(uint8_t *out, const void *p, size_t n) { return frame(out, 0x82, p, n, 0); }

/* One message in frames of the given lengths (the last takes the rest), a ping between each. */
static size_t fragmented(uint8_t *out, const uint8_t *p, size_t n, size_t first, const char *ping)
{
    size_t k = frame(out, 0x02, p, first, 0);
    k += frame(out + k, 0x89, ping, strlen(ping), 0);
    k += frame(out + k, 0x80, p + first, n - first, 0);
    return k;
}

static size_t zstd_of(uint8_t *out, size_t cap, const uint8_t *p, size_t n)
{
    size_t z = ZSTD_compress(out, cap, p, n, 1);
    assert_false(ZSTD_isError(z));
    return z;
}

/* ==== unit cases ================================================================================ */

/* The two questions the path asks, answered as documented. */
static void test_slot_and_payload_left(void **state)
{
    (void)state;
    uint8_t s[512], pay[300];
    memset(pay, 7, sizeof pay);
    rli_ws_parser p;
    rli_ws_parser_init(&p);
    rli_ws_event ev;
    assert_int_equal(rli_ws_payload_left(&p), 0);
    size_t n = frame(s, 0x82, pay, sizeof pay, 0);
    assert_int_equal(rli_ws_parse(&p, s, 2, &ev), 2); /* half a 16-bit-length header */
    assert_int_equal(rli_ws_payload_left(&p), 0);
    assert_int_equal(rli_ws_parse(&p, s + 2, 2, &ev), 2);
    assert_int_equal(ev.kind, RLI_WS_EV_FRAME);
    assert_int_equal(rli_ws_payload_left(&p), 300);
    assert_int_equal(rli_ws_parse(&p, s + 4, 100, &ev), 100);
    assert_int_equal(rli_ws_payload_left(&p), 200);
    assert_int_equal(rli_ws_parse(&p, s + 104, n - 104, &ev), 200);
    assert_true(ev.frame_end);
    assert_int_equal(rli_ws_payload_left(&p), 0);
    n = frame(s, 0x89, "abc", 3, 0);
    assert_int_equal(rli_ws_parse(&p, s, 3, &ev), 3); /* a ping's payload is the parser's */
    assert_int_equal(rli_ws_payload_left(&p), 0);

    rli_asm *a = rli_asm_new(1000, CS_MAX_CHUNK_SIZE);
    rli_asm_reset(a, 0);
    size_t room = 99;
    uint8_t m[CS_WIRE_CHUNK_HEADER_LEN + 2000];
    uint8_t b[CS_WIRE_BEGIN_LEN];
    cs_err err;
    assert_int_equal(rli_asm_message(a, b, cs_wire_put_begin(b, 9, 1), &err), RLI_ASM_MORE);
    size_t ml = cs_wire_append_chunk(m, 9, 0, CS_CODEC_RAW, pay, sizeof pay);
    rli_asm_msg_begin(a, 0);
    assert_null(rli_asm_recv_slot(a, 100, &room)); /* the header is still to come */
    assert_int_equal(room, 0);
    rli_asm_msg_data(a, m, CS_WIRE_CHUNK_HEADER_LEN + 10);
    uint8_t *slot = rli_asm_recv_slot(a, 100, &room);
    assert_non_null(slot);
    assert_int_equal(room, 100);
    assert_null(rli_asm_recv_slot(a, 0, &room));
    slot = rli_asm_recv_slot(a, 5000, &room);
    assert_int_equal(room, 990); /* within the 1000-byte cap */
    memcpy(slot, m + CS_WIRE_CHUNK_HEADER_LEN + 10, 290);
    rli_asm_msg_data(a, slot, 290);
    assert_int_equal(rli_asm_msg_end(a, &err), RLI_ASM_MORE);
    assert_null(rli_asm_recv_slot(a, 10, &room)); /* between messages */

    /* At the cap there is no slot: the next byte goes through the caller's buffer and is the
     * cap's error. */
    ml = cs_wire_append_chunk(m, 9, 1, CS_CODEC_RAW, pay, sizeof pay);
    rli_asm_msg_begin(a, 0);
    rli_asm_msg_data(a, m, CS_WIRE_CHUNK_HEADER_LEN);
    for (int i = 0; i < 3; i++) {
        slot = rli_asm_recv_slot(a, 300, &room);
        assert_non_null(slot);
        memcpy(slot, pay, room < 300 ? room : 300);
        rli_asm_msg_data(a, slot, room < 300 ? room : 300);
        if (room < 300)
            break;
    }
    assert_null(rli_asm_recv_slot(a, 300, &room));
    rli_asm_msg_data(a, pay, 1);
    assert_int_equal(rli_asm_msg_end(a, &err), RLI_ASM_ERROR);
    assert_string_equal(err.msg, "remoteledger: protocol violation: ledger 9 exceeds the 1000-byte payload cap");

    /* A wrong index is known from the header: nothing is received in place. */
    rli_asm_reset(a, 0);
    assert_int_equal(rli_asm_message(a, b, cs_wire_put_begin(b, 9, 1), &err), RLI_ASM_MORE);
    ml = cs_wire_append_chunk(m, 9, 4, CS_CODEC_RAW, pay, sizeof pay);
    rli_asm_msg_begin(a, 0);
    rli_asm_msg_data(a, m, CS_WIRE_CHUNK_HEADER_LEN + 1);
    assert_null(rli_asm_recv_slot(a, 10, &room));
    rli_asm_msg_data(a, m + CS_WIRE_CHUNK_HEADER_LEN + 1, ml - CS_WIRE_CHUNK_HEADER_LEN - 1);
    assert_int_equal(rli_asm_msg_end(a, &err), RLI_ASM_ERROR);
    assert_string_equal(err.msg, "remoteledger: protocol violation: ledger 9 chunk 4 arrived, expected chunk 0");

    /* A fragmented zstd chunk gathers in place, and expands from there. */
    rli_asm_reset(a, 0);
    assert_int_equal(rli_asm_message(a, b, cs_wire_put_begin(b, 9, 1), &err), RLI_ASM_MORE);
    uint8_t z[600];
    size_t zn = zstd_of(z, sizeof z, pay, sizeof pay);
    ml = cs_wire_append_chunk(m, 9, 0, CS_CODEC_ZSTD, z, zn);
    rli_asm_msg_begin(a, 0);
    rli_asm_msg_data(a, m, CS_WIRE_CHUNK_HEADER_LEN);
    slot = rli_asm_recv_slot(a, zn, &room);
    assert_non_null(slot);
    assert_int_equal(room, zn);
    memcpy(slot, z, zn);
    rli_asm_msg_data(a, slot, zn);
    assert_int_equal(rli_asm_msg_end(a, &err), RLI_ASM_MORE);
    uint8_t e[CS_WIRE_END_LEN];
    assert_int_equal(rli_asm_message(a, e, cs_wire_put_end(e, 9, 1, sizeof pay, 2, XXH64(pay, sizeof pay, 0)), &err),
                     RLI_ASM_LEDGER);
    size_t len;
    const uint8_t *l = rli_asm_ledger(a, &len, NULL);
    assert_int_equal(len, sizeof pay);
    assert_memory_equal(l, pay, len);
    rli_asm_free(a);
}

/* Two ledgers of raw and zstd chunks, whole and fragmented with control frames between the
 * fragments, every length encoding: read cut at every byte, one byte at a time, with the
 * receive-buffer-only path as the reference. Nearly every payload byte lands in place. */
static void test_every_split_in_place(void **state)
{
    (void)state;
    static uint8_t s[32768], m[8192], raw[6000], z[8192], comp[3000];
    cs_synthetic_fill(raw, sizeof raw, 11, false);
    cs_synthetic_fill(comp, sizeof comp, 12, true);
    size_t n = 0, ml;
    XXH64_state_t *h = XXH64_createState();
    n += msg(s + n, m, cs_wire_put_begin(m, 5, 100));
    ml = cs_wire_append_chunk(m, 5, 0, CS_CODEC_RAW, raw, 2000);
    n += fragmented(s + n, m, ml, 700, "mid");
    size_t zn = zstd_of(z, sizeof z, comp, sizeof comp);
    ml = cs_wire_append_chunk(m, 5, 1, CS_CODEC_ZSTD, z, zn);
    n += frame(s + n, 0x02, m, 5, 0);        /* the header itself split across frames */
    n += frame(s + n, 0x8A, "pong", 4, 0);
    n += frame(s + n, 0x00, m + 5, 40, 0);
    n += frame(s + n, 0x00, NULL, 0, 0);     /* an empty continuation */
    n += frame(s + n, 0x80, m + 45, ml - 45, 0);
    ml = cs_wire_append_chunk(m, 5, 2, CS_CODEC_RAW, raw + 2000, 300);
    n += msg(s + n, m, ml);
    ml = cs_wire_append_chunk(m, 5, 3, CS_CODEC_RAW, NULL, 0); /* an empty chunk */
    n += msg(s + n, m, ml);
    XXH64_reset(h, 0);
    XXH64_update(h, raw, 2000);
    XXH64_update(h, comp, sizeof comp);
    XXH64_update(h, raw + 2000, 300);
    n += msg(s + n, m, cs_wire_put_end(m, 5, 4, 2000 + sizeof comp + 300, 200, XXH64_digest(h)));
    n += msg(s + n, m, cs_wire_put_begin(m, 6, 300));
    ml = cs_wire_append_chunk(m, 6, 0, CS_CODEC_RAW, raw, 1500);
    n += frame(s + n, 0x82, m, ml, 8); /* a 64-bit length */
    n += msg(s + n, m, cs_wire_put_end(m, 6, 1, 1500, 400, XXH64(raw, 1500, 0)));
    n += frame(s + n, 0x88, "\x03\xe8", 2, 0);
    assert_true(n < sizeof s);
    char want[256];
    snprintf(want, sizeof want, "control 9 mid\ncontrol 10 pong\nledger 5 len=%zu xxh=%016llx chunks=4\n",
             2000 + sizeof comp + 300, (unsigned long long)XXH64_digest(h));
    size_t in_place = expect_same_everywhere(s, n, -1, want);
    /* Byte by byte, every payload byte past each chunk header is received in place. */
    assert_int_equal(in_place, 2000 + zn + 300 + 1500);
    XXH64_freeState(h);
}

/* What was an error through the receive buffer is the same error in place, at every cut. */
static void test_errors_are_the_same_in_place(void **state)
{
    (void)state;
    static uint8_t s[16384], m[8192], raw[4000], z[8192];
    cs_synthetic_fill(raw, sizeof raw, 13, true);
    size_t zn = zstd_of(z, sizeof z, raw, sizeof raw);
    for (int k = 0; k < 7; k++) {
        size_t n = 0, ml;
        int64_t cap = -1;
        const char *want = NULL;
        n += msg(s + n, m, cs_wire_put_begin(m, 5, 100));
        switch (k) {
        case 0: /* a raw chunk past the cap, fragmented */
            cap = 1000;
            ml = cs_wire_append_chunk(m, 5, 0, CS_CODEC_RAW, raw, 2500);
            n += fragmented(s + n, m, ml, 600, "p");
            want = "exceeds the 1000-byte payload cap";
            break;
        case 1: /* a zstd chunk cut short */
            ml = cs_wire_append_chunk(m, 5, 0, CS_CODEC_ZSTD, z, zn - 9);
            n += fragmented(s + n, m, ml, 30, "p");
            want = "decompress: ";
            break;
        case 2: /* a chunk out of order */
            ml = cs_wire_append_chunk(m, 5, 3, CS_CODEC_RAW, raw, 900);
            n += fragmented(s + n, m, ml, 200, "p");
            want = "chunk 3 arrived, expected chunk 0";
            break;
        case 3: /* a message shorter than a chunk header */
            n += fragmented(s + n, (const uint8_t *)"\x01\x02\x00\x00\x00\x05\x00\x00", 8, 3, "p");
            want = "wire: ";
            break;
        case 4: /* END's total does not match */
            ml = cs_wire_append_chunk(m, 5, 0, CS_CODEC_RAW, raw, 900);
            n += msg(s + n, m, ml);
            n += msg(s + n, m, cs_wire_put_end(m, 5, 1, 901, 2, XXH64(raw, 900, 0)));
            want = "END declares 901 bytes, 900 assembled";
            break;
        case 5: /* a framing violation inside a fragmented chunk */
            ml = cs_wire_append_chunk(m, 5, 0, CS_CODEC_RAW, raw, 900);
            n += frame(s + n, 0x02, m, 400, 0);
            n += frame(s + n, 0xC0, m + 400, ml - 400, 0);
            want = "ws error received header with unexpected rsv bits set: true:false:false";
            break;
        default: /* a checksum mismatch after an in-place chunk */
            ml = cs_wire_append_chunk(m, 5, 0, CS_CODEC_RAW, raw, 900);
            n += fragmented(s + n, m, ml, 100, "p");
            n += msg(s + n, m, cs_wire_put_end(m, 5, 1, 900, 2, XXH64(raw, 900, 0) ^ 1));
            want = "checksum mismatch";
            break;
        }
        expect_same_everywhere(s, n, cap, want);
    }
}

/* ==== end to end ================================================================================ */

static void big_ledgers(rl_options *o, bool compressed)
{
    enum { SIZE = 3 << 20, CHUNK = 262144 };
    uint8_t *payload = malloc(SIZE), *z = malloc(ZSTD_compressBound(CHUNK)), *m = malloc(CHUNK + 64);
    assert_non_null(payload);
    cs_synthetic_fill(payload, SIZE, 21, compressed);
    ss_server *ss = ss_start();
    for (uint32_t seq = 10; seq < 12; seq++) {
        ss_begin(ss, seq, 0);
        uint32_t idx = 0;
        for (size_t off = 0; off < SIZE; off += CHUNK, idx++) {
            const uint8_t *p = payload + off;
            size_t ml;
            if (compressed) {
                size_t zn = zstd_of(z, ZSTD_compressBound(CHUNK), p, CHUNK);
                ml = cs_wire_append_chunk(m, seq, idx, CS_CODEC_ZSTD, z, zn);
            } else {
                ml = cs_wire_append_chunk(m, seq, idx, CS_CODEC_RAW, p, CHUNK);
            }
            if (idx % 3 == 1) { /* fragmented, a ping between the fragments */
                ss_send_frame(ss, 0x02, m, ml / 3);
                ss_send_ping(ss, "mid");
                ss_send_frame(ss, 0x80, m + ml / 3, ml - ml / 3);
            } else {
                ss_send_binary(ss, m, ml);
            }
        }
        ss_end(ss, seq, idx, SIZE, 0, XXH64(payload, SIZE, 0));
    }
    collected c = {0};
    drain(ss, o, rl_bounded_range(10, 11), &c);
    expect(&c, RL_OK, 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(c.sizes[i], SIZE);
        assert_memory_equal(c.copies[i], payload, SIZE);
    }
    ss_stop(ss);
    collected_free(&c);
    free(payload);
    free(z);
    free(m);
}

/* Large ledgers arrive intact through the real client, raw and compressed, with busy-polling off
 * (the default) and on, by callback and by a poll loop of rl_stream_next(s, 0) (which never spins). */
static void test_large_ledgers_with_and_without_busy_poll(void **state)
{
    (void)state;
    for (int mode = 0; mode < 3; mode++) {
        for (int compressed = 0; compressed < 2; compressed++) {
            rl_options o;
            rl_options_init(&o);
            o.busy_poll_ns = mode ? 50000 : 0;
            rlclient_poll = mode == 2;
            big_ledgers(&o, compressed);
        }
    }
    rlclient_poll = false;
}

/* The busy-poll bound, named in the error; negative is off, like 0. */
static void test_busy_poll_option_bounds(void **state)
{
    (void)state;
    rl_options o;
    rl_options_init(&o);
    rl_stream *s = NULL;
    o.busy_poll_ns = RL_MAX_BUSY_POLL_NS + 1;
    assert_int_equal(rl_stream_new(&s, "ws://127.0.0.1:1", &o), RL_ERR_INVALID);
    assert_string_equal(rl_stream_error(s),
                        "remoteledger: rl_options.busy_poll_ns 1000000001 is over the 1 s (1000000000 ns) bound");
    rl_stream_free(s);
    o.busy_poll_ns = RL_MAX_BUSY_POLL_NS;
    assert_int_equal(rl_stream_new(&s, "ws://127.0.0.1:1", &o), RL_OK);
    rl_stream_free(s);
    o.busy_poll_ns = -5;
    assert_int_equal(rl_stream_new(&s, "ws://127.0.0.1:1", &o), RL_OK);
    rl_stream_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slot_and_payload_left),
        cmocka_unit_test(test_every_split_in_place),
        cmocka_unit_test(test_errors_are_the_same_in_place),
        cmocka_unit_test(test_large_ledgers_with_and_without_busy_poll),
        cmocka_unit_test(test_busy_poll_option_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
