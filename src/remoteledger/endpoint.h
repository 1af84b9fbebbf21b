/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger internals: the subscription URL (rl_stream_new in remoteledger.h) and the
 * per-connection limits.
 *
 * The URL is parsed once, when the stream is created, with Go's net/url rules (the prototype's
 * messages quote its errors), and turned into an endpoint per call: the range owns the start and
 * end query parameters, every other parameter survives, and the query is re-encoded with its keys
 * sorted the way url.Values.Encode does it. */
#ifndef RLI_ENDPOINT_H
#define RLI_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestream/remoteledger.h"

/* A parsed, validated stream URL (the URL rules of rl_stream_new). All strings are heap copies. */
typedef struct rli_url {
    bool tls;         /* wss (or https) */
    char *scheme;     /* "ws" or "wss" after the http/https mapping */
    char *userinfo;   /* re-escaped "user[:password]", or NULL when the URL had none */
    char *host;       /* the authority's host[:port] as it is printed, e.g. "box:8462", "[::1]:1" */
    char *hostname;   /* what to dial: "box", "::1" ("localhost" when only a port was given) */
    int port;         /* explicit, or 80/443 by scheme; -1 when out of range (fails at dial) */
    char *path;       /* escaped path; "/stream" when the URL's was empty or "/" */
    char *raw_query;  /* the query as written (no '?'); NULL when there was none */
    char *fragment;   /* escaped fragment (no '#'); NULL when there was none. Never sent. */
} rli_url;

/* Parses raw. On failure (kind RL_ERR_INVALID) the message is one of
 *   remoteledger: invalid url "<u>": parse "<u>": <net/url error>
 *   remoteledger: url "<u>" must use ws, wss, http or https
 *   remoteledger: url "<u>" has no host
 * and *u is left empty (rli_url_free is still safe). */
int rli_url_parse(rli_url *u, const char *raw, cs_err *err);
void rli_url_free(rli_url *u);

/* Steps 5-7 for one range: the ceiling check, then start/end scrubbed and re-set (and with sig,
 * sig=1 asking for signed ledgers' SIG messages, any sig the URL had replaced), the query
 * re-encoded with sorted keys. On success *endpoint is the full URL to report (malloc'd) and
 * *target the request target to send, path and query (malloc'd). Errors have kind
 * RL_ERR_INVALID:
 *   remoteledger: range <r> reaches ledger 4294967295, the last representable sequence
 *   remoteledger: range [a,b] ends before it starts */
int rli_endpoint_build(const rli_url *u, rl_range r, bool sig, char **endpoint, char **target, cs_err *err);

/* "[a,b]" when bounded, "[a,latest)" otherwise (Go's ledgerbackend.Range.String). */
void rli_range_format(rl_range r, char *buf, size_t len);

/* The WebSocket read limit for a max_chunk_size option: -1 (no limit) when negative; the 8 MiB
 * default plus the 11-byte chunk header when 0; max(n+11, 34) otherwise, saturating at
 * INT64_MAX-1 so it can never wrap into "no limit". */
int64_t rli_read_limit(int64_t max_chunk_size);

/* The zstd expansion bound for one chunk: min(n, 8 MiB), and 8 MiB when n <= 0. */
size_t rli_expand_bound(int64_t max_chunk_size);

#endif
