/* SPDX-License-Identifier: Apache-2.0 */
/* corestreamd's command line (docs/operations/flags.md) and its validation ("Validation and
 * start-up errors, in order"), in the prototype's order and wording. */
#ifndef CS_CORESTREAMD_CONFIG_H
#define CS_CORESTREAMD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"
#include "common/godur.h"

typedef struct cs_daemon_config {
    const char *listen;
    const char *source;
    int64_t retention;
    bool ring_direct;
    uint64_t start_ledger;
    int64_t pipe_size;
    const char *data_dir;
    const char *log_level;
    const char *log_format;
    const char *log_level_file;
    int64_t chunk_size;
    bool compress;
    int64_t compress_workers;
    const char *compress_level_text; /* --compress-level as given: auto or an integer */
    int64_t compress_level;          /* derived from it: 0 for auto, else the level */
    cs_dur emit_window;
    cs_dur cadence;
    const char *core_binary;
    const char *core_config;
    const char *history_archive_urls;
    const char *storage_dir;
    const char *network_passphrase;
    const char *file_dir;
    const char *pipe_cmd;
    const char *pipe_path;
    uint64_t file_count;
    int64_t synthetic_size;
    bool synthetic_compressible;
    cs_dur synthetic_interval;
    uint64_t synthetic_count;
    int64_t max_connections;
    int64_t max_connections_per_ip;
    int64_t max_replays;
    int64_t max_replays_per_ip;
    int64_t busy_poll_us; /* stream I/O threads: poll this long before each blocking wait; 0 off */
    int64_t background_nice; /* nice steps of the ring writer, replays, frames fill, cs-ws-bulk */
    const char *auth_tokens;
    bool auth_healthz;
    const char *tls_cert;
    const char *tls_key;
    const char *tls_client_ca;
    const char *signing_key;  /* --signing-key: sign every ledger (Ed25519 PEM private key) */
    const char *trusted_keys; /* --trusted-keys: the edge and a peer backfill check signatures */
    bool version; /* --version: print the build information and exit 0 */
    /* --jetstream-*: the JetStream publisher, off while jetstream_url is "" (jetstream/). */
    const char *jetstream_url;
    const char *jetstream_stream;
    cs_dur jetstream_max_age;
    int64_t jetstream_max_bytes;
    int64_t jetstream_replicas;
    int64_t jetstream_max_pending;
    /* --source jetstream (the edge): where to consume, and which run ("" the newest). */
    const char *jetstream_source_url;
    const char *jetstream_run;
    cs_dur jetstream_gap_wait; /* how long the edge waits for a ledger the stream went on without */
    /* NATS credentials and TLS, for whichever of the two runs (jetstream/auth.h). */
    const char *jetstream_creds;
    const char *jetstream_nkey_seed;
    const char *jetstream_user;
    const char *jetstream_password_file;
    const char *jetstream_tls_ca;
    const char *jetstream_tls_cert;
    const char *jetstream_tls_key;
    const char *admin_listen;
    /* The ring as a SEP-54 lake (docs/LAKE.md): served on /lake/ when network_passphrase is set. */
    uint64_t lake_ledgers_per_batch;
    uint64_t lake_batches_per_partition;
    int64_t lake_readers; /* lake objects made at once */
    const char *lake_dir; /* --lake-dir: export the lake to this directory ("" off) */
    const char *lake_url; /* --lake-url: export the lake to this s3://bucket/prefix ("" off) */
    const char *backfill_from;       /* --backfill-from: a lake or peer a gap is filled from ("" none) */
    const char *backfill_token_file; /* --backfill-token-file: its bearer token's file ("" none) */
    const char *backfill_ca;         /* --backfill-ca: PEM CAs its https/wss is checked with ("" system) */
    /* Derived: --log-level and --log-format parsed. */
    int log_level_value;
    int log_format_value; /* a cs_log_fmt */
    /* Derived: the archive URLs split, trimmed, empties dropped (points into urls_buf). */
    char *urls_buf;
    const char *urls[32];
    size_t nurls;
} cs_daemon_config;

/* Parses and validates argv. Returns 0, 1 when help was asked for (usage already printed to
 * usage_out), CS_CONFIG_VERSION when --version was given (nothing printed, nothing validated: the
 * caller prints cs_build_print's text and exits 0), or -1 with the message in err (for a flag syntax error the usage is printed to
 * usage_out first, as Go's flag package does). Free with cs_daemon_config_free. */
#define CS_CONFIG_VERSION 2
/* --busy-poll-us at most: a spin that long already costs a core per idle I/O thread. */
#define CS_BUSY_POLL_US_MAX 100000
/* The NATS credential flags as jetstream/auth.h takes them. */
struct cs_js_auth;
void cs_daemon_nats_auth(const cs_daemon_config *cfg, struct cs_js_auth *out);

int cs_daemon_config_parse(cs_daemon_config *cfg, int argc, char **argv, FILE *usage_out, cs_err *err);
void cs_daemon_config_free(cs_daemon_config *cfg);

/* What defines the byte stream of the configured source, e.g. `synthetic size=204800
 * compressible=false chunk_size=262144`: the JetStream run identity is made from it
 * (cs_js_run_id). It stands in for the run identity the ring will record (ring v2). */
void cs_daemon_run_definition(const cs_daemon_config *cfg, char *buf, size_t len);
/* --log-level-file: the file's first line, trimmed, parsed as --log-level is. Returns 0 with
 * *level, or -1: `--log-level-file F: <reason>`, `--log-level-file F: "x" is not a level: …`.
 * Called at start and on each SIGHUP (from the signal thread). */
int cs_log_level_file_read(const char *path, int *level, cs_err *err);

/* Splits a comma-separated list, trimming spaces and dropping empty items, in place. */
size_t cs_split_urls(char *list, const char **out, size_t max);

#endif
