/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger: RFC 6455 on its own, without a socket. The frame parser (wsframe.c) must give
 * the same transcript of frames, messages, control frames and errors however its input is sliced,
 * in place and in coder/websocket's words for what a server may not send; client frames are built
 * masked. The opening handshake (handshake.c): the key and the accept, the upgrade request, the
 * checks on the response in lws's words, and the response head found in any slicing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <xxhash.h>

#include "common/synthetic.h"
#include "remoteledger/handshake.h"
#include "remoteledger/wsframe.h"
#include "wire/wsaccept.h"
#include "support/rlsuite.h"

/* ==== WebSocket framing (wsframe.c) =========================================================== */

typedef struct tbuf {
    char *p;
    size_t len, cap;
} tbuf;

static void tb_add(tbuf *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void tb_add(tbuf *t, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof line);
    if (t->len + (size_t)n + 1 > t->cap) {
        t->cap = (t->len + (size_t)n + 1) * 2;
        t->p = realloc(t->p, t->cap);
        assert_non_null(t->p);
    }
    memcpy(t->p + t->len, line, (size_t)n + 1);
    t->len += (size_t)n;
}

/* A server frame: first byte b0, payload p[0..n) declared as `declared` bytes with the given
 * length encoding (0: minimal, 2: 16-bit, 8: 64-bit). */
static size_t srv_frame(uint8_t *out, uint8_t b0, const void *p, size_t n, int enc)
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

static uint64_t split_rng(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* The next piece of input: mode 0 all of it, 1 one byte, otherwise random sizes (seeded by mode),
 * mostly small so headers straddle pieces, sometimes large. */
static size_t next_piece(int mode, uint64_t *rng, size_t left)
{
    size_t k;
    if (mode == 0)
        k = left;
    else if (mode == 1)
        k = 1;
    else if (split_rng(rng) % 8 == 0)
        k = 1 + split_rng(rng) % 20000;
    else
        k = 1 + split_rng(rng) % 17;
    return k < left ? k : left;
}

/* Parses the stream in the pieces `mode` chooses and writes what came out, in a form that does not
 * depend on the slicing: frame headers, whole messages (length and hash), control frames, the
 * error. Checks the event invariants on the way. Returns how many data events there were. */
static int ws_transcript(const uint8_t *in, size_t n, int mode, tbuf *t)
{
    rli_ws_parser p;
    rli_ws_parser_init(&p);
    uint64_t rng = 0x9E3779B97F4A7C15ull * (uint64_t)(mode + 1);
    uint8_t *msg = NULL;
    size_t msg_len = 0, msg_cap = 0;
    uint64_t frame_left = 0;
    bool in_frame = false, in_msg = false, fresh = false;
    int data_events = 0;
    size_t off = 0;
    bool failed = false;
    while (!failed) {
        size_t k = next_piece(mode, &rng, n - off);
        const uint8_t *piece = in + off;
        size_t used = 0;
        for (;;) {
            rli_ws_event ev;
            size_t u = rli_ws_parse(&p, piece + used, k - used, &ev);
            assert_true(u <= k - used);
            used += u;
            if (ev.kind == RLI_WS_EV_NONE) {
                assert_int_equal(used, k);
                break;
            }
            if (ev.kind == RLI_WS_EV_FRAME) {
                assert_false(in_frame);
                assert_int_equal(ev.first, !in_msg);
                tb_add(t, "frame op=%u first=%d fin=%d len=%llu\n", ev.opcode, ev.first, ev.fin,
                       (unsigned long long)ev.frame_len);
                in_frame = true;
                frame_left = ev.frame_len;
                if (ev.first) {
                    in_msg = true;
                    fresh = true;
                    msg_len = 0;
                }
                assert_true(rli_ws_parser_in_message(&p));
            } else if (ev.kind == RLI_WS_EV_DATA) {
                data_events++;
                assert_true(in_frame);
                assert_int_equal(ev.msg_start, fresh);
                fresh = false;
                assert_true(ev.len <= frame_left);
                if (ev.len) {
                    assert_true(ev.data >= piece && ev.data + ev.len <= piece + k); /* in place */
                    if (msg_len + ev.len > msg_cap) {
                        msg_cap = (msg_len + ev.len) * 2;
                        msg = realloc(msg, msg_cap);
                        assert_non_null(msg);
                    }
                    memcpy(msg + msg_len, ev.data, ev.len);
                    msg_len += ev.len;
                }
                frame_left -= ev.len;
                assert_int_equal(ev.frame_end, frame_left == 0);
                if (ev.frame_end)
                    in_frame = false;
                if (ev.msg_end) {
                    assert_true(ev.frame_end);
                    tb_add(t, "message len=%zu xxh=%016llx\n", msg_len,
                           (unsigned long long)XXH64(msg ? msg : (const uint8_t *)"", msg_len, 0));
                    in_msg = false;
                    assert_false(rli_ws_parser_in_message(&p));
                }
            } else if (ev.kind == RLI_WS_EV_CONTROL) {
                assert_false(in_frame);
                assert_true(ev.len <= RLI_WS_MAX_CONTROL);
                char hex[2 * RLI_WS_MAX_CONTROL + 1];
                for (size_t i = 0; i < ev.len; i++)
                    snprintf(hex + 2 * i, 3, "%02x", ev.data[i]);
                hex[2 * ev.len] = '\0';
                tb_add(t, "control op=%u len=%zu %s\n", ev.opcode, ev.len, hex);
            } else {
                assert_int_equal(ev.kind, RLI_WS_EV_ERROR);
                tb_add(t, "error boundary=%d %s\n", ev.at_boundary, ev.err);
                /* the parser stays failed */
                rli_ws_event again;
                assert_int_equal(rli_ws_parse(&p, piece, k, &again), 0);
                assert_int_equal(again.kind, RLI_WS_EV_ERROR);
                assert_string_equal(again.err, ev.err);
                assert_int_equal(again.at_boundary, ev.at_boundary);
                failed = true;
                break;
            }
        }
        off += k;
        if (off == n)
            break;
    }
    if (!failed && in_msg)
        tb_add(t, "open message\n");
    free(msg);
    return data_events;
}

/* Every slicing gives the transcript of the whole-buffer parse. */
static void expect_split_invariant(const uint8_t *in, size_t n, const char *want)
{
    tbuf whole = {0};
    ws_transcript(in, n, 0, &whole);
    if (want)
        assert_string_equal(whole.p ? whole.p : "", want);
    for (int mode = 1; mode < 40; mode++) {
        tbuf t = {0};
        ws_transcript(in, n, mode, &t);
        if (strcmp(t.p ? t.p : "", whole.p ? whole.p : ""))
            fail_msg("split mode %d:\n%s\nwhole:\n%s", mode, t.p ? t.p : "", whole.p ? whole.p : "");
        free(t.p);
    }
    free(whole.p);
}

static void test_wsframe_splits(void **state)
{
    (void)state;
    const size_t cap = 1u << 20;
    uint8_t *s = malloc(cap), *pay = malloc(80000);
    cs_synthetic_fill(pay, 80000, 5, false);
    size_t n = 0;
    n += srv_frame(s + n, 0x82, "hello", 5, 0);        /* 7-bit length */
    n += srv_frame(s + n, 0x82, pay, 300, 0);          /* 16-bit length */
    n += srv_frame(s + n, 0x82, pay, 70000, 0);        /* 64-bit length */
    n += srv_frame(s + n, 0x89, "p1", 2, 0);           /* ping */
    n += srv_frame(s + n, 0x02, pay, 1000, 0);         /* fragmented: first frame */
    n += srv_frame(s + n, 0x89, "mid", 3, 0);          /* ping between fragments */
    n += srv_frame(s + n, 0x00, NULL, 0, 0);           /* empty continuation */
    n += srv_frame(s + n, 0x8A, "x", 1, 0);            /* pong */
    n += srv_frame(s + n, 0x80, pay + 1000, 2000, 0);  /* final continuation */
    n += srv_frame(s + n, 0x82, NULL, 0, 0);           /* empty message */
    n += srv_frame(s + n, 0x02, NULL, 0, 0);           /* empty first frame... */
    n += srv_frame(s + n, 0x80, "abc", 3, 0);          /* ...then the payload */
    n += srv_frame(s + n, 0x81, "txt", 3, 0);          /* text: the caller's business */
    n += srv_frame(s + n, 0x82, pay, 10, 2);           /* non-minimal lengths are accepted */
    n += srv_frame(s + n, 0x82, pay, 10, 8);
    n += srv_frame(s + n, 0x89, pay, 125, 0);          /* the largest control frame */
    n += srv_frame(s + n, 0x89, NULL, 0, 0);           /* an empty one */
    n += srv_frame(s + n, 0x88, "\x03\xe8" "bye", 5, 0); /* close */
    n += srv_frame(s + n, 0x02, "tail", 4, 0);         /* a message left open */
    char want[4096];
    snprintf(want, sizeof want,
             "frame op=2 first=1 fin=1 len=5\nmessage len=5 xxh=%016llx\n"
             "frame op=2 first=1 fin=1 len=300\nmessage len=300 xxh=%016llx\n"
             "frame op=2 first=1 fin=1 len=70000\nmessage len=70000 xxh=%016llx\n"
             "control op=9 len=2 7031\n"
             "frame op=2 first=1 fin=0 len=1000\n"
             "control op=9 len=3 6d6964\n"
             "frame op=2 first=0 fin=0 len=0\n"
             "control op=10 len=1 78\n"
             "frame op=2 first=0 fin=1 len=2000\nmessage len=3000 xxh=%016llx\n"
             "frame op=2 first=1 fin=1 len=0\nmessage len=0 xxh=%016llx\n"
             "frame op=2 first=1 fin=0 len=0\nframe op=2 first=0 fin=1 len=3\nmessage len=3 xxh=%016llx\n"
             "frame op=1 first=1 fin=1 len=3\nmessage len=3 xxh=%016llx\n"
             "frame op=2 first=1 fin=1 len=10\nmessage len=10 xxh=%016llx\n"
             "frame op=2 first=1 fin=1 len=10\nmessage len=10 xxh=%016llx\n",
             (unsigned long long)XXH64("hello", 5, 0), (unsigned long long)XXH64(pay, 300, 0),
             (unsigned long long)XXH64(pay, 70000, 0), (unsigned long long)XXH64(pay, 3000, 0),
             (unsigned long long)XXH64("", 0, 0), (unsigned long long)XXH64("abc", 3, 0),
             (unsigned long long)XXH64("txt", 3, 0), (unsigned long long)XXH64(pay, 10, 0),
             (unsigned long long)XXH64(pay, 10, 0));
    size_t wl = strlen(want);
    snprintf(want + wl, sizeof want - wl, "control op=9 len=125 ");
    wl = strlen(want);
    for (int i = 0; i < 125; i++)
        wl += (size_t)snprintf(want + wl, sizeof want - wl, "%02x", pay[i]);
    snprintf(want + wl, sizeof want - wl,
             "\ncontrol op=9 len=0 \ncontrol op=8 len=5 03e8627965\n"
             "frame op=2 first=1 fin=0 len=4\nopen message\n");
    expect_split_invariant(s, n, want);

    /* Fed whole, each unfragmented message is one event pointing into the input. */
    uint8_t one[16];
    size_t ol = srv_frame(one, 0x82, "hello", 5, 0);
    rli_ws_parser p;
    rli_ws_parser_init(&p);
    rli_ws_event ev;
    assert_int_equal(rli_ws_parse(&p, one, ol, &ev), 2);
    assert_int_equal(ev.kind, RLI_WS_EV_FRAME);
    assert_int_equal(rli_ws_parse(&p, one + 2, ol - 2, &ev), 5);
    assert_int_equal(ev.kind, RLI_WS_EV_DATA);
    assert_true(ev.msg_start && ev.frame_end && ev.msg_end);
    assert_ptr_equal(ev.data, one + 2);
    assert_int_equal(rli_ws_parse(&p, one + ol, 0, &ev), 0);
    assert_int_equal(ev.kind, RLI_WS_EV_NONE);
    assert_false(rli_ws_parser_in_message(&p));

    /* A large stream of chunk-sized frames: one data event per input piece at most. */
    n = 0;
    for (int i = 0; i < 12; i++)
        n += srv_frame(s + n, 0x82, pay, 65536 + (size_t)i, 0);
    tbuf t = {0};
    int events = ws_transcript(s, n, 0, &t);
    assert_int_equal(events, 12);
    free(t.p);
    expect_split_invariant(s, n, NULL);
    free(s);
    free(pay);
}

static void test_wsframe_violations(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        uint8_t bytes[16];
        size_t n;
        bool boundary;
        const char *err;
    } cases[] = {
        {"rsv1", {0xC2, 0x00}, 2, true, "received header with unexpected rsv bits set: true:false:false"},
        {"rsv2", {0xA2, 0x00}, 2, true, "received header with unexpected rsv bits set: false:true:false"},
        {"rsv3", {0x92, 0x00}, 2, true, "received header with unexpected rsv bits set: false:false:true"},
        {"masked", {0x82, 0x81, 1, 2, 3, 4, 'x' ^ 1}, 7, true, "received masked frame from server"},
        {"opcode 3", {0x83, 0x00}, 2, true, "received unknown opcode opcode(3)"},
        {"opcode 11", {0x8B, 0x00}, 2, true, "received unknown opcode opcode(11)"},
        {"long ping", {0x89, 126, 0x00, 126}, 4, true,
         "failed to handle control frame opPing: received control frame payload with invalid length: 126"},
        {"long close", {0x88, 127, 0, 0, 0, 0, 0, 0, 0, 200}, 10, true,
         "failed to handle control frame opClose: received control frame payload with invalid length: 200"},
        {"fragmented ping", {0x09, 0x00}, 2, true,
         "failed to handle control frame opPing: received fragmented control frame"},
        {"fragmented pong", {0x0A, 0x01, 'x'}, 3, true,
         "failed to handle control frame opPong: received fragmented control frame"},
        {"stray continuation", {0x80, 0x01, 'x'}, 3, true,
         "received continuation frame without text or binary frame"},
        {"negative length", {0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 0}, 10, true,
         "failed to read frame header: received negative payload length: -9223372036854775808"},
    };
    /* Each violation at the start, after a whole message, and (where it can be) inside a
     * fragmented one. */
    static const uint8_t after_msg[] = {0x82, 0x01, 'z'};
    static const uint8_t in_msg[] = {0x02, 0x02, 'a', 'b'};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int where = 0; where < 3; where++) {
            uint8_t buf[64];
            size_t n = 0;
            if (where == 1) {
                memcpy(buf, after_msg, sizeof after_msg);
                n = sizeof after_msg;
            } else if (where == 2) {
                memcpy(buf, in_msg, sizeof in_msg);
                n = sizeof in_msg;
            }
            memcpy(buf + n, cases[i].bytes, cases[i].n);
            n += cases[i].n;
            memcpy(buf + n, "\x82\x01q", 3); /* never reached */
            n += 3;
            bool boundary = where == 2 ? false : cases[i].boundary;
            const char *err = cases[i].err;
            if (where == 2 && !strcmp(cases[i].name, "stray continuation"))
                continue; /* inside a message a continuation is fine */
            char want[512];
            const char *prefix = where == 0 ? ""
                                 : where == 1 ? "frame op=2 first=1 fin=1 len=1\nmessage len=1 xxh=%016llx\n"
                                              : "frame op=2 first=1 fin=0 len=2\n";
            char pre[256];
            snprintf(pre, sizeof pre, prefix, (unsigned long long)XXH64("z", 1, 0));
            snprintf(want, sizeof want, "%serror boundary=%d %s\n", pre, boundary, err);
            expect_split_invariant(buf, n, want);
        }
    }
    /* A new data message inside a fragmented one. */
    uint8_t b[] = {0x02, 0x01, 'a', 0x82, 0x01, 'b'};
    expect_split_invariant(b, sizeof b,
                           "frame op=2 first=1 fin=0 len=1\n"
                           "error boundary=0 received new data message without finishing the previous message\n");
    uint8_t t[] = {0x01, 0x01, 'a', 0x89, 0x00, 0x81, 0x01, 'b'};
    expect_split_invariant(t, sizeof t,
                           "frame op=1 first=1 fin=0 len=1\ncontrol op=9 len=0 \n"
                           "error boundary=0 received new data message without finishing the previous message\n");
}

static void test_wsframe_build(void **state)
{
    (void)state;
    static const size_t sizes[] = {0, 1, 125, 126, 65535, 65536, 70000};
    uint8_t *p = malloc(70000), *out = malloc(70000 + RLI_WS_MAX_HEADER);
    cs_synthetic_fill(p, 70000, 9, false);
    const uint8_t mask[4] = {0x11, 0x22, 0x33, 0x44};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        size_t fl = rli_ws_build_frame(out, RLI_WS_OP_CLOSE, p, n, mask);
        size_t h = n < 126 ? 2 : n <= 0xFFFF ? 4 : 10;
        assert_int_equal(fl, h + 4 + n);
        assert_int_equal(out[0], 0x88);
        assert_true(out[1] & 0x80); /* masked */
        uint64_t len = out[1] & 0x7F;
        if (len == 126)
            len = (uint64_t)out[2] << 8 | out[3];
        else if (len == 127) {
            len = 0;
            for (int k = 0; k < 8; k++)
                len = len << 8 | out[2 + k];
        }
        assert_int_equal(len, n);
        assert_memory_equal(out + h, mask, 4);
        for (size_t k = 0; k < n; k++)
            if ((uint8_t)(out[h + 4 + k] ^ mask[k & 3]) != p[k])
                fail_msg("size %zu: byte %zu not masked right", n, k);
    }
    /* masks are random */
    uint8_t a[4], b2[4], c[4];
    rli_random_bytes(a, 4);
    rli_random_bytes(b2, 4);
    rli_random_bytes(c, 4);
    assert_false(memcmp(a, b2, 4) == 0 && memcmp(b2, c, 4) == 0);
    free(p);
    free(out);
}

/* ==== the opening handshake (handshake.c) ===================================================== */

static void test_handshake_key_and_accept(void **state)
{
    (void)state;
    /* RFC 6455 sections 1.3 and 4.1 */
    char acc[CS_WS_ACCEPT_LEN + 1];
    cs_ws_accept("dGhlIHNhbXBsZSBub25jZQ==", 24, acc);
    assert_string_equal(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    const uint8_t nonce[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    char key[RLI_HS_KEY_LEN + 1];
    rli_hs_key_encode(nonce, key);
    assert_string_equal(key, "AQIDBAUGBwgJCgsMDQ4PEA==");
    rli_hs_key_encode((const uint8_t *)"the sample nonce", key);
    assert_string_equal(key, "dGhlIHNhbXBsZSBub25jZQ==");
    char k1[RLI_HS_KEY_LEN + 1], k2[RLI_HS_KEY_LEN + 1];
    rli_hs_key_new(k1);
    rli_hs_key_new(k2);
    assert_int_equal(strlen(k1), 24);
    assert_string_not_equal(k1, k2);
    assert_string_equal(k1 + 22, "==");
}

static void test_handshake_request(void **state)
{
    (void)state;
    char buf[512];
    size_t n = rli_hs_request(buf, sizeof buf, "/stream?end=7&start=5", "box:8462", "dGhlIHNhbXBsZSBub25jZQ==", NULL);
    const char *want = "GET /stream?end=7&start=5 HTTP/1.1\r\n"
                       "Pragma: no-cache\r\n"
                       "Cache-Control: no-cache\r\n"
                       "Host: box:8462\r\n"
                       "Upgrade: websocket\r\n"
                       "Connection: Upgrade\r\n"
                       "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                       "Sec-WebSocket-Version: 13\r\n"
                       "\r\n";
    assert_string_equal(buf, want);
    assert_int_equal(n, strlen(want));
    assert_int_equal(rli_hs_request(NULL, 0, "/stream?end=7&start=5", "box:8462", "dGhlIHNhbXBsZSBub25jZQ==", NULL),
                     strlen(want));
}

#define HS_KEY "dGhlIHNhbXBsZSBub25jZQ=="
#define HS_ACC "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

static void test_handshake_check(void **state)
{
    (void)state;
    static const struct {
        const char *head;
        const char *want; /* NULL: accepted */
    } cases[] = {
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Accept: " HS_ACC "\r\n\r\n", NULL},
        {"HTTP/1.1 101 OK\r\nupgrade:WebSocket\r\nconnection: keep-alive, upgrade \r\n"
         "sec-websocket-accept:   " HS_ACC "  \r\nServer: x\r\n\r\n", NULL},
        {"HTTP/1.0 101 Switching Protocols\nUpgrade: websocket\nConnection: Upgrade\n"
         "Sec-WebSocket-Accept: " HS_ACC "\n\n", NULL},
        {"HTTP/1.1 101\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " HS_ACC
         "\r\nSec-WebSocket-Extensions:\r\n\r\n", NULL},
        {"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", "HS: ws upgrade response not 101"},
        {"HTTP/1.1 200 OK\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " HS_ACC
         "\r\n\r\n", "HS: ws upgrade response not 101"},
        {"HTTP/1.1 401 Unauthorized\r\n\r\n", "server requires a token (401)"},
        {"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nx-corestream-tls: required\r\n\r\n",
         "the server speaks TLS on this port (is it wss://?)"},
        {"HTTP/1.1 400 Bad Request\r\nX-Corestream-TLS: optional\r\n\r\n", "HS: ws upgrade response not 101"},
        {"SSH-2.0-OpenSSH_9.2\r\n\r\n", "HS: URI missing"},
        {"HTTP/1.1 1O1 Switching\r\n\r\n", "HS: URI missing"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
         "HS: ACCEPT missing"},
        {"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " HS_ACC "\r\n\r\n",
         "HS: UPGRADE missing"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Accept: " HS_ACC "\r\n\r\n", "HS: Upgrade to something other than websocket"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: " HS_ACC "\r\n\r\n",
         "HS: UPGRADE malformed"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: keep-alive\r\n"
         "Sec-WebSocket-Accept: " HS_ACC "\r\n\r\n", "HS: UPGRADE malformed"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Protocol: chat\r\nSec-WebSocket-Accept: " HS_ACC "\r\n\r\n", "HS: PROTOCOL malformed"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Extensions: permessage-deflate\r\nSec-WebSocket-Accept: " HS_ACC "\r\n\r\n",
         "HS: EXT: unknown ext"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo\r\n\r\n", "HS: Accept hash wrong"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Accept: S3PPLMBITXAQ9KYGZZHZRBK+XOO=\r\n\r\n", "HS: Accept hash wrong"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *got = rli_hs_check(cases[i].head, strlen(cases[i].head), HS_KEY);
        if (cases[i].want ? !got || strcmp(got, cases[i].want) : got != NULL)
            fail_msg("case %zu: got \"%s\", want \"%s\"", i, got ? got : "(accepted)",
                     cases[i].want ? cases[i].want : "(accepted)");
    }
}

/* The head is found in any slicing, and the bytes after it are left for the framing. */
static void test_handshake_feed(void **state)
{
    (void)state;
    const char *heads[] = {
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Accept: " HS_ACC "\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\nUpgrade: websocket\nConnection: Upgrade\n"
        "Sec-WebSocket-Accept: " HS_ACC "\n\n",
    };
    const uint8_t frames[] = {0x82, 0x03, '\r', '\n', '\n'};
    rli_hs_reader *r = malloc(sizeof *r);
    for (size_t h = 0; h < 2; h++) {
        uint8_t in[512];
        size_t hl = strlen(heads[h]);
        memcpy(in, heads[h], hl);
        memcpy(in + hl, frames, sizeof frames);
        size_t n = hl + sizeof frames;
        for (int mode = 0; mode < 30; mode++) {
            uint64_t rng = 77 + (uint64_t)mode;
            rli_hs_reader_init(r);
            size_t off = 0;
            rli_hs_status st = RLI_HS_MORE;
            while (off < n) {
                size_t k = next_piece(mode, &rng, n - off);
                size_t used = 0;
                const char *err = NULL;
                st = rli_hs_feed(r, in + off, k, &used, HS_KEY, &err);
                if (st == RLI_HS_FAILED)
                    fail_msg("mode %d: %s", mode, err);
                if (st == RLI_HS_DONE) {
                    assert_null(err);
                    off += used;
                    break;
                }
                assert_int_equal(used, k);
                off += k;
            }
            assert_int_equal(st, RLI_HS_DONE);
            assert_int_equal(off, hl); /* the frames are left over */
        }
    }
    /* a failing head, and one that never ends */
    rli_hs_reader_init(r);
    size_t used;
    const char *err = NULL;
    const char *bad = "HTTP/1.1 403 Forbidden\r\n\r\n";
    assert_int_equal(rli_hs_feed(r, (const uint8_t *)bad, strlen(bad), &used, HS_KEY, &err), RLI_HS_FAILED);
    assert_string_equal(err, "HS: ws upgrade response not 101");
    rli_hs_reader_init(r);
    uint8_t junk[4096];
    memset(junk, 'a', sizeof junk);
    rli_hs_status st = RLI_HS_MORE;
    int rounds = 0;
    while (st == RLI_HS_MORE && rounds++ < 10)
        st = rli_hs_feed(r, junk, sizeof junk, &used, HS_KEY, &err);
    assert_int_equal(st, RLI_HS_FAILED);
    assert_string_equal(err, "HS: response headers too long");
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wsframe_splits),
        cmocka_unit_test(test_wsframe_violations),
        cmocka_unit_test(test_wsframe_build),
        cmocka_unit_test(test_handshake_key_and_accept),
        cmocka_unit_test(test_handshake_request),
        cmocka_unit_test(test_handshake_check),
        cmocka_unit_test(test_handshake_feed),
    };
    return RLSUITE_RUN(tests);
}
