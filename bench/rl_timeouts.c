/* SPDX-License-Identifier: Apache-2.0 */
/* rl_timeouts: how promptly libremoteledger's timeouts fire, and how fast a refused dial fails,
 * against the tests' scripted server (tests/support/scriptserver.c) on 127.0.0.1.
 *
 *   rl_timeouts [runs]        default 20 runs of each case
 *
 * The cases, each on a fresh connection: a refused dial (nothing listens on 127.0.0.1:1; a 2 s
 * dial timeout that must not be what ends it), a 200 ms handshake timeout (ws://, the upgrade never
 * answered), a 300 ms TLS handshake timeout (wss:// to a server that never speaks TLS), and a
 * 300 ms idle timeout (the upgrade answered, then silence). For each it prints the p50 and the
 * largest time from the call to its result, the overshoot past the setting, and PASS or MISS
 * against the target: the largest overshoot at most 100 ms on a quiet machine (for the refused
 * dial: its largest time at most 100 ms). The unit tests keep only what holds on any machine (no
 * timeout fires early; the right result ends each call); the promptness is measured here
 * (bench/README.md, "Client timeouts"). Exit 0 when every case ended with its result, whatever the
 * times; 1 otherwise. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "corestream/remoteledger.h"
#include "support/scriptserver.h"

#define TARGET_MS 100.0

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { REFUSED, HANDSHAKE, TLS_HANDSHAKE, IDLE, NCASES };

static const struct {
    const char *name;
    double setting_ms; /* the timeout that must end it; 0: none may (the refusal ends it) */
    rl_result want;
} cases[NCASES] = {
    [REFUSED] = {"refused dial (2 s dial timeout)", 0, RL_ERR_DIAL},
    [HANDSHAKE] = {"handshake timeout 200 ms (ws)", 200, RL_ERR_HANDSHAKE_TIMEOUT},
    [TLS_HANDSHAKE] = {"handshake timeout 300 ms (wss)", 300, RL_ERR_HANDSHAKE_TIMEOUT},
    [IDLE] = {"idle timeout 300 ms", 300, RL_ERR_IDLE_TIMEOUT},
};

/* One call of case k: its time in ms, or -1 when it ended with another result. */
static double run_case(int k)
{
    rl_options o;
    rl_options_init(&o);
    o.dial_timeout_ns = 2000000000LL;
    ss_server *ss = NULL;
    char url[128];
    switch (k) {
    case REFUSED:
        snprintf(url, sizeof url, "ws://127.0.0.1:1");
        break;
    case HANDSHAKE:
        ss = ss_start();
        ss_no_handshake(ss);
        o.handshake_timeout_ns = 200000000LL;
        snprintf(url, sizeof url, "%s", ss_url(ss));
        break;
    case TLS_HANDSHAKE:
        ss = ss_start();
        ss_no_handshake(ss);
        o.handshake_timeout_ns = 300000000LL;
        snprintf(url, sizeof url, "wss://127.0.0.1:%d", ss_port(ss));
        break;
    default:
        ss = ss_start();
        ss_stall(ss);
        o.idle_timeout_ns = 300000000LL;
        snprintf(url, sizeof url, "%s", ss_url(ss));
        break;
    }
    if (k != REFUSED && !ss)
        return -1;
    rl_stream *s;
    double took = -1;
    if (rl_stream_new(&s, url, &o) == RL_OK) {
        double t0 = now_ms();
        rl_result r = rl_stream_raw_ledgers(s, rl_unbounded_range(1), NULL, NULL);
        took = now_ms() - t0;
        if (r != cases[k].want) {
            fprintf(stderr, "rl_timeouts: %s: %s: %s\n", cases[k].name, rl_result_name(r), rl_stream_error(s));
            took = -1;
        }
        rl_stream_free(s);
    }
    if (ss) {
        ss_wait(ss, 10000);
        ss_stop(ss);
    }
    return took;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 20;
    if (runs < 1)
        runs = 1;
    double *t = calloc((size_t)runs * NCASES, sizeof *t);
    if (!t)
        return 1;
    /* The cases alternate, so a busy moment spreads over all of them. */
    int failed = 0;
    for (int r = 0; r < runs; r++)
        for (int k = 0; k < NCASES; k++) {
            t[k * runs + r] = run_case(k);
            failed += t[k * runs + r] < 0;
        }
    printf("%d runs of each case; target: overshoot (refused dial: time) at most %.0f ms\n", runs, TARGET_MS);
    printf("%-32s %9s %9s %14s  %s\n", "case", "p50 ms", "max ms", "max over ms", "verdict");
    for (int k = 0; k < NCASES; k++) {
        double *v = t + k * runs;
        qsort(v, (size_t)runs, sizeof *v, cmp);
        if (v[0] < 0) {
            printf("%-32s %9s %9s %14s  FAILED (another result; see stderr)\n", cases[k].name, "-", "-", "-");
            continue;
        }
        double p50 = v[(runs - 1) / 2], max = v[runs - 1], over = max - cases[k].setting_ms;
        printf("%-32s %9.1f %9.1f %14.1f  %s\n", cases[k].name, p50, max, over, over <= TARGET_MS ? "PASS" : "MISS");
    }
    free(t);
    return failed ? 1 : 0;
}
