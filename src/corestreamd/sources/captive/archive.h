/* SPDX-License-Identifier: Apache-2.0 */
/* The one thing the captive source reads from a history archive itself (CAPTIVE.md 1.6): the root
 * HistoryArchiveState, `<url>/.well-known/stellar-history.json`, for `currentLedger` (the latest
 * checkpoint) and, when the archive publishes it, `networkPassphrase`. Core fetches everything
 * else through the toml's HISTORY `get` commands.
 *
 * Like the Go SDK's archive pool: the URLs are tried round-robin from a random start, 4 tries in
 * all (3 retries) with a constant 250 ms pause between them, and the last error is returned. Each
 * GET sends the User-Agent, follows redirects, accepts any final status in 200..399, and reads at
 * most 10 MB of body (plus the one byte Go's LimitedReader lets through: a HAS that ends within
 * 10 MB + 1 byte parses). The run's cancel aborts a transfer or a pause at once. http, https and file
 * URLs are accepted. */
#ifndef CS_CORESTREAMD_ARCHIVE_H
#define CS_CORESTREAMD_ARCHIVE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/cancel.h"

#define CS_ARCHIVE_HAS_PATH ".well-known/stellar-history.json"
#define CS_ARCHIVE_MAX_HAS (10 * 1024 * 1024) /* maxHASSize */
#define CS_ARCHIVE_TRIES 4
#define CS_ARCHIVE_BACKOFF_NS (250 * 1000000LL)
#define CS_ARCHIVE_USER_AGENT "corestream"

typedef struct cs_archive_opts {
    const char *const *urls;
    size_t nurls;
    const char *user_agent;         /* NULL → CS_ARCHIVE_USER_AGENT */
    const char *network_passphrase; /* NULL or "" → not checked */
    cs_cancel *cancel;              /* required */
    long connect_timeout_ms;        /* 0 → 15 s */
    long timeout_ms;                /* whole transfer; 0 → 60 s */
    int tries;                      /* 0 → CS_ARCHIVE_TRIES (tests use 1) */
    int64_t backoff_ns;             /* 0 → CS_ARCHIVE_BACKOFF_NS */
} cs_archive_opts;

typedef struct cs_archive_has {
    uint32_t current_ledger;
    char network_passphrase[512]; /* "" when the archive does not publish it */
} cs_archive_has;

/* cs_err.kind of a body that is not JSON at all. */
#define CS_ARCHIVE_ERR_NOT_JSON 1

/* Reads a root HAS from body[0, len) (any bytes; no NUL needed), as each GET does: a JSON
 * object whose currentLedger (absent or null → 0) is a uint32 and whose networkPassphrase (absent
 * or null → "") is a string, cut to fit has->network_passphrase. When network_passphrase is set
 * (not NULL or "") and the archive publishes one, they must match. url only names the archive in
 * messages. Returns 0 with *has, or -1 with *has partly filled and
 *   `history archive state: <url> is not valid JSON` (kind CS_ARCHIVE_ERR_NOT_JSON),
 *   `history archive state: <url> does not hold a JSON object`,
 *   `history archive state: currentLedger is not a uint32`,
 *   `history archive state: networkPassphrase is not a string`,
 *   `Network passphrase does not match! expected=<ours> actual=<archive's>`. Thread-safe. */
int cs_archive_parse_has(const char *body, size_t len, const char *url, const char *network_passphrase,
                         cs_archive_has *has, cs_err *err);

/* GETs the root HAS from the pool. Returns 0, or -1 with the last try's error:
 *   `Get "<url>": <transport error>`,
 *   `Bad HTTP response '<code> <reason>' for GET '<url>'`,
 *   `history archive state response exceeds 10485760 bytes limit`,
 *   `history archive state: …` (not JSON, or a field of the wrong type),
 *   `Network passphrase does not match! expected=<ours> actual=<archive's>`,
 * or kind CS_ERR_CANCELLED ("context canceled") once the cancel fires. Failed tries are logged at
 * WARN with subservice=stellar-core. Thread-safe (libcurl's global init runs once). */
int cs_archive_root_has(const cs_archive_opts *o, cs_archive_has *has, cs_err *err);

#endif
