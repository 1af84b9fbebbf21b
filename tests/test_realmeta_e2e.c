/* SPDX-License-Identifier: Apache-2.0 */
/* corestreamd over ledgers stellar-core itself wrote (../shared/realmeta, beside the project and
 * never copied into it; each case skips, saying so, where it is absent):
 *   - the pipe source over core's own v23 metadata stream (record-marked LedgerCloseMeta frames of
 *     ledgers 84, 85 and 88): 84 and 85 reach a libremoteledger subscriber byte-exact, and the gap
 *     to 88 stops the run with an error naming both;
 *   - the file source over five public-network ledgers (412 B to 1.1 MB): each reaches a
 *     libremoteledger subscriber byte-exact. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "corestream/remoteledger.h"
#include "support/procharness.h"
#include "support/rlclient.h"
#include "support/tmpdir.h"
#include "support/wait.h"

#ifndef CORESTREAMD_BIN
#error "CORESTREAMD_BIN must name the binary under test"
#endif
#ifndef CS_REALMETA_DIR
#error "CS_REALMETA_DIR must name ../shared/realmeta"
#endif

static const char *const k_pubnet[] = {"pubnet-ledger-6154623.xdr", "pubnet-ledger-16154623.xdr",
                                       "pubnet-ledger-26154623.xdr", "pubnet-ledger-36154623.xdr",
                                       "pubnet-ledger-46154623.xdr"};
#define PUBNET_N (sizeof k_pubnet / sizeof k_pubnet[0])

static cs_tmpdir g_tmp;
static cs_proc g_proc;
static bool g_proc_live;
static int g_gate = -1;

static int setup(void **state)
{
    (void)state;
    return cs_tmpdir_make(&g_tmp, "realmeta");
}

static int teardown(void **state)
{
    (void)state;
    if (g_proc_live)
        cs_proc_free(&g_proc);
    g_proc_live = false;
    if (g_gate >= 0)
        close(g_gate);
    g_gate = -1;
    cs_tmpdir_remove(&g_tmp);
    return 0;
}

/* The whole of file name in the realmeta dir, malloc'd, or NULL (and the case skipped) when the
 * directory is not there. */
static uint8_t *read_real(const char *name, size_t *len)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", CS_REALMETA_DIR, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    uint8_t *p = malloc(n > 0 ? (size_t)n : 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return p;
}

static bool realmeta_present(void)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/SHA256SUMS", CS_REALMETA_DIR);
    if (access(path, R_OK) == 0)
        return true;
    fprintf(stderr, "SKIP: %s is absent: the real-ledger cases need it\n", CS_REALMETA_DIR);
    return false;
}

/* Runs corestreamd with args after --data-dir and --listen, and waits for it to listen. */
static void start_daemon(const char *const *args)
{
    char datadir[PATH_MAX + 32];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/data", g_tmp.path);
    char *argv[24] = {CORESTREAMD_BIN, datadir, "--listen", "127.0.0.1:0"};
    int n = 4;
    for (; *args && n < 23; args++)
        argv[n++] = (char *)*args;
    argv[n] = NULL;
    assert_int_equal(cs_proc_start(&g_proc, argv), 0);
    g_proc_live = true;
    assert_int_equal(cs_proc_wait_listening(&g_proc, WAIT_MS), 0);
}

typedef struct drain_job {
    char url[96];
    rl_range range;
    collected c;
} drain_job;

static void *drain_main(void *arg)
{
    drain_job *j = arg;
    drain_url(j->url, NULL, j->range, &j->c);
    return NULL;
}

/* The payloads of an RFC 5531 record-marked stream (one fragment per record, as core writes). */
static size_t split_records(const uint8_t *p, size_t n, const uint8_t **rec, size_t *len, size_t max)
{
    size_t k = 0;
    for (size_t off = 0; off + 4 <= n && k < max; k++) {
        uint32_t mark = (uint32_t)p[off] << 24 | (uint32_t)p[off + 1] << 16 | (uint32_t)p[off + 2] << 8 | p[off + 3];
        assert_true(mark & 0x80000000u); /* the last (only) fragment */
        len[k] = mark & 0x7fffffffu;
        rec[k] = p + off + 4;
        off += 4 + len[k];
        assert_true(off <= n);
    }
    return k;
}

/* Core's own v23 stream through the pipe source: 84 and 85 byte-exact, then the gap to 88 is
 * refused, naming both, and the run fails (exit 1). */
static void test_pipe_source_over_cores_v23_stream(void **state)
{
    (void)state;
    if (!realmeta_present())
        skip();
    size_t n;
    uint8_t *stream = read_real("v23-loadtest-stream.xdr", &n);
    assert_non_null(stream);
    const uint8_t *rec[4];
    size_t len[4];
    assert_int_equal(split_records(stream, n, rec, len, 4), 3);

    char gate[PATH_MAX + 32], cmd[3 * PATH_MAX];
    cs_tmpdir_join(&g_tmp, "gate", gate, sizeof gate);
    assert_int_equal(mkfifo(gate, 0600), 0);
    g_gate = open(gate, O_RDWR | O_CLOEXEC); /* never blocks; closing it unparks the writer */
    assert_true(g_gate >= 0);
    snprintf(cmd, sizeof cmd, "read go < '%s' && cat '%s/v23-loadtest-stream.xdr' >&3", gate, CS_REALMETA_DIR);
    const char *args[] = {"--source", "pipe", "--pipe-cmd", cmd, NULL};
    start_daemon(args);

    drain_job j = {.range = {.from = 84}};
    snprintf(j.url, sizeof j.url, "ws://127.0.0.1:%d/stream", g_proc.port);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, drain_main, &j), 0);
    assert_int_equal(cs_proc_wait_line(&g_proc, "subscriber connected", WAIT_MS), 0);
    assert_int_equal(write(g_gate, "go\n", 3), 3);
    pthread_join(t, NULL);

    assert_int_equal(j.c.count, 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(j.c.infos[i].sequence, 84 + i);
        assert_int_equal(j.c.sizes[i], len[i]);
        assert_memory_equal(j.c.copies[i], rec[i], len[i]);
    }
    assert_int_equal(len[0], 19768);
    assert_int_equal(len[1], 1773360);
    assert_int_not_equal(j.c.r, RL_OK); /* the run failed under it */
    assert_int_equal(cs_proc_wait_exit(&g_proc, WAIT_MS), 1);
    const char *want = "source emitted ledger 88 after 85: sequences must be dense and ascending";
    if (!strstr(g_proc.log, want))
        fail_msg("no \"%s\" in:\n%s", want, g_proc.log);
    rl_stream_free(j.c.s);
    collected_free(&j.c);
    free(stream);
}

/* Five public-network ledgers, renumbered 1..5 in a dump directory, through the file source:
 * each arrives byte-exact, from 412 B to 1.1 MB. */
static void test_file_source_over_public_network_ledgers(void **state)
{
    (void)state;
    if (!realmeta_present())
        skip();
    char dump[PATH_MAX + 32];
    cs_tmpdir_join(&g_tmp, "dump", dump, sizeof dump);
    assert_int_equal(mkdir(dump, 0700), 0);
    uint8_t *want[PUBNET_N];
    size_t wlen[PUBNET_N];
    for (size_t i = 0; i < PUBNET_N; i++) {
        want[i] = read_real(k_pubnet[i], &wlen[i]);
        assert_non_null(want[i]);
        char src[PATH_MAX], dst[2 * PATH_MAX];
        snprintf(src, sizeof src, "%s/%s", CS_REALMETA_DIR, k_pubnet[i]);
        snprintf(dst, sizeof dst, "%s/ledger-%zu.xdr", dump, i + 1);
        assert_int_equal(symlink(src, dst), 0);
    }
    char filedir[PATH_MAX + 64];
    snprintf(filedir, sizeof filedir, "--file-dir=%s", dump);
    /* Endless (the dump cycles): a subscriber that arrives late still finds 1..5 in the ring. */
    const char *args[] = {"--source", "file", filedir, "--cadence", "50ms", NULL};
    start_daemon(args);

    drain_job j = {.range = {.from = 1, .to = 5, .bounded = true}};
    snprintf(j.url, sizeof j.url, "ws://127.0.0.1:%d/stream", g_proc.port);
    drain_main(&j);
    if (j.c.r != RL_OK)
        fail_msg("stream: %s\n%s", j.c.err, g_proc.log);
    assert_int_equal(j.c.count, (int)PUBNET_N);
    for (size_t i = 0; i < PUBNET_N; i++) {
        assert_int_equal(j.c.infos[i].sequence, i + 1);
        assert_int_equal(j.c.sizes[i], wlen[i]);
        assert_memory_equal(j.c.copies[i], want[i], wlen[i]);
        free(want[i]);
    }
    assert_int_equal(cs_proc_stop(&g_proc, SIGTERM, WAIT_MS), 0);
    rl_stream_free(j.c.s);
    collected_free(&j.c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pipe_source_over_cores_v23_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_source_over_public_network_ledgers, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
