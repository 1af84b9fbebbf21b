/* SPDX-License-Identifier: Apache-2.0 */
/* benchrunner's command line (benchrunner(1)): flags, defaults, and validation in the prototype's
 * order and wording. Separate from main.c so tests can drive it. */
#ifndef CS_BENCHRUNNER_OPTIONS_H
#define CS_BENCHRUNNER_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"
#include "common/godur.h"

typedef struct br_options {
    const char *mode; /* loopback | remote | local | localtap */
    const char *url;
    uint64_t start;
    uint64_t end;
    const char *csv;
    int64_t synthetic_size;
    cs_dur synthetic_interval;
    cs_dur emit_window;
    int64_t chunk_size;
    bool compress;
    const char *compress_level_text; /* --compress-level: auto or an integer */
    int64_t compress_level;          /* derived: 0 for auto */
    bool remote_compressible;
    uint64_t count;
    bool verify;
    const char *verify_dir; /* --verify-dir: a dump directory to verify against ("" unset) */
    const char *pipe_cmd;
    int64_t pipe_size;
    const char *core_binary;
    const char *core_config;
    const char *history_archive_urls;
    const char *storage_dir;
    const char *network_passphrase;
    /* remote mode over wss:// (and the token over either scheme); "" means unset */
    const char *tls_ca;          /* CA certificate file, or a directory of them, to trust */
    const char *tls_server_name; /* name to verify the server's certificate against (and SNI) */
    const char *tls_cert;        /* client certificate (PEM) */
    const char *tls_key;         /* its key (PEM; default: in tls_cert) */
    const char *token;           /* bearer token */
    const char *token_file;      /* file whose first line is the bearer token */
    const char *trusted_keys;    /* remote: Ed25519 public keys every ledger must be signed by */
    int64_t subscribers;         /* remote and loopback: sessions served by one thread (1..1024) */
    bool resume;                 /* remote and loopback: reconnect and go on (rl_options resume) */
    int64_t resume_retries;      /* --resume's budget: attempts in a row without a ledger; <0 none */
    int64_t busy_poll_us;        /* remote and loopback: rl_options.busy_poll_ns / 1000; 0 off */
    bool quiet;                  /* --quiet: no progress line, even on a terminal */
    bool version;                /* --version: print the build information and exit 0 */
} br_options;

/* --subscribers' ceiling: sessions one process (and its descriptor limit) serves. */
#define BR_MAX_SUBSCRIBERS 1024
/* --busy-poll-us' ceiling: the library's RL_MAX_BUSY_POLL_NS, 1 s. */
#define BR_MAX_BUSY_POLL_US 1000000

/* The defaults of benchrunner(1) (mode loopback, url ws://127.0.0.1:8462, count 100, ...). */
void br_options_defaults(br_options *o);

/* Parses argv[1..argc) over the defaults, then validates. Returns
 *   0 on success;
 *   1 when help was asked for (usage already written to usage_out: exit 0);
 *   BR_OPTIONS_VERSION when --version was given (nothing printed or validated: the caller prints
 *     cs_build_print's text and exits 0);
 *  -1 with the message in err (without the "benchrunner: " prefix). For a flag syntax error the
 *     message and the usage are written to usage_out first, as Go's flag package does.
 * String fields point into argv or at static defaults. usage_out may be NULL to print nothing. */
#define BR_OPTIONS_VERSION 2
int br_options_parse(br_options *o, int argc, char **argv, FILE *usage_out, cs_err *err);

/* The flags' validation steps alone (benchrunner(1)), in order; the first failure wins. */
int br_options_validate(const br_options *o, cs_err *err);

/* The bearer token into tok[0..len): --token, else the first line of --token-file (without its
 * line ending), else "". 0, or -1 with err: `read token file "F": open F: <cause>`, `read token
 * file "F": no token in it`. */
int br_bearer_token(const br_options *o, char *tok, size_t len, cs_err *err);

#endif
