/* The lake's config.json (SEP-54 "Configuration File", docs/LAKE.md): the JSON object a client
 * reads first to learn the network, where the batches are, their compression and the layout.
 * Field names are the SEP's, which the Go SDK's datastore reads: networkPassphrase, ledgersPath,
 * compression, ledgersPerBatch, batchesPerPartition. A pure function: any thread. */
#ifndef CS_LAKE_LAKECONFIG_H
#define CS_LAKE_LAKECONFIG_H

#include "common/err.h"
#include "corestreamd/lake/lakekey.h"

/* The config text for a lake of network passphrase (UTF-8; '"', '\\' and control characters are
 * escaped) and layout l (which must pass cs_lake_layout_check): one line, no trailing newline,
 * ledgersPath CS_LAKE_LEDGERS_PATH and compression "zstd". Returns a malloc'd NUL-terminated
 * string the caller frees, or NULL with `lake: config.json: out of memory`. */
char *cs_lake_config_json(const char *passphrase, const cs_lake_layout *l, cs_err *err);

/* The Go SDK's datastore manifest (support/datastore, `.config.json` at the datastore's root,
 * which for its HTTP datastore is the base URL the keys are relative to: here
 * CS_LAKE_LEDGERS_PATH "/.config.json"): networkPassphrase, version CS_LAKE_MANIFEST_VERSION,
 * compression "zstd", ledgersPerBatch, batchesPerPartition. The SDK compares each field it was
 * configured with and refuses a store that differs. Same rules and errors as
 * cs_lake_config_json (`lake: .config.json: out of memory`). */
#define CS_LAKE_MANIFEST_VERSION "1.0"
char *cs_lake_manifest_json(const char *passphrase, const cs_lake_layout *l, cs_err *err);

#endif
