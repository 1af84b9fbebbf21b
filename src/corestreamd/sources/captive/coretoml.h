/* SPDX-License-Identifier: Apache-2.0 */
/* The operator's captive-core toml (docs/operations/captive.md): the Go SDK's rules
 * for it and the stellar-core.conf generated from it.
 *
 * The text is read by toml.h (top-level `KEY = value` lines, comments, and table headers such as
 * [HISTORY.x], [QUORUM_SET…], [[VALIDATORS]], [[HOME_DOMAINS]]); this file applies the Go SDK's
 * rules for a Strict captive-core toml on the items it returns:
 *   - syntax errors, duplicate keys and duplicate tables are refused;
 *   - a top-level key outside the SDK's whitelist, a [[VALIDATORS]] / [[HOME_DOMAINS]] key outside
 *     theirs, or any other table is refused, naming it (METADATA_OUTPUT_STREAM, NODE_SEED,
 *     NODE_IS_VALIDATOR, … are all such keys); BUCKET_DIR_PATH is refused with its own message;
 *   - whitelisted keys must have the type the SDK decodes them into;
 *   - NETWORK_PASSPHRASE, when the file sets it, must equal the passphrase in use;
 *   - HOME_DOMAINS / VALIDATORS entries are checked as the SDK checks them; DATABASE must be an
 *     sqlite3:// URL; a quorum set (VALIDATORS or a QUORUM_SET table) must exist.
 *
 * The generated stellar-core.conf is the operator's file passed through byte for byte, behind a
 * `# Generated file, do not edit` line, with the SDK's defaults (CAPTIVE.md 2.2) added for every
 * key the file does not set — inserted after the file's last top-level key, so before its first
 * table as TOML requires — and `[HISTORY.h<i>]` tables appended when the file configures no
 * history archive. */
#ifndef CS_CORESTREAMD_CORETOML_H
#define CS_CORESTREAMD_CORETOML_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

/* The peek at NETWORK_PASSPHRASE (docs/operations/captive.md), exactly the prototype's rule: scan
 * lines, trimmed; skip empty and `#` lines; stop at the first line starting with `[`; split at the
 * first `=`; the trimmed key must be NETWORK_PASSPHRASE; the trimmed value must start with `"` or
 * `'` and hold the matching closing quote; the text between is the passphrase (no escapes are
 * processed, a trailing comment is ignored). Returns 0 with a malloc'd passphrase in *out, or -1
 * with `NETWORK_PASSPHRASE is not a quoted string; pass --network-passphrase instead` or
 * `NETWORK_PASSPHRASE is not defined; define it or pass --network-passphrase` (the caller adds the
 * `captive: config "<p>": ` prefix). */
int cs_coretoml_peek_passphrase(const char *data, size_t len, char **out, cs_err *err);

typedef struct cs_coretoml cs_coretoml;

/* Reads and validates the operator's toml against the passphrase in use. Messages are the SDK's
 * (the caller adds `captive: invalid config "<p>": `):
 *   `could not unmarshal captive core toml: line N: …` (syntax, duplicates, types),
 *   `could not unmarshal captive core toml: these fields are not supported by captive core: ["K" …]`,
 *   `could not unmarshal captive core toml: setting BUCKET_DIR_PATH is disallowed for Captive
 *    Core, use --storage-dir instead`,
 *   `invalid captive core toml: NETWORK_PASSPHRASE in captive core config file: F does not match
 *    passed configuration (P)`, `invalid captive core toml: found …` (HOME_DOMAINS, VALIDATORS),
 *   `invalid captive core toml: invalid DATABASE parameter: …`,
 *   `captive-core config file does not define any quorum set`.
 * The data is copied. Returns 0 or -1. */
int cs_coretoml_parse(cs_coretoml **out, const char *data, size_t len, const char *passphrase, cs_err *err);
void cs_coretoml_free(cs_coretoml *t);

/* Whether the file sets the top-level key. */
bool cs_coretoml_has(const cs_coretoml *t, const char *key);
/* The decoded value of a top-level string key, or NULL when absent or not a string. */
const char *cs_coretoml_string(const cs_coretoml *t, const char *key);
/* A [HISTORY…] table, or a [[VALIDATORS]] entry with HISTORY. */
bool cs_coretoml_history_configured(const cs_coretoml *t);
/* A [QUORUM_SET…] table, or at least one [[VALIDATORS]] entry. */
bool cs_coretoml_quorum_configured(const cs_coretoml *t);

/* What the generated file depends on besides the operator's text. */
typedef struct cs_coretoml_params {
    const char *network_passphrase; /* written when the file has no NETWORK_PASSPHRASE */
    const char *const *urls;        /* one [HISTORY.h<i>] per URL when no history is configured */
    size_t nurls;
    int core_major, core_minor;     /* core build version (0.0 = unknown) */
    unsigned core_protocol;         /* core ledger protocol version (0 = unknown) */
    bool catchup_complete;          /* add CATCHUP_COMPLETE=true (the from-1 < 3 start) */
} cs_coretoml_params;

/* The stellar-core.conf text (malloc'd, NUL-terminated; *len without the NUL), or NULL when out
 * of memory. Defaults, each only when the file lacks the key: NETWORK_PASSPHRASE, DATABASE =
 * "sqlite3://stellar.db", HTTP_PORT = 11626, LOG_FILE_PATH = "", FAILURE_SAFETY = -1,
 * BUCKETLIST_DB_INDEX_PAGE_SIZE_EXPONENT = 12, BACKFILL_RESTORE_META = true (protocol >= 23),
 * ENABLE_SOROBAN_DIAGNOSTIC_EVENTS, ENABLE_DIAGNOSTICS_FOR_TX_SUBMISSION and
 * EMIT_SOROBAN_TRANSACTION_META_EXT_V1 = true, EMIT_CLASSIC_EVENTS = true (protocol >= 23),
 * BUCKETLIST_DB_MEMORY_FOR_CACHING = 0 (build >= 22.2), CATCHUP_COMPLETE = true (when asked). */
char *cs_coretoml_generate(const cs_coretoml *t, const cs_coretoml_params *p, size_t *len);

/* The SDK's reading of `stellar-core version` output. Build version: the first line, matched
 * with `\D*(\d*)\.(\d*).*` (0.0 when it does not match, or the major when only it parses). */
void cs_coretoml_build_version(const char *first_line, int *major, int *minor);
/* Protocol: the first line matching `^\s*ledger protocol version: (\d*)`. Returns 0 with *proto,
 * or -1 with `error parsing protocol version from stellar-core output`. */
int cs_coretoml_protocol_version(const char *output, unsigned *proto, cs_err *err);

#endif
