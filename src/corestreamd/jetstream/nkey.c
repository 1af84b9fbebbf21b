/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/jetstream/nkey.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

#include "common/secretfile.h"
#include "corestreamd/jetstream/auth.h"

#define PREFIX_SEED (18 << 3) /* 'S' */
#define PREFIX_USER (20 << 3) /* 'U' */

static const char k_b32[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

static uint16_t crc16(const uint8_t *p, size_t n)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    return crc;
}

static void b32_encode(const uint8_t *p, size_t n, char *out)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        acc = acc << 8 | p[i];
        bits += 8;
        while (bits >= 5) {
            out[o++] = k_b32[(acc >> (bits - 5)) & 31];
            bits -= 5;
        }
    }
    if (bits > 0)
        out[o++] = k_b32[(acc << (5 - bits)) & 31];
    out[o] = '\0';
}

/* Returns the bytes decoded, or -1 on a character outside the alphabet or too many. */
static int b32_decode(const char *s, uint8_t *out, size_t cap)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (; *s; s++) {
        const char *at = strchr(k_b32, *s);
        if (!at)
            return -1;
        acc = acc << 5 | (uint32_t)(at - k_b32);
        bits += 5;
        if (bits >= 8) {
            if (o == cap)
                return -1;
            out[o++] = (uint8_t)(acc >> (bits - 8));
            bits -= 8;
        }
    }
    return (int)o;
}

static void encode(const uint8_t *prefix, size_t np, const uint8_t key[32], char out[CS_NKEY_TEXT_MAX])
{
    uint8_t raw[2 + 32 + 2];
    memcpy(raw, prefix, np);
    memcpy(raw + np, key, 32);
    uint16_t crc = crc16(raw, np + 32);
    raw[np + 32] = (uint8_t)(crc & 0xff);
    raw[np + 33] = (uint8_t)(crc >> 8);
    b32_encode(raw, np + 34, out);
    OPENSSL_cleanse(raw, sizeof raw);
}

void cs_nkey_user_public(const uint8_t key[32], char out[CS_NKEY_TEXT_MAX])
{
    const uint8_t prefix[1] = {PREFIX_USER};
    encode(prefix, 1, key, out);
}

void cs_nkey_user_seed(const uint8_t seed[32], char out[CS_NKEY_TEXT_MAX])
{
    const uint8_t prefix[2] = {PREFIX_SEED | PREFIX_USER >> 5, (PREFIX_USER & 31) << 3};
    encode(prefix, 2, seed, out);
}

int cs_nkey_decode_user_seed(const char *text, uint8_t seed[32], cs_err *err)
{
    uint8_t raw[40];
    int n = b32_decode(text, raw, sizeof raw);
    int rc = 0;
    if (n != 36)
        rc = cs_err_set(err, 0, "not an nkey seed (58 characters of A-Z and 2-7, starting with SU)");
    else if (crc16(raw, 34) != (uint16_t)(raw[34] | raw[35] << 8))
        rc = cs_err_set(err, 0, "not an nkey seed: its checksum does not match");
    else if ((raw[0] & 0xf8) != PREFIX_SEED || (((raw[0] & 7) << 5) | ((raw[1] & 0xf8) >> 3)) != PREFIX_USER)
        rc = cs_err_set(err, 0, "not a user's nkey seed (SU…): NATS users authenticate with user keys");
    else
        memcpy(seed, raw + 2, 32);
    OPENSSL_cleanse(raw, sizeof raw);
    return rc;
}

static int derive_public(const uint8_t seed[32], uint8_t pub[32])
{
    EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, 32);
    size_t len = 32;
    int ok = k && EVP_PKEY_get_raw_public_key(k, pub, &len) == 1 && len == 32;
    EVP_PKEY_free(k);
    return ok ? 0 : -1;
}

int cs_nkey_public_from_seed_file(const char *path, char out[CS_NKEY_TEXT_MAX], cs_err *err)
{
    char line[256];
    if (cs_read_secret_line(path, line, sizeof line, err) != 0)
        return cs_err_prefix(err, "%s: ", path);
    uint8_t seed[32], pub[32];
    int rc = cs_nkey_decode_user_seed(line, seed, err);
    OPENSSL_cleanse(line, sizeof line);
    if (rc == 0 && derive_public(seed, pub) != 0)
        rc = cs_err_set(err, 0, "cannot derive the public key from the seed (OpenSSL's Ed25519)");
    OPENSSL_cleanse(seed, sizeof seed);
    if (rc != 0)
        return cs_err_prefix(err, "%s: ", path);
    cs_nkey_user_public(pub, out);
    return 0;
}
