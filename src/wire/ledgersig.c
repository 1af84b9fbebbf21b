/* SPDX-License-Identifier: Apache-2.0 */
/* Signed ledgers: the SIG message, the signed input, Ed25519 keys (ledgersig.h). */
#include "wire/ledgersig.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "wire/wire.h"

#define KEYSET_MAX 64

size_t cs_sig_encode(const cs_sig *s, uint8_t out[CS_WIRE_SIG_MAX_LEN])
{
    out[0] = CS_WIRE_VERSION;
    out[1] = CS_WIRE_TYPE_SIG;
    cs_wire_put_u32(out + 2, s->seq);
    out[6] = s->alg;
    memcpy(out + 7, s->key, CS_SIG_KEY_LEN);
    memcpy(out + 39, s->sha256, CS_SIG_SHA_LEN);
    memcpy(out + 71, s->prev, CS_SIG_LEN);
    memcpy(out + 135, s->sig, CS_SIG_LEN);
    memcpy(out + CS_WIRE_SIG_FIXED_LEN, s->run, s->run_len);
    return CS_WIRE_SIG_FIXED_LEN + s->run_len;
}

int cs_sig_decode(const uint8_t *msg, size_t len, cs_sig *out, cs_err *err)
{
    if (len >= 2 && msg[1] != CS_WIRE_TYPE_SIG)
        return cs_err_set(err, 0, "SIG type 0x%02x", msg[1]);
    if (len <= CS_WIRE_SIG_FIXED_LEN || len > CS_WIRE_SIG_MAX_LEN)
        return cs_err_set(err, 0, "SIG is %zu bytes, want %d to %d", len, CS_WIRE_SIG_FIXED_LEN + 1,
                          CS_WIRE_SIG_MAX_LEN);
    if (msg[6] != CS_SIG_ALG_ED25519)
        return cs_err_set(err, 0, "SIG algorithm 0x%02x is not Ed25519 (0x%02x)", msg[6], CS_SIG_ALG_ED25519);
    memset(out, 0, sizeof *out);
    out->seq = cs_wire_get_u32(msg + 2);
    out->alg = msg[6];
    memcpy(out->key, msg + 7, CS_SIG_KEY_LEN);
    memcpy(out->sha256, msg + 39, CS_SIG_SHA_LEN);
    memcpy(out->prev, msg + 71, CS_SIG_LEN);
    memcpy(out->sig, msg + 135, CS_SIG_LEN);
    out->run_len = (uint8_t)(len - CS_WIRE_SIG_FIXED_LEN);
    memcpy(out->run, msg + CS_WIRE_SIG_FIXED_LEN, out->run_len);
    return 0;
}

size_t cs_sig_input(const cs_sig *s, uint64_t len, uint64_t xxh64, uint8_t out[CS_SIG_INPUT_MAX])
{
    size_t n = strlen(CS_SIG_DOMAIN);
    memcpy(out, CS_SIG_DOMAIN, n);
    out[n++] = s->run_len;
    memcpy(out + n, s->run, s->run_len);
    n += s->run_len;
    cs_wire_put_u32(out + n, s->seq);
    cs_wire_put_u64(out + n + 4, len);
    cs_wire_put_u64(out + n + 12, xxh64);
    n += 20;
    memcpy(out + n, s->sha256, CS_SIG_SHA_LEN);
    n += CS_SIG_SHA_LEN;
    memcpy(out + n, s->prev, CS_SIG_LEN);
    return n + CS_SIG_LEN;
}

bool cs_sig_prev_none(const cs_sig *s)
{
    uint8_t any = 0;
    for (size_t i = 0; i < CS_SIG_LEN; i++)
        any |= s->prev[i];
    return any == 0;
}

void cs_sig_key_hex(const uint8_t key[CS_SIG_KEY_LEN], char out[2 * CS_SIG_KEY_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < CS_SIG_KEY_LEN; i++) {
        out[2 * i] = hex[key[i] >> 4];
        out[2 * i + 1] = hex[key[i] & 15];
    }
    out[2 * CS_SIG_KEY_LEN] = '\0';
}

/* libcrypto's first queued error, for a message; the queue is cleared. */
static const char *ssl_reason(char *buf, size_t len)
{
    unsigned long e = ERR_get_error();
    ERR_clear_error();
    if (!e)
        return "unknown libcrypto error";
    const char *r = ERR_reason_error_string(e);
    snprintf(buf, len, "%s", r ? r : "unknown libcrypto error");
    return buf;
}

static const char *key_type(const EVP_PKEY *k)
{
    const char *name = OBJ_nid2sn(EVP_PKEY_get_id(k));
    return name ? name : "unknown";
}

/* ---- the signer ------------------------------------------------------------------------------ */

struct cs_sig_signer {
    EVP_PKEY *pkey;
    uint8_t pub[CS_SIG_KEY_LEN];
};

int cs_sig_signer_load(const char *path, cs_sig_signer **out, cs_err *err)
{
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f)
        return cs_err_set(err, 0, "signing key \"%s\": %s", path, strerror(errno));
    EVP_PKEY *pkey = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    ERR_clear_error();
    if (!pkey)
        return cs_err_set(err, 0, "signing key \"%s\": no PEM private key in it", path);
    if (EVP_PKEY_get_id(pkey) != EVP_PKEY_ED25519) {
        cs_err_set(err, 0, "signing key \"%s\": an %s key, not Ed25519", path, key_type(pkey));
        EVP_PKEY_free(pkey);
        return -1;
    }
    cs_sig_signer *k = calloc(1, sizeof *k);
    size_t n = CS_SIG_KEY_LEN;
    if (!k || EVP_PKEY_get_raw_public_key(pkey, k->pub, &n) != 1 || n != CS_SIG_KEY_LEN) {
        free(k);
        EVP_PKEY_free(pkey);
        return cs_err_set(err, 0, "signing key \"%s\": cannot read its public key", path);
    }
    k->pkey = pkey;
    *out = k;
    return 0;
}

void cs_sig_signer_free(cs_sig_signer *k)
{
    if (!k)
        return;
    EVP_PKEY_free(k->pkey);
    free(k);
}

const uint8_t *cs_sig_signer_key(const cs_sig_signer *k) { return k->pub; }

int cs_sig_sign(const cs_sig_signer *k, cs_sig *s, uint64_t len, uint64_t xxh64, cs_err *err)
{
    uint8_t in[CS_SIG_INPUT_MAX];
    s->alg = CS_SIG_ALG_ED25519;
    memcpy(s->key, k->pub, CS_SIG_KEY_LEN);
    size_t n = cs_sig_input(s, len, xxh64, in);
    size_t siglen = CS_SIG_LEN;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestSignInit(ctx, NULL, NULL, NULL, k->pkey) == 1 &&
             EVP_DigestSign(ctx, s->sig, &siglen, in, n) == 1 && siglen == CS_SIG_LEN;
    EVP_MD_CTX_free(ctx);
    if (!ok) {
        char why[128];
        return cs_err_set(err, 0, "signing ledger %u: %s", s->seq, ssl_reason(why, sizeof why));
    }
    return 0;
}

/* ---- trusted keys ---------------------------------------------------------------------------- */

struct cs_sig_keyset {
    size_t n;
    EVP_PKEY *pkey[KEYSET_MAX];
    uint8_t pub[KEYSET_MAX][CS_SIG_KEY_LEN];
};

void cs_sig_keyset_free(cs_sig_keyset *ks)
{
    if (!ks)
        return;
    for (size_t i = 0; i < ks->n; i++)
        EVP_PKEY_free(ks->pkey[i]);
    free(ks);
}

size_t cs_sig_keyset_count(const cs_sig_keyset *ks) { return ks ? ks->n : 0; }

/* Adds one key read from the file; -1 with err when it is not Ed25519 or the set is full. */
static int keyset_add(cs_sig_keyset *ks, EVP_PKEY *pkey, const char *path, cs_err *err)
{
    if (EVP_PKEY_get_id(pkey) != EVP_PKEY_ED25519) {
        cs_err_set(err, 0, "trusted keys \"%s\": key %zu is an %s key, not Ed25519", path, ks->n + 1,
                   key_type(pkey));
        EVP_PKEY_free(pkey);
        return -1;
    }
    if (ks->n == KEYSET_MAX) {
        EVP_PKEY_free(pkey);
        return cs_err_set(err, 0, "trusted keys \"%s\": more than %d keys", path, KEYSET_MAX);
    }
    size_t n = CS_SIG_KEY_LEN;
    if (EVP_PKEY_get_raw_public_key(pkey, ks->pub[ks->n], &n) != 1 || n != CS_SIG_KEY_LEN) {
        EVP_PKEY_free(pkey);
        return cs_err_set(err, 0, "trusted keys \"%s\": cannot read key %zu", path, ks->n + 1);
    }
    ks->pkey[ks->n++] = pkey;
    return 0;
}

int cs_sig_keyset_load(const char *path, cs_sig_keyset **out, cs_err *err)
{
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f)
        return cs_err_set(err, 0, "trusted keys \"%s\": %s", path, strerror(errno));
    cs_sig_keyset *ks = calloc(1, sizeof *ks);
    if (!ks) {
        fclose(f);
        return cs_err_set(err, 0, "trusted keys \"%s\": out of memory", path);
    }
    EVP_PKEY *pkey;
    int rc = 0;
    while (rc == 0 && (pkey = PEM_read_PUBKEY(f, NULL, NULL, NULL)) != NULL)
        rc = keyset_add(ks, pkey, path, err);
    fclose(f);
    ERR_clear_error(); /* the read that ended the loop queued "no start line" */
    if (rc == 0 && ks->n == 0)
        rc = cs_err_set(err, 0, "trusted keys \"%s\": no PEM public key in it", path);
    if (rc != 0) {
        cs_sig_keyset_free(ks);
        return -1;
    }
    *out = ks;
    return 0;
}

int cs_sig_verify(const cs_sig_keyset *ks, const cs_sig *s, uint64_t len, uint64_t xxh64,
                  const uint8_t sha256[CS_SIG_SHA_LEN], cs_err *err)
{
    EVP_PKEY *pkey = NULL;
    for (size_t i = 0; i < ks->n && !pkey; i++)
        if (memcmp(ks->pub[i], s->key, CS_SIG_KEY_LEN) == 0)
            pkey = ks->pkey[i];
    if (!pkey) {
        char hex[2 * CS_SIG_KEY_LEN + 1];
        cs_sig_key_hex(s->key, hex);
        return cs_err_set(err, 0, "signed by %s, which is not a trusted key", hex);
    }
    if (memcmp(sha256, s->sha256, CS_SIG_SHA_LEN) != 0)
        return cs_err_set(err, 0, "bytes differ from the signed SHA-256");
    uint8_t in[CS_SIG_INPUT_MAX];
    size_t n = cs_sig_input(s, len, xxh64, in);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pkey) == 1 &&
             EVP_DigestVerify(ctx, s->sig, CS_SIG_LEN, in, n) == 1;
    EVP_MD_CTX_free(ctx);
    ERR_clear_error();
    if (!ok)
        return cs_err_set(err, 0, "signature does not verify");
    return 0;
}

/* ---- a verifier's chain ---------------------------------------------------------------------- */

/* The run s was signed for against the chain's: the first signed ledger sets it; another later is
 * refused unless allow_run_change, which restarts the chain on the new run. */
static int chain_run(cs_sig_chain *c, const cs_sig *s, bool allow_run_change, cs_err *err)
{
    bool same = c->run_len == s->run_len && memcmp(c->run, s->run, s->run_len) == 0;
    if (c->run_len && !same && !allow_run_change)
        return cs_err_set(err, 0, "ledger %u: signed for run %.*s, the session's ledgers for run %.*s", s->seq,
                          (int)s->run_len, s->run, (int)c->run_len, c->run);
    if (!same) {
        c->run_len = s->run_len;
        memcpy(c->run, s->run, s->run_len);
        c->have_prev = false;
    }
    return 0;
}

int cs_sig_chain_check(cs_sig_chain *c, const cs_sig_keyset *ks, const uint8_t *msg, size_t n, uint32_t seq,
                       uint64_t len, uint64_t xxh64, const uint8_t sha256[CS_SIG_SHA_LEN], bool allow_run_change,
                       cs_err *err)
{
    cs_sig s;
    cs_err why;
    if (cs_sig_decode(msg, n, &s, &why) || cs_sig_verify(ks, &s, len, xxh64, sha256, &why))
        return cs_err_set(err, 0, "ledger %u: %s", seq, why.msg);
    if (s.seq != seq)
        return cs_err_set(err, 0, "ledger %u: SIG is for ledger %u", seq, s.seq);
    if (chain_run(c, &s, allow_run_change, err))
        return -1;
    /* A zero previous signature is the signer saying it had none (its first ledger, or a ring
     * reset): the chain starts again there. */
    if (c->have_prev && c->prev_seq + 1 == seq && !cs_sig_prev_none(&s) && memcmp(c->prev, s.prev, CS_SIG_LEN) != 0)
        return cs_err_set(err, 0, "ledger %u does not chain to ledger %u", seq, c->prev_seq);
    c->have_prev = true;
    c->prev_seq = seq;
    memcpy(c->prev, s.sig, CS_SIG_LEN);
    return 0;
}
