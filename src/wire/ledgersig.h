/* SPDX-License-Identifier: Apache-2.0 */
/* Signed ledgers (docs/PROTOCOL.md, "Signed ledgers"): the SIG message, what its signature
 * covers, Ed25519 keys in PEM files, signing and verifying. Shared by corestreamd (the signer,
 * the ring, the edge) and libremoteledger (the verifier); OpenSSL's libcrypto does the
 * cryptography.
 *
 * The signature covers, in this order (cs_sig_input):
 *   "corestream ledger v1" (20 bytes) | run length (1 byte) | run | seq (u32) | length (u64) |
 *   XXH64 (u64) | SHA-256 of the raw ledger (32) | previous ledger's signature (64, zeros: none)
 * all integers big-endian. The run is the signer's run token; the previous signature chains a
 * ledger to the one before it as the signer published it.
 *
 * Thread use: everything here is a pure function of its arguments, or works on an object the
 * caller owns (a key set is read-only once loaded and may be shared by threads). */
#ifndef CS_WIRE_LEDGERSIG_H
#define CS_WIRE_LEDGERSIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestream/wire.h"

#define CS_SIG_KEY_LEN 32
#define CS_SIG_LEN 64
#define CS_SIG_SHA_LEN 32
#define CS_SIG_DOMAIN "corestream ledger v1"
#define CS_SIG_INPUT_MAX (20 + 1 + CS_WIRE_SIG_RUN_MAX + 4 + 8 + 8 + CS_SIG_SHA_LEN + CS_SIG_LEN)

/* A decoded SIG message. run is not NUL-terminated. */
typedef struct cs_sig {
    uint32_t seq;
    uint8_t alg;
    uint8_t key[CS_SIG_KEY_LEN];
    uint8_t sha256[CS_SIG_SHA_LEN];
    uint8_t prev[CS_SIG_LEN];
    uint8_t sig[CS_SIG_LEN];
    uint8_t run_len;
    char run[CS_WIRE_SIG_RUN_MAX];
} cs_sig;

/* Encodes s into out (CS_WIRE_SIG_MAX_LEN bytes hold any); returns the message length. */
size_t cs_sig_encode(const cs_sig *s, uint8_t out[CS_WIRE_SIG_MAX_LEN]);

/* Decodes one SIG message. Errors (kind 0): `SIG is N bytes, want 200 to 263`, `SIG algorithm
 * 0xNN is not Ed25519 (0x01)`, `SIG type 0xNN` for another message. */
int cs_sig_decode(const uint8_t *msg, size_t len, cs_sig *out, cs_err *err);

/* What the signature covers (the layout above) for s's run, seq and prev with the ledger's length
 * and XXH64 and s->sha256. Returns the input's length. */
size_t cs_sig_input(const cs_sig *s, uint64_t len, uint64_t xxh64, uint8_t out[CS_SIG_INPUT_MAX]);

/* True when every byte of prev is 0 (the signer had no previous signature). */
bool cs_sig_prev_none(const cs_sig *s);

/* Lower-case hex of a public key (64 characters and a NUL), for logs. */
void cs_sig_key_hex(const uint8_t key[CS_SIG_KEY_LEN], char out[2 * CS_SIG_KEY_LEN + 1]);

/* ---- the signer's key ---------------------------------------------------------------------- */

typedef struct cs_sig_signer cs_sig_signer;

/* Loads an Ed25519 private key from a PEM file (`openssl genpkey -algorithm ed25519`). Errors
 * name the file: `signing key "<path>": <strerror>`, `…: no PEM private key in it`, `…: an
 * <type> key, not Ed25519`. *out is freed with cs_sig_signer_free. */
int cs_sig_signer_load(const char *path, cs_sig_signer **out, cs_err *err);
void cs_sig_signer_free(cs_sig_signer *k);
/* The raw public key of the signer. */
const uint8_t *cs_sig_signer_key(const cs_sig_signer *k);
/* Signs the input of s (cs_sig_input) with k: fills s->alg, s->key and s->sig. The caller has
 * set seq, run, sha256 and prev. Returns 0, or -1 (libcrypto failed; err says why). */
int cs_sig_sign(const cs_sig_signer *k, cs_sig *s, uint64_t len, uint64_t xxh64, cs_err *err);

/* ---- trusted keys ------------------------------------------------------------------------- */

typedef struct cs_sig_keyset cs_sig_keyset;

/* Loads every PEM public key in a file (one or more `-----BEGIN PUBLIC KEY-----` blocks, e.g.
 * from `openssl pkey -pubout`); all must be Ed25519. Errors name the file: `trusted keys
 * "<path>": <strerror>`, `…: no PEM public key in it`, `…: key N is an <type> key, not Ed25519`,
 * `…: more than 64 keys`. */
int cs_sig_keyset_load(const char *path, cs_sig_keyset **out, cs_err *err);
void cs_sig_keyset_free(cs_sig_keyset *ks);
size_t cs_sig_keyset_count(const cs_sig_keyset *ks);

/* Verifies a SIG against the ledger it came with: the key is one of ks, sha256 is the ledger's
 * (the caller computed it over the bytes it assembled), and the signature covers seq, len, xxh64,
 * run and prev. Errors (kind 0), the ledger named by the caller's prefix:
 * `signed by <hex>, which is not a trusted key`, `bytes differ from the signed SHA-256`,
 * `signature does not verify`. */
int cs_sig_verify(const cs_sig_keyset *ks, const cs_sig *s, uint64_t len, uint64_t xxh64,
                  const uint8_t sha256[CS_SIG_SHA_LEN], cs_err *err);

/* ---- a verifier's chain ------------------------------------------------------------------- */

/* What a verifier keeps between ledgers: the signing run (that of its first signed ledger) and
 * the last signature it accepted. Zero it to start. */
typedef struct cs_sig_chain {
    uint8_t run_len; /* 0: no signed ledger yet */
    char run[CS_WIRE_SIG_RUN_MAX];
    bool have_prev;
    uint32_t prev_seq;
    uint8_t prev[CS_SIG_LEN];
} cs_sig_chain;

/* The SIG message msg of ledger seq (length len, XXH64 xxh64, SHA-256 sha256 as the verifier
 * computed them) against the trusted keys ks and the chain: cs_sig_verify's checks, then the run
 * (another signing run than the chain's is refused unless allow_run_change, which starts the chain
 * afresh on it) and the chain (when the chain holds ledger seq - 1, a SIG whose previous signature
 * is not all zero must carry that ledger's signature). 0 with the chain advanced, or -1 with err
 * (kind 0), worded to follow "…: ": `ledger N: <cs_sig_decode's or cs_sig_verify's message>`,
 * `ledger N: SIG is for ledger M`, `ledger N: signed for run R2, the session's ledgers for run
 * R1`, `ledger N does not chain to ledger N-1`. */
int cs_sig_chain_check(cs_sig_chain *c, const cs_sig_keyset *ks, const uint8_t *msg, size_t n, uint32_t seq,
                       uint64_t len, uint64_t xxh64, const uint8_t sha256[CS_SIG_SHA_LEN], bool allow_run_change,
                       cs_err *err);

#endif
