/* SPDX-License-Identifier: Apache-2.0 */
/* NATS nkeys (Ed25519 keys in NATS's text form), as far as corestreamd needs them: a user seed
 * read from a file (--jetstream-nkey-seed) and the public key it stands for, which nats.c's
 * natsOptions_SetNKeyFromSeed wants beside the seed file but cannot derive itself.
 *
 * The text form (nats-io/nkeys): base32 (RFC 4648, no padding) of the prefix byte(s), the 32
 * key bytes and a CRC-16/XMODEM of those, little endian. A seed has two prefix bytes, 'S' and the
 * kind ("SU…" for a user); a public key one ("U…"). Pure functions but for the file read and
 * OpenSSL's Ed25519; any thread. */
#ifndef CS_CORESTREAMD_JETSTREAM_NKEY_H
#define CS_CORESTREAMD_JETSTREAM_NKEY_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* A user seed is 58 characters, a public key 56; with room for the NUL. */
#define CS_NKEY_TEXT_MAX 64

/* Encodes a user's Ed25519 public key (32 bytes) as "U…" and its private seed as "SU…". */
void cs_nkey_user_public(const uint8_t key[32], char out[CS_NKEY_TEXT_MAX]);
void cs_nkey_user_seed(const uint8_t seed[32], char out[CS_NKEY_TEXT_MAX]);

/* Decodes a "SU…" user seed into its 32 private bytes. 0, or -1 with err saying what is wrong
 * with it (never quoting the seed). */
int cs_nkey_decode_user_seed(const char *text, uint8_t seed[32], cs_err *err);

/* Reads the seed file (its first non-empty line, blanks trimmed) and derives the user's public
 * key. 0, or -1 with err "<path>: …" (the system's cause for an unreadable file, or what is wrong
 * with its content). The seed's bytes are wiped before returning. */
int cs_nkey_public_from_seed_file(const char *path, char out[CS_NKEY_TEXT_MAX], cs_err *err);

#endif
