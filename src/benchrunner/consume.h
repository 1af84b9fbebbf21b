/* SPDX-License-Identifier: Apache-2.0 */
/* benchrunner: streaming a range from a corestreamd through libremoteledger's pull API, into one
 * collector per subscriber (loopback and remote modes).
 *
 * One subscriber: rl_stream_open, then rl_stream_next(-1) to the end, as RPC's ingestion does.
 * K subscribers (--subscribers): K sessions in this process served by the calling thread alone, a
 * poll loop over rl_stream_fd with rl_stream_next(0) (the header's contract), taking one ledger
 * per readable session per pass so no subscriber is served twice while another waits. Each
 * ledger's arrival is stamped as next returns it; with --verify its bytes are compared against the
 * synthetic source, regenerated once per sequence for all subscribers, or with --verify-dir
 * against a dump directory's (dumpverify.h). */
#ifndef CS_BENCHRUNNER_CONSUME_H
#define CS_BENCHRUNNER_CONSUME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "benchrunner/options.h"
#include "benchrunner/stats.h"
#include "common/err.h"
#include "corestream/remoteledger.h"

typedef struct br_consume_spec {
    const char *label;        /* the summary's title */
    const char *url;
    const br_options *remote; /* TLS and token flags, or NULL (loopback) */
    rl_range range;
    bool verify;
    bool compressible;        /* the synthetic shape --verify regenerates */
    uint64_t size;            /* the length --verify expects of every ledger */
    const char *verify_dir;   /* --verify-dir: expect the dump's bytes instead (NULL or "": no) */
    size_t subscribers;       /* 1..BR_MAX_SUBSCRIBERS */
    bool resume;
    int64_t resume_retries;
    int64_t busy_poll_us;     /* rl_options.busy_poll_ns in microseconds; 0 off */
    /* Called with the run's streams once they exist (and with NULL, 0 before they are freed), so
     * a signal can rl_stream_cancel them; may be NULL. */
    void (*publish)(rl_stream *const *streams, size_t n);
    /* Called on the consuming thread after each ledger any subscriber (0-based sub) records, with
     * its sample (a progress line); may be NULL. */
    void (*progress)(size_t sub, const br_sample *s, void *ctx);
    void *progress_ctx;
    /* Whether the user interrupted the run (SIGINT/SIGTERM): then a subscriber of an unbounded
     * range that ends cancelled ended well (Ctrl-C is how such a run stops). May be NULL. */
    bool (*interrupted)(void);
} br_consume_spec;

/* How one subscriber ended. */
typedef struct br_subscriber {
    br_collector *c;
    rl_result r;  /* RL_OK when its range was delivered (or it was stopped cleanly) */
    cs_err err;   /* the message when r is not RL_OK, or when verification failed (r RL_OK) */
    bool failed;  /* r is an error, or verification failed */
} br_subscriber;

/* Runs the spec: *subs (spec->subscribers entries, free with br_consume_free) holds each
 * subscriber's collector and end. Returns 0 when every subscriber ended well, -1 otherwise (err
 * names the first failure: for one subscriber its message as it stands, for several prefixed with
 * "subscriber N: " and followed by how many failed). *subs is NULL only when memory ran out. */
int br_consume(const br_consume_spec *spec, br_subscriber **subs, cs_err *err);
void br_consume_free(br_subscriber *subs, size_t n);

/* --csv with several subscribers: one file per subscriber, the path with "-NNN" (1-based, three
 * digits at least) put before its ".csv" ("run.csv" -> "run-001.csv"), or appended when it has
 * no such suffix. */
void br_subscriber_csv_path(const char *path, size_t i, char *buf, size_t len);

#endif
