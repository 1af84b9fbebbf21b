/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/flags.h"
#include "common/thread.h"
#include "common/log.h"
#include "common/goquote.h"
#include "corestream/wire.h"
#include "corestreamd/jetstream/auth.h"
#include "corestreamd/jetstream/naming.h"
#include "corestreamd/net/listener.h"
#include "corestreamd/jetstream/publisher.h"
#include "common/complevel.h"
#include "corestreamd/server/server.h"
#include "corestreamd/sources/jetstream.h"
#include "corestreamd/lake/lakekey.h"
#include "wire/wire.h"

static void set_defaults(cs_daemon_config *c)
{
    memset(c, 0, sizeof *c);
    c->listen = ":8462";
    c->source = "synthetic";
    c->retention = 10000;
    c->ring_direct = true;
    c->pipe_size = 1048576;
    c->data_dir = "corestreamd-data";
    c->log_level = "info";
    c->log_format = "logfmt";
    c->log_level_file = "";
    c->chunk_size = CS_DEFAULT_CHUNK_SIZE;
    c->compress = true;
    c->compress_level_text = "auto";
    c->emit_window = 15 * CS_MS;
    c->cadence = 600 * CS_MS;
    c->core_binary = "";
    c->core_config = "";
    c->history_archive_urls = "";
    c->storage_dir = "";
    c->network_passphrase = "";
    c->file_dir = "";
    c->pipe_cmd = "";
    c->pipe_path = "";
    c->synthetic_size = 204800;
    c->synthetic_interval = CS_SEC;
    c->max_connections = CS_DEFAULT_MAX_CONNECTIONS;
    c->max_connections_per_ip = CS_DEFAULT_MAX_CONNECTIONS_PER_IP;
    c->max_replays = CS_DEFAULT_MAX_REPLAYS;
    c->max_replays_per_ip = CS_DEFAULT_MAX_REPLAYS_PER_IP;
    c->background_nice = CS_NICE_BACKGROUND_DEFAULT;
    c->auth_tokens = "";
    c->tls_cert = "";
    c->tls_key = "";
    c->tls_client_ca = "";
    c->signing_key = "";
    c->trusted_keys = "";
    c->admin_listen = "";
    c->lake_ledgers_per_batch = CS_LAKE_LEDGERS_PER_BATCH_DEFAULT;
    c->lake_batches_per_partition = CS_LAKE_BATCHES_PER_PARTITION_DEFAULT;
    c->lake_readers = CS_LAKE_READERS_DEFAULT;
    c->lake_dir = "";
    c->lake_url = "";
    c->backfill_from = "";
    c->backfill_token_file = "";
    c->backfill_ca = "";
    c->jetstream_url = "";
    c->jetstream_stream = CS_JS_DEFAULT_STREAM;
    c->jetstream_max_age = CS_JS_DEFAULT_MAX_AGE_NS;
    c->jetstream_max_bytes = CS_JS_DEFAULT_MAX_BYTES;
    c->jetstream_replicas = CS_JS_DEFAULT_REPLICAS;
    c->jetstream_max_pending = CS_JS_DEFAULT_MAX_PENDING;
    c->jetstream_source_url = "";
    c->jetstream_run = "";
    c->jetstream_gap_wait = CS_JS_DEFAULT_GAP_WAIT_NS;
    c->jetstream_creds = "";
    c->jetstream_nkey_seed = "";
    c->jetstream_user = "";
    c->jetstream_password_file = "";
    c->jetstream_tls_ca = "";
    c->jetstream_tls_cert = "";
    c->jetstream_tls_key = "";
}

void cs_daemon_nats_auth(const cs_daemon_config *c, cs_js_auth *out)
{
    *out = (cs_js_auth){.creds = c->jetstream_creds,
                        .nkey_seed = c->jetstream_nkey_seed,
                        .user = c->jetstream_user,
                        .password_file = c->jetstream_password_file,
                        .tls_ca = c->jetstream_tls_ca,
                        .tls_cert = c->jetstream_tls_cert,
                        .tls_key = c->jetstream_tls_key};
}

/* The NATS credential and TLS flags: meaningful with a connection to NATS only. */
static int validate_nats_auth(const cs_daemon_config *c, bool edge, cs_err *err)
{
    cs_js_auth a;
    cs_daemon_nats_auth(c, &a);
    if (!cs_js_auth_any(&a) || edge || *c->jetstream_url)
        return cs_js_auth_validate(&a, err);
    const char *flag = *a.creds ? "creds" : *a.nkey_seed ? "nkey-seed" : *a.user ? "user"
                       : *a.password_file ? "password-file" : *a.tls_ca ? "tls-ca" : *a.tls_cert ? "tls-cert"
                                                                                                : "tls-key";
    return cs_err_set(err, 0, "--jetstream-%s needs --jetstream-url (publishing) or --source jetstream (an edge)",
                      flag);
}

/* --source jetstream: the edge's own flags. */
static int validate_edge(const cs_daemon_config *c, cs_err *err)
{
    if (!*c->jetstream_source_url)
        return cs_err_set(err, 0, "--jetstream-source-url is required with --source jetstream");
    if (*c->jetstream_url)
        return cs_err_set(err, 0,
                          "--jetstream-url cannot be combined with --source jetstream: an edge serves a stream, it "
                          "does not publish one");
    if (*c->signing_key)
        return cs_err_set(err, 0,
                          "--signing-key cannot be combined with --source jetstream: an edge forwards the core's "
                          "signatures, it never signs");
    if (cs_js_validate_stream_name(c->jetstream_stream, err) != 0)
        return -1;
    size_t n = strlen(c->jetstream_run);
    bool ok = n < CS_JS_NAME_MAX;
    for (size_t i = 0; ok && i < n; i++) {
        char ch = c->jetstream_run[i];
        ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
    }
    if (!ok)
        return cs_err_set(err, 0, "--jetstream-run \"%.80s\" must be a run token (A-Z a-z 0-9 _ -, under %d characters), as "
                          "the core logs it in `jetstream publisher ready`",
                          c->jetstream_run, CS_JS_NAME_MAX);
    if (c->jetstream_gap_wait < 0) {
        char a[CS_DUR_STR_MAX];
        return cs_err_set(err, 0, "--jetstream-gap-wait %s is negative (0 means go on at once)",
                          cs_dur_format(c->jetstream_gap_wait, a, sizeof a));
    }
    return 0;
}

static int validate_jetstream(const cs_daemon_config *c, cs_err *err)
{
    char a[CS_DUR_STR_MAX];
    if (!*c->jetstream_url)
        return 0;
    if (cs_js_validate_stream_name(c->jetstream_stream, err) != 0)
        return -1;
    if (c->jetstream_max_age < 0)
        return cs_err_set(err, 0, "--jetstream-max-age %s is negative (0 means no age limit)",
                          cs_dur_format(c->jetstream_max_age, a, sizeof a));
    if (c->jetstream_max_bytes == 0 || c->jetstream_max_bytes < -1)
        return cs_err_set(err, 0, "--jetstream-max-bytes %lld must be positive, or -1 for no size limit",
                          (long long)c->jetstream_max_bytes);
    if (c->jetstream_replicas < 1 || c->jetstream_replicas > CS_JS_MAX_REPLICAS)
        return cs_err_set(err, 0, "--jetstream-replicas %lld is outside [1,%d]", (long long)c->jetstream_replicas,
                          CS_JS_MAX_REPLICAS);
    if (c->jetstream_max_pending < 1 || c->jetstream_max_pending > CS_JS_MAX_MAX_PENDING)
        return cs_err_set(err, 0, "--jetstream-max-pending %lld is outside [1,%d]",
                          (long long)c->jetstream_max_pending, CS_JS_MAX_MAX_PENDING);
    return 0;
}

size_t cs_split_urls(char *list, const char **out, size_t max)
{
    size_t n = 0;
    for (char *item = list; item && n < max;) {
        char *comma = strchr(item, ',');
        if (comma)
            *comma = '\0';
        while (*item == ' ' || *item == '\t')
            item++;
        char *e = item + strlen(item);
        while (e > item && (e[-1] == ' ' || e[-1] == '\t'))
            *--e = '\0';
        if (*item)
            out[n++] = item;
        item = comma ? comma + 1 : NULL;
    }
    return n;
}

#define LEVELS_ACCEPTED "use debug, info, warn or error (case-insensitive, with an optional offset such as info+2)"

int cs_log_level_file_read(const char *path, int *level, cs_err *err)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return cs_err_set(err, 0, "--log-level-file %s: %s", path, strerror(errno));
    char line[128];
    if (!fgets(line, sizeof line, f))
        line[0] = '\0';
    fclose(f);
    char *s = line, *e = line + strlen(line);
    while (*s == ' ' || *s == '\t')
        s++;
    while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
        *--e = '\0';
    if (cs_log_parse_level(s, level) != 0) {
        char q[CS_ERR_MSG_MAX / 2];
        cs_go_quote(q, sizeof q, s);
        return cs_err_set(err, 0, "--log-level-file %s: %s is not a level: " LEVELS_ACCEPTED, path, q);
    }
    return 0;
}

/* The addresses, TLS, tokens and the admission caps. */
static int validate_serving(const cs_daemon_config *c, cs_err *err)
{
    if (cs_listen_addr_check(c->listen, err) != 0)
        return -1;
    if (*c->admin_listen && cs_listen_addr_check(c->admin_listen, err) != 0)
        return cs_err_prefix(err, "--admin-listen: ");
    if (*c->tls_cert && !*c->tls_key)
        return cs_err_set(err, 0, "--tls-key is required with --tls-cert");
    if (*c->tls_key && !*c->tls_cert)
        return cs_err_set(err, 0, "--tls-cert is required with --tls-key");
    if (*c->tls_client_ca && !*c->tls_cert)
        return cs_err_set(err, 0, "--tls-client-ca needs --tls-cert");
    if (c->auth_healthz && !*c->auth_tokens)
        return cs_err_set(err, 0, "--auth-healthz needs --auth-tokens");
    if (c->max_connections == 0)
        return cs_err_set(err, 0, "--max-connections 0 would refuse every connection; use a negative value for no cap");
    if (c->max_connections_per_ip == 0)
        return cs_err_set(err, 0,
                          "--max-connections-per-ip 0 would refuse every connection; use a negative value for no cap");
    if (c->max_replays == 0)
        return cs_err_set(err, 0, "--max-replays 0 would leave every replay waiting; use a negative value for no cap");
    if (c->max_replays_per_ip == 0)
        return cs_err_set(err, 0,
                          "--max-replays-per-ip 0 would leave every replay waiting; use a negative value for no cap");
    return 0;
}

/* The lake's layout and readers (docs/LAKE.md). */
static int validate_lake(const cs_daemon_config *c, cs_err *err)
{
    if (c->lake_ledgers_per_batch > UINT32_MAX || c->lake_batches_per_partition > UINT32_MAX)
        return cs_err_set(err, 0, "--lake-%s %llu does not fit in 32 bits",
                          c->lake_ledgers_per_batch > UINT32_MAX ? "ledgers-per-batch" : "batches-per-partition",
                          (unsigned long long)(c->lake_ledgers_per_batch > UINT32_MAX ? c->lake_ledgers_per_batch
                                                                                      : c->lake_batches_per_partition));
    cs_lake_layout l = {(uint32_t)c->lake_ledgers_per_batch, (uint32_t)c->lake_batches_per_partition};
    if (cs_lake_layout_check(&l, err) != 0)
        return -1;
    if (c->lake_readers < 1 || c->lake_readers > CS_LAKE_READERS_MAX)
        return cs_err_set(err, 0, "--lake-readers %lld is outside [1,%d]", (long long)c->lake_readers,
                          CS_LAKE_READERS_MAX);
    if (*c->lake_dir && !*c->network_passphrase)
        return cs_err_set(err, 0, "--lake-dir needs --network-passphrase: the lake's config names its network");
    if (!*c->lake_url)
        return 0;
    if (*c->lake_dir)
        return cs_err_set(err, 0, "--lake-url and --lake-dir cannot be combined: a corestreamd exports to one lake");
    if (!CS_WITH_CAPTIVE)
        return cs_err_set(err, 0,
                          "--lake-url is not available: this corestreamd was configured with -DCS_WITH_CAPTIVE=OFF "
                          "(it writes to S3 with libcurl)");
    if (strncmp(c->lake_url, "s3://", 5) != 0 || !c->lake_url[5] || c->lake_url[5] == '/')
        return cs_err_set(err, 0, "--lake-url %.200s: not s3://bucket[/prefix]", c->lake_url);
    if (!*c->network_passphrase)
        return cs_err_set(err, 0, "--lake-url needs --network-passphrase: the lake's config names its network");
    return 0;
}

static bool backfill_is_peer(const char *u)
{
    return strncmp(u, "ws://", 5) == 0 || strncmp(u, "wss://", 6) == 0;
}

/* --backfill-from: a lake or a peer's stream, for the sources whose core can move on without us. */
static int validate_backfill(const cs_daemon_config *c, cs_err *err)
{
    const char *u = c->backfill_from;
    if (!*u && (*c->backfill_token_file || *c->backfill_ca))
        return cs_err_set(err, 0, "--backfill-%s needs --backfill-from",
                          *c->backfill_token_file ? "token-file" : "ca");
    if (!*u)
        return 0;
    if (strcmp(c->source, "pipe") != 0 && strcmp(c->source, "captive") != 0)
        return cs_err_set(err, 0,
                          "--backfill-from applies to --source pipe and captive, whose core can move on without "
                          "corestreamd, not %s",
                          c->source);
    if (!CS_WITH_CAPTIVE)
        return cs_err_set(err, 0,
                          "--backfill-from is not available: this corestreamd was configured with "
                          "-DCS_WITH_CAPTIVE=OFF (it reads lakes with libcurl)");
    if (backfill_is_peer(u))
        return 0;
    if (strstr(u, "://") && strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0)
        return cs_err_set(err, 0,
                          "--backfill-from %.200s: a lake is http://, https:// or a directory, a corestreamd's "
                          "stream ws:// or wss://",
                          u);
    return 0;
}

/* A part this build left out (CMake -DCS_WITH_<PART>=OFF) is refused by its flag, before anything
 * starts. */
static int validate_built_in(const cs_daemon_config *c, bool captive, bool edge, cs_err *err)
{
    if (captive && !CS_WITH_CAPTIVE)
        return cs_err_set(err, 0,
                          "--source captive is not available: this corestreamd was configured with "
                          "-DCS_WITH_CAPTIVE=OFF");
    const char *js = edge ? "--source jetstream" : *c->jetstream_url ? "--jetstream-url" : NULL;
    if (js && !CS_WITH_NATS)
        return cs_err_set(err, 0, "%s is not available: this corestreamd was configured with -DCS_WITH_NATS=OFF",
                          js);
    return 0;
}

static int validate(cs_daemon_config *c, cs_err *err)
{
    const char *src = c->source;
    bool synthetic = strcmp(src, "synthetic") == 0, file = strcmp(src, "file") == 0;
    bool captive = strcmp(src, "captive") == 0, pipe = strcmp(src, "pipe") == 0;
    bool edge = strcmp(src, "jetstream") == 0;
    char a[CS_DUR_STR_MAX], b[CS_DUR_STR_MAX];
    if (!synthetic && !file && !captive && !pipe && !edge) {
        char q[CS_ERR_MSG_MAX / 2];
        cs_go_quote(q, sizeof q, src);
        return cs_err_set(err, 0, "--source must be captive, file, synthetic, pipe or jetstream, got %s", q);
    }
    if (validate_built_in(c, captive, edge, err) != 0)
        return -1;
    if (c->start_ledger > CS_LAST_SEQUENCE)
        return cs_err_set(err, 0, "--start-ledger %llu does not fit in a ledger sequence",
                          (unsigned long long)c->start_ledger);
    if (c->synthetic_count > CS_LAST_SEQUENCE)
        return cs_err_set(err, 0, "--synthetic-count %llu is too large", (unsigned long long)c->synthetic_count);
    if (c->file_count > CS_LAST_SEQUENCE)
        return cs_err_set(err, 0, "--file-count %llu is too large", (unsigned long long)c->file_count);
    if (cs_wire_validate_chunk_size(c->chunk_size, err) != 0)
        return cs_err_prefix(err, "--chunk-size: ");
    if (c->emit_window < 0)
        return cs_err_set(err, 0, "--emit-window %s is negative", cs_dur_format(c->emit_window, a, sizeof a));
    if (c->cadence < 0)
        return cs_err_set(err, 0, "--cadence %s is negative", cs_dur_format(c->cadence, a, sizeof a));
    if (file && c->cadence > 0 && c->emit_window > c->cadence)
        return cs_err_set(err, 0, "--emit-window %s does not fit inside --cadence %s",
                          cs_dur_format(c->emit_window, a, sizeof a), cs_dur_format(c->cadence, b, sizeof b));
    if (synthetic && c->synthetic_interval > 0 && c->emit_window > c->synthetic_interval)
        return cs_err_set(err, 0, "--emit-window %s does not fit inside --synthetic-interval %s",
                          cs_dur_format(c->emit_window, a, sizeof a),
                          cs_dur_format(c->synthetic_interval, b, sizeof b));
    uint64_t start = c->start_ledger ? c->start_ledger : 1;
    uint64_t count = synthetic ? c->synthetic_count : file ? c->file_count : 0;
    uint64_t last = count ? start + count - 1 : start;
    if (last >= CS_LAST_SEQUENCE)
        return cs_err_set(err, 0,
                          "the requested range reaches ledger %u, the last representable sequence, which is "
                          "not streamable; lower --start-ledger or --synthetic-count",
                          CS_LAST_SEQUENCE);
    if (c->synthetic_size > CS_MAX_PAYLOAD_SIZE)
        return cs_err_set(err, 0, "--synthetic-size %lld exceeds the %d-byte protocol payload cap",
                          (long long)c->synthetic_size, CS_MAX_PAYLOAD_SIZE);
    if (captive) {
        if (!*c->core_config)
            return cs_err_set(err, 0, "--core-config is required with --source captive");
        if (!*c->history_archive_urls)
            return cs_err_set(err, 0, "--history-archive-urls is required with --source captive");
    }
    if (file && !*c->file_dir)
        return cs_err_set(err, 0, "--file-dir is required with --source file");
    if (pipe && !*c->pipe_cmd && !*c->pipe_path)
        return cs_err_set(err, 0, "--pipe-cmd or --pipe-path is required with --source pipe");
    if (pipe && *c->pipe_cmd && *c->pipe_path)
        return cs_err_set(err, 0,
                          "--pipe-cmd and --pipe-path cannot be used together: the pipe source runs core itself or "
                          "reads the FIFO of a core that runs on its own");
    if (edge && validate_edge(c, err) != 0)
        return -1;
    if (!edge && *c->trusted_keys && !*c->backfill_from)
        return cs_err_set(err, 0,
                          "--trusted-keys is for the edge (--source jetstream) and a backfill source "
                          "(--backfill-from); a subscriber checks signatures with its own keys");
    if (validate_serving(c, err) != 0 || validate_lake(c, err) != 0 || validate_backfill(c, err) != 0)
        return -1;
    if (c->busy_poll_us < 0 || c->busy_poll_us > CS_BUSY_POLL_US_MAX)
        return cs_err_set(err, 0, "--busy-poll-us %lld is outside [0, %d]", (long long)c->busy_poll_us,
                          CS_BUSY_POLL_US_MAX);
    if (c->background_nice < 0 || c->background_nice > 19)
        return cs_err_set(err, 0, "--background-nice %lld is outside [0, 19]", (long long)c->background_nice);
    if (cs_compress_level_parse(c->compress_level_text, &c->compress_level, err) != 0)
        return -1;
    char q[CS_ERR_MSG_MAX / 2];
    if (cs_log_parse_level(c->log_level, &c->log_level_value) != 0) {
        cs_go_quote(q, sizeof q, c->log_level);
        return cs_err_set(err, 0, "--log-level %s is not a level: " LEVELS_ACCEPTED, q);
    }
    if (*c->log_level_file && cs_log_level_file_read(c->log_level_file, &c->log_level_value, err) != 0)
        return -1;
    cs_log_fmt fmt;
    if (cs_log_parse_format(c->log_format, &fmt) != 0) {
        cs_go_quote(q, sizeof q, c->log_format);
        return cs_err_set(err, 0, "--log-format must be logfmt or json, got %s", q);
    }
    c->log_format_value = (int)fmt;
    if (validate_jetstream(c, err) != 0)
        return -1;
    return validate_nats_auth(c, edge, err);
}

/* Long because of its table: one line or three per flag, in -h's order, then a dozen lines of
 * parsing. */
int cs_daemon_config_parse(cs_daemon_config *c, int argc, char **argv, FILE *usage_out, cs_err *err)
{
    set_defaults(c);
    cs_flag flags[] = {
        {"listen", CS_FLAG_STRING, &c->listen, "TCP `address` to serve /stream, /healthz, /readyz and /metrics on"},
        {"admin-listen", CS_FLAG_STRING, &c->admin_listen,
         "second TCP `address` serving only /healthz, /readyz and /metrics (default: none)"},
        {"source", CS_FLAG_STRING, &c->source, "ledger source: captive, file, synthetic, pipe or jetstream"},
        {"retention", CS_FLAG_INT, &c->retention, "number of completed ledgers kept in the disk ring"},
        {"ring-direct", CS_FLAG_BOOL, &c->ring_direct,
         "write ring ledger files with O_DIRECT from the chunk buffers, not through the page cache "
         "(where the file system allows it)"},
        {"start-ledger", CS_FLAG_UINT, &c->start_ledger,
         "first ledger sequence; 0: continue the ring (its latest + 1) when it holds this run's ledgers, else 1 "
         "(--source jetstream: the run's first in the stream; --source captive: required with an empty ring)"},
        {"pipe-size", CS_FLAG_INT, &c->pipe_size,
         "kernel pipe size requested for --source pipe (0 means 1 MiB, negative leaves it alone)"},
        {"data-dir", CS_FLAG_STRING, &c->data_dir, "`directory` for the retention ring (<data-dir>/ledgers)"},
        {"log-level", CS_FLAG_STRING, &c->log_level, "log `level`: debug, info, warn or error"},
        {"log-level-file", CS_FLAG_STRING, &c->log_level_file,
         "`file` whose first line is the log level, read at start and on SIGHUP (overrides --log-level)"},
        {"log-format", CS_FLAG_STRING, &c->log_format,
         "log line `format`: logfmt (slog text, the prototype's) or json (one object per line)"},
        {"chunk-size", CS_FLAG_INT, &c->chunk_size, "chunk payload `bytes`, within [4096,8388608]"},
        {"compress", CS_FLAG_BOOL, &c->compress, "zstd-compress each chunk that shrinks"},
        {"compress-workers", CS_FLAG_INT, &c->compress_workers,
         "live zstd encoder threads, 1..64 (0 means 4)"},
        {"compress-level", CS_FLAG_STRING, &c->compress_level_text,
         "zstd `level` for live chunks: auto adapts it per chunk within -7..3 to what the encoders "
         "sustain at the source's rate; or a fixed level (1 is the prototype's, negative levels trade "
         "ratio for speed)"},
        {"emit-window", CS_FLAG_DURATION, &c->emit_window,
         "window each ledger's bytes are paced over (file and synthetic sources)"},
        {"cadence", CS_FLAG_DURATION, &c->cadence, "interval between ledger starts (file source)"},
        {"core-binary", CS_FLAG_STRING, &c->core_binary,
         "stellar-core `path` for --source captive (default: stellar-core on PATH)"},
        {"core-config", CS_FLAG_STRING, &c->core_config, "captive-core toml `path`"},
        {"history-archive-urls", CS_FLAG_STRING, &c->history_archive_urls,
         "comma-separated history archive `urls` (captive)"},
        {"storage-dir", CS_FLAG_STRING, &c->storage_dir,
         "captive core's working `directory` (default: <data-dir>/captive-core)"},
        {"network-passphrase", CS_FLAG_STRING, &c->network_passphrase,
         "network passphrase: --source captive's (must agree with --core-config when it sets one), and the "
         "lake's; when set, the ring is served as a SEP-54 lake under /lake/"},
        {"file-dir", CS_FLAG_STRING, &c->file_dir, "dump `directory` of ledger-<seq>.xdr files (file source)"},
        {"pipe-cmd", CS_FLAG_STRING, &c->pipe_cmd,
         "shell `command` that writes framed metas to fd 3 (pipe source)"},
        {"pipe-path", CS_FLAG_STRING, &c->pipe_path,
         "named FIFO (`path`, created if missing) that a stellar-core running on its own writes with "
         "METADATA_OUTPUT_STREAM (pipe source)"},
        {"file-count", CS_FLAG_UINT, &c->file_count, "ledgers to replay, cycling the dump (0 means endless)"},
        {"synthetic-size", CS_FLAG_INT, &c->synthetic_size, "synthetic ledger `bytes`"},
        {"synthetic-compressible", CS_FLAG_BOOL, &c->synthetic_compressible,
         "make synthetic ledgers meta-shaped and about 7x compressible"},
        {"synthetic-interval", CS_FLAG_DURATION, &c->synthetic_interval,
         "interval between synthetic ledger starts (negative means unpaced)"},
        {"synthetic-count", CS_FLAG_UINT, &c->synthetic_count, "synthetic ledgers to emit (0 means endless)"},
        {"max-connections", CS_FLAG_INT, &c->max_connections,
         "connections held at once, subscribers included; more are closed at accept (negative: "
         "no cap but the descriptor limit, which always applies)"},
        {"max-connections-per-ip", CS_FLAG_INT, &c->max_connections_per_ip,
         "connections held at once per IPv4 address or IPv6 /64 (negative: no cap)"},
        {"max-replays", CS_FLAG_INT, &c->max_replays,
         "subscribers catching up from the ring at once; more wait their turn, in order (negative: no cap)"},
        {"max-replays-per-ip", CS_FLAG_INT, &c->max_replays_per_ip,
         "subscribers catching up from the ring at once per IPv4 address or IPv6 /64 (negative: no cap)"},
        {"busy-poll-us", CS_FLAG_INT, &c->busy_poll_us,
         "stream I/O threads: poll the sockets this many `microseconds` without blocking before each "
         "wait (0 = off; a waiting thread then spins that long, burning CPU, to shave wake-up latency)"},
        {"background-nice", CS_FLAG_INT, &c->background_nice,
         "nice `steps` below the daemon for work that can wait: ring writes, ring replays, stored-frame "
         "fills, catch-up sends (19: only what stellar-core and live delivery leave; lower it if "
         "catch-ups must progress on a saturated host)"},
        {"auth-tokens", CS_FLAG_STRING, &c->auth_tokens,
         "`file` of \"name token\" lines: /stream then needs Authorization: Bearer <token> (SIGHUP "
         "reloads it)"},
        {"auth-healthz", CS_FLAG_BOOL, &c->auth_healthz, "with --auth-tokens, /healthz, /readyz and /metrics need a token too"},
        {"tls-cert", CS_FLAG_STRING, &c->tls_cert,
         "PEM certificate `file` (chain allowed): serve https:// and wss:// on --listen (SIGHUP reloads it)"},
        {"tls-key", CS_FLAG_STRING, &c->tls_key, "PEM private key `file` for --tls-cert"},
        {"tls-client-ca", CS_FLAG_STRING, &c->tls_client_ca,
         "PEM CA `file`: clients must present a certificate it signed (mutual TLS)"},
        {"signing-key", CS_FLAG_STRING, &c->signing_key,
         "Ed25519 PEM private key `file`: sign every ledger (subscribers ask with sig=1; SIGHUP reloads it)"},
        {"trusted-keys", CS_FLAG_STRING, &c->trusted_keys,
         "PEM `file` of Ed25519 public keys: the edge (--source jetstream), and a gap filled from "
         "--backfill-from, take only ledgers one of them signed"},
        {"version", CS_FLAG_BOOL, &c->version,
         "print the version, commit, build type and library versions, then exit"},
        {"jetstream-url", CS_FLAG_STRING, &c->jetstream_url,
         "NATS `urls` (comma-separated): also publish every ledger's wire messages to JetStream (off when empty)"},
        {"jetstream-stream", CS_FLAG_STRING, &c->jetstream_stream,
         "JetStream stream `name`, created at start when missing, checked against the limits below when not"},
        {"jetstream-max-age", CS_FLAG_DURATION, &c->jetstream_max_age,
         "the stream's max age for messages (0 means no age limit)"},
        {"jetstream-max-bytes", CS_FLAG_INT, &c->jetstream_max_bytes,
         "the stream's size limit in `bytes`; the oldest messages go first (-1 means no limit)"},
        {"jetstream-replicas", CS_FLAG_INT, &c->jetstream_replicas, "the stream's replicas, 1..5 (3 on a cluster)"},
        {"jetstream-max-pending", CS_FLAG_INT, &c->jetstream_max_pending,
         "JetStream publishes in flight awaiting their ack, 1..4096 (bounds the publisher's memory)"},
        {"jetstream-source-url", CS_FLAG_STRING, &c->jetstream_source_url,
         "NATS `urls` (comma-separated) the edge (--source jetstream) consumes --jetstream-stream from"},
        {"jetstream-run", CS_FLAG_STRING, &c->jetstream_run,
         "run `token` the edge follows (as the core logs it); empty means the run of the stream's newest message"},
        {"jetstream-gap-wait", CS_FLAG_DURATION, &c->jetstream_gap_wait,
         "how long the edge waits for a ledger the stream went on without (a later one verified) before it "
         "reports the gap and serves on from the later ledger"},
        {"jetstream-creds", CS_FLAG_STRING, &c->jetstream_creds,
         "NATS credentials `file` (.creds: user JWT and nkey seed) for the publisher or the edge"},
        {"jetstream-nkey-seed", CS_FLAG_STRING, &c->jetstream_nkey_seed,
         "`file` holding the NATS user nkey seed (SU…) to authenticate with"},
        {"jetstream-user", CS_FLAG_STRING, &c->jetstream_user,
         "NATS user `name`, with --jetstream-password-file"},
        {"jetstream-password-file", CS_FLAG_STRING, &c->jetstream_password_file,
         "`file` whose first line is the password of --jetstream-user"},
        {"jetstream-tls-ca", CS_FLAG_STRING, &c->jetstream_tls_ca,
         "PEM CA `file` the NATS servers' certificates must chain to (turns TLS on)"},
        {"jetstream-tls-cert", CS_FLAG_STRING, &c->jetstream_tls_cert,
         "PEM client certificate `file` (chain allowed) presented to NATS (turns TLS on)"},
        {"jetstream-tls-key", CS_FLAG_STRING, &c->jetstream_tls_key, "PEM private key `file` for --jetstream-tls-cert"},
        {"lake-ledgers-per-batch", CS_FLAG_UINT, &c->lake_ledgers_per_batch,
         "ledgers in one lake object (SEP-54 ledgersPerBatch)"},
        {"lake-batches-per-partition", CS_FLAG_UINT, &c->lake_batches_per_partition,
         "lake objects in one partition directory (SEP-54 batchesPerPartition)"},
        {"lake-readers", CS_FLAG_INT, &c->lake_readers,
         "lake objects made at once for /lake/ requests, 1..64; more wait (up to 64 per reader), then 503"},
        {"lake-dir", CS_FLAG_STRING, &c->lake_dir,
         "`directory` to export the lake to, served by any static HTTP server as /lake/ (needs "
         "--network-passphrase; empty: no export)"},
        {"lake-url", CS_FLAG_STRING, &c->lake_url,
         "S3-compatible bucket (`url` s3://bucket/prefix) to export the lake to, credentials and endpoint from the "
         "AWS_* environment (needs --network-passphrase; not with --lake-dir; empty: no export)"},
        {"backfill-from", CS_FLAG_STRING, &c->backfill_from,
         "where a gap in --source pipe or captive is filled from, instead of starting the ring over: a SEP-54 "
         "lake (`url` http(s)://host:8462/lake, or a directory) or a corestreamd's stream (ws(s)://host:8462) "
         "(empty: none)"},
        {"backfill-token-file", CS_FLAG_STRING, &c->backfill_token_file,
         "`file` whose first line is the bearer token --backfill-from is asked with (read at start; empty: none)"},
        {"backfill-ca", CS_FLAG_STRING, &c->backfill_ca,
         "PEM CA `file` an https:// or wss:// --backfill-from is verified with (empty: the system's CAs)"},
    };
    cs_flagset fs = {.prog = "corestreamd",
                     .synopsis = "Streams ledgers from one source to WebSocket subscribers on /stream.",
                     .flags = flags,
                     .nflags = sizeof flags / sizeof flags[0]};
    int first = 0;
    int rc = cs_flags_parse(&fs, argc, argv, &first, err);
    if (rc == CS_FLAGS_HELP) {
        cs_flags_usage(&fs, usage_out);
        return 1;
    }
    if (rc != CS_FLAGS_OK) {
        fprintf(usage_out, "%s\n", err->msg);
        cs_flags_usage(&fs, usage_out);
        return -1;
    }
    if (c->version)
        return CS_CONFIG_VERSION;
    if (first < argc) {
        char q[CS_ERR_MSG_MAX / 2];
        cs_go_quote(q, sizeof q, argv[first]);
        return cs_err_set(err, 0, "unexpected argument %s", q);
    }
    c->urls_buf = strdup(c->history_archive_urls);
    if (!c->urls_buf)
        return cs_err_set(err, 0, "out of memory");
    c->nurls = cs_split_urls(c->urls_buf, c->urls, sizeof c->urls / sizeof c->urls[0]);
    return validate(c, err);
}

void cs_daemon_run_definition(const cs_daemon_config *c, char *buf, size_t len)
{
    long long chunk = (long long)c->chunk_size;
    if (strcmp(c->source, "synthetic") == 0) {
        snprintf(buf, len, "synthetic size=%lld compressible=%s chunk_size=%lld", (long long)c->synthetic_size,
                 c->synthetic_compressible ? "true" : "false", chunk);
    } else if (strcmp(c->source, "file") == 0) {
        /* The dump cycles from --start-ledger, so both name the bytes of a ledger. */
        char dir[PATH_MAX];
        if (!realpath(c->file_dir, dir))
            snprintf(dir, sizeof dir, "%s", c->file_dir);
        snprintf(buf, len, "file dir=%s start=%llu chunk_size=%lld", dir, (unsigned long long)c->start_ledger, chunk);
    } else if (strcmp(c->source, "jetstream") == 0) {
        snprintf(buf, len, "jetstream stream=%s run=%s", c->jetstream_stream, c->jetstream_run);
    } else if (strcmp(c->source, "pipe") == 0) {
        if (*c->pipe_path)
            snprintf(buf, len, "pipe path=%s chunk_size=%lld", c->pipe_path, chunk);
        else
            snprintf(buf, len, "pipe cmd=%s chunk_size=%lld", c->pipe_cmd, chunk);
    } else if (*c->network_passphrase) {
        /* A ledger of a network is the same bytes whichever core produced it. */
        snprintf(buf, len, "captive network=%s chunk_size=%lld", c->network_passphrase, chunk);
    } else {
        char cfgpath[PATH_MAX];
        if (!realpath(c->core_config, cfgpath))
            snprintf(cfgpath, sizeof cfgpath, "%s", c->core_config);
        snprintf(buf, len, "captive config=%s chunk_size=%lld", cfgpath, chunk);
    }
}

void cs_daemon_config_free(cs_daemon_config *c)
{
    free(c->urls_buf);
    c->urls_buf = NULL;
}
