/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger: what a session hands over, the whole client against the scripted server
 * (support/scriptserver.h). The requested range and the endpoint asked for, chunk flows reassembled
 * with their stamps and the observer before the callback, the sequence rules, a partial dropped on
 * ring redelivery, protocol violations and text or empty messages refused, borrowed buffers, the
 * payload cap, zstd chunks, and a stream reused for another range. How a session ends is
 * test_remoteledger_endings.c's. The numbers in comments (118-149) are the prototype's test cases
 * these carry over. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* 118 */
static void test_delivers_bounded_range(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 5, 64);
    ss_ledger(ss, 6, 64);
    ss_ledger(ss, 7, 64);
    collected c = {0};
    drain_expect(ss, NULL, rl_bounded_range(5, 7), &c, RL_OK, 3, NULL);
    assert_int_equal(c.first, 5);
    assert_string_equal(ss_target(ss, 0), "/stream?end=7&start=5");
    /* no permessage-deflate offered */
    assert_null(strcasestr(ss_request(ss, 0), "permessage-deflate"));
    assert_null(strcasestr(ss_request(ss, 0), "Sec-WebSocket-Extensions"));
    /* after the range's last ledger the client says so, without waiting for the server */
    expect_client_close(ss, 0, 1000, "range complete");
    ss_stop(ss);
    collected_free(&c);
}

/* 119 */
static void test_reassembles_chunk_flows(void **state)
{
    (void)state;
    const int64_t es = 1700000000000000000LL, ee = 1700000000015000000LL;
    ss_server *ss = ss_start();
    const void *p1[] = {"hello, ", "world"};
    size_t l1[] = {7, 5};
    ss_flow(ss, 5, es, ee, 2, p1, l1);
    const void *p2[] = {"ring-replayed"};
    size_t l2[] = {13};
    ss_flow(ss, 6, 0, 0, 1, p2, l2);
    collected c = {0};
    int64_t before = wall_ns();
    drain_expect(ss, NULL, rl_bounded_range(5, 6), &c, RL_OK, 2, NULL);
    assert_int_equal(c.sizes[0], 12);
    assert_memory_equal(c.copies[0], "hello, world", 12);
    assert_memory_equal(c.copies[1], "ring-replayed", 13);
    assert_int_equal(c.observed, 2);
    assert_int_equal(c.observed_before_callback, 2); /* the observer runs before the hand-over */
    const rl_ledger_info *live = &c.observed_infos[0];
    assert_memory_equal(live, &c.infos[0], sizeof *live);
    assert_int_equal(live->sequence, 5);
    assert_int_equal(live->chunks, 2);
    assert_int_equal(live->size, 12);
    assert_int_equal(live->emit_start_unix_nano, es);
    assert_int_equal(live->emit_end_unix_nano, ee);
    assert_true(live->received_unix_nano >= before && live->received_unix_nano <= wall_ns());
    int64_t d;
    assert_true(rl_info_delivery(live, &d));
    assert_int_equal(d, live->received_unix_nano - ee);
    assert_true(rl_info_emit_window(live, &d));
    assert_int_equal(d, ee - es);
    assert_true(rl_info_pipeline(live, &d));
    assert_int_equal(d, live->received_unix_nano - es);
    const rl_ledger_info *replayed = &c.observed_infos[1];
    d = 12345;
    assert_false(rl_info_delivery(replayed, &d));
    assert_false(rl_info_pipeline(replayed, &d));
    assert_false(rl_info_emit_window(replayed, &d));
    assert_int_equal(d, 12345);
    assert_int_equal(replayed->discarded_partials, 0);
    assert_true(replayed->received_unix_nano > 0);
    ss_stop(ss);
    collected_free(&c);
}

/* The receive stamp is taken with or without an observer (unlike the prototype). */
static void test_received_stamp_without_observer(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 8);
    collected c = {0};
    rl_options o;
    rl_options_init(&o);
    o.observer = NULL;
    c.first = -1;
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), &o), RL_OK);
    assert_int_equal(rl_stream_raw_ledgers(s, rl_single_ledger_range(1), on_ledger, &c), RL_OK);
    assert_int_equal(c.count, 1);
    assert_int_equal(c.observed, 0);
    assert_true(c.infos[0].received_unix_nano > 0);
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    ss_stop(ss);
    collected_free(&c);
}

/* 120 */
static void test_stops_at_range_end(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    for (uint32_t i = 1; i <= 5; i++)
        ss_ledger(ss, i, 32);
    collected c = {0};
    drain_expect(ss, NULL, rl_bounded_range(1, 3), &c, RL_OK, 3, NULL);
    ss_stop(ss);
    collected_free(&c);
}

/* 121 */
static void test_from_tip_accepts_any_first_ledger(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 900, 32);
    ss_ledger(ss, 901, 32);
    ss_send_close(ss, 1000, "");
    collected c = {0};
    drain_expect(ss, NULL, rl_unbounded_range(0), &c, RL_OK, 2, NULL);
    assert_string_equal(ss_target(ss, 0), "/stream?start=0");
    ss_stop(ss);
    collected_free(&c);
}

/* 122 */
static void test_sequence_rules(void **state)
{
    (void)state;
    collected c = {0};
    ss_server *ss = ss_start();
    ss_ledger(ss, 5, 32);
    ss_ledger(ss, 6, 32);
    ss_ledger(ss, 8, 32);
    drain_expect(ss, NULL, rl_unbounded_range(5), &c, RL_ERR_GAP, 2,
                 "remoteledger: ledger sequence gap: got ledger 8, expected 7");
    ss_stop(ss);
    collected_free(&c);

    ss = ss_start();
    ss_ledger(ss, 11, 32);
    collected_reset(&c);
    drain_expect(ss, NULL, rl_unbounded_range(10), &c, RL_ERR_GAP, 0,
                 "remoteledger: ledger sequence gap: got ledger 11, expected 10");
    ss_stop(ss);

    ss = ss_start();
    ss_begin(ss, 1, 0);
    ss_begin(ss, 2, 0);
    collected_reset(&c);
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_PROTOCOL, 0,
                 "remoteledger: protocol violation: BEGIN for ledger 2 while assembling 1");
    ss_stop(ss);

    ss = ss_start();
    ss_ledger(ss, MAXU32, 32);
    ss_ledger(ss, 1, 32);
    collected_reset(&c);
    drain_expect(ss, NULL, rl_unbounded_range(0), &c, RL_ERR_GAP, 1,
                 "remoteledger: ledger sequence gap: ledger 1 cannot follow 4294967295, the last representable sequence");
    ss_stop(ss);
    collected_free(&c);
}

/* 134 */
static void test_discards_partial_on_ring_redelivery(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_begin(ss, 9, wall_ns());
    ss_chunk(ss, 9, 0, CS_CODEC_RAW, "partial that must v", 19);
    ss_chunk(ss, 9, 1, CS_CODEC_RAW, "anish", 5);
    const void *p[] = {"the complete", " ledger"};
    size_t l[] = {12, 7};
    ss_flow(ss, 9, 0, 0, 2, p, l);
    collected c = {0};
    drain_expect(ss, NULL, rl_single_ledger_range(9), &c, RL_OK, 1, NULL);
    assert_int_equal(c.sizes[0], 19);
    assert_memory_equal(c.copies[0], "the complete ledger", 19);
    assert_int_equal(c.observed, 1);
    assert_int_equal(c.observed_infos[0].discarded_partials, 1);
    int64_t d;
    assert_false(rl_info_delivery(&c.observed_infos[0], &d));
    ss_stop(ss);
    collected_free(&c);
}

/* 135 */
static void test_protocol_violations(void **state)
{
    (void)state;
    uint64_t hx = XXH64("x", 1, 0);
    for (int k = 0; k < 9; k++) {
        ss_server *ss = ss_start();
        const char *want = NULL;
        switch (k) {
        case 0:
            ss_begin(ss, 1, 0);
            ss_chunk(ss, 1, 1, CS_CODEC_RAW, "x", 1);
            want = "expected chunk 0";
            break;
        case 1:
            ss_chunk(ss, 1, 0, CS_CODEC_RAW, "x", 1);
            want = "outside its flow";
            break;
        case 2:
            ss_begin(ss, 1, 0);
            ss_chunk(ss, 2, 0, CS_CODEC_RAW, "x", 1);
            want = "outside its flow";
            break;
        case 3:
            ss_end(ss, 1, 0, 0, 0, 0);
            want = "outside its flow";
            break;
        case 4:
            ss_begin(ss, 1, 0);
            ss_chunk(ss, 1, 0, CS_CODEC_RAW, "x", 1);
            ss_end(ss, 1, 2, 1, 0, hx);
            want = "declares 2 chunks";
            break;
        case 5:
            ss_begin(ss, 1, 0);
            ss_chunk(ss, 1, 0, CS_CODEC_RAW, "x", 1);
            ss_end(ss, 1, 1, 2, 0, hx);
            want = "declares 2 bytes";
            break;
        case 6:
            ss_begin(ss, 1, 0);
            ss_chunk(ss, 1, 0, CS_CODEC_RAW, "x", 1);
            ss_end(ss, 1, 1, 1, 0, 0xbad);
            want = "checksum mismatch";
            break;
        case 7: {
            uint8_t two[2] = {CS_WIRE_VERSION, CS_WIRE_TYPE_BEGIN};
            ss_send_binary(ss, two, 2);
            want = "shorter than header";
            break;
        }
        default: {
            uint8_t b[CS_WIRE_BEGIN_LEN];
            cs_wire_put_begin(b, 1, 0);
            b[0] = 0x01;
            ss_send_binary(ss, b, sizeof b);
            want = "version";
            break;
        }
        }
        collected c = {0};
        drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_PROTOCOL, 0, NULL);
        assert_contains(c.err, "remoteledger: protocol violation: ");
        assert_contains(c.err, want);
        ss_stop(ss);
    }
}

/* 136 */
static void test_rejects_text_messages(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_send_text(ss, "hello");
    collected c = {0};
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_PROTOCOL, 0,
                 "remoteledger: protocol violation: unexpected MessageText message");
    ss_stop(ss);
}

/* An empty binary message is a message too: shorter than any header. */
static void test_empty_message(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_send_binary(ss, "", 0);
    collected c = {0};
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_PROTOCOL, 0,
                 "remoteledger: protocol violation: wire: message shorter than header: got 0 bytes, want at least 6");
    ss_stop(ss);
}

/* 137: the buffer handed to the first callback is the one the second ledger overwrote. */
static void test_yields_borrowed_buffers(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 64);
    ss_ledger(ss, 2, 64);
    collected c = {0};
    drain_expect(ss, NULL, rl_bounded_range(1, 2), &c, RL_OK, 2, NULL);
    assert_true(c.same_buffer);
    assert_true(c.borrowed_overwritten);
    ss_stop(ss);
    collected_free(&c);
}

/* 138 */
static void test_assembly_cap(void **state)
{
    (void)state;
    uint8_t a100[100], b100[100], both[150];
    memset(a100, 1, sizeof a100);
    memset(b100, 2, sizeof b100);
    memcpy(both, a100, 100);
    memcpy(both + 100, b100, 50);
    rl_options o;
    rl_options_init(&o);
    o.max_message_size = 150;

    ss_server *ss = ss_start();
    ss_begin(ss, 1, 0);
    ss_chunk(ss, 1, 0, CS_CODEC_RAW, a100, 100);
    ss_chunk(ss, 1, 1, CS_CODEC_RAW, b100, 100);
    collected c = {0};
    drain_expect(ss, &o, rl_unbounded_range(1), &c, RL_ERR_PROTOCOL, 0, NULL);
    assert_contains(c.err, "payload cap");
    ss_stop(ss);

    ss = ss_start();
    const void *p[] = {a100, b100};
    size_t l[] = {100, 50};
    ss_flow(ss, 1, 0, 0, 2, p, l);
    collected_reset(&c);
    drain_expect(ss, &o, rl_single_ledger_range(1), &c, RL_OK, 1, NULL);
    assert_int_equal(c.sizes[0], 150);
    assert_memory_equal(c.copies[0], both, 150);
    ss_stop(ss);
    collected_free(&c);
}

/* 148 */
static void test_expands_compressed_chunks(void **state)
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

    ss_server *ss = ss_start();
    ss_begin(ss, 1, 0);
    ss_chunk(ss, 1, 0, CS_CODEC_ZSTD, z, zn);
    ss_chunk(ss, 1, 1, CS_CODEC_RAW, rsrc, rlen);
    ss_end(ss, 1, 2, zlen + rlen, 0, XXH64(both, zlen + rlen, 0));
    collected c = {0};
    drain_expect(ss, NULL, rl_single_ledger_range(1), &c, RL_OK, 1, NULL);
    assert_int_equal(c.sizes[0], zlen + rlen);
    assert_memory_equal(c.copies[0], both, zlen + rlen);
    assert_int_equal(c.infos[0].chunks, 2);
    ss_stop(ss);
    collected_free(&c);
    free(zsrc);
    free(rsrc);
    free(both);
    free(z);
}

/* 149 */
static void test_rejects_corrupt_compressed_chunk(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_begin(ss, 1, 0);
    ss_chunk(ss, 1, 0, CS_CODEC_ZSTD, "not a zstd frame", 16);
    collected c = {0};
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_PROTOCOL, 0, NULL);
    assert_contains(c.err, "remoteledger: protocol violation: ledger 1 chunk 0: decompress: ");
    ss_stop(ss);
}

/* 141 (TestRawLedgersIgnoresStreamOptions): not applicable. The Go iterator accepts the SDK's
 * StreamOption values and ignores them; the C call has no such parameter. */

/* A stream is reusable: each call dials its own connection and reports its own outcome. */
static void test_stream_is_reusable(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_send_close(ss, 4001, "too far behind: oldest=50 latest=60");
    ss_next_connection(ss);
    ss_ledger(ss, 50, 8);
    ss_ledger(ss, 51, 8);
    rl_stream *s;
    char url[128];
    snprintf(url, sizeof url, "%s/stream?token=abc&start=1", ss_url(ss));
    assert_int_equal(rl_stream_new(&s, url, NULL), RL_OK);
    assert_string_equal(rl_stream_endpoint(s), "");
    collected c = {0};
    assert_int_equal(rl_stream_raw_ledgers(s, rl_unbounded_range(10), on_ledger, &c), RL_ERR_TOO_FAR_BEHIND);
    uint32_t req, oldest, latest;
    assert_true(rl_stream_too_far_behind(s, &req, &oldest, &latest));
    assert_int_equal(oldest, 50);
    char want[256];
    snprintf(want, sizeof want, "%s/stream?start=10&token=abc", ss_url(ss));
    assert_string_equal(rl_stream_endpoint(s), want);
    assert_int_equal(rl_stream_raw_ledgers(s, rl_bounded_range(50, 51), on_ledger, &c), RL_OK);
    assert_string_equal(rl_stream_error(s), "");
    assert_false(rl_stream_too_far_behind(s, &req, &oldest, &latest));
    assert_int_equal(c.count, 2);
    snprintf(want, sizeof want, "%s/stream?end=51&start=50&token=abc", ss_url(ss));
    assert_string_equal(rl_stream_endpoint(s), want);
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    assert_int_equal(ss_connections(ss), 2);
    assert_string_equal(ss_target(ss, 1), "/stream?end=51&start=50&token=abc");
    ss_stop(ss);
    collected_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delivers_bounded_range),
        cmocka_unit_test(test_reassembles_chunk_flows),
        cmocka_unit_test(test_received_stamp_without_observer),
        cmocka_unit_test(test_stops_at_range_end),
        cmocka_unit_test(test_from_tip_accepts_any_first_ledger),
        cmocka_unit_test(test_sequence_rules),
        cmocka_unit_test(test_discards_partial_on_ring_redelivery),
        cmocka_unit_test(test_protocol_violations),
        cmocka_unit_test(test_rejects_text_messages),
        cmocka_unit_test(test_empty_message),
        cmocka_unit_test(test_yields_borrowed_buffers),
        cmocka_unit_test(test_assembly_cap),
        cmocka_unit_test(test_expands_compressed_chunks),
        cmocka_unit_test(test_rejects_corrupt_compressed_chunk),
        cmocka_unit_test(test_stream_is_reusable),
    };
    return RLSUITE_RUN(tests);
}
