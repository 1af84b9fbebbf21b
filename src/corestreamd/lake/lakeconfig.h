/* The lake's two configuration files (docs/LAKE.md): config.json (SEP-54 "Configuration File"),
 * the JSON object a client reads first to learn the network, where the batches are, their
 * compression and the layout, with the SEP's field names (networkPassphrase, ledgersPath,
 * compression, ledgersPerBatch, batchesPerPartition); and .config.json, the manifest the Go SDK's
 * datastore reads at its root (the ledgers path) instead, with version in place of ledgersPath.
 * Their text, and the check of a file found in place against this lake's (lakeconfigread.c).
 * Pure functions: any thread. */
#ifndef CS_LAKE_LAKECONFIG_H
#define CS_LAKE_LAKECONFIG_H

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
};

/* Whether text (len bytes, a file's contents, no NUL needed) is the config of this lake: a JSON
 * object whose networkPassphrase is passphrase, compression "zstd", ledgersPerBatch and
 * batchesPerPartition l's, and, by kind, ledgersPath CS_LAKE_LEDGERS_PATH or version
 * CS_LAKE_MANIFEST_VERSION. Other members are ignored, as the SDK ignores them. 0 when it is; else
 * -1 with CS_LAKE_CONF_ERR_DISAGREES and the first difference, both values Go-quoted (strings) or
 * as numbers, and what sets this lake's:
 *   `its networkPassphrase is "A", this lake's is "B" (--network-passphrase)`,
 *   `its ledgersPerBatch is 64, this lake's is 1 (--lake-ledgers-per-batch)`,
 *   `its batchesPerPartition is …, this lake's is … (--lake-batches-per-partition)`,
 *   `its compression is "gzip", this lake's is "zstd"`, `its ledgersPath is …`, `its version is …`,
 *   `its networkPassphrase is absent, this lake's is "B" (--network-passphrase)`,
 *   `it is not a JSON object of strings and numbers: <what> at byte N`. */
int cs_lake_config_agrees(const char *text, size_t len, cs_lake_conf_kind kind, const char *passphrase,
                          const cs_lake_layout *l, cs_err *err);

#endif
