/* SPDX-License-Identifier: Apache-2.0 */
/* edge_delivery: delivery through an edge against delivery straight from the core, for the same
 * ledgers in the same run (bench/edge-path.sh).
 *
 *   edge_delivery CORE_URL EDGE_URL|- FROM COUNT CSV [TIMEOUT_S]
 *
 * Two verifying libremoteledger subscribers on their own threads, one on the core and one on the
 * edge (corestreamd --source jetstream), each streaming [FROM, FROM+COUNT-1]. The edge stamps its
 * own BEGIN/END, so its subscriber's delivery is measured against the core's emit end of the same
 * ledger, as the direct subscriber saw it: both clocks are this host's CLOCK_REALTIME. With "-"
 * for the edge only the direct path runs (the core's cost without an edge).
 *
 * CSV: sequence,direct_delivery_ns,edge_delivery_ns (empty when that path did not deliver it).
 * Prints "direct n p50 p99 max" and "edge n p50 p99 max" in nanoseconds, nearest rank. Exit 0
 * when every path delivered every ledger, 1 otherwise (the reason on stderr). */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "corestream/remoteledger.h"

typedef struct path {
    const char *name;
    const char *url;
    uint32_t from, count;
    int64_t deadline_s;
    int64_t *received; /* per ledger offset, Unix ns; 0 = not yet */
    int64_t *emit_end; /* per ledger offset, the server's stamp (0 for a ring replay) */
    uint32_t got;
    char error[512];
    pthread_t thread;
} path;

static int64_t now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

static void *run(void *arg)
{
    path *p = arg;
    rl_stream *s = NULL;
    rl_options o;
    rl_options_init(&o);
    if (rl_stream_new(&s, p->url, &o) != RL_OK ||
        rl_stream_open(s, rl_bounded_range(p->from, p->from + p->count - 1)) != RL_OK) {
        snprintf(p->error, sizeof p->error, "%s: open %s: %s", p->name, p->url, s ? rl_stream_error(s) : "no memory");
        rl_stream_free(s);
        return NULL;
    }
    while (p->got < p->count) {
        if (now_s() > p->deadline_s) {
            snprintf(p->error, sizeof p->error, "%s: timed out after %u of %u ledgers", p->name, p->got, p->count);
            break;
        }
        const uint8_t *data;
        size_t len;
        rl_ledger_info info;
        rl_result r = rl_stream_next(s, 1000000000LL, &data, &len, &info);
        if (r == RL_AGAIN)
            continue;
        if (r == RL_END)
            break;
        if (r != RL_OK) {
            snprintf(p->error, sizeof p->error, "%s: %s: %s", p->name, rl_result_name(r), rl_stream_error(s));
            break;
        }
        uint32_t i = info.sequence - p->from;
        if (i >= p->count) {
            snprintf(p->error, sizeof p->error, "%s: ledger %u outside the range", p->name, info.sequence);
            break;
        }
        p->received[i] = info.received_unix_nano;
        p->emit_end[i] = info.emit_end_unix_nano;
        p->got++;
    }
    if (!p->error[0] && p->got < p->count)
        snprintf(p->error, sizeof p->error, "%s: the stream ended after %u of %u ledgers", p->name, p->got, p->count);
    rl_stream_close(s);
    rl_stream_free(s);
    return NULL;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void summary(const char *name, int64_t *v, size_t n)
{
    if (!n) {
        printf("%s 0 0 0 0\n", name);
        return;
    }
    qsort(v, n, sizeof *v, cmp64);
    size_t k50 = (50 * n + 99) / 100, k99 = (99 * n + 99) / 100;
    printf("%s %zu %" PRId64 " %" PRId64 " %" PRId64 "\n", name, n, v[k50 - 1], v[k99 - 1], v[n - 1]);
}

static path *path_new(const char *name, const char *url, uint32_t from, uint32_t count, int64_t deadline)
{
    path *p = calloc(1, sizeof *p);
    p->name = name;
    p->url = url;
    p->from = from;
    p->count = count;
    p->deadline_s = deadline;
    p->received = calloc(count, sizeof *p->received);
    p->emit_end = calloc(count, sizeof *p->emit_end);
    if (!p->received || !p->emit_end) {
        fprintf(stderr, "edge_delivery: out of memory\n");
        exit(2);
    }
    return p;
}

int main(int argc, char **argv)
{
    if (argc < 6 || argc > 7) {
        fprintf(stderr, "usage: edge_delivery CORE_URL EDGE_URL|- FROM COUNT CSV [TIMEOUT_S]\n");
        return 2;
    }
    uint32_t from = (uint32_t)strtoul(argv[3], NULL, 10), count = (uint32_t)strtoul(argv[4], NULL, 10);
    int64_t timeout = argc == 7 ? strtoll(argv[6], NULL, 10) : 600;
    if (!from || !count) {
        fprintf(stderr, "edge_delivery: FROM and COUNT must be positive\n");
        return 2;
    }
    int64_t deadline = now_s() + timeout;
    path *direct = path_new("direct", argv[1], from, count, deadline);
    path *edge = strcmp(argv[2], "-") ? path_new("edge", argv[2], from, count, deadline) : NULL;
    pthread_create(&direct->thread, NULL, run, direct);
    if (edge)
        pthread_create(&edge->thread, NULL, run, edge);
    pthread_join(direct->thread, NULL);
    if (edge)
        pthread_join(edge->thread, NULL);

    FILE *csv = fopen(argv[5], "w");
    if (!csv) {
        perror(argv[5]);
        return 2;
    }
    fputs("sequence,direct_delivery_ns,edge_delivery_ns,edge_end_stamp_ns\n", csv);
    int64_t *dv = calloc(count, sizeof *dv), *ev = calloc(count, sizeof *ev);
    size_t nd = 0, ne = 0;
    for (uint32_t i = 0; i < count; i++) {
        /* The core's emit end as the direct subscriber saw it live; a ledger it got from the
         * ring has no stamp and is left out of both. */
        int64_t end = direct->emit_end[i];
        fprintf(csv, "%u,", from + i);
        if (end && direct->received[i]) {
            dv[nd++] = direct->received[i] - end;
            fprintf(csv, "%" PRId64, direct->received[i] - end);
        }
        fputc(',', csv);
        if (end && edge && edge->received[i]) {
            ev[ne++] = edge->received[i] - end;
            fprintf(csv, "%" PRId64, edge->received[i] - end);
        }
        fputc(',', csv);
        if (end && edge && edge->received[i] && edge->emit_end[i])
            fprintf(csv, "%" PRId64, edge->emit_end[i] - end);
        fputc('\n', csv);
    }
    fclose(csv);
    summary("direct", dv, nd);
    if (edge)
        summary("edge", ev, ne);
    int rc = 0;
    if (direct->error[0]) {
        fprintf(stderr, "edge_delivery: %s\n", direct->error);
        rc = 1;
    }
    if (edge && edge->error[0]) {
        fprintf(stderr, "edge_delivery: %s\n", edge->error);
        rc = 1;
    }
    free(dv);
    free(ev);
    path *ps[2] = {direct, edge};
    for (int i = 0; i < 2; i++)
        if (ps[i]) {
            free(ps[i]->received);
            free(ps[i]->emit_end);
            free(ps[i]);
        }
    return rc;
}
