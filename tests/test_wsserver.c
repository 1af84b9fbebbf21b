/* The server's framing for TLS subscribers (corestreamd/net/wsserver.h): the RFC 6455 accept
 * key, client frames as the TLS I/O threads read them (masked control frames unmasked in place,
 * data frames refused at their header, protocol errors named), and the frame header a message
 * gets in its headroom. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "corestreamd/stream/message.h"
#include "corestreamd/net/wsserver.h"

static void test_accept_key_is_rfc_6455s(void **state)
{
    (void)state;
    char out[29];
    static const char key[] = "dGhlIHNhbXBsZSBub25jZQ==";
    cs_wss_accept(key, strlen(key), out);
    assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="); /* RFC 6455 section 1.3 */
}

static void test_masked_ping_is_unmasked_in_place(void **state)
{
    (void)state;
    uint8_t f[] = {0x89, 0x84, 1, 2, 3, 4, 'p' ^ 1, 'i' ^ 2, 'n' ^ 3, 'g' ^ 4, 0x88};
    cs_wss_frame fr;
    assert_int_equal(cs_wss_parse(f, sizeof f, &fr), 10);
    assert_int_equal(fr.kind, CS_WSS_CONTROL);
    assert_int_equal(fr.opcode, CS_WSS_OP_PING);
    assert_int_equal(fr.len, 4);
    assert_memory_equal(fr.payload, "ping", 4);
    assert_int_equal(cs_wss_parse(f, 9, &fr), 0); /* cut short */
    assert_int_equal(fr.kind, CS_WSS_MORE);
}

static void test_data_and_errors(void **state)
{
    (void)state;
    cs_wss_frame fr;
    uint8_t data[] = {0x82, 0xfe, 0x01, 0x00, 9, 9, 9, 9}; /* 256 bytes announced, none sent */
    assert_int_equal(cs_wss_parse(data, sizeof data, &fr), 8);
    assert_int_equal(fr.kind, CS_WSS_DATA);
    uint8_t unmasked[] = {0x89, 0x00};
    assert_int_equal(cs_wss_parse(unmasked, 2, &fr), 0);
    assert_int_equal(fr.kind, CS_WSS_ERROR);
    assert_string_equal(fr.err, "client frames must be masked");
    uint8_t rsv[] = {0xc9, 0x80};
    cs_wss_parse(rsv, 2, &fr);
    assert_string_equal(fr.err, "RSV bits set");
    uint8_t frag[] = {0x09, 0x80};
    cs_wss_parse(frag, 2, &fr);
    assert_string_equal(fr.err, "fragmented control frame");
    uint8_t big[] = {0x89, 0xfe};
    cs_wss_parse(big, 2, &fr);
    assert_string_equal(fr.err, "control frame longer than 125 bytes");
    uint8_t op[] = {0x83, 0x80};
    cs_wss_parse(op, 2, &fr);
    assert_string_equal(fr.err, "unknown opcode");
}

static void test_close_frame_and_message_header(void **state)
{
    (void)state;
    uint8_t out[2 + CS_WSS_MAX_CONTROL];
    size_t n = cs_wss_close(out, 1008, "token revoked");
    assert_int_equal(n, 2 + 2 + 13);
    assert_int_equal(out[0], 0x88);
    assert_int_equal(out[1], 15);
    assert_int_equal(out[2] << 8 | out[3], 1008);
    assert_memory_equal(out + 4, "token revoked", 13);
    const size_t lens[] = {5, 126, 70000};
    const uint8_t want1[] = {5, 126, 127};
    for (size_t i = 0; i < 3; i++) {
        cs_msg *m = cs_msg_new(lens[i]);
        m->len = lens[i];
        size_t hl = cs_msg_ws_header(m);
        assert_int_equal(hl, i == 0 ? 2 : i == 1 ? 4 : 10);
        assert_int_equal(cs_msg_ws_header(m), hl); /* once: the same header again */
        const uint8_t *h = m->data - hl;
        assert_int_equal(h[0], 0x82);
        assert_int_equal(h[1], want1[i]);
        if (i == 1)
            assert_int_equal(h[2] << 8 | h[3], 126);
        if (i == 2)
            assert_int_equal((uint32_t)h[6] << 24 | (uint32_t)h[7] << 16 | (uint32_t)h[8] << 8 | h[9], 70000);
        cs_msg_release(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accept_key_is_rfc_6455s),
        cmocka_unit_test(test_masked_ping_is_unmasked_in_place),
        cmocka_unit_test(test_data_and_errors),
        cmocka_unit_test(test_close_frame_and_message_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
