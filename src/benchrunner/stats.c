/* SPDX-License-Identifier: Apache-2.0 */
#include "benchrunner/stats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/godur.h"

struct br_collector {
    char *label;
    bool started;
    int64_t start_ns;
    br_sample *samples;
    size_t n, cap;
    uint64_t bytes;
    bool resume;
    uint64_t reconnects;
};

br_collector *br_collector_new(const char *label)
{
    br_collector *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->label = strdup(label ? label : "");
    if (!c->label) {
        free(c);
        return NULL;
    }
    return c;
}

void br_collector_free(br_collector *c)
{
    if (!c)
        return;
    free(c->samples);
    free(c->label);
    free(c);
}

int br_collector_add(br_collector *c, int64_t now_ns, const br_sample *s)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 256;
        br_sample *grown = realloc(c->samples, cap * sizeof *grown);
        if (!grown)
            return -1;
        c->samples = grown;
        c->cap = cap;
    }
    if (!c->started) {
        c->started = true;
        c->start_ns = now_ns;
    }
    br_sample *d = &c->samples[c->n++];
    *d = *s;
    d->since_start = now_ns - c->start_ns;
    c->bytes += s->bytes;
    return 0;
}

size_t br_collector_len(const br_collector *c)
{
    return c->n;
}

const br_sample *br_collector_sample(const br_collector *c, size_t i)
{
    return &c->samples[i];
}

const char *br_collector_label(const br_collector *c)
{
    return c->label;
}

int64_t br_collector_elapsed(const br_collector *c)
{
    return c->n ? c->samples[c->n - 1].since_start : 0;
}

uint64_t br_collector_fallbacks(const br_collector *c)
{
    uint64_t n = 0;
    for (size_t i = 0; i < c->n; i++)
        n += c->samples[i].discarded;
    return n;
}

void br_collector_set_resume(br_collector *c, bool on) { c->resume = on; }
void br_collector_set_reconnects(br_collector *c, uint64_t n) { c->reconnects = n; }
uint64_t br_collector_reconnects(const br_collector *c) { return c->reconnects; }

bool br_collector_chunked(const br_collector *c)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->samples[i].chunks > 0)
            return true;
    return false;
}

size_t br_collector_metric(const br_collector *c, br_metric m, int64_t *out)
{
    size_t k = 0;
    if (m == BR_METRIC_INTER_ARRIVAL) {
        for (size_t i = 1; i < c->n; i++, k++)
            if (out)
                out[k] = c->samples[i].since_start - c->samples[i - 1].since_start;
        return k;
    }
    for (size_t i = 0; i < c->n; i++) {
        const br_sample *s = &c->samples[i];
        bool ok = m == BR_METRIC_DELIVERY ? s->has_delivery : m == BR_METRIC_PIPELINE ? s->has_pipeline
                                                                                        : s->has_emit;
        if (!ok)
            continue;
        if (out)
            out[k] = m == BR_METRIC_DELIVERY ? s->delivery : m == BR_METRIC_PIPELINE ? s->pipeline : s->emit;
        k++;
    }
    return k;
}

/* The 0-based nearest rank of percentile p among n > 0 values. Go computes (p*len+99)/100 - 1 in
 * int, truncating toward zero. */
static uint64_t rank_of(uint64_t n, int p)
{
    int64_t idx = ((int64_t)p * (int64_t)n + 99) / 100 - 1;
    if (idx < 0)
        idx = 0;
    if ((uint64_t)idx >= n)
        idx = (int64_t)n - 1;
    return (uint64_t)idx;
}

int64_t br_percentile(const int64_t *sorted, size_t n, int p)
{
    return n == 0 ? 0 : sorted[rank_of(n, p)];
}

#define HIST_EXACT ((uint64_t)1 << BR_HIST_SUB_BITS)  /* values below have a bucket each */
#define HIST_HALF ((uint64_t)1 << (BR_HIST_SUB_BITS - 1)) /* buckets per power of two above */

size_t br_hist_index(int64_t v)
{
    if (v < (int64_t)HIST_EXACT)
        return v < 0 ? 0 : (size_t)v;
    int top = 63 - __builtin_clzll((unsigned long long)v); /* BR_HIST_SUB_BITS .. 62 */
    int shift = top - (BR_HIST_SUB_BITS - 1);              /* leaves the top SUB_BITS bits */
    uint64_t m = (uint64_t)v >> shift;                     /* HIST_HALF .. HIST_EXACT-1 */
    return (size_t)(HIST_EXACT + (uint64_t)(shift - 1) * HIST_HALF + (m - HIST_HALF));
}

int64_t br_hist_value(size_t index)
{
    if (index < HIST_EXACT)
        return (int64_t)index;
    uint64_t k = index - HIST_EXACT;
    int shift = (int)(k / HIST_HALF) + 1;
    uint64_t lo = (HIST_HALF + k % HIST_HALF) << shift;
    return (int64_t)(lo + ((uint64_t)1 << shift) / 2);
}

int64_t br_hist_percentile(const uint64_t *counts, uint64_t n, int p)
{
    if (n == 0)
        return 0;
    uint64_t want = rank_of(n, p) + 1, seen = 0;
    for (size_t i = 0; i < BR_HIST_BUCKETS; i++) {
        seen += counts[i];
        if (seen >= want)
            return br_hist_value(i);
    }
    return br_hist_value(BR_HIST_BUCKETS - 1); /* counts summed to less than n */
}

char *br_fmt_dur(int64_t d, char *buf, size_t len)
{
    if (d < CS_US)
        snprintf(buf, len, "%" PRId64 "ns", d);
    else if (d < CS_MS)
        snprintf(buf, len, "%.1f\xc2\xb5s", (double)d / 1e3);
    else
        snprintf(buf, len, "%.2fms", (double)d / 1e6);
    return buf;
}

/* Go's lessThanHalf: x+x < y computed in uint64, so it cannot overflow. */
static bool less_than_half(int64_t x, int64_t y)
{
    return (uint64_t)x + (uint64_t)x < (uint64_t)y;
}

int64_t br_dur_round(int64_t d, int64_t m)
{
    if (m <= 0)
        return d;
    int64_t r = d % m;
    if (d < 0) {
        r = -r;
        if (less_than_half(r, m))
            return d + r;
        int64_t d1 = (int64_t)((uint64_t)d - (uint64_t)m + (uint64_t)r);
        return d1 < d ? d1 : INT64_MIN;
    }
    if (less_than_half(r, m))
        return d - r;
    int64_t d1 = (int64_t)((uint64_t)d + (uint64_t)m - (uint64_t)r);
    return d1 > d ? d1 : INT64_MAX;
}

/* Go's Duration.Seconds, split the same way so the float result is bit-identical. */
static double dur_seconds(int64_t d)
{
    int64_t sec = d / CS_SEC, nsec = d % CS_SEC;
    return (double)sec + (double)nsec / 1e9;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* "%-13s p50 X  p90 X  p99 X  max X\n", or "%-13s n/a\n" for no values. Sorts vals in place. */
static void percentile_line(FILE *out, const char *label, int64_t *vals, size_t n)
{
    if (n == 0) {
        fprintf(out, "%-13s n/a\n", label);
        return;
    }
    qsort(vals, n, sizeof *vals, cmp_i64);
    char a[BR_DUR_STR_MAX], b[BR_DUR_STR_MAX], c[BR_DUR_STR_MAX], d[BR_DUR_STR_MAX];
    fprintf(out, "%-13s p50 %s  p90 %s  p99 %s  max %s\n", label,
            br_fmt_dur(br_percentile(vals, n, 50), a, sizeof a), br_fmt_dur(br_percentile(vals, n, 90), b, sizeof b),
            br_fmt_dur(br_percentile(vals, n, 99), c, sizeof c), br_fmt_dur(vals[n - 1], d, sizeof d));
}

char *br_collector_summary(const br_collector *c)
{
    char *text = NULL;
    size_t textlen = 0;
    FILE *out = open_memstream(&text, &textlen);
    if (!out)
        return NULL;
    fprintf(out, "\n=== %s ===\n", c->label);
    if (c->n == 0) {
        fputs("no ledgers received\n", out);
        goto done;
    }
    int64_t *vals = malloc(c->n * sizeof *vals);
    if (!vals) {
        fclose(out);
        free(text);
        return NULL;
    }
    int64_t elapsed = br_collector_elapsed(c);
    double mib = (double)c->bytes / (1 << 20);
    char dbuf[CS_DUR_STR_MAX];
    fprintf(out, "ledgers      %zu (%" PRIu32 "..%" PRIu32 ")\n", c->n, c->samples[0].seq,
            c->samples[c->n - 1].seq);
    fprintf(out, "bytes        %.2f MiB (mean %.1f KiB/ledger)\n", mib, (double)c->bytes / (double)c->n / 1024);
    fprintf(out, "elapsed      %s\n", cs_dur_format(br_dur_round(elapsed, CS_MS), dbuf, sizeof dbuf));
    if (elapsed > 0) {
        double secs = dur_seconds(elapsed);
        fprintf(out, "throughput   %.1f ledgers/s, %.1f MiB/s\n", (double)(c->n - 1) / secs, mib / secs);
    }
    percentile_line(out, "inter-arrival", vals, br_collector_metric(c, BR_METRIC_INTER_ARRIVAL, vals));

    size_t deliveries = br_collector_metric(c, BR_METRIC_DELIVERY, NULL);
    if (deliveries == 0) {
        fputs("delivery     no emit stamps in this mode (nothing to measure against)\n", out);
    } else {
        size_t n = br_collector_metric(c, BR_METRIC_EMIT, vals);
        if (n > 0)
            percentile_line(out, "t_emit", vals, n);
        percentile_line(out, "delivery", vals, br_collector_metric(c, BR_METRIC_DELIVERY, vals));
        n = br_collector_metric(c, BR_METRIC_PIPELINE, vals);
        if (n > 0)
            percentile_line(out, "pipeline", vals, n);
        if (c->n > deliveries)
            fprintf(out, "             %zu ledger(s) excluded: replayed from retention, no emit stamp\n",
                    c->n - deliveries);
    }
    free(vals);
    /* Stated even at zero for a chunked run: the gate is zero fallbacks, so the report shows the
     * count was measured rather than omitted. */
    if (br_collector_chunked(c))
        fprintf(out, "fallbacks    %" PRIu64 " partial deliveries discarded (live flow abandoned, ring redelivered)\n",
                br_collector_fallbacks(c));
    if (c->resume)
        fprintf(out, "reconnects   %" PRIu64 "\n", c->reconnects);
done:
    if (fclose(out) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* A metric's values over every subscriber, into one malloc'd array (*n of them); NULL with *n 0
 * when there are none or memory ran out (*oom then). */
static int64_t *pooled(const br_subscriber_result *subs, size_t k, br_metric m, size_t *n, bool *oom)
{
    size_t total = 0;
    for (size_t i = 0; i < k; i++)
        total += br_collector_metric(subs[i].c, m, NULL);
    *n = 0;
    if (total == 0)
        return NULL;
    int64_t *vals = malloc(total * sizeof *vals);
    if (!vals) {
        *oom = true;
        return NULL;
    }
    for (size_t i = 0; i < k; i++)
        *n += br_collector_metric(subs[i].c, m, vals + *n);
    return vals;
}

/* A pooled metric's line (percentile_line's format); nothing when no subscriber has it. */
static void pooled_line(FILE *out, const char *label, const br_subscriber_result *subs, size_t k, br_metric m,
                        bool *oom)
{
    size_t n;
    int64_t *vals = pooled(subs, k, m, &n, oom);
    if (n > 0)
        percentile_line(out, label, vals, n);
    free(vals);
}

/* One subscriber's delivery p50, p99 and max (false when it has no stamped samples). */
static bool delivery_of(const br_collector *c, int64_t *p50, int64_t *p99, int64_t *max, bool *oom)
{
    size_t n = br_collector_metric(c, BR_METRIC_DELIVERY, NULL);
    if (n == 0)
        return false;
    int64_t *vals = malloc(n * sizeof *vals);
    if (!vals) {
        *oom = true;
        return false;
    }
    br_collector_metric(c, BR_METRIC_DELIVERY, vals);
    qsort(vals, n, sizeof *vals, cmp_i64);
    *p50 = br_percentile(vals, n, 50);
    *p99 = br_percentile(vals, n, 99);
    *max = vals[n - 1];
    free(vals);
    return true;
}

char *br_fanout_summary(const char *label, const br_subscriber_result *subs, size_t k, bool resume)
{
    char *text = NULL;
    size_t textlen = 0;
    FILE *out = open_memstream(&text, &textlen);
    if (!out)
        return NULL;
    bool oom = false;
    size_t ok = 0, all = 0, least = SIZE_MAX, most = 0;
    uint64_t discarded = 0, replayed = 0, reconnects = 0;
    for (size_t i = 0; i < k; i++) {
        const br_collector *c = subs[i].c;
        ok += strcmp(subs[i].result, "ok") == 0;
        all += c->n;
        least = c->n < least ? c->n : least;
        most = c->n > most ? c->n : most;
        discarded += br_collector_fallbacks(c);
        replayed += c->n - br_collector_metric(c, BR_METRIC_DELIVERY, NULL);
        reconnects += c->reconnects;
    }
    if (k == 0)
        least = 0;
    fprintf(out, "\n=== %s ===\n", label);
    fprintf(out, "subscribers  %zu on one thread: %zu ended well, %zu failed\n", k, ok, k - ok);
    fprintf(out, "ledgers      %zu in all, per subscriber min %zu max %zu\n", all, least, most);
    size_t deliveries;
    int64_t *d = pooled(subs, k, BR_METRIC_DELIVERY, &deliveries, &oom);
    free(d);
    if (all > 0 && deliveries == 0)
        fputs("delivery     no emit stamps (nothing to measure against)\n", out);
    pooled_line(out, "t_emit", subs, k, BR_METRIC_EMIT, &oom);
    pooled_line(out, "delivery", subs, k, BR_METRIC_DELIVERY, &oom);
    pooled_line(out, "pipeline", subs, k, BR_METRIC_PIPELINE, &oom);
    int64_t worst = 0;
    size_t worst_i = 0;
    bool any = false;
    for (size_t i = 0; i < k; i++) {
        int64_t p50, p99, max;
        if (delivery_of(subs[i].c, &p50, &p99, &max, &oom) && (!any || p99 > worst)) {
            worst = p99;
            worst_i = i;
            any = true;
        }
    }
    char a[BR_DUR_STR_MAX], b[BR_DUR_STR_MAX], m[BR_DUR_STR_MAX];
    if (any)
        fprintf(out, "worst p99    %s (subscriber %zu)\n", br_fmt_dur(worst, a, sizeof a), worst_i + 1);
    fprintf(out, "fallbacks    %" PRIu64 " partial deliveries discarded in all (live flow abandoned, ring redelivered)\n",
            discarded);
    fprintf(out, "replayed     %" PRIu64 " ledgers in all without an emit stamp (sent from retention)\n", replayed);
    if (resume)
        fprintf(out, "reconnects   %" PRIu64 " in all\n", reconnects);
    fprintf(out, "%-5s %-8s %-23s %-10s %-10s %-10s %-9s %-8s%s %s\n", "sub", "ledgers", "range", "p50", "p99",
            "max", "discarded", "replayed", resume ? " reconnects" : "", "result");
    for (size_t i = 0; i < k; i++) {
        const br_collector *c = subs[i].c;
        char range[32] = "-";
        if (c->n)
            snprintf(range, sizeof range, "%" PRIu32 "..%" PRIu32, c->samples[0].seq, c->samples[c->n - 1].seq);
        int64_t p50, p99, max;
        bool has = delivery_of(c, &p50, &p99, &max, &oom);
        char rc[24] = "";
        if (resume)
            snprintf(rc, sizeof rc, " %-10" PRIu64, c->reconnects);
        fprintf(out, "%-5zu %-8zu %-23s %-10s %-10s %-10s %-9" PRIu64 " %-8zu%s %s\n", i + 1, c->n, range,
                has ? br_fmt_dur(p50, a, sizeof a) : "n/a", has ? br_fmt_dur(p99, b, sizeof b) : "n/a",
                has ? br_fmt_dur(max, m, sizeof m) : "n/a", br_collector_fallbacks(c),
                c->n - br_collector_metric(c, BR_METRIC_DELIVERY, NULL), rc, subs[i].result);
    }
    if (fclose(out) != 0 || oom) {
        free(text);
        return NULL;
    }
    return text;
}

static void put_optional(FILE *out, int64_t v, bool ok)
{
    if (ok)
        fprintf(out, "%" PRId64, v);
}

int br_collector_write_csv(const br_collector *c, FILE *out)
{
    fputs("sequence,bytes,chunks,since_start_ns,inter_arrival_ns,emit_ns,delivery_ns,pipeline_ns,"
          "discarded_partials",
          out);
    fputs(c->resume ? ",reconnects\n" : "\n", out);
    for (size_t i = 0; i < c->n; i++) {
        const br_sample *s = &c->samples[i];
        int64_t gap = i > 0 ? s->since_start - c->samples[i - 1].since_start : 0;
        fprintf(out, "%" PRIu32 ",%" PRIu64 ",%" PRIu32 ",%" PRId64 ",%" PRId64 ",", s->seq, s->bytes, s->chunks,
                s->since_start, gap);
        put_optional(out, s->emit, s->has_emit);
        fputc(',', out);
        put_optional(out, s->delivery, s->has_delivery);
        fputc(',', out);
        put_optional(out, s->pipeline, s->has_pipeline);
        fprintf(out, ",%" PRIu32, s->discarded);
        if (c->resume)
            fprintf(out, ",%" PRIu64, s->reconnects);
        fputc('\n', out);
    }
    if (fflush(out) != 0 || ferror(out)) {
        if (errno == 0)
            errno = EIO;
        return -1;
    }
    return 0;
}

/* strerror in Go's wording, which starts lower-case ("no such file or directory"). */
static const char *go_strerror(int e, char *buf, size_t len)
{
    snprintf(buf, len, "%s", strerror(e));
    if (buf[0] >= 'A' && buf[0] <= 'Z' && !(buf[1] >= 'A' && buf[1] <= 'Z'))
        buf[0] = (char)(buf[0] - 'A' + 'a');
    return buf;
}

int br_write_csv_file(const char *path, const br_collector *c, cs_err *err)
{
    char why[256];
    FILE *f = fopen(path, "w");
    if (!f)
        return cs_err_set(err, 0, "open %s: %s", path, go_strerror(errno, why, sizeof why));
    errno = 0;
    if (br_collector_write_csv(c, f) != 0) {
        int e = errno;
        fclose(f);
        return cs_err_set(err, 0, "write %s: %s", path, go_strerror(e, why, sizeof why));
    }
    if (fclose(f) != 0)
        return cs_err_set(err, 0, "close %s: %s", path, go_strerror(errno, why, sizeof why));
    return 0;
}

int64_t br_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
