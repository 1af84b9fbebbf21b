/* SPDX-License-Identifier: Apache-2.0 */
/* The WebSocket opening handshake's proof (RFC 6455 4.2.2): Sec-WebSocket-Accept for a
 * Sec-WebSocket-Key. The one computation of it, for the server that answers (corestreamd's
 * routes) and the client that checks the answer (libremoteledger's handshake). Pure; any thread. */
#ifndef CS_WIRE_WSACCEPT_H
#define CS_WIRE_WSACCEPT_H

#include <stddef.h>

#define CS_WS_ACCEPT_LEN 28 /* base64 of a SHA-1 */

/* base64(SHA-1(key[0..key_len) + the RFC 6455 GUID)) into out: 28 characters and a NUL. When
 * OpenSSL cannot allocate its digest context, a wrong accept (of zero bytes), which the other end
 * refuses. */
void cs_ws_accept(const char *key, size_t key_len, char out[CS_WS_ACCEPT_LEN + 1]);

#endif
