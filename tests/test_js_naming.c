/* JetStream naming: stream names, run tokens, subjects, message ids and the resume position. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "corestreamd/jetstream/naming.h"
#include "corestreamd/jetstream/stream.h"
#include "wire/ledgersig.h"
#include "wire/wire.h"

static void test_stream_names(void **state)
{
    (void)state;
    cs_err e;
    assert_int_equal(cs_js_validate_stream_name("CORESTREAM", &e), 0);
    assert_int_equal(cs_js_validate_stream_name("core_stream-2", &e), 0);
    const char *bad[] = {"", "a.b", "a*", "a>", "a b", "a/b", "012345678901234567890123456789012"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(cs_js_validate_stream_name(bad[i], &e), -1);
    assert_string_equal(e.msg, "--jetstream-stream \"012345678901234567890123456789012\" must be 1 to 32 characters "
                               "of A-Z a-z 0-9 _ -");
}

static void test_names_and_ids(void **state)
{
    (void)state;
    char run[CS_JS_NAME_MAX], other[CS_JS_NAME_MAX], buf[CS_JS_SUBJECT_MAX];
    cs_js_run_id(run, sizeof run, "synthetic", "synthetic size=204800 compressible=false chunk_size=262144");
    cs_js_run_id(other, sizeof other, "synthetic", "synthetic size=204800 compressible=true chunk_size=262144");
    assert_int_equal(strlen(run), strlen("synthetic-") + 16);
    assert_memory_equal(run, "synthetic-", 10);
    assert_string_not_equal(run, other);
    cs_js_run_id(other, sizeof other, "synthetic", "synthetic size=204800 compressible=false chunk_size=262144");
    assert_string_equal(run, other); /* the same definition is the same run */

    cs_js_subject(buf, sizeof buf, "CORESTREAM", "file-00ff", 4294967294u);
    assert_string_equal(buf, "CORESTREAM.file-00ff.4294967294");
    cs_js_run_filter(buf, sizeof buf, "CORESTREAM", "file-00ff");
    assert_string_equal(buf, "CORESTREAM.file-00ff.*");
    cs_js_stream_subjects(buf, sizeof buf, "S");
    assert_string_equal(buf, "S.>");
    cs_js_msg_id(buf, sizeof buf, "file-00ff", 7, 3);
    assert_string_equal(buf, "file-00ff:7:3");
}

static void test_position_after(void **state)
{
    (void)state;
    uint8_t m[64];
    cs_js_pos p;
    cs_err e;
    size_t n = cs_wire_put_begin(m, 9, 123);
    assert_int_equal(cs_js_pos_after(m, n, &p, &e), 0);
    assert_int_equal(p.seq, 9);
    assert_int_equal(p.item, 1);
    n = cs_wire_append_chunk(m, 9, 4, 0, (const uint8_t *)"abc", 3);
    assert_int_equal(cs_js_pos_after(m, n, &p, &e), 0);
    assert_int_equal(p.seq, 9);
    assert_int_equal(p.item, 6);
    uint8_t sig[CS_WIRE_SIG_MAX_LEN];
    cs_sig s = {.seq = 9, .alg = CS_SIG_ALG_ED25519, .run_len = 1, .run = "r"};
    n = cs_sig_encode(&s, sig);
    assert_int_equal(cs_js_pos_after(sig, n, &p, &e), 0); /* a SIG: only its END is left */
    assert_int_equal(p.seq, 9);
    assert_int_equal(p.item, CS_JS_ITEM_END);
    n = cs_wire_put_end(m, 9, 5, 100, 0, 42);
    assert_int_equal(cs_js_pos_after(m, n, &p, &e), 0);
    assert_int_equal(p.seq, 10);
    assert_int_equal(p.item, 0);
    n = cs_wire_put_end(m, 4294967295u, 5, 100, 0, 42);
    assert_int_equal(cs_js_pos_after(m, n, &p, &e), -1);
    assert_int_equal(cs_js_pos_after((const uint8_t *)"xx", 2, &p, &e), -1);
    assert_non_null(strstr(e.msg, "jetstream: last message of the run is not a wire message: wire: "));
}

static void test_payload_check(void **state)
{
    (void)state;
    cs_err e;
    assert_int_equal(cs_js_check_payload(1048576, 262144, "nats://x:1", &e), 0);
    assert_int_equal(cs_js_check_payload(1048576, 1048437, "nats://x:1", &e), 0);
    assert_int_equal(cs_js_check_payload(1048576, 1048438, "nats://x:1", &e), -1);
    assert_string_equal(e.msg, "--chunk-size 1048438 makes JetStream messages of up to 1048577 bytes (chunk, header "
                               "and Nats-Msg-Id), over the max_payload of 1048576 bytes that nats://x:1 announces; "
                               "use --chunk-size 1048437 or less, or raise max_payload on the server");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_names),
        cmocka_unit_test(test_names_and_ids),
        cmocka_unit_test(test_position_after),
        cmocka_unit_test(test_payload_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
