/* SPDX-License-Identifier: Apache-2.0 */
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
#include "wire/wsaccept.h"

static void test_accept_key_is_rfc_6455s(void **state)
{
    (void)state;
    char out[29];
    static const char key[] = "dGhlIHNhbXBsZSBub25jZQ==";
    cs_ws_accept(key, strlen(key), out);
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

/* A client's close and the answer (RFC 6455 5.5.1, 7.1.5, 7.4): its code echoed when an endpoint
 * may send it and its reason is UTF-8; 1002 for a code cut short or one that must not be sent,
 * 1007 for a reason that is not UTF-8. */
static void test_close_answers(void **state)
{
    (void)state;
    static const struct {
        const char *payload;
        size_t len;
        int code;
        const char *reason;
    } cases[] = {
        {"", 0, 0, ""},
        {"\x03", 1, 1002, "close payload of one byte"},
        {"\x03\xe8", 2, 1000, ""},
        {"\x03\xe8" "bye", 5, 1000, ""},
        {"\x03\xe9", 2, 1001, ""},
        {"\x03\xeb", 2, 1003, ""},
        {"\x03\xec", 2, 1002, "close code 1004 may not be sent"},
        {"\x03\xed", 2, 1002, "close code 1005 may not be sent"},
        {"\x03\xee", 2, 1002, "close code 1006 may not be sent"},
        {"\x03\xef", 2, 1007, ""},
        {"\x03\xf3", 2, 1011, ""},
        {"\x03\xf6", 2, 1014, ""},
        {"\x03\xf7", 2, 1002, "close code 1015 may not be sent"},
        {"\x07\xd0", 2, 1002, "close code 2000 may not be sent"},
        {"\x0b\xb7", 2, 1002, "close code 2999 may not be sent"},
        {"\x0b\xb8", 2, 3000, ""},
        {"\x0f\xa0", 2, 4000, ""},
        {"\x13\x87", 2, 4999, ""},
        {"\x13\x88", 2, 1002, "close code 5000 may not be sent"},
        {"\x03\xe7", 2, 1002, "close code 999 may not be sent"},
        {"\x00\x00", 2, 1002, "close code 0 may not be sent"},
        {"\xff\xff", 2, 1002, "close code 65535 may not be sent"},
        {"\x03\xe8\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5", 13, 1000, ""}, /* κόσμε */
        {"\x03\xe8\xef\xbf\xbd", 5, 1000, ""},                              /* U+FFFD itself */
        {"\x03\xe8\xf4\x8f\xbf\xbf", 6, 1000, ""},                          /* U+10FFFF */
        {"\x03\xe8\xff", 3, 1007, "close reason is not UTF-8"},
        {"\x03\xe8\xce", 3, 1007, "close reason is not UTF-8"},                 /* cut short */
        {"\x03\xe8\xc0\xaf", 4, 1007, "close reason is not UTF-8"},             /* overlong */
        {"\x03\xe8\xed\xa0\x80", 5, 1007, "close reason is not UTF-8"},         /* a surrogate */
        {"\x03\xe8\xf4\x90\x80\x80", 6, 1007, "close reason is not UTF-8"},     /* past U+10FFFF */
        {"\x03\xe8" "ok\xe2\x82", 6, 1007, "close reason is not UTF-8"},           /* cut at the end */
        {"\x03\xed\xff", 3, 1002, "close code 1005 may not be sent"},           /* the code first */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[48];
        const char *reason = NULL;
        int code = cs_wss_close_answer((const uint8_t *)cases[i].payload, cases[i].len, buf, &reason);
        if (code != cases[i].code || strcmp(reason, cases[i].reason) != 0)
            fail_msg("case %zu: %d \"%s\", want %d \"%s\"", i, code, reason, cases[i].code, cases[i].reason);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accept_key_is_rfc_6455s),
        cmocka_unit_test(test_masked_ping_is_unmasked_in_place),
        cmocka_unit_test(test_data_and_errors),
        cmocka_unit_test(test_close_frame_and_message_header),
        cmocka_unit_test(test_close_answers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
