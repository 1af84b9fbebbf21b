/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: the edge's end-to-end fixture (edgefixture.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "support/edgefixture.h"
#include "support/jsreader.h"
#include "support/wait.h"

#ifndef CORESTREAMD_BIN
#error "CORESTREAMD_BIN must name the binary under test"
#endif

int cs_edgefx_setup(cs_edgefx *fx, bool clustered)
{
    memset(fx, 0, sizeof *fx);
    fx->clustered = clustered;
    if (cs_tmpdir_make(&fx->tmp, "edgee2e") != 0)
        return -1;
    int rc = clustered ? cs_nats_cluster_start(&fx->cluster, 3, 60000) : cs_nats_start(&fx->nats, 0, WAIT_MS);
    if (rc == 0)
        return 0;
    if (clustered) {
        for (int i = 0; i < fx->cluster.n; i++)
            fprintf(stderr, "node %d:\n%s\n", i, fx->cluster.node[i].proc.log ? fx->cluster.node[i].proc.log : "");
        cs_nats_cluster_free(&fx->cluster);
    } else {
        fprintf(stderr, "nats-server did not start:\n%s\n", fx->nats.proc.log ? fx->nats.proc.log : "");
        cs_nats_free(&fx->nats);
    }
    /* cmocka runs no teardown after a failed setup. */
    cs_tmpdir_remove(&fx->tmp);
    return -1;
}

void cs_edgefx_teardown(cs_edgefx *fx)
{
    if (fx->edge_live)
        cs_proc_free(&fx->edge);
    if (fx->core_live)
        cs_proc_free(&fx->core);
    fx->edge_live = fx->core_live = false;
    if (fx->clustered)
        cs_nats_cluster_free(&fx->cluster);
    else
        cs_nats_free(&fx->nats);
    cs_tmpdir_remove(&fx->tmp);
}

const char *cs_edgefx_urls(const cs_edgefx *fx) { return fx->clustered ? fx->cluster.urls : fx->nats.url; }

/* argv: the binary, the common flags, then extra (NULL-terminated). */
static void start(cs_proc *p, bool *live, const char *const *common, size_t ncommon, const char *const *extra)
{
    char *argv[48];
    size_t n = 0;
    argv[n++] = CORESTREAMD_BIN;
    for (size_t i = 0; i < ncommon; i++)
        argv[n++] = (char *)common[i];
    for (; extra && *extra && n < 46; extra++)
        argv[n++] = (char *)*extra;
    argv[n] = NULL;
    assert_int_equal(cs_proc_start(p, argv), 0);
    *live = true;
}

/* The core: synthetic ledgers of SIZE bytes in 64 KiB chunks every 100 ms, published to the
 * test's NATS; run gets the run token. */
void cs_edgefx_start_core(cs_edgefx *fx, const char *const *extra, char *run, size_t runlen)
{
    char datadir[PATH_MAX + 32], url[512];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/core", fx->tmp.path);
    snprintf(url, sizeof url, "--jetstream-url=%s", cs_edgefx_urls(fx));
    const char *common[] = {datadir,
                            "--listen=127.0.0.1:0",
                            url,
                            "--jetstream-max-bytes=268435456",
                            fx->clustered ? "--jetstream-replicas=3" : "--jetstream-replicas=1",
                            "--synthetic-size=300000",
                            "--chunk-size=65536",
                            "--synthetic-interval=100ms",
                            "--emit-window=20ms"};
    start(&fx->core, &fx->core_live, common, sizeof common / sizeof common[0], extra);
    if (cs_proc_wait_line(&fx->core, "jetstream publisher ready", WAIT_MS) != 0) {
        for (int i = 0; fx->clustered && i < fx->cluster.n; i++) {
            cs_proc_drain(&fx->cluster.node[i].proc);
            fprintf(stderr, "node %d:\n%s\n", i, fx->cluster.node[i].proc.log);
        }
        fail_msg("no `jetstream publisher ready` in:\n%s", fx->core.log);
    }
    char line[2048];
    cs_proc_line(&fx->core, line, sizeof line);
    const char *r = strstr(line, " run=");
    assert_non_null(r);
    r += 5;
    size_t k = strcspn(r, " ");
    assert_true(k > 0 && k < runlen);
    memcpy(run, r, k);
    run[k] = '\0';
    if (cs_proc_wait_listening(&fx->core, WAIT_MS) != 0)
        fail_msg("core not listening:\n%s", fx->core.log);
}

/* The edge on its own data dir; returns once it follows the stream and listens. following gets
 * the `jetstream source following` line. */
void cs_edgefx_launch_edge(cs_edgefx *fx, const char *url, const char *const *extra)
{
    char datadir[PATH_MAX + 32], urlflag[512];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/edge", fx->tmp.path);
    snprintf(urlflag, sizeof urlflag, "--jetstream-source-url=%s", url ? url : cs_edgefx_urls(fx));
    const char *common[] = {datadir, "--listen=127.0.0.1:0", "--source=jetstream", urlflag, "--retention=1000"};
    start(&fx->edge, &fx->edge_live, common, sizeof common / sizeof common[0], extra);
}

void cs_edgefx_start_edge(cs_edgefx *fx, const char *const *extra, char *following, size_t flen)
{
    cs_edgefx_launch_edge(fx, NULL, extra);
    if (cs_proc_wait_listening(&fx->edge, WAIT_MS) != 0)
        fail_msg("edge not listening:\n%s", fx->edge.log);
    if (cs_proc_wait_line(&fx->edge, "jetstream source following", WAIT_MS) != 0)
        fail_msg("no `jetstream source following` in:\n%s", fx->edge.log);
    if (following)
        cs_proc_line(&fx->edge, following, flen);
}

void cs_edgefx_wait_stream_ledger(cs_edgefx *fx, const char *run, uint32_t seq)
{
    /* A node that stays up in the cluster case. */
    const char *url = fx->clustered ? fx->cluster.node[1].url : fx->nats.url;
    if (cs_jsr_wait_ledger(url, CS_EDGEFX_STREAM, run, seq, WAIT_MS) != 0)
        fail_msg("ledger %u never reached the stream; core:\n%s", seq, fx->core.log);
}

