/* SPDX-License-Identifier: Apache-2.0 */
/* The lake's two configuration files (docs/LAKE.md): config.json (SEP-54 "Configuration File"),
 * the JSON object a client reads first to learn the network, where the batches are, their
 * compression and the layout, with the SEP's field names (networkPassphrase, ledgersPath,
 * compression, ledgersPerBatch, batchesPerPartition); and .config.json, the manifest the Go SDK's
 * datastore reads at its root (the ledgers path) instead, with version in place of ledgersPath.
 * Their text (lakeconfig.c), and their one reader (lakeconfigread.c, cJSON): a file read into its
 * members, and the check of a file found in place against this lake's. Pure functions: any
 * thread. */
#ifndef CS_LAKE_LAKECONFIG_H
#define CS_LAKE_LAKECONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestreamd/lake/lakekey.h"

/* The config text for a lake of network passphrase (UTF-8; '"', '\\' and control characters are
 * escaped) and layout l (which must pass cs_lake_layout_check): one line, no trailing newline,
 * ledgersPath CS_LAKE_LEDGERS_PATH and compression "zstd". Returns a malloc'd NUL-terminated
 * string the caller frees, or NULL with `lake: config.json: out of memory`. */
char *cs_lake_config_json(const char *passphrase, const cs_lake_layout *l, cs_err *err);

/* The files' names: config.json beside the ledgers path, .config.json inside it. */
#define CS_LAKE_CONFIG_NAME "config.json"
#define CS_LAKE_MANIFEST_NAME ".config.json"
/* The manifest version the Go SDK writes, and refuses a manifest without. */
#define CS_LAKE_MANIFEST_VERSION "1.0"

/* The manifest's text, as the SDK's json.Marshal of its DatastoreManifest lays it out:
 * networkPassphrase (escaped as above), version, compression "zstd", ledgersPerBatch,
 * batchesPerPartition; one line, no trailing newline. Returns a malloc'd string the caller frees,
 * or NULL with `lake: .config.json: out of memory`. */
char *cs_lake_manifest_json(const char *passphrase, const cs_lake_layout *l, cs_err *err);

/* Which file a text is read as. */
typedef enum cs_lake_conf_kind { CS_LAKE_CONF_SEP, CS_LAKE_CONF_MANIFEST } cs_lake_conf_kind;

enum {
    CS_LAKE_CONF_ERR_DISAGREES = 1, /* the file is another lake's, or not a lake config at all */
    CS_LAKE_CONF_ERR_SYNTAX = 2,    /* cs_lake_conf_read: the text is not one JSON object */
    CS_LAKE_CONF_ERR_MEMORY = 3,    /* `out of memory` */
};

/* What a member of a config file holds, as found. */
typedef enum cs_lake_conf_type {
    CS_LAKE_CONF_ABSENT, /* no such member */
    CS_LAKE_CONF_STRING, /* str */
    CS_LAKE_CONF_NUMBER, /* num (and json) */
    CS_LAKE_CONF_OTHER,  /* true, false, null, an array or an object (json) */
} cs_lake_conf_type;

typedef struct cs_lake_conf_value {
    cs_lake_conf_type type;
    char *str;  /* STRING: the value decoded (escapes, surrogate pairs), NUL-terminated */
    double num; /* NUMBER */
    char *json; /* NUMBER and OTHER: the value as compact JSON, for messages */
} cs_lake_conf_value;

/* A config file read (either kind): the members the lake's readers use, each as found. */
typedef struct cs_lake_conf {
    cs_lake_conf_value passphrase;            /* networkPassphrase */
    cs_lake_conf_value ledgers_path;          /* ledgersPath (config.json) */
    cs_lake_conf_value version;               /* version (the SDK's .config.json) */
    cs_lake_conf_value compression;           /* compression */
    cs_lake_conf_value ledgers_per_batch;     /* ledgersPerBatch */
    cs_lake_conf_value batches_per_partition; /* batchesPerPartition */
} cs_lake_conf;

/* The one reader of the lake's config files (config.json and .config.json, whoever wrote them:
 * the export's check below, the lake reader's config.json, lakereader.h): text (len bytes, no NUL
 * needed, read with cJSON) must be one JSON object and nothing after it but white space. Members
 * other than those of cs_lake_conf are ignored at any depth, as the SDK's encoding/json ignores
 * them; names are matched exactly, and of a member written twice the last counts, as in
 * encoding/json. 0 with *out, which owns its strings (cs_lake_conf_free), or -1 with *out empty
 * and CS_LAKE_CONF_ERR_SYNTAX: `invalid JSON at byte N` (where cJSON stops), `text after the
 * object at byte N`, `a JSON array, not an object` (string, number, true, false, null); or
 * CS_LAKE_CONF_ERR_MEMORY `out of memory`. Any thread (cJSON's one global is its last error's
 * place, written on a failure and never read here). */
int cs_lake_conf_read(const char *text, size_t len, cs_lake_conf *out, cs_err *err);

/* Frees what cs_lake_conf_read put in c and empties it. Safe on an empty or freed one. */
void cs_lake_conf_free(cs_lake_conf *c);

/* Whether v is a count the layout takes: a number that is an integer from 1 to 4294967295, into
 * *out. */
bool cs_lake_conf_count(const cs_lake_conf_value *v, uint32_t *out);

/* Whether text (len bytes, a file's contents, no NUL needed) is the config of this lake, read by
 * cs_lake_conf_read: networkPassphrase passphrase, compression "zstd", ledgersPerBatch and
 * batchesPerPartition l's (numbers, compared by value), and, by kind, ledgersPath
 * CS_LAKE_LEDGERS_PATH or version CS_LAKE_MANIFEST_VERSION. Other members are ignored, as the SDK
 * ignores them. 0 when it is; else -1 with CS_LAKE_CONF_ERR_DISAGREES and the first difference,
 * both values shown (a string Go-quoted, anything else as JSON), and what sets this lake's:
 *   `its networkPassphrase is "A", this lake's is "B" (--network-passphrase)`,
 *   `its ledgersPerBatch is 64, this lake's is 1 (--lake-ledgers-per-batch)`,
 *   `its batchesPerPartition is …, this lake's is … (--lake-batches-per-partition)`,
 *   `its compression is "gzip", this lake's is "zstd"`, `its ledgersPath is …`, `its version is …`,
 *   `its networkPassphrase is absent, this lake's is "B" (--network-passphrase)`,
 *   `it is not a JSON object of strings and numbers: <cs_lake_conf_read's syntax error>`;
 * or -1 with CS_LAKE_CONF_ERR_MEMORY `out of memory`. */
int cs_lake_config_agrees(const char *text, size_t len, cs_lake_conf_kind kind, const char *passphrase,
                          const cs_lake_layout *l, cs_err *err);

#endif
