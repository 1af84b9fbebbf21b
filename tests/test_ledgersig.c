/* SPDX-License-Identifier: Apache-2.0 */
/* Signed ledgers (wire/ledgersig.h): the SIG message round trip, what the signature covers, key
 * files and their errors, with keys made by the openssl lines the manual gives (support/certs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/certs.h"
#include "wire/ledgersig.h"
#include "wire/wire.h"

static cs_certs certs;

static int setup(void **state)
{
    (void)state;
    return cs_certs_make(&certs);
}

static int teardown(void **state)
{
    (void)state;
    cs_certs_remove(&certs);
    return 0;
}

static cs_sig fields(uint32_t seq, const char *run)
{
    cs_sig s = {.seq = seq, .run_len = (uint8_t)strlen(run)};
    memcpy(s.run, run, s.run_len);
    for (int i = 0; i < CS_SIG_SHA_LEN; i++)
        s.sha256[i] = (uint8_t)(i * 7 + 1);
    return s;
}

static void test_sign_encode_decode_verify(void **state)
{
    (void)state;
    cs_sig_signer *k;
    cs_sig_keyset *ks;
    cs_err err;
    assert_int_equal(cs_sig_signer_load(certs.sign_key, &k, &err), 0);
    assert_int_equal(cs_sig_keyset_load(certs.sign_pub, &ks, &err), 0);
    assert_int_equal(cs_sig_keyset_count(ks), 1);

    cs_sig s = fields(42, "synthetic-95370d14cf26c211");
    memset(s.prev, 0xab, CS_SIG_LEN);
    assert_int_equal(cs_sig_sign(k, &s, 1000, 0x1122334455667788ull, &err), 0);
    assert_memory_equal(s.key, cs_sig_signer_key(k), CS_SIG_KEY_LEN);

    uint8_t msg[CS_WIRE_SIG_MAX_LEN];
    size_t n = cs_sig_encode(&s, msg);
    assert_int_equal(n, CS_WIRE_SIG_FIXED_LEN + strlen("synthetic-95370d14cf26c211"));
    cs_wire_msg w;
    assert_int_equal(cs_wire_decode(msg, n, &w, &err), 0);
    assert_int_equal(w.type, CS_WIRE_TYPE_SIG);
    assert_int_equal(w.seq, 42);
    cs_sig d;
    assert_int_equal(cs_sig_decode(msg, n, &d, &err), 0);
    assert_memory_equal(&d, &s, sizeof d);
    assert_false(cs_sig_prev_none(&d));
    assert_int_equal(cs_sig_verify(ks, &d, 1000, 0x1122334455667788ull, s.sha256, &err), 0);

    /* Every covered field matters. */
    assert_int_equal(cs_sig_verify(ks, &d, 1001, 0x1122334455667788ull, s.sha256, &err), -1);
    assert_string_equal(err.msg, "signature does not verify");
    assert_int_equal(cs_sig_verify(ks, &d, 1000, 0x1122334455667789ull, s.sha256, &err), -1);
    cs_sig t = d;
    t.seq = 43;
    assert_int_equal(cs_sig_verify(ks, &t, 1000, 0x1122334455667788ull, s.sha256, &err), -1);
    t = d;
    t.run[0] = 'S';
    assert_int_equal(cs_sig_verify(ks, &t, 1000, 0x1122334455667788ull, s.sha256, &err), -1);
    t = d;
    t.prev[63] ^= 1;
    assert_int_equal(cs_sig_verify(ks, &t, 1000, 0x1122334455667788ull, s.sha256, &err), -1);
    assert_string_equal(err.msg, "signature does not verify");
    uint8_t other_sha[CS_SIG_SHA_LEN];
    memcpy(other_sha, s.sha256, sizeof other_sha);
    other_sha[0] ^= 1;
    assert_int_equal(cs_sig_verify(ks, &d, 1000, 0x1122334455667788ull, other_sha, &err), -1);
    assert_string_equal(err.msg, "bytes differ from the signed SHA-256");
    cs_sig_keyset_free(ks);
    cs_sig_signer_free(k);
}

static void test_untrusted_and_several_keys(void **state)
{
    (void)state;
    cs_sig_signer *other;
    cs_sig_keyset *mine, *both;
    cs_err err;
    assert_int_equal(cs_sig_signer_load(certs.other_sign_key, &other, &err), 0);
    assert_int_equal(cs_sig_keyset_load(certs.sign_pub, &mine, &err), 0);
    assert_int_equal(cs_sig_keyset_load(certs.both_pub, &both, &err), 0);
    assert_int_equal(cs_sig_keyset_count(both), 2);
    cs_sig s = fields(7, "file-0123456789abcdef");
    assert_true(cs_sig_prev_none(&s));
    assert_int_equal(cs_sig_sign(other, &s, 5, 9, &err), 0);
    assert_int_equal(cs_sig_verify(mine, &s, 5, 9, s.sha256, &err), -1);
    char hex[2 * CS_SIG_KEY_LEN + 1], want[160];
    cs_sig_key_hex(cs_sig_signer_key(other), hex);
    snprintf(want, sizeof want, "signed by %s, which is not a trusted key", hex);
    assert_string_equal(err.msg, want);
    assert_int_equal(cs_sig_verify(both, &s, 5, 9, s.sha256, &err), 0);
    cs_sig_keyset_free(both);
    cs_sig_keyset_free(mine);
    cs_sig_signer_free(other);
}

static void test_key_file_errors(void **state)
{
    (void)state;
    cs_sig_signer *k = (cs_sig_signer *)1;
    cs_sig_keyset *ks = (cs_sig_keyset *)1;
    cs_err err;
    char missing[PATH_MAX + 16], want[PATH_MAX + 96];
    snprintf(missing, sizeof missing, "%s/nope.key", certs.dir.path);
    assert_int_equal(cs_sig_signer_load(missing, &k, &err), -1);
    assert_null(k);
    snprintf(want, sizeof want, "signing key \"%s\": No such file or directory", missing);
    assert_string_equal(err.msg, want);
    assert_int_equal(cs_sig_signer_load(certs.sign_pub, &k, &err), -1);
    snprintf(want, sizeof want, "signing key \"%s\": no PEM private key in it", certs.sign_pub);
    assert_string_equal(err.msg, want);
    assert_int_equal(cs_sig_signer_load(certs.server_key, &k, &err), -1);
    snprintf(want, sizeof want, "signing key \"%s\": an id-ecPublicKey key, not Ed25519", certs.server_key);
    assert_string_equal(err.msg, want);

    assert_int_equal(cs_sig_keyset_load(missing, &ks, &err), -1);
    assert_null(ks);
    snprintf(want, sizeof want, "trusted keys \"%s\": No such file or directory", missing);
    assert_string_equal(err.msg, want);
    assert_int_equal(cs_sig_keyset_load(certs.sign_key, &ks, &err), -1);
    snprintf(want, sizeof want, "trusted keys \"%s\": no PEM public key in it", certs.sign_key);
    assert_string_equal(err.msg, want);
    assert_int_equal(cs_sig_keyset_load(certs.ec_pub, &ks, &err), -1);
    snprintf(want, sizeof want, "trusted keys \"%s\": key 1 is an id-ecPublicKey key, not Ed25519", certs.ec_pub);
    assert_string_equal(err.msg, want);
}

static void test_decode_errors(void **state)
{
    (void)state;
    uint8_t msg[CS_WIRE_SIG_MAX_LEN + 1] = {CS_WIRE_VERSION, CS_WIRE_TYPE_SIG, 0, 0, 0, 1, CS_SIG_ALG_ED25519};
    cs_sig s;
    cs_err err;
    assert_int_equal(cs_sig_decode(msg, CS_WIRE_SIG_FIXED_LEN, &s, &err), -1);
    assert_string_equal(err.msg, "SIG is 199 bytes, want 200 to 263");
    assert_int_equal(cs_sig_decode(msg, CS_WIRE_SIG_MAX_LEN + 1, &s, &err), -1);
    assert_string_equal(err.msg, "SIG is 264 bytes, want 200 to 263");
    cs_wire_msg w;
    assert_int_equal(cs_wire_decode(msg, CS_WIRE_SIG_FIXED_LEN, &w, &err), -1);
    assert_string_equal(err.msg, "wire: SIG is 199 bytes, want 200 to 263");
    msg[6] = 2;
    assert_int_equal(cs_sig_decode(msg, CS_WIRE_SIG_FIXED_LEN + 1, &s, &err), -1);
    assert_string_equal(err.msg, "SIG algorithm 0x02 is not Ed25519 (0x01)");
    msg[1] = CS_WIRE_TYPE_END;
    assert_int_equal(cs_sig_decode(msg, CS_WIRE_SIG_FIXED_LEN + 1, &s, &err), -1);
    assert_string_equal(err.msg, "SIG type 0x12");
}

/* The signed input, byte for byte as docs/PROTOCOL.md lays it out. */
static void test_input_layout(void **state)
{
    (void)state;
    cs_sig s = fields(0x01020304, "ab");
    memset(s.prev, 0xee, CS_SIG_LEN);
    uint8_t in[CS_SIG_INPUT_MAX];
    size_t n = cs_sig_input(&s, 0x1112131415161718ull, 0x2122232425262728ull, in);
    assert_int_equal(n, 20 + 1 + 2 + 4 + 8 + 8 + 32 + 64);
    assert_memory_equal(in, "corestream ledger v1", 20);
    assert_int_equal(in[20], 2);
    assert_memory_equal(in + 21, "ab", 2);
    static const uint8_t nums[] = {1, 2, 3, 4, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
                                   0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28};
    assert_memory_equal(in + 23, nums, sizeof nums);
    assert_memory_equal(in + 43, s.sha256, 32);
    assert_memory_equal(in + 75, s.prev, 64);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sign_encode_decode_verify),
        cmocka_unit_test(test_untrusted_and_several_keys),
        cmocka_unit_test(test_key_file_errors),
        cmocka_unit_test(test_decode_errors),
        cmocka_unit_test(test_input_layout),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
