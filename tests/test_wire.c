/* SPDX-License-Identifier: Apache-2.0 */
/* Wire codec: PORTSPEC section 0 and test cases 28-35. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "wire/wire.h"

static void test_begin_round_trip(void **state)
{
    (void)state;
    uint8_t msg[CS_WIRE_BEGIN_LEN];
    assert_int_equal(cs_wire_put_begin(msg, 42, 1700000000123456789LL), 14);
    const uint8_t want[14] = {0x02, 0x10, 0, 0, 0, 42, 0x17, 0x97, 0x9c, 0xfe, 0x3d, 0x85, 0xcd, 0x15};
    assert_memory_equal(msg, want, 14);
    cs_wire_msg m;
    cs_err err;
    assert_int_equal(cs_wire_decode(msg, sizeof msg, &m, &err), 0);
    assert_int_equal(m.type, CS_WIRE_TYPE_BEGIN);
    assert_int_equal(m.seq, 42);
    assert_true(m.stamp == 1700000000123456789LL);
}

static void test_chunk_round_trip(void **state)
{
    (void)state;
    const uint8_t payload[] = "hello, chunk";
    uint8_t msg[64];
    size_t n = cs_wire_append_chunk(msg, 7, 3, CS_CODEC_RAW, payload, sizeof payload);
    assert_int_equal(n, CS_WIRE_CHUNK_HEADER_LEN + sizeof payload);
    cs_wire_msg m;
    assert_int_equal(cs_wire_decode(msg, n, &m, NULL), 0);
    assert_int_equal(m.type, CS_WIRE_TYPE_CHUNK);
    assert_int_equal(m.seq, 7);
    assert_int_equal(m.chunk_idx, 3);
    assert_int_equal(m.codec, CS_CODEC_RAW);
    assert_int_equal(m.payload_len, sizeof payload);
    assert_memory_equal(m.payload, payload, sizeof payload);
    assert_ptr_equal(m.payload, msg + CS_WIRE_CHUNK_HEADER_LEN); /* aliases, no copy */
}

static void test_put_chunk_header_matches_append(void **state)
{
    (void)state;
    uint8_t payload[300];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (uint8_t)(i * 7);
    uint8_t appended[CS_WIRE_CHUNK_HEADER_LEN + sizeof payload];
    uint8_t inplace[CS_WIRE_CHUNK_HEADER_LEN + sizeof payload];
    cs_wire_append_chunk(appended, 0xdeadbeef, 0x01020304, CS_CODEC_ZSTD, payload, sizeof payload);
    memcpy(inplace + CS_WIRE_CHUNK_HEADER_LEN, payload, sizeof payload);
    cs_wire_put_chunk_header(inplace, 0xdeadbeef, 0x01020304, CS_CODEC_ZSTD);
    assert_memory_equal(appended, inplace, sizeof appended);
    const uint8_t want_hdr[11] = {0x02, 0x11, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 0x01};
    assert_memory_equal(inplace, want_hdr, 11);
}

static void test_chunk_empty_payload(void **state)
{
    (void)state;
    uint8_t msg[CS_WIRE_CHUNK_HEADER_LEN];
    assert_int_equal(cs_wire_append_chunk(msg, 1, 0, CS_CODEC_RAW, NULL, 0), 11);
    cs_wire_msg m;
    assert_int_equal(cs_wire_decode(msg, sizeof msg, &m, NULL), 0);
    assert_int_equal(m.payload_len, 0);
}

static void test_end_round_trip(void **state)
{
    (void)state;
    uint8_t msg[CS_WIRE_END_LEN];
    assert_int_equal(cs_wire_put_end(msg, 4294967295u, 58, 15196324, -1, 0xdeadbeefcafef00dULL), 34);
    cs_wire_msg m;
    assert_int_equal(cs_wire_decode(msg, sizeof msg, &m, NULL), 0);
    assert_int_equal(m.type, CS_WIRE_TYPE_END);
    assert_true(m.seq == 4294967295u);
    assert_int_equal(m.chunk_count, 58);
    assert_true(m.total_len == 15196324);
    assert_true(m.stamp == -1);
    assert_true(m.checksum == 0xdeadbeefcafef00dULL);
}

static void expect_decode_error(const uint8_t *buf, size_t len, int kind, const char *msg)
{
    cs_wire_msg m;
    cs_err err;
    assert_int_equal(cs_wire_decode(buf, len, &m, &err), -1);
    assert_int_equal(err.kind, kind);
    assert_string_equal(err.msg, msg);
}

static void test_decode_errors(void **state)
{
    (void)state;
    uint8_t buf[64];
    memset(buf, 0, sizeof buf);
    expect_decode_error(buf, 0, CS_WIRE_ERR_SHORT,
                        "wire: message shorter than header: got 0 bytes, want at least 6");
    buf[0] = 0x02;
    expect_decode_error(buf, 5, CS_WIRE_ERR_SHORT,
                        "wire: message shorter than header: got 5 bytes, want at least 6");
    buf[1] = CS_WIRE_TYPE_BEGIN;
    expect_decode_error(buf, 13, CS_WIRE_ERR_SHORT,
                        "wire: message shorter than header: BEGIN is 13 bytes, want 14");
    expect_decode_error(buf, 15, CS_WIRE_ERR_SHORT,
                        "wire: message shorter than header: BEGIN is 15 bytes, want 14");
    buf[1] = CS_WIRE_TYPE_CHUNK;
    expect_decode_error(buf, 10, CS_WIRE_ERR_SHORT,
                        "wire: message shorter than header: CHUNK is 10 bytes, want at least 11");
    buf[10] = 0x05;
    expect_decode_error(buf, 11, CS_WIRE_ERR_CODEC, "wire: unknown chunk codec: 0x05");
    buf[1] = CS_WIRE_TYPE_END;
    expect_decode_error(buf, 33, CS_WIRE_ERR_SHORT,
                        "wire: message shorter than header: END is 33 bytes, want 34");
    expect_decode_error(buf, 35, CS_WIRE_ERR_SHORT,
                        "wire: message shorter than header: END is 35 bytes, want 34");
    buf[0] = 0x01; /* the retired v1 */
    expect_decode_error(buf, 34, CS_WIRE_ERR_VERSION,
                        "wire: unsupported protocol version: got 0x01, want 0x02");
    buf[0] = 0x02;
    buf[1] = 0x7f;
    expect_decode_error(buf, 34, CS_WIRE_ERR_TYPE, "wire: unknown message type: 0x7f");
    /* Version is checked before length per type: a short v1 message is a version error. */
    buf[0] = 0x01;
    buf[1] = CS_WIRE_TYPE_BEGIN;
    expect_decode_error(buf, 6, CS_WIRE_ERR_VERSION,
                        "wire: unsupported protocol version: got 0x01, want 0x02");
}

static void test_chunk_size_bounds(void **state)
{
    (void)state;
    cs_err err;
    assert_int_equal(CS_DEFAULT_CHUNK_SIZE, 256 * 1024);
    assert_int_equal(cs_wire_validate_chunk_size(CS_DEFAULT_CHUNK_SIZE, &err), 0);
    assert_int_equal(cs_wire_validate_chunk_size(CS_MIN_CHUNK_SIZE, &err), 0);
    assert_int_equal(cs_wire_validate_chunk_size(CS_MAX_CHUNK_SIZE, &err), 0);
    assert_int_equal(cs_wire_validate_chunk_size(0, &err), -1);
    assert_string_equal(err.msg, "chunk size 0 is outside [4096,8388608]");
    assert_int_equal(cs_wire_validate_chunk_size(4095, &err), -1);
    assert_string_equal(err.msg, "chunk size 4095 is outside [4096,8388608]");
    assert_int_equal(cs_wire_validate_chunk_size(8388609, &err), -1);
    assert_string_equal(err.msg, "chunk size 8388609 is outside [4096,8388608]");
    assert_int_equal(cs_wire_validate_chunk_size(-1, &err), -1);
    /* The smallest chunk message still holds an END, so a read limit sized for chunks admits END. */
    assert_true(CS_MIN_CHUNK_SIZE + CS_WIRE_CHUNK_HEADER_LEN >= CS_WIRE_END_LEN);
}

static void test_payload_cap(void **state)
{
    (void)state;
    assert_int_equal(CS_MAX_PAYLOAD_SIZE, 256 * 1024 * 1024);
    assert_true(CS_LAST_SEQUENCE == UINT32_MAX);
}

static void test_too_far_behind_reason(void **state)
{
    (void)state;
    char buf[128];
    cs_wire_format_too_far_behind(buf, sizeof buf, 500, 900);
    assert_string_equal(buf, "too far behind: oldest=500 latest=900");
    uint32_t o = 1, l = 1;
    assert_true(cs_wire_parse_too_far_behind(buf, strlen(buf), &o, &l));
    assert_int_equal(o, 500);
    assert_int_equal(l, 900);
    cs_wire_format_too_far_behind(buf, sizeof buf, 1, 4294967295u);
    assert_true(cs_wire_parse_too_far_behind(buf, strlen(buf), &o, &l));
    assert_true(o == 1 && l == 4294967295u);

    static const char *bad[] = {
        "nope", "", "too far behind: oldest=", "too far behind: oldest=5", "too far behind: oldest=x latest=9",
        "too far behind: oldest=-5 latest=9", "too far behind: oldest=4294967296 latest=9",
        "too far behind: oldest=5 latest=", "Too far behind: oldest=5 latest=9",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o = l = 77;
        assert_false(cs_wire_parse_too_far_behind(bad[i], strlen(bad[i]), &o, &l));
        assert_int_equal(o, 0); /* unknown, not wrong */
        assert_int_equal(l, 0);
    }
    /* The length bounds the parse: a reason is not NUL-terminated on the wire. */
    const char *full = "too far behind: oldest=5 latest=95";
    assert_true(cs_wire_parse_too_far_behind(full, strlen(full) - 1, &o, &l));
    assert_int_equal(l, 9);
    /* scanf tolerates spaces before a number and ignores trailing text. */
    const char *loose = "too far behind: oldest= 5 latest=+9 trailing";
    assert_true(cs_wire_parse_too_far_behind(loose, strlen(loose), &o, &l));
    assert_true(o == 5 && l == 9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_begin_round_trip),
        cmocka_unit_test(test_chunk_round_trip),
        cmocka_unit_test(test_put_chunk_header_matches_append),
        cmocka_unit_test(test_chunk_empty_payload),
        cmocka_unit_test(test_end_round_trip),
        cmocka_unit_test(test_decode_errors),
        cmocka_unit_test(test_chunk_size_bounds),
        cmocka_unit_test(test_payload_cap),
        cmocka_unit_test(test_too_far_behind_reason),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
