/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger: signed ledgers (rl_options.trusted_keys_file; sigcheck.c) against the scripted
 * server (support/scriptserver.h), signed with keys made by the manual's openssl lines
 * (support/certs.h). With trusted keys every request asks for signatures (sig=1) and a ledger is
 * handed over only with a SIG a trusted key made over its bytes, for the session's signing run, in
 * its chain; an unsigned ledger, an untrusted key, bytes or fields that differ from what was
 * signed, another run, a broken chain each end the session with RL_ERR_SIGNATURE, its exact
 * message, a close 1008 "ledger signature refused", never retried, the ledger not handed over.
 * Without keys nothing is asked for, and a SIG a server sends anyway is accepted and ignored. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <xxhash.h>

#include "corestream/remoteledger.h"
#include "support/certs.h"
#include "support/rlclient.h"
#include "support/rlsuite.h"
#include "support/scriptserver.h"
#include "wire/ledgersig.h"

#define RUN_A "synthetic-7c31a2d9e0f4b816"
#define RUN_B "synthetic-0b5d2e55c1a3f9e4"
#define LEDGER_SIZE 1000

static cs_certs certs;
static cs_sig_signer *key, *other_key;

/* How one scripted ledger departs from an honest signer's. */
typedef struct how {
    const cs_sig_signer *by; /* NULL: no SIG at all */
    const char *run;         /* the run signed for (default RUN_A) */
    uint8_t fill;            /* the bytes sent; 0: the sequence's low byte */
    uint8_t signed_fill;     /* the bytes signed, when they differ from those sent */
    bool flip_sig;           /* one bit of the signature changed */
    bool wrong_prev;         /* a previous signature that is not the last one */
} how;

/* The chain the script signs along: the last signature made. */
static uint8_t last_sig[CS_SIG_LEN];
static bool have_last;

static void sha256(const uint8_t *p, size_t n, uint8_t out[CS_SIG_SHA_LEN])
{
    unsigned int len = 0;
    assert_int_equal(EVP_Digest(p, n, out, &len, EVP_sha256(), NULL), 1);
}

/* BEGIN, one raw CHUNK, the SIG (unless h->by is NULL), END: as a signing corestreamd sends a ledger
 * to a subscriber that asked for signatures. */
static void signed_ledger(ss_server *ss, uint32_t seq, how h)
{
    uint8_t body[LEDGER_SIZE], signed_body[LEDGER_SIZE];
    memset(body, h.fill ? h.fill : (int)(seq & 0xFF), sizeof body);
    memset(signed_body, h.signed_fill ? h.signed_fill : body[0], sizeof signed_body);
    uint64_t sum = XXH64(body, sizeof body, 0);
    ss_begin(ss, seq, 0);
    ss_chunk(ss, seq, 0, CS_CODEC_RAW, body, sizeof body);
    if (h.by) {
        const char *run = h.run ? h.run : RUN_A;
        cs_sig s = {.seq = seq, .run_len = (uint8_t)strlen(run)};
        memcpy(s.run, run, s.run_len);
        sha256(signed_body, sizeof signed_body, s.sha256);
        if (have_last)
            memcpy(s.prev, last_sig, CS_SIG_LEN);
        if (h.wrong_prev)
            s.prev[0] ^= 0x55;
        cs_err err;
        assert_int_equal(cs_sig_sign(h.by, &s, sizeof body, XXH64(signed_body, sizeof signed_body, 0), &err), 0);
        memcpy(last_sig, s.sig, CS_SIG_LEN);
        have_last = true;
        if (h.flip_sig)
            s.sig[10] ^= 1;
        uint8_t msg[CS_WIRE_SIG_MAX_LEN];
        ss_send_binary(ss, msg, cs_sig_encode(&s, msg));
    }
    ss_end(ss, seq, 1, sizeof body, 0, sum);
}

static ss_server *start(void)
{
    have_last = false;
    ss_server *ss = ss_start();
    ss_handshake_run(ss, "file-0123456789abcdef");
    return ss;
}

static rl_options trusting(const char *file)
{
    rl_options o;
    rl_options_init(&o);
    o.trusted_keys_file = file;
    o.idle_timeout_ns = 3000000000LL;
    return o;
}

/* Ledgers 1..3 honestly signed pass, and the request asked for signatures. */
static void test_signed_stream_passes(void **state)
{
    (void)state;
    ss_server *ss = start();
    for (uint32_t seq = 1; seq <= 3; seq++)
        signed_ledger(ss, seq, (how){.by = key});
    rl_options o = trusting(certs.sign_pub);
    collected c = {0};
    drain_expect(ss, &o, rl_bounded_range(1, 3), &c, RL_OK, 3, NULL);
    expect_sequences(&c, 1, 3);
    assert_string_equal(ss_target(ss, 0), "/stream?end=3&sig=1&start=1");
    collected_free(&c);
    ss_stop(ss);
}

/* Refusals: ledger 1 passes, ledger 2 is refused with the message; nothing is retried although
 * resume would allow it, and the connection is closed 1008. */
static void expect_refused(how bad, const char *msg)
{
    ss_server *ss = start();
    signed_ledger(ss, 1, (how){.by = key});
    signed_ledger(ss, 2, bad);
    ss_stall(ss);
    rl_options o = resume_options(3);
    o.trusted_keys_file = certs.sign_pub;
    o.idle_timeout_ns = 3000000000LL;
    collected c = {0};
    drain_expect(ss, &o, rl_bounded_range(1, 3), &c, RL_ERR_SIGNATURE, 1, msg);
    assert_int_equal(ss_connections(ss), 1);
    expect_client_close(ss, 0, 1008, "ledger signature refused");
    collected_free(&c);
    ss_stop(ss);
}

static void test_unsigned_ledger(void **state)
{
    (void)state;
    expect_refused((how){0}, "remoteledger: signature: ledger 2 is unsigned");
}

static void test_untrusted_key(void **state)
{
    (void)state;
    char hex[2 * CS_SIG_KEY_LEN + 1], msg[256];
    cs_sig_key_hex(cs_sig_signer_key(other_key), hex);
    snprintf(msg, sizeof msg, "remoteledger: signature: ledger 2: signed by %s, which is not a trusted key", hex);
    expect_refused((how){.by = other_key}, msg);
}

/* Bytes other than those signed, though their XXH64 and length in END are right for what came. */
static void test_forged_bytes(void **state)
{
    (void)state;
    expect_refused((how){.by = key, .fill = 0x66, .signed_fill = 0x02},
                   "remoteledger: signature: ledger 2: bytes differ from the signed SHA-256");
}

static void test_bad_signature(void **state)
{
    (void)state;
    expect_refused((how){.by = key, .flip_sig = true}, "remoteledger: signature: ledger 2: signature does not verify");
}

static void test_broken_chain(void **state)
{
    (void)state;
    expect_refused((how){.by = key, .wrong_prev = true}, "remoteledger: signature: ledger 2 does not chain to ledger 1");
}

static void test_another_signing_run(void **state)
{
    (void)state;
    expect_refused((how){.by = key, .run = RUN_B},
                   "remoteledger: signature: ledger 2: signed for run " RUN_B ", the session's ledgers for run " RUN_A);
}

/* Key rotation: a file of both keys passes a stream whose signer changes key mid-chain; a signer
 * that starts its chain again (no previous signature) passes too. */
static void test_rotation_and_chain_restart(void **state)
{
    (void)state;
    ss_server *ss = start();
    signed_ledger(ss, 1, (how){.by = key});
    signed_ledger(ss, 2, (how){.by = other_key});
    have_last = false; /* the signer lost its ring: ledger 3 has no previous signature */
    signed_ledger(ss, 3, (how){.by = other_key});
    rl_options o = trusting(certs.both_pub);
    collected c = {0};
    drain_expect(ss, &o, rl_bounded_range(1, 3), &c, RL_OK, 3, NULL);
    collected_free(&c);
    ss_stop(ss);
}

/* allow_run_change: a new signing run is followed, its chain starting afresh. */
static void test_allow_run_change_follows_signing_run(void **state)
{
    (void)state;
    ss_server *ss = start();
    signed_ledger(ss, 1, (how){.by = key});
    have_last = false;
    signed_ledger(ss, 2, (how){.by = key, .run = RUN_B});
    rl_options o = trusting(certs.sign_pub);
    o.allow_run_change = true;
    collected c = {0};
    drain_expect(ss, &o, rl_bounded_range(1, 2), &c, RL_OK, 2, NULL);
    collected_free(&c);
    ss_stop(ss);
}

/* Without keys: no sig=1, and a SIG sent anyway changes nothing. */
static void test_without_keys_sig_is_ignored(void **state)
{
    (void)state;
    ss_server *ss = start();
    signed_ledger(ss, 1, (how){.by = key});
    signed_ledger(ss, 2, (how){.by = other_key, .flip_sig = true});
    collected c = {0};
    drain_expect(ss, NULL, rl_bounded_range(1, 2), &c, RL_OK, 2, NULL);
    assert_string_equal(ss_target(ss, 0), "/stream?end=2&start=1");
    collected_free(&c);
    ss_stop(ss);
}

static void test_key_file_errors(void **state)
{
    (void)state;
    static const char *files[3];
    files[0] = "/nonexistent/keys.pub";
    files[1] = certs.sign_key;
    files[2] = certs.ec_pub;
    const char *want[3] = {"No such file or directory", "no PEM public key in it", "key 1 is an id-ecPublicKey key, not Ed25519"};
    for (int i = 0; i < 3; i++) {
        rl_options o = trusting(files[i]);
        rl_stream *s;
        assert_int_equal(rl_stream_new(&s, "ws://127.0.0.1:1/stream", &o), RL_ERR_INVALID);
        char msg[PATH_MAX + 128];
        snprintf(msg, sizeof msg, "remoteledger: trusted keys \"%s\": %s", files[i], want[i]);
        assert_string_equal(rl_stream_error(s), msg);
        rl_stream_free(s);
    }
    assert_string_equal(rl_result_name(RL_ERR_SIGNATURE), "RL_ERR_SIGNATURE");
}

int main(void)
{
    cs_err err;
    if (cs_certs_make(&certs) || cs_sig_signer_load(certs.sign_key, &key, &err) ||
        cs_sig_signer_load(certs.other_sign_key, &other_key, &err))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_signed_stream_passes),
        cmocka_unit_test(test_unsigned_ledger),
        cmocka_unit_test(test_untrusted_key),
        cmocka_unit_test(test_forged_bytes),
        cmocka_unit_test(test_bad_signature),
        cmocka_unit_test(test_broken_chain),
        cmocka_unit_test(test_another_signing_run),
        cmocka_unit_test(test_rotation_and_chain_restart),
        cmocka_unit_test(test_allow_run_change_follows_signing_run),
        cmocka_unit_test(test_without_keys_sig_is_ignored),
        cmocka_unit_test(test_key_file_errors),
    };
    int failed = RLSUITE_RUN(tests);
    cs_sig_signer_free(key);
    cs_sig_signer_free(other_key);
    cs_certs_remove(&certs);
    return failed;
}
