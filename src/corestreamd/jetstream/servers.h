/* SPDX-License-Identifier: Apache-2.0 */
/* NATS server lists: --jetstream-url and --jetstream-source-url take comma-separated URLs, which
 * nats.c 3.4.1 does not split itself (natsOptions_SetURL with "a,b" fails to connect even when
 * both are up), so they are split here and handed over as a server pool. */
#ifndef CS_CORESTREAMD_JETSTREAM_SERVERS_H
#define CS_CORESTREAMD_JETSTREAM_SERVERS_H

#include <nats/nats.h>

#define CS_JS_MAX_SERVERS 16

/* Splits urls on commas (spaces around each trimmed, empties dropped) and sets them as the pool
 * of opts (natsOptions_SetServers). NATS_INVALID_ARG when no URL or more than CS_JS_MAX_SERVERS;
 * otherwise nats.c's status. */
natsStatus cs_js_set_servers(natsOptions *opts, const char *urls);

#endif
