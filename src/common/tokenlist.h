/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP's comma-separated lists of tokens (RFC 9110 5.6.1: `Connection: keep-alive, Upgrade`):
 * the one reading of them, for the server's request rules and the client's check of a 101. Pure;
 * any thread. */
#ifndef CS_COMMON_TOKENLIST_H
#define CS_COMMON_TOKENLIST_H

#include <stdbool.h>
#include <stddef.h>

/* Whether the list list[0..n) holds token, without regard to ASCII case: its elements are what
 * lies between commas, spaces and tabs around them dropped; empty elements are none. */
bool cs_list_has_token(const char *list, size_t n, const char *token);

#endif
