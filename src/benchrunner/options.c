/* SPDX-License-Identifier: Apache-2.0 */
#include "benchrunner/options.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/complevel.h"
#include "common/flags.h"
#include "common/goquote.h"
#include "common/synthetic.h"
#include "corestream/wire.h"
#include "wire/wire.h"

void br_options_defaults(br_options *o)
{
    memset(o, 0, sizeof *o);
    o->mode = "loopback";
    o->url = "ws://127.0.0.1:8462";
    o->csv = "";
    o->synthetic_size = CS_SYNTHETIC_DEFAULT_SIZE;
    o->synthetic_interval = 10 * CS_MS;
    o->emit_window = 5 * CS_MS;
    o->chunk_size = CS_DEFAULT_CHUNK_SIZE;
    o->compress_level_text = "auto";
    o->count = 100;
    o->verify_dir = "";
    o->pipe_cmd = "";
    o->pipe_size = 1048576;
    o->core_binary = "";
    o->core_config = "";
    o->history_archive_urls = "";
    o->storage_dir = "";
    o->network_passphrase = "";
    o->tls_ca = "";
    o->tls_server_name = "";
    o->tls_cert = "";
    o->tls_key = "";
    o->token = "";
    o->token_file = "";
    o->trusted_keys = "";
    o->subscribers = 1;
    o->resume_retries = 10;
}

#define BR_NFLAGS 35

static void fill_flags(cs_flag *f, br_options *o)
{
    const cs_flag table[BR_NFLAGS] = {
        {"mode", CS_FLAG_STRING, &o->mode, "loopback|remote|local|localtap|lake"},
        {"url", CS_FLAG_STRING, &o->url,
         "corestreamd URL (remote mode); lake mode: a SEP-54 lake, http(s)://host:8462/lake or a directory"},
        {"start", CS_FLAG_UINT, &o->start, "first ledger (0 = tip in remote mode, 1 in loopback)"},
        {"end", CS_FLAG_UINT, &o->end, "last ledger (0 = unbounded)"},
        {"csv", CS_FLAG_STRING, &o->csv, "write per-ledger rows to this file"},
        {"synthetic-size", CS_FLAG_INT, &o->synthetic_size,
         "loopback: ledger payload bytes; remote --verify: the server's --synthetic-size"},
        {"synthetic-interval", CS_FLAG_DURATION, &o->synthetic_interval,
         "loopback: ledger cadence (the emit window nests inside it)"},
        {"emit-window", CS_FLAG_DURATION, &o->emit_window,
         "loopback: pace each ledger's bytes over this window (0 = all at once)"},
        {"chunk-size", CS_FLAG_INT, &o->chunk_size,
         "loopback: server chunk payload bytes; localtap: read size"},
        {"compress", CS_FLAG_BOOL, &o->compress,
         "loopback: zstd-compress chunks and make the payloads compressible"},
        {"compress-level", CS_FLAG_STRING, &o->compress_level_text,
         "loopback: zstd `level` for chunks: auto (adapts within -7..3) or a fixed level (1 is the "
         "prototype's; negative is faster)"},
        {"remote-compressible", CS_FLAG_BOOL, &o->remote_compressible,
         "remote --verify: the server runs --synthetic-compressible"},
        {"count", CS_FLAG_UINT, &o->count, "loopback: ledgers to stream"},
        {"verify", CS_FLAG_BOOL, &o->verify,
         "loopback and remote: check every payload against the regenerated synthetic bytes"},
        {"verify-dir", CS_FLAG_STRING, &o->verify_dir,
         "remote: check every payload against the dump `directory` instead: ledger N is its record (N-1) mod "
         "records, in ledger-<seq>.xdr order, as corestreamd's file source serves it without --start-ledger"},
        {"pipe-cmd", CS_FLAG_STRING, &o->pipe_cmd, "localtap: shell command that writes framed metas to fd 3"},
        {"pipe-size", CS_FLAG_INT, &o->pipe_size, "localtap: kernel pipe size to request"},
        {"core-binary", CS_FLAG_STRING, &o->core_binary, "local: stellar-core binary (default: found on PATH)"},
        {"core-config", CS_FLAG_STRING, &o->core_config, "local: captive-core toml path"},
        {"history-archive-urls", CS_FLAG_STRING, &o->history_archive_urls,
         "local: comma-separated history archive URLs"},
        {"storage-dir", CS_FLAG_STRING, &o->storage_dir, "local: captive core storage path"},
        {"network-passphrase", CS_FLAG_STRING, &o->network_passphrase,
         "local: override the toml's NETWORK_PASSPHRASE"},
        {"tls-ca", CS_FLAG_STRING, &o->tls_ca,
         "remote, wss://: CA certificate file or directory to trust instead of the system's"},
        {"tls-server-name", CS_FLAG_STRING, &o->tls_server_name,
         "remote, wss://: name to verify the server's certificate against (default: the URL's host)"},
        {"tls-cert", CS_FLAG_STRING, &o->tls_cert, "remote, wss://: client certificate (PEM)"},
        {"tls-key", CS_FLAG_STRING, &o->tls_key, "remote, wss://: client key (PEM; default: in -tls-cert)"},
        {"token", CS_FLAG_STRING, &o->token, "remote: bearer token for the server"},
        {"token-file", CS_FLAG_STRING, &o->token_file, "remote: file holding the bearer token (its first line)"},
        {"trusted-keys", CS_FLAG_STRING, &o->trusted_keys,
         "remote and lake: PEM `file` of Ed25519 public keys; every ledger must be signed by one (corestreamd "
         "--signing-key; lake: by the batch's <key>.sig)"},
        {"subscribers", CS_FLAG_INT, &o->subscribers,
         "remote and loopback: K subscribers in this process, served by one thread (1..1024)"},
        {"resume", CS_FLAG_BOOL, &o->resume,
         "remote and loopback: reconnect when a connection is lost and go on from the next ledger"},
        {"resume-retries", CS_FLAG_INT, &o->resume_retries,
         "with -resume: attempts in a row without a ledger before giving up (negative = no limit)"},
        {"busy-poll-us", CS_FLAG_INT, &o->busy_poll_us,
         "remote and loopback, one subscriber: busy-poll the socket this many microseconds before blocking (0 = off); loopback: the in-process server's stream I/O threads too"},
        {"quiet", CS_FLAG_BOOL, &o->quiet,
         "no progress line (by default one is redrawn each second on standard error when it is a terminal)"},
        {"version", CS_FLAG_BOOL, &o->version,
         "print the version, commit, build type and library versions, then exit"},
    };
    memcpy(f, table, sizeof table);
}

/* -h's lines after "Usage of benchrunner:": what the program is for and how it is called. */
#define BR_SYNOPSIS                                                                                            \
    "Measures how ledgers arrive from a corestreamd: delivery latency, throughput, one CSV row per ledger.\n"  \
    "Example: benchrunner --mode remote --url ws://127.0.0.1:8462 --start 1000 --end 1999 --csv run.csv\n"     \
    "On a terminal a progress line is redrawn each second on standard error (not with --quiet); the\n"          \
    "summary goes to standard output. Exit: 0 done, 1 error, 2 --csv cannot be created, 128+N stopped by\n"   \
    "signal N before the range's end. See benchrunner(1)."

/* Go's usage shows the defaults recorded when the flags were defined, not the parsed values. */
static void print_usage(FILE *out)
{
    br_options defaults;
    cs_flag flags[BR_NFLAGS];
    br_options_defaults(&defaults);
    fill_flags(flags, &defaults);
    cs_flagset fs = {.prog = "benchrunner", .synopsis = BR_SYNOPSIS, .flags = flags, .nflags = BR_NFLAGS};
    cs_flags_usage(&fs, out);
}

static int set_quoted(cs_err *err, const char *prefix, const char *value)
{
    char q[CS_ERR_MSG_MAX / 2];
    cs_go_quote(q, sizeof q, value);
    return cs_err_set(err, 0, "%s%s", prefix, q);
}

int br_options_validate(const br_options *o, cs_err *err)
{
    char a[CS_DUR_STR_MAX], b[CS_DUR_STR_MAX];
    if (o->start > UINT32_MAX || o->end > UINT32_MAX || o->count > UINT32_MAX)
        return cs_err_set(err, 0, "--start, --end and --count must fit in a ledger sequence");
    if (o->end != 0 && o->start > o->end)
        return cs_err_set(err, 0, "--end %llu is before --start %llu", (unsigned long long)o->end,
                          (unsigned long long)o->start);
    if (cs_wire_validate_chunk_size(o->chunk_size, err) != 0)
        return cs_err_prefix(err, "--chunk-size: ");
    if (o->emit_window < 0)
        return cs_err_set(err, 0, "--emit-window %s is negative", cs_dur_format(o->emit_window, a, sizeof a));
    bool loopback = strcmp(o->mode, "loopback") == 0;
    if (loopback && o->synthetic_interval > 0 && o->emit_window > o->synthetic_interval)
        return cs_err_set(err, 0, "--emit-window %s does not fit inside --synthetic-interval %s",
                          cs_dur_format(o->emit_window, a, sizeof a),
                          cs_dur_format(o->synthetic_interval, b, sizeof b));
    if (loopback) {
        if (o->count == 0)
            return cs_err_set(err, 0, "--count must be positive in loopback mode");
    } else if (strcmp(o->mode, "remote") == 0) {
        /* nothing more to check */
    } else if (strcmp(o->mode, "lake") == 0) {
        if (!CS_WITH_CAPTIVE)
            return cs_err_set(err, 0,
                              "--mode lake is not available: this benchrunner was configured with "
                              "-DCS_WITH_CAPTIVE=OFF (it reads lakes with libcurl)");
        if (o->start == 0 || o->end == 0)
            return cs_err_set(err, 0, "--start and --end are required in lake mode: a lake holds a known range");
        if (strncmp(o->url, "ws://", 5) == 0 || strncmp(o->url, "wss://", 6) == 0)
            return set_quoted(err, "--url must name a lake in lake mode (http(s)://host:8462/lake or a directory), got ",
                              o->url);
    } else if (strcmp(o->mode, "localtap") == 0) {
        if (!*o->pipe_cmd)
            return cs_err_set(err, 0, "--pipe-cmd is required in localtap mode");
    } else if (strcmp(o->mode, "local") == 0) {
        if (!CS_WITH_CAPTIVE)
            return cs_err_set(err, 0,
                              "--mode local is not available: this benchrunner was configured with "
                              "-DCS_WITH_CAPTIVE=OFF");
        if (o->start == 0)
            return cs_err_set(err, 0, "--start is required in local mode: captive core replays a known range");
        if (!*o->core_config)
            return cs_err_set(err, 0, "--core-config is required in local mode");
        if (!*o->history_archive_urls)
            return cs_err_set(err, 0, "--history-archive-urls is required in local mode");
    } else {
        return set_quoted(err, "--mode must be loopback, remote, local, localtap or lake, got ", o->mode);
    }
    bool streams = loopback || strcmp(o->mode, "remote") == 0;
    if (o->subscribers < 1 || o->subscribers > BR_MAX_SUBSCRIBERS)
        return cs_err_set(err, 0, "--subscribers must be 1 to %d, got %lld", BR_MAX_SUBSCRIBERS,
                          (long long)o->subscribers);
    if (*o->verify_dir && strcmp(o->mode, "remote") != 0 && strcmp(o->mode, "lake") != 0)
        return set_quoted(err, "--verify-dir applies to the remote and lake modes, not ", o->mode);
    if (o->subscribers > 1 && !streams)
        return set_quoted(err, "--subscribers applies to the remote and loopback modes, not ", o->mode);
    if (o->resume && !streams)
        return set_quoted(err, "--resume applies to the remote and loopback modes, not ", o->mode);
    if (o->resume && o->resume_retries == 0)
        return cs_err_set(err, 0, "--resume-retries 0 would never reconnect: give a positive budget, or a "
                                  "negative one for no limit");
    if (o->busy_poll_us < 0 || o->busy_poll_us > BR_MAX_BUSY_POLL_US)
        return cs_err_set(err, 0, "--busy-poll-us must be 0 to %d, got %lld", BR_MAX_BUSY_POLL_US,
                          (long long)o->busy_poll_us);
    if (o->busy_poll_us && !streams)
        return set_quoted(err, "--busy-poll-us applies to the remote and loopback modes, not ", o->mode);
    if (o->busy_poll_us && o->subscribers > 1)
        return cs_err_set(err, 0, "--busy-poll-us applies to one subscriber: --subscribers %lld polls its sessions "
                                  "without blocking in any one of them",
                          (long long)o->subscribers);
    if (*o->tls_key && !*o->tls_cert)
        return cs_err_set(err, 0, "--tls-key needs --tls-cert");
    if (*o->token && *o->token_file)
        return cs_err_set(err, 0, "--token and --token-file cannot both be given");
    return 0;
}

int br_options_parse(br_options *o, int argc, char **argv, FILE *usage_out, cs_err *err)
{
    br_options_defaults(o);
    cs_flag flags[BR_NFLAGS];
    fill_flags(flags, o);
    cs_flagset fs = {.prog = "benchrunner", .synopsis = BR_SYNOPSIS, .flags = flags, .nflags = BR_NFLAGS};
    int first = argc;
    int rc = cs_flags_parse(&fs, argc, argv, &first, err);
    if (rc == CS_FLAGS_HELP) {
        if (usage_out)
            print_usage(usage_out);
        return 1;
    }
    if (rc != CS_FLAGS_OK) {
        if (usage_out) {
            fprintf(usage_out, "%s\n", err->msg);
            print_usage(usage_out);
        }
        return -1;
    }
    if (o->version)
        return BR_OPTIONS_VERSION;
    if (first < argc)
        return set_quoted(err, "unexpected argument ", argv[first]);
    if (cs_compress_level_parse(o->compress_level_text, &o->compress_level, err) != 0)
        return -1;
    return br_options_validate(o, err);
}

int br_bearer_token(const br_options *o, char *tok, size_t len, cs_err *err)
{
    snprintf(tok, len, "%s", o->token);
    if (*o->token || !*o->token_file)
        return 0;
    FILE *f = fopen(o->token_file, "r");
    char e[128];
    if (!f)
        return cs_err_set(err, 0, "read token file \"%s\": open %s: %s", o->token_file, o->token_file,
                          cs_go_errno(errno, e, sizeof e));
    bool ok = fgets(tok, (int)len, f) != NULL;
    fclose(f);
    tok[ok ? strcspn(tok, "\r\n") : 0] = '\0';
    if (!*tok)
        return cs_err_set(err, 0, "read token file \"%s\": no token in it", o->token_file);
    return 0;
}
