/* SPDX-License-Identifier: Apache-2.0 */
/* benchrunner's measurements (benchrunner(1)): one sample per received ledger, nearest-rank
 * percentiles, the plain-text summary and the per-ledger CSV, formatted to the character as the
 * prototype prints them. No clock is read here except by br_mono_ns: callers pass arrival times in,
 * so tests can script them. */
#ifndef CS_BENCHRUNNER_STATS_H
#define CS_BENCHRUNNER_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"

/* One received ledger. Durations are nanoseconds; each optional one has its own flag. */
typedef struct br_sample {
    uint32_t seq;
    uint64_t bytes;      /* payload size */
    uint32_t chunks;     /* CHUNK messages that carried it; 0 when no stream was involved */
    uint32_t discarded;  /* partial assemblies thrown away before it arrived (ring fallbacks) */
    int64_t since_start; /* arrival minus the first arrival of the run; set by br_collector_add */
    int64_t delivery;    /* assembled and verified minus emit end */
    bool has_delivery;
    int64_t pipeline;    /* assembled minus emit start */
    bool has_pipeline;
    int64_t emit;        /* emit end minus emit start, on the server's clock */
    bool has_emit;
    uint64_t reconnects; /* --resume: the session's reconnections when it arrived */
} br_sample;

typedef struct br_collector br_collector;

/* NULL on allocation failure. The label is copied. */
br_collector *br_collector_new(const char *label);
void br_collector_free(br_collector *c);

/* Records s as received at now_ns (a monotonic clock reading); s->since_start is ignored and
 * computed here. Returns 0, or -1 when out of memory (the sample is then lost). */
int br_collector_add(br_collector *c, int64_t now_ns, const br_sample *s);

size_t br_collector_len(const br_collector *c);
/* The i-th sample in arrival order (i < len). */
const br_sample *br_collector_sample(const br_collector *c, size_t i);
const char *br_collector_label(const br_collector *c);

/* Last arrival minus first arrival; 0 for no samples. */
int64_t br_collector_elapsed(const br_collector *c);
/* Sum of the discarded partials over the run. */
uint64_t br_collector_fallbacks(const br_collector *c);
/* Whether any ledger arrived as a chunk flow (chunks > 0). */
bool br_collector_chunked(const br_collector *c);

typedef enum br_metric {
    BR_METRIC_INTER_ARRIVAL, /* gaps between consecutive arrivals: len-1 values, none below 2 */
    BR_METRIC_DELIVERY,
    BR_METRIC_PIPELINE,
    BR_METRIC_EMIT,
} br_metric;

/* Writes the metric's present values, in arrival order, to out (room for br_collector_len values;
 * out may be NULL just to count) and returns how many there are. */
size_t br_collector_metric(const br_collector *c, br_metric m, int64_t *out);

/* --resume: the summary gains a "reconnects" line and the CSV a tenth column, "reconnects" (the
 * sample's count); without it both are the prototype's, to the character. */
void br_collector_set_resume(br_collector *c, bool on);
/* The session's reconnections at the end of the run (the summary's figure). */
void br_collector_set_reconnects(br_collector *c, uint64_t n);
uint64_t br_collector_reconnects(const br_collector *c);

/* One subscriber of a --subscribers run, for br_fanout_summary: its samples and how it ended
 * ("ok", or the failure's message). */
typedef struct br_subscriber_result {
    const br_collector *c;
    const char *result;
} br_subscriber_result;

/* The summary of k subscribers served by one process: "\n=== <label> ===\n", how many ended well,
 * the ledgers in all and per subscriber, the delivery, pipeline and t_emit percentiles pooled over
 * every subscriber's stamped samples, the worst subscriber's delivery p99, the discarded partials
 * and stampless (replayed) ledgers in all (what a client sees of the server's live abandons),
 * reconnects with resume, then one row per subscriber. malloc'd; NULL when out of memory. */
char *br_fanout_summary(const char *label, const br_subscriber_result *subs, size_t k, bool resume);

/* Nearest rank over an ascending array: index floor((p*n+99)/100)-1 clamped to [0,n-1]; 0 for
 * n == 0. */
int64_t br_percentile(const int64_t *sorted, size_t n, int p);

/* A running latency histogram's buckets (the progress line's percentiles, where sorting every
 * value each second would cost more the longer a run goes): values below 2^BR_HIST_SUB_BITS
 * have a bucket each, larger ones 2^(BR_HIST_SUB_BITS-1) buckets per power of two, so a bucket's
 * value is within 0.4 % of any value counted in it. Negative values count as 0. */
#define BR_HIST_SUB_BITS 9
#define BR_HIST_BUCKETS ((1 << BR_HIST_SUB_BITS) + (63 - BR_HIST_SUB_BITS) * (1 << (BR_HIST_SUB_BITS - 1)))
/* The bucket v counts in. */
size_t br_hist_index(int64_t v);
/* The value a bucket stands for: the value itself below 2^BR_HIST_SUB_BITS, else its midpoint. */
int64_t br_hist_value(size_t index);
/* br_percentile's nearest rank over counts[BR_HIST_BUCKETS] holding n values in all: the value
 * of the bucket the rank falls in; 0 for n == 0. */
int64_t br_hist_percentile(const uint64_t *counts, uint64_t n, int p);

/* Latency text: below 1 µs (negatives included) "%dns", below 1 ms "%.1fµs", else "%.2fms".
 * Returns buf. BR_DUR_STR_MAX bytes always suffice. */
#define BR_DUR_STR_MAX 48
char *br_fmt_dur(int64_t d, char *buf, size_t len);

/* d rounded to a multiple of m, halves away from zero (Go's Duration.Round); m ≤ 0 returns d.
 * Saturates at the int64 range like Go. */
int64_t br_dur_round(int64_t d, int64_t m);

/* The summary of benchrunner(1), starting with "\n=== <label> ===\n". malloc'd; NULL when out of
 * memory. */
char *br_collector_summary(const br_collector *c);

/* The 9-column CSV of benchrunner(1) (header plus one row per sample). Returns 0, or -1 with errno
 * set when a write fails. */
int br_collector_write_csv(const br_collector *c, FILE *out);

/* Creates or truncates path and writes the CSV into it. Errors read like Go's os package:
 * `open <path>: no such file or directory`, `write <path>: …`, `close <path>: …`. */
int br_write_csv_file(const char *path, const br_collector *c, cs_err *err);

/* CLOCK_MONOTONIC in nanoseconds: the clock arrivals are taken on. */
int64_t br_mono_ns(void);

#endif
