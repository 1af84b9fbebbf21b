/* SPDX-License-Identifier: Apache-2.0 */
/* The NATS connection options the publisher and the edge share: the server pool, a client name,
 * the connect timeout, the credentials and TLS of jetstream/auth.h, and an asynchronous error
 * handler that logs what NATS reports after connecting (a permission violation, a slow
 * consumer) as WARN `jetstream NATS error`. Each side then adds its own reconnect policy and
 * callbacks. One mechanism for both, so a flag means the same on a core and on an edge. */
#ifndef CS_CORESTREAMD_JETSTREAM_CONNECT_H
#define CS_CORESTREAMD_JETSTREAM_CONNECT_H

#include <nats/nats.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "corestreamd/jetstream/auth.h"

typedef struct cs_js_conn_config {
    const char *urls;       /* comma-separated */
    const char *name;       /* the client name the server shows (and the log's `client`) */
    int64_t timeout_ms;     /* per connection attempt */
    const cs_js_auth *auth; /* NULL: none */
} cs_js_conn_config;

/* New options with the above set. On failure -1 with err naming the flag and file that could not
 * be used (`--jetstream-tls-ca F: …`, `--jetstream-nkey-seed F: …`), *out NULL. name must
 * outlive the options (the error handler logs it). */
int cs_js_options_new(natsOptions **out, const cs_js_conn_config *c, cs_err *err);

/* Whether a failed connection was refused for its credentials or its TLS, which no retry cures. */
bool cs_js_refused(natsStatus s);

/* The cause of a failed connect, for an operator: for a refusal (authorization violation, TLS
 * failure, TLS required or not offered, a TLS connection closed in the handshake when tls says
 * TLS was asked for) what happened and which flags to check, then nats.c's own text; otherwise
 * nats.c's status and last error. Into buf; returns buf. */
const char *cs_js_connect_cause(natsStatus s, bool tls, char *buf, size_t len);

#endif
