/* SPDX-License-Identifier: Apache-2.0 */
/* rl_throughput: libremoteledger's receive throughput over ws:// and wss:// on loopback, against
 * the tests' scripted server (tests/support/scriptserver.c) sending the same incompressible ledger
 * again and again in raw 256 KiB chunks, the way corestreamd chunks it.
 *
 *   rl_throughput [runs [ledgers [size_bytes]]]      default 5 runs of 40 ledgers of 14.5 MiB
 *
 * Each run streams the range over ws:// and then over wss:// (TLS 1.3, the client verifying a
 * certificate made for the run), so the two alternate. Per transport it prints the wall-clock rate
 * (the server's sending and encryption share the machine) and the rate per second of the client
 * thread's own CPU time. Built with -DRL_THROUGHPUT_WS_ONLY it measures ws:// alone, against a
 * library without the TLS options (the before/after comparison). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "corestream/remoteledger.h"
#include "support/scriptserver.h"
#ifndef RL_THROUGHPUT_WS_ONLY
#include "support/certs.h"
#endif

#define CHUNK 262144

static double secs(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct result {
    double wall_mbs, cpu_mbs;
} result;

static int run_one(ss_server *ss, const void *payload, uint32_t n, size_t size, const char *ca, result *out)
{
    ss_bulk_ledgers(ss, 1, n, payload, size, CHUNK);
    rl_options o;
    rl_options_init(&o);
#ifndef RL_THROUGHPUT_WS_ONLY
    o.tls_ca_file = ca;
#else
    (void)ca;
#endif
    rl_stream *s;
    if (rl_stream_new(&s, ss_url(ss), &o) != RL_OK)
        return -1;
    double w0 = secs(CLOCK_MONOTONIC), c0 = secs(CLOCK_THREAD_CPUTIME_ID);
    rl_result r = rl_stream_raw_ledgers(s, rl_bounded_range(1, n), NULL, NULL);
    double w1 = secs(CLOCK_MONOTONIC), c1 = secs(CLOCK_THREAD_CPUTIME_ID);
    if (r != RL_OK) {
        fprintf(stderr, "rl_throughput: %s: %s\n", ss_url(ss), rl_stream_error(s));
        rl_stream_free(s);
        return -1;
    }
    rl_stream_free(s);
    double mb = (double)n * (double)size / 1e6;
    out->wall_mbs = mb / (w1 - w0);
    out->cpu_mbs = mb / (c1 - c0);
    return 0;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 5;
    uint32_t n = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 40;
    size_t size = argc > 3 ? strtoull(argv[3], NULL, 10) : (size_t)(14.5 * 1048576);
    uint8_t *payload = malloc(size);
    if (!payload)
        return 1;
    uint64_t x = 88172645463325252ULL; /* xorshift: incompressible bytes */
    for (size_t i = 0; i < size; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        payload[i] = (uint8_t)x;
    }
#ifndef RL_THROUGHPUT_WS_ONLY
    cs_certs certs;
    if (cs_certs_make(&certs) != 0)
        return 1;
    ss_tls tls = {.cert_file = certs.server_cert, .key_file = certs.server_key};
    const char *ca = certs.ca;
#else
    const char *ca = NULL;
#endif
    printf("%u ledgers of %zu bytes per run, raw %d-byte chunks\n", n, size, CHUNK);
    printf("run  transport  wall MB/s  client-CPU MB/s\n");
    double sum[2][2] = {{0}};
    const char *names[2] = {"ws", "wss"};
    int kinds = 2;
#ifdef RL_THROUGHPUT_WS_ONLY
    kinds = 1;
#endif
    for (int r = 0; r < runs; r++) {
        for (int k = 0; k < kinds; k++) {
#ifndef RL_THROUGHPUT_WS_ONLY
            ss_server *ss = k ? ss_start_tls(&tls) : ss_start();
#else
            ss_server *ss = ss_start();
#endif
            result res;
            if (!ss || run_one(ss, payload, n, size, ca, &res) != 0)
                return 1;
            ss_wait(ss, 10000);
            ss_stop(ss);
            printf("%3d  %-9s  %9.0f  %15.0f\n", r + 1, names[k], res.wall_mbs, res.cpu_mbs);
            fflush(stdout);
            sum[k][0] += res.wall_mbs;
            sum[k][1] += res.cpu_mbs;
        }
    }
    for (int k = 0; k < kinds; k++)
        printf("mean %-9s  %9.0f  %15.0f\n", names[k], sum[k][0] / runs, sum[k][1] / runs);
    if (kinds == 2)
        printf("wss/ws: wall %.2f, client CPU %.2f\n", sum[1][0] / sum[0][0], sum[1][1] / sum[0][1]);
#ifndef RL_THROUGHPUT_WS_ONLY
    cs_certs_remove(&certs);
#endif
    free(payload);
    return 0;
}
