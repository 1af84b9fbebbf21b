/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger: one connection (conn.c, conn_input.c, transport.c) against the scripted server
 * (support/scriptserver.h). Dialing and what ends it (bad URLs, nothing listening, the dial and
 * handshake timeouts, a refused or malformed upgrade), the upgrade request itself, the idle
 * timeout, WebSocket framing through the client (pings, framing violations and their close 1002,
 * EOF inside a frame, the close echoed, fragmented and large messages), the read limit, and a
 * cancel tearing the connection down. The numbers in comments (139-150) are the prototype's test
 * cases these carry over. */
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
#include "support/rlclient.h"
#include "support/rlsuite.h"
#include "support/scriptserver.h"
#include "wire/wire.h"

/* ==== dialing, the upgrade, the idle timeout ================================================== */

/* 142 */
static void test_dial_failures(void **state)
{
    (void)state;
    static const struct {
        const char *url, *msg;
    } invalid[] = {
        {"ftp://example.invalid", "remoteledger: url \"ftp://example.invalid\" must use ws, wss, http or https"},
        {"ws://", "remoteledger: url \"ws://\" has no host"},
        {"ws://[::1", "remoteledger: invalid url \"ws://[::1\": parse \"ws://[::1\": missing ']' in host"},
    };
    rl_options o;
    rl_options_init(&o);
    o.dial_timeout_ns = 2000000000LL;
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        rl_stream *s = NULL;
        assert_int_equal(rl_stream_new(&s, invalid[i].url, &o), RL_ERR_INVALID);
        assert_non_null(s);
        assert_string_equal(rl_stream_error(s), invalid[i].msg);
        collected c = {0};
        assert_int_equal(rl_stream_raw_ledgers(s, rl_unbounded_range(1), on_ledger, &c), RL_ERR_INVALID);
        assert_string_equal(rl_stream_error(s), invalid[i].msg);
        assert_string_equal(rl_stream_endpoint(s), "");
        rl_stream_free(s);
    }

    /* nothing listening: the refusal ends the dial, not the 2 s dial timeout */
    collected c = {0};
    drain_url("ws://127.0.0.1:1", &o, rl_unbounded_range(1), &c);
    expect(&c, RL_ERR_DIAL, 0);
    assert_contains(c.err, "remoteledger: dial ws://127.0.0.1:1/stream?start=1: ");
    assert_contains(c.err, ": connect: connection refused");
    rl_stream_free(c.s);

    /* a server that accepts and never answers the upgrade: the handshake timeout fires */
    ss_server *ss = ss_start();
    ss_no_handshake(ss);
    o.handshake_timeout_ns = 200000000LL;
    collected_reset(&c);
    drain_expect(ss, &o, rl_unbounded_range(1), &c, RL_ERR_HANDSHAKE_TIMEOUT, 0, NULL);
    char want[256];
    snprintf(want, sizeof want, "remoteledger: dial %s/stream?start=1: handshake timeout: no upgrade response within 200ms",
             ss_url(ss));
    assert_string_equal(c.err, want);
    /* Not before its time; how promptly it fires is measured by bench/rl_timeouts.c. */
    if (c.elapsed_ms < 190)
        fail_msg("a 200 ms handshake timeout took %lld ms", (long long)c.elapsed_ms);
    assert_string_equal(rl_result_name(RL_ERR_HANDSHAKE_TIMEOUT), "RL_ERR_HANDSHAKE_TIMEOUT");
    ss_stop(ss);

    /* the upgrade refused */
    ss = ss_start();
    ss_reject_handshake(ss, 400);
    collected_reset(&c);
    drain_expect(ss, &o, rl_unbounded_range(1), &c, RL_ERR_DIAL, 0, NULL);
    assert_contains(c.err, "remoteledger: dial ");
    ss_stop(ss);

    /* cancelled while the handshake hangs, with no dial timeout at all: only the cancel can end it */
    ss = ss_start();
    o.dial_timeout_ns = -1;
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), &o), RL_OK);
    ss_no_handshake(ss);
    ss_call(ss, cancel_stream, s); /* runs once the upgrade request has arrived */
    collected_reset(&c);
    assert_int_equal(rl_stream_raw_ledgers(s, rl_unbounded_range(1), on_ledger, &c), RL_ERR_CANCELLED);
    assert_string_equal(rl_stream_error(s), "context canceled");
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    ss_stop(ss);
}

/* wss:// (and https://) dial with TLS: against a server that never speaks TLS the handshake cannot
 * finish, and the handshake timeout ends it. */
static void test_wss_dial_timeout(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_no_handshake(ss);
    rl_options o;
    rl_options_init(&o);
    o.handshake_timeout_ns = 300000000LL;
    char url[128];
    snprintf(url, sizeof url, "wss://127.0.0.1:%d", ss_port(ss));
    collected c = {0};
    drain_url(url, &o, rl_unbounded_range(1), &c);
    expect(&c, RL_ERR_HANDSHAKE_TIMEOUT, 0);
    char want[256];
    snprintf(want, sizeof want, "remoteledger: dial wss://127.0.0.1:%d/stream?start=1: handshake timeout: no TLS "
             "handshake within 300ms", ss_port(ss));
    assert_string_equal(c.err, want);
    assert_true(c.elapsed_ms >= 290); /* promptness: bench/rl_timeouts.c */
    drain_done(ss, &c);
    ss_stop(ss);
}

/* A bad upgrade response fails the dial in lws's words, as before. */
static void test_handshake_failures(void **state)
{
    (void)state;
    static const struct {
        const char *resp, *want;
    } cases[] = {
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Accept: AAAA\r\n\r\n", "HS: Accept hash wrong"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Extensions: permessage-deflate\r\nSec-WebSocket-Accept: %s\r\n\r\n",
         "HS: EXT: unknown ext"},
        {"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n", "server requires a token (401)"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: %s\r\n\r\n",
         "HS: UPGRADE malformed"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ss_server *ss = ss_start();
        ss_handshake_with(ss, cases[i].resp);
        collected c = {0};
        drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_DIAL, 0, NULL);
        char want[256];
        snprintf(want, sizeof want, "remoteledger: dial %s/stream?start=1: %s", ss_url(ss), cases[i].want);
        assert_string_equal(c.err, want);
        ss_stop(ss);
    }
    /* and a valid but unusual one works */
    ss_server *ss = ss_start();
    ss_handshake_with(ss, "HTTP/1.1 101 OK\r\nconnection: keep-alive, upgrade\r\nupgrade: WebSocket\r\n"
                          "sec-websocket-accept: %s\r\nServer: scripted\r\n\r\n");
    ss_ledger(ss, 3, 64);
    collected c = {0};
    drain_expect(ss, NULL, rl_single_ledger_range(3), &c, RL_OK, 1, NULL);
    ss_stop(ss);
    collected_free(&c);
}

/* The upgrade request is ours now: the same headers lws sent, a fresh key per connection. */
static void test_upgrade_request(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 8);
    ss_next_connection(ss);
    ss_ledger(ss, 2, 8);
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), NULL), RL_OK);
    collected c = {0};
    assert_int_equal(rl_stream_raw_ledgers(s, rl_single_ledger_range(1), on_ledger, &c), RL_OK);
    assert_int_equal(rl_stream_raw_ledgers(s, rl_single_ledger_range(2), on_ledger, &c), RL_OK);
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    char host[64], keys[2][64];
    snprintf(host, sizeof host, "\r\nHost: 127.0.0.1:%d\r\n", ss_port(ss));
    for (int i = 0; i < 2; i++) {
        const char *req = ss_request(ss, i);
        char line[64];
        snprintf(line, sizeof line, "GET /stream?end=%d&start=%d HTTP/1.1\r\n", i + 1, i + 1);
        assert_true(strncmp(req, line, strlen(line)) == 0);
        assert_contains(req, host);
        assert_contains(req, "\r\nUpgrade: websocket\r\n");
        assert_contains(req, "\r\nConnection: Upgrade\r\n");
        assert_contains(req, "\r\nSec-WebSocket-Version: 13\r\n");
        assert_null(strcasestr(req, "Sec-WebSocket-Extensions"));
        assert_null(strcasestr(req, "Sec-WebSocket-Protocol"));
        const char *k = strstr(req, "\r\nSec-WebSocket-Key: ");
        assert_non_null(k);
        k += strlen("\r\nSec-WebSocket-Key: ");
        size_t kl = strcspn(k, "\r");
        assert_int_equal(kl, 24);
        memcpy(keys[i], k, kl);
        keys[i][kl] = '\0';
        assert_int_equal(ss_client_unmasked(ss, i), 0);
        assert_string_equal(ss_client_frames(ss, i), "close");
    }
    assert_string_not_equal(keys[0], keys[1]);
    ss_stop(ss);
    collected_free(&c);
}

/* The idle timeout: a server that completes the upgrade and then says nothing; one that goes
 * silent after a ledger (the clock restarts at each message); one that keeps sending bytes of a
 * message it never completes (bytes are not messages). */
static void test_idle_timeout(void **state)
{
    (void)state;
    rl_options o;
    rl_options_init(&o);
    o.idle_timeout_ns = 300000000LL;

    ss_server *ss = ss_start();
    ss_stall(ss);
    collected c = {0};
    drain_expect(ss, &o, rl_unbounded_range(1), &c, RL_ERR_IDLE_TIMEOUT, 0,
                 "remoteledger: read: idle timeout: no complete message for 300ms");
    if (c.elapsed_ms < 290) /* promptness: bench/rl_timeouts.c */
        fail_msg("a 300 ms idle timeout took %lld ms", (long long)c.elapsed_ms);
    assert_int_equal(ss_client_close(ss, 0, NULL, 0), 0); /* dropped, no close frame */
    assert_string_equal(rl_result_name(RL_ERR_IDLE_TIMEOUT), "RL_ERR_IDLE_TIMEOUT");
    ss_stop(ss);

    ss = ss_start();
    ss_ledger(ss, 1, 100);
    ss_ledger(ss, 2, 100);
    ss_stall(ss);
    collected_reset(&c);
    drain_expect(ss, &o, rl_unbounded_range(1), &c, RL_ERR_IDLE_TIMEOUT, 2,
                 "remoteledger: read: idle timeout: no complete message for 300ms");
    ss_stop(ss);

    ss = ss_start();
    uint8_t part[64] = {0};
    ss_begin(ss, 1, 0);
    ss_send_partial(ss, part, sizeof part, 100000); /* a CHUNK frame that never completes */
    ss_stall(ss);
    collected_reset(&c);
    drain_expect(ss, &o, rl_unbounded_range(1), &c, RL_ERR_IDLE_TIMEOUT, 0, NULL);
    ss_stop(ss);

    /* negative: no idle timeout; only a cancel ends the wait */
    ss = ss_start();
    o.idle_timeout_ns = -1;
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), &o), RL_OK);
    ss_ledger(ss, 1, 10);
    ss_call(ss, cancel_stream, s);
    ss_stall(ss);
    collected_reset(&c);
    assert_int_equal(rl_stream_raw_ledgers(s, rl_unbounded_range(1), on_ledger, &c), RL_ERR_CANCELLED);
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    ss_stop(ss);
    collected_free(&c);
}

/* ==== ws:// framing through the client, end to end ============================================ */

/* Pings are answered with masked pongs carrying the ping's payload, also between the fragments of
 * a message. */
static void test_pings_are_answered(void **state)
{
    (void)state;
    for (int mid = 0; mid < 2; mid++) {
        ss_server *ss = ss_start();
        uint8_t m[CS_WIRE_CHUNK_HEADER_LEN + 100], piece[100];
        memset(piece, 0x5a, sizeof piece);
        size_t ml = cs_wire_append_chunk(m, 1, 0, CS_CODEC_RAW, piece, sizeof piece);
        if (!mid)
            ss_send_ping(ss, "are you there?");
        ss_begin(ss, 1, 0);
        if (mid) {
            ss_send_frame(ss, 0x02, m, 40);
            ss_send_ping(ss, "mid-message");
            ss_send_frame(ss, 0x80, m + 40, ml - 40);
        } else {
            ss_send_binary(ss, m, ml);
        }
        ss_end(ss, 1, 1, sizeof piece, 0, XXH64(piece, sizeof piece, 0));
        collected c = {0};
        drain_expect(ss, NULL, rl_single_ledger_range(1), &c, RL_OK, 1, NULL);
        assert_memory_equal(c.copies[0], piece, sizeof piece);
        assert_string_equal(ss_client_frames(ss, 0), "pong close");
        assert_string_equal(ss_client_pong(ss, 0), mid ? "mid-message" : "are you there?");
        assert_int_equal(ss_client_unmasked(ss, 0), 0);
        expect_client_close(ss, 0, 1000, "range complete");
        ss_stop(ss);
        collected_free(&c);
    }
}

/* What a server may not send ends the call with a read error in coder/websocket's words, and a
 * close 1002 saying why. */
static void test_framing_violations(void **state)
{
    (void)state;
    uint8_t big[126];
    memset(big, 'p', sizeof big);
    static const uint8_t masked[] = {0x82, 0x81, 1, 2, 3, 4, 'x' ^ 1};
    for (int k = 0; k < 8; k++) {
        ss_server *ss = ss_start();
        ss_ledger(ss, 1, 16);
        const char *want = NULL;
        bool mid = false;
        switch (k) {
        case 0:
            ss_send_frame(ss, 0xC2, "x", 1);
            want = "received header with unexpected rsv bits set: true:false:false";
            break;
        case 1:
            ss_send_bytes(ss, masked, sizeof masked);
            want = "received masked frame from server";
            break;
        case 2:
            ss_send_frame(ss, 0x83, "x", 1);
            want = "received unknown opcode opcode(3)";
            break;
        case 3:
            ss_send_frame(ss, 0x89, big, sizeof big);
            want = "failed to handle control frame opPing: received control frame payload with invalid length: 126";
            break;
        case 4:
            ss_send_frame(ss, 0x09, "p", 1);
            want = "failed to handle control frame opPing: received fragmented control frame";
            break;
        case 5:
            ss_send_frame(ss, 0x80, "x", 1);
            want = "received continuation frame without text or binary frame";
            break;
        case 6:
            ss_send_frame(ss, 0x02, "ab", 2);
            ss_send_frame(ss, 0x82, "cd", 2);
            want = "received new data message without finishing the previous message";
            mid = true;
            break;
        default:
            ss_send_frame(ss, 0x02, "ab", 2);
            ss_send_frame(ss, 0xC0, "cd", 2);
            want = "received header with unexpected rsv bits set: true:false:false";
            mid = true;
            break;
        }
        collected c = {0};
        char full[512];
        snprintf(full, sizeof full, "remoteledger: read: %s%s", mid ? "" : "failed to get reader: ", want);
        drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_READ, 1, full);
        char trunc[124];
        snprintf(trunc, sizeof trunc, "%s", want); /* a close reason holds 123 bytes */
        expect_client_close(ss, 0, 1002, trunc);
        assert_int_equal(ss_client_unmasked(ss, 0), 0);
        ss_stop(ss);
        collected_free(&c);
    }
}

/* End of stream inside a frame header reads as before (lws's client said the same); inside a
 * fragmented message it is a payload EOF. */
static void test_eof_inside_frames(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 16);
    ss_send_bytes(ss, "\x82", 1);
    ss_drop(ss);
    collected c = {0};
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_READ, 1,
                 "remoteledger: read: failed to get reader: failed to read frame header: EOF");
    ss_stop(ss);
    collected_free(&c);

    ss = ss_start();
    ss_begin(ss, 1, 0);
    ss_send_frame(ss, 0x02, "ab", 2);
    ss_drop(ss);
    collected_reset(&c);
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_READ, 0,
                 "remoteledger: read: failed to read frame payload: unexpected EOF");
    ss_stop(ss);
}

/* The server's close frame is echoed back as it came (lws parroted it too). */
static void test_close_is_echoed(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 16);
    ss_send_close(ss, 4002, "odd one");
    collected c = {0};
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_READ, 1, NULL);
    expect_client_close(ss, 0, 4002, "odd one");
    assert_string_equal(ss_client_frames(ss, 0), "close");
    assert_int_equal(ss_client_unmasked(ss, 0), 0);
    ss_stop(ss);
    collected_free(&c);

    ss = ss_start();
    ss_send_close_empty(ss);
    collected_reset(&c);
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_READ, 0, NULL);
    assert_int_equal(ss_client_close(ss, 0, NULL, 0), 1005); /* an empty close, echoed empty */
    ss_stop(ss);
}

/* Messages split into WebSocket fragments, and chunks bigger than the receive buffer, take the
 * incremental path of the assembler; the bytes must come out the same. */
static void test_fragmented_and_large_messages(void **state)
{
    (void)state;
    const size_t big = 3u << 20; /* bigger than lws's per-connection receive buffer */
    uint8_t *led = malloc(big + 1000);
    cs_synthetic_fill(led, big + 1000, 77, false);
    size_t cb = ZSTD_compressBound(big);
    uint8_t *z = malloc(cb);
    size_t zn = ZSTD_compress(z, cb, led, big, 1);
    assert_false(ZSTD_isError(zn));
    uint8_t *m = malloc(CS_WIRE_CHUNK_HEADER_LEN + (cb > big + 1000 ? cb : big + 1000));

    ss_server *ss = ss_start();
    /* ledger 1: a raw 3 MiB chunk, then a 1000-byte chunk sent as 3-byte fragments */
    ss_begin(ss, 1, 0);
    ss_chunk(ss, 1, 0, CS_CODEC_RAW, led, big);
    size_t ml = cs_wire_append_chunk(m, 1, 1, CS_CODEC_RAW, led + big, 1000);
    ss_send_fragmented(ss, m, ml, 3);
    ss_end(ss, 1, 2, big + 1000, 0, XXH64(led, big + 1000, 0));
    /* ledger 2: the 3 MiB as one zstd chunk in 64 KiB fragments, BEGIN and END fragmented too */
    uint8_t b[CS_WIRE_BEGIN_LEN], e[CS_WIRE_END_LEN];
    ss_send_fragmented(ss, b, cs_wire_put_begin(b, 2, 5), 5);
    ml = cs_wire_append_chunk(m, 2, 0, CS_CODEC_ZSTD, z, zn);
    ss_send_fragmented(ss, m, ml, 65536);
    ss_send_fragmented(ss, e, cs_wire_put_end(e, 2, 1, big, 6, XXH64(led, big, 0)), 1);
    collected c = {0};
    drain_expect(ss, NULL, rl_bounded_range(1, 2), &c, RL_OK, 2, NULL);
    assert_int_equal(c.sizes[0], big + 1000);
    assert_memory_equal(c.copies[0], led, big + 1000);
    assert_int_equal(c.sizes[1], big);
    assert_memory_equal(c.copies[1], led, big);
    assert_int_equal(c.infos[1].emit_start_unix_nano, 5);
    assert_int_equal(c.infos[1].emit_end_unix_nano, 6);
    ss_stop(ss);
    collected_free(&c);
    free(led);
    free(z);
    free(m);
}

/* ==== the read limit ========================================================================== */

/* 139 */
static void test_chunk_over_the_read_limit_is_rejected(void **state)
{
    (void)state;
    rl_options o;
    rl_options_init(&o);
    o.max_chunk_size = 4096;
    static uint8_t big[8192];
    ss_server *ss = ss_start();
    ss_begin(ss, 1, 0);
    ss_chunk(ss, 1, 0, CS_CODEC_RAW, big, sizeof big);
    collected c = {0};
    drain_expect(ss, &o, rl_unbounded_range(1), &c, RL_ERR_READ, 0, "remoteledger: read: read limited at 4108 bytes");
    expect_client_close(ss, 0, 1009, "read limited at 4108 bytes");
    ss_stop(ss);

    /* a chunk exactly at the limit passes */
    ss = ss_start();
    const void *p[] = {big};
    size_t l[] = {4096};
    ss_flow(ss, 1, 0, 0, 1, p, l);
    collected_reset(&c);
    drain_expect(ss, &o, rl_single_ledger_range(1), &c, RL_OK, 1, NULL);
    ss_stop(ss);
    collected_free(&c);

    /* no limit at all */
    o.max_chunk_size = -1;
    ss = ss_start();
    const void *p2[] = {big};
    size_t l2[] = {sizeof big};
    ss_flow(ss, 1, 0, 0, 1, p2, l2);
    collected_reset(&c);
    drain_expect(ss, &o, rl_single_ledger_range(1), &c, RL_OK, 1, NULL);
    ss_stop(ss);
    collected_free(&c);
}

/* The read limit covers the whole message, however it is fragmented. */
static void test_read_limit_across_fragments(void **state)
{
    (void)state;
    rl_options o;
    rl_options_init(&o);
    o.max_chunk_size = 4096; /* read limit 4107 */
    static uint8_t piece[5000], m[CS_WIRE_CHUNK_HEADER_LEN + 5000];
    cs_synthetic_fill(piece, sizeof piece, 3, false);
    for (int exact = 0; exact < 2; exact++) {
        size_t plen = exact ? 4096 : 5000;
        size_t ml = cs_wire_append_chunk(m, 1, 0, CS_CODEC_RAW, piece, plen);
        ss_server *ss = ss_start();
        ss_begin(ss, 1, 0);
        ss_send_fragmented(ss, m, ml, 1000);
        ss_end(ss, 1, 1, plen, 0, XXH64(piece, plen, 0));
        collected c = {0};
        drain(ss, &o, rl_single_ledger_range(1), &c);
        char reason[128];
        if (exact) {
            expect(&c, RL_OK, 1);
            assert_memory_equal(c.copies[0], piece, plen);
        } else {
            expect(&c, RL_ERR_READ, 0);
            assert_string_equal(c.err, "remoteledger: read: read limited at 4108 bytes");
            assert_int_equal(ss_client_close(ss, 0, reason, sizeof reason), 1009);
            assert_string_equal(reason, "read limited at 4108 bytes");
        }
        ss_stop(ss);
        collected_free(&c);
    }
}

/* ==== cancel ================================================================================== */

/* 140 */
static void test_cancel_tears_down(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 32);
    ss_stall(ss);
    collected c = {0};
    c.cancel_in_callback = true;
    drain_url(ss_url(ss), NULL, rl_unbounded_range(1), &c);
    expect(&c, RL_ERR_CANCELLED, 1);
    assert_string_equal(c.err, "context canceled");
    /* sticky: the next call returns at once, without a connection */
    collected c2 = {0};
    assert_int_equal(rl_stream_raw_ledgers(c.s, rl_unbounded_range(1), on_ledger, &c2), RL_ERR_CANCELLED);
    assert_string_equal(rl_stream_error(c.s), "context canceled");
    assert_int_equal(c2.count, 0);
    drain_done(ss, &c);
    assert_int_equal(ss_connections(ss), 1);
    /* the connection was dropped, not closed with a frame */
    assert_int_equal(ss_client_close(ss, 0, NULL, 0), 0);
    ss_stop(ss);
    collected_free(&c);
}

/* 150: cancelled while blocked in the middle of a 2 MiB message, from another thread. */
static void test_cancel_while_blocked_mid_message(void **state)
{
    (void)state;
    const size_t half = 1u << 20;
    uint8_t *msg = malloc(half);
    cs_wire_put_chunk_header(msg, 1, 0, CS_CODEC_RAW);
    memset(msg + CS_WIRE_CHUNK_HEADER_LEN, 9, half - CS_WIRE_CHUNK_HEADER_LEN);
    ss_server *ss = ss_start();
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), NULL), RL_OK);
    ss_begin(ss, 1, 0);
    ss_send_partial(ss, msg, half, 2 * half);
    ss_call(ss, cancel_stream, s);
    ss_stall(ss);
    collected c = {0};
    rl_result r = rl_stream_raw_ledgers(s, rl_unbounded_range(1), on_ledger, &c);
    if (r != RL_ERR_CANCELLED) /* the cancel ended it, not the idle timeout */
        fail_msg("%s: %s", rl_result_name(r), rl_stream_error(s));
    assert_string_equal(rl_stream_error(s), "context canceled");
    assert_int_equal(c.count, 0);
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    assert_int_equal(ss_client_close(ss, 0, NULL, 0), 0); /* dropped, no close frame */
    ss_stop(ss);
    free(msg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunk_over_the_read_limit_is_rejected),
        cmocka_unit_test(test_cancel_tears_down),
        cmocka_unit_test(test_dial_failures),
        cmocka_unit_test(test_wss_dial_timeout),
        cmocka_unit_test(test_idle_timeout),
        cmocka_unit_test(test_cancel_while_blocked_mid_message),
        cmocka_unit_test(test_fragmented_and_large_messages),
        cmocka_unit_test(test_upgrade_request),
        cmocka_unit_test(test_pings_are_answered),
        cmocka_unit_test(test_framing_violations),
        cmocka_unit_test(test_eof_inside_frames),
        cmocka_unit_test(test_read_limit_across_fragments),
        cmocka_unit_test(test_close_is_echoed),
        cmocka_unit_test(test_handshake_failures),
    };
    return RLSUITE_RUN(tests);
}
