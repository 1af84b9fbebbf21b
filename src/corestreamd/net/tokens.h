/* SPDX-License-Identifier: Apache-2.0 */
/* Bearer tokens for /stream (--auth-tokens): the file that names them, and the constant-time
 * lookup of a presented token.
 *
 * File format: one `name token` pair per line, separated by spaces or tabs; blank lines and lines
 * whose first non-blank character is '#' are ignored. A name is 1-64 printable ASCII characters
 * without spaces and appears once. A token is 32-512 characters of RFC 6750's b64token alphabet
 * (A-Z a-z 0-9 - . _ ~ + / and trailing '='), and appears once. At least one pair is required.
 *
 * Only SHA-256 digests of the tokens are kept after loading; names are kept for the logs (a token
 * never appears in a log line). A table is immutable once loaded: the I/O thread reads it, and a
 * reload builds a new one. */
#ifndef CS_CORESTREAMD_TOKENS_H
#define CS_CORESTREAMD_TOKENS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define CS_TOKEN_MIN 32
#define CS_TOKEN_MAX 512
#define CS_TOKEN_NAME_MAX 64
#define CS_TOKEN_DIGEST_LEN 32

typedef struct cs_tokens cs_tokens;

/* Parses the file's bytes. Errors name the line and what is wrong, e.g.
 * `line 3: token for "rpc-a" is 12 characters; 32 to 512 are required`, `line 5: name "rpc-a"
 * appears twice`, `line 2: want "name token"`, `no tokens`. */
int cs_tokens_parse(cs_tokens **out, const char *data, size_t len, cs_err *err);

/* Reads and parses path (at most 1 MiB): errors are `--auth-tokens <path>: <reason>`. */
int cs_tokens_load(cs_tokens **out, const char *path, cs_err *err);

void cs_tokens_free(cs_tokens *t);
size_t cs_tokens_count(const cs_tokens *t);

/* The name of the entry whose token is exactly token[0..len), or NULL. The time taken does not
 * depend on which entry matches or on how much of a token matches: every entry's digest is
 * compared in full. On a match digest receives the token's SHA-256 (for cs_tokens_has). */
const char *cs_tokens_match(const cs_tokens *t, const char *token, size_t len,
                            uint8_t digest[CS_TOKEN_DIGEST_LEN]);

/* Whether a token with this digest is still in the table (a reload revokes the others). */
bool cs_tokens_has(const cs_tokens *t, const uint8_t digest[CS_TOKEN_DIGEST_LEN]);

/* The token of an `Authorization` header value: "Bearer <token>", the scheme without regard to
 * case, then one or more spaces. Returns false when the value is not of that form. */
bool cs_bearer_token(const char *header, const char **token, size_t *len);

#endif
