/* SPDX-License-Identifier: Apache-2.0 */
/* --lake-url end to end (docs/LAKE.md "Export to S3"): the real corestreamd exports its ring into
 * an S3-compatible bucket, s3rver (an npm package scripts/setup.sh installs under .cache/s3rver)
 * on an ephemeral port, the AWS_* environment pointing at it. A synthetic run writes the configs
 * and each ledger's object, every one the ring's ledger once decompressed; stopped by SIGTERM and
 * started again it resumes after the newest object (found by HEADs, without a listing) and
 * rewrites none (s3rver keeps each object as a file: its inode and mtime stay) and misses none;
 * an object another writer put at a key ahead of the export is kept, with an ERROR naming its
 * key; a bucket prefix holding another network's config.json fails the start. A signing run
 * (--signing-key, keys made by the openssl CLI, support/certs.h) into the bucket's root puts each
 * ledger's <key>.sig beside its object, and benchrunner --mode lake --trusted-keys, reading the
 * bucket over HTTP as a lake (s3rver answers anonymous GETs), verifies them; a different .sig
 * already at a key is kept, with the ERROR naming that .sig's key, and refused by the reader. */
#include <stdarg.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "corestreamd/lake/lakes3.h"
#include "support/certs.h"
#include "support/lakee2e.h"
#include "support/ringfixture.h"
#include "support/s3rver.h"
#include "support/wait.h"

#ifndef CS_S3RVER
#error "CS_S3RVER must name the s3rver program"
#endif
#ifndef BENCHRUNNER_BIN
#error "BENCHRUNNER_BIN must name the benchrunner binary"
#endif

#define STOP_MS 20000
#define TESTNET "Test SDF Network ; September 2015"
#define PATHLEN (PATH_MAX + 200)

typedef struct fixture {
    cs_ringfx *rf;
    cs_proc s3;
    char s3dir[PATHLEN];
    char endpoint[64]; /* s3rver's http://127.0.0.1:<port> */
    cs_s3 *bucket;     /* s3://lake/pubnet, the test's own client */
} fixture;

static int teardown(void **state)
{
    fixture *f = *state;
    cs_s3_free(f->bucket);
    cs_proc_stop(&f->s3, SIGTERM, 10000);
    cs_proc_free(&f->s3);
    void *rf = f->rf;
    int rc = cs_ringfx_teardown(&rf);
    free(f);
    return rc;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    void *rf = NULL;
    if (!f || cs_ringfx_setup(&rf, "lakes3e2e") != 0) {
        free(f);
        return -1;
    }
    f->rf = rf;
    *state = f;
    /* The daemon inherits the environment: its client finds s3rver and its account as the test's. */
    snprintf(f->s3dir, sizeof f->s3dir, "%s/s3", f->rf->dir.path);
    cs_err err = {0};
    if (cs_s3rver_start(&f->s3, CS_S3RVER, f->s3dir, "lake", f->endpoint, sizeof f->endpoint) != 0 ||
        cs_s3_open(&f->bucket, "s3://lake/pubnet", &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        teardown(state);
        return -1;
    }
    return 0;
}

static bool object_exists(fixture *f, uint32_t seq)
{
    char key[128];
    cs_err err = {0};
    int rc = cs_s3_exists(f->bucket, cs_lakee2e_key(seq, key, sizeof key), &err);
    if (rc < 0)
        fail_msg("HEAD %s: %s", key, err.msg);
    return rc == 0;
}

/* Objects appear as the exporter writes them: looked for every 100 ms, for WAIT_MS at most. */
static void wait_object(fixture *f, uint32_t seq)
{
    for (int i = 0; i < WAIT_MS / 100; i++) {
        if (object_exists(f, seq))
            return;
        usleep(100 * 1000);
    }
    cs_proc_drain(&f->rf->proc);
    fail_msg("no object for ledger %" PRIu32 ":\n%s", seq, f->rf->proc.log);
}

static uint8_t *get(fixture *f, const char *key, size_t *len)
{
    uint8_t *p = NULL;
    cs_err err = {0};
    if (cs_s3_get(f->bucket, key, 1 << 24, &p, len, &err) != 0)
        fail_msg("GET %s: %s", key, err.msg[0] ? err.msg : "no such key");
    return p;
}

static uint8_t *object_of(void *arg, uint32_t seq, size_t *len)
{
    char key[128];
    return get(arg, cs_lakee2e_key(seq, key, sizeof key), len);
}

static void stat_object(void *arg, uint32_t seq, struct stat *st)
{
    fixture *f = arg;
    char key[128], path[2 * PATHLEN];
    snprintf(path, sizeof path, "%s/lake/pubnet/%s._S3rver_object", f->s3dir, cs_lakee2e_key(seq, key, sizeof key));
    if (stat(path, st) != 0)
        fail_msg("no file %s", path);
}

static bool exists_seq(void *arg, uint32_t seq)
{
    return object_exists(arg, seq);
}

static cs_lakee2e_lake lake_of(fixture *f)
{
    return (cs_lakee2e_lake){.exists = exists_seq, .object = object_of, .stat = stat_object, .arg = f};
}

static void start_synthetic(fixture *f, const char *url, const char *passphrase)
{
    /* The background threads (the exporter among them) at the daemon's own priority. */
    const char *const args[] = {"--source", "synthetic", "--synthetic-size", "4096", "--synthetic-interval", "20ms",
                                "--background-nice", "0", "--network-passphrase", passphrase, "--lake-url", url, NULL};
    cs_ringfx_start(f->rf, NULL, CORESTREAMD_BIN, args);
}

static void wait_listening(fixture *f)
{
    if (cs_proc_wait_listening(&f->rf->proc, WAIT_MS) != 0)
        fail_msg("not listening:\n%s", f->rf->proc.log);
}

static void stop_run(fixture *f)
{
    int st = cs_proc_stop(&f->rf->proc, SIGTERM, STOP_MS);
    if (st != 0)
        fail_msg("stop: status %d\n%s", st, f->rf->proc.log);
}

static void restart_writes_nothing_twice(void **state)
{
    fixture *f = *state;
    start_synthetic(f, "s3://lake/pubnet", TESTNET);
    wait_listening(f);
    wait_object(f, 10);
    size_t clen;
    char *config = (char *)get(f, "config.json", &clen);
    const char *want_net = "\"networkPassphrase\":\"" TESTNET "\",\"ledgersPath\":\"/lake/ledgers\"";
    assert_non_null(memmem(config, clen, want_net, strlen(want_net)));
    free(config);
    char *manifest = (char *)get(f, "ledgers/.config.json", &clen);
    assert_non_null(memmem(manifest, clen, "\"version\":\"1.0\"", strlen("\"version\":\"1.0\"")));
    free(manifest);
    stop_run(f);
    /* The stop exports what the ring held: the objects run to the ring's latest. */
    cs_lakee2e_lake l = lake_of(f);
    uint32_t first_end = cs_lakee2e_newest(&l, 10);
    struct stat *before = cs_lakee2e_stat_run(&l, first_end);
    cs_ringfx_free_proc(f->rf);

    start_synthetic(f, "s3://lake/pubnet/", TESTNET);
    wait_listening(f);
    cs_ringfx_wait_line(f->rf, "msg=\"lake export starts\"", WAIT_MS);
    /* It resumes after the newest object, found by a binary search of HEADs over the ring. */
    char line[1024], want[128];
    cs_proc_line(&f->rf->proc, line, sizeof line);
    snprintf(want, sizeof want, " next=%" PRIu32 " newest=%" PRIu32 " ring_oldest=1 ", first_end + 1, first_end);
    if (!strstr(line, want) || !strstr(line, " url=\"s3://lake/pubnet at http://127.0.0.1:"))
        fail_msg("resumed elsewhere: %s (objects end at %" PRIu32 ")", line, first_end);
    wait_object(f, first_end + 10);
    stop_run(f);
    uint32_t end = cs_lakee2e_newest(&l, first_end + 10);
    cs_lakee2e_expect_kept(&l, end, before, first_end);
    free(before);
    assert_int_equal(cs_proc_log_count(&f->rf->proc, "level=ERROR"), 0);
    assert_int_equal(cs_proc_log_count(&f->rf->proc, "level=WARN msg=\"lake export"), 0);
}

static void object_in_place_kept(void **state)
{
    fixture *f = *state;
    /* Another writer's object at ledger 30's key, before the daemon starts. */
    char key[128];
    static const char other[] = "another writer's ledger 30";
    uint8_t z[256];
    size_t zlen = ZSTD_compress(z, sizeof z, other, sizeof other, 3);
    assert_false(ZSTD_isError(zlen));
    cs_err err = {0};
    if (cs_s3_put(f->bucket, cs_lakee2e_key(30, key, sizeof key), z, zlen, "application/zstd", &err) != 0)
        fail_msg("PUT: %s", err.msg);
    start_synthetic(f, "s3://lake/pubnet", TESTNET);
    wait_listening(f);
    cs_ringfx_wait_line(f->rf, "level=ERROR msg=\"lake export: an object in place differs from the ring's batch; it is kept\"",
                        WAIT_MS);
    char line[2048];
    cs_proc_line(&f->rf->proc, line, sizeof line);
    if (!strstr(line, " key=FFFFFFFF--0-63999/FFFFFFE1--30.xdr.zst ") ||
        !strstr(line, " path=s3://lake/pubnet/ledgers/FFFFFFFF--0-63999/FFFFFFE1--30.xdr.zst ") ||
        !strstr(line, " problem=\"its content differs from the ring's batch 30-30\""))
        fail_msg("line: %s", line);
    wait_object(f, 31);
    stop_run(f);
    size_t len;
    uint8_t *kept = get(f, key, &len);
    assert_int_equal(len, zlen);
    assert_memory_equal(kept, z, zlen);
    free(kept);
    for (uint32_t seq = 29; seq <= 31; seq += 2) {
        uint8_t *z = object_of(f, seq, &len);
        cs_lakee2e_expect_synthetic(z, len, seq);
        free(z);
    }
}

static void another_lakes_config_fails_the_start(void **state)
{
    fixture *f = *state;
    static const char other[] = "{\"networkPassphrase\":\"Public Global Stellar Network ; September 2015\","
                                "\"ledgersPath\":\"/lake/ledgers\",\"compression\":\"zstd\",\"ledgersPerBatch\":1,"
                                "\"batchesPerPartition\":64000}";
    cs_err err = {0};
    if (cs_s3_put(f->bucket, "config.json", other, strlen(other), "application/json", &err) != 0)
        fail_msg("PUT: %s", err.msg);
    start_synthetic(f, "s3://lake/pubnet", TESTNET);
    int st = cs_proc_wait_exit(&f->rf->proc, WAIT_MS);
    if (st == 0 || st == -1)
        fail_msg("status %d:\n%s", st, f->rf->proc.log);
    assert_non_null(strstr(f->rf->proc.log, "lake: \\\"s3://lake/pubnet/config.json\\\" is another lake's: its "
                                            "networkPassphrase is"));
    assert_false(object_exists(f, 1));
}

/* ---- a signing run: the .sig objects ---- */

static cs_certs certs; /* the signing keys, for the group */

static int group_setup(void **state)
{
    (void)state;
    return cs_certs_make(&certs);
}

static int group_teardown(void **state)
{
    (void)state;
    cs_certs_remove(&certs);
    return 0;
}

/* benchrunner --mode lake over the bucket's root as a lake over HTTP (config.json at
 * <endpoint>/lake/config.json, ledgersPath /lake/ledgers: the bucket "lake", key ledgers/…),
 * ledgers 1..end checked with the public keys in pub: its exit status, its output in p. */
static int bench_verify(fixture *f, uint32_t end, const char *pub, cs_proc *p)
{
    char url[128], last[16];
    snprintf(url, sizeof url, "%s/lake", f->endpoint);
    snprintf(last, sizeof last, "%" PRIu32, end);
    char *const argv[] = {BENCHRUNNER_BIN, "--mode", "lake", "--url", url, "--start", "1", "--end", last,
                          "--quiet", "--trusted-keys", (char *)pub, NULL};
    assert_int_equal(cs_proc_start(p, argv), 0);
    return cs_proc_wait_exit(p, WAIT_MS);
}

static void signed_export_verifies(void **state)
{
    fixture *f = *state;
    /* Not ledger 5's signatures, at its .sig key before the daemon starts. */
    static const char other[] = "not ledger 5's signatures";
    char key[128];
    cs_lakee2e_key(5, key, sizeof key);
    strcat(key, ".sig");
    cs_err err = {0};
    cs_s3 *root = NULL; /* s3://lake, the bucket's root */
    if (cs_s3_open(&root, "s3://lake", &err) != 0 ||
        cs_s3_put(root, key, other, sizeof other, "application/octet-stream", &err) != 0)
        fail_msg("PUT: %s", err.msg);
    cs_s3_free(f->bucket);
    f->bucket = root; /* what get() reads from now on */
    const char *const args[] = {"--source", "synthetic", "--synthetic-size", "4096", "--synthetic-interval", "20ms",
                                "--synthetic-count", "8", "--background-nice", "0", "--network-passphrase", TESTNET,
                                "--lake-url", "s3://lake", "--signing-key", certs.sign_key, NULL};
    cs_ringfx_run_to_exit(f->rf, CORESTREAMD_BIN, args, WAIT_MS);
    cs_ringfx_wait_line(f->rf, "level=ERROR msg=\"lake export: an object in place differs from the ring's batch; it is kept\"",
                        WAIT_MS);
    char line[2048];
    cs_proc_line(&f->rf->proc, line, sizeof line);
    if (!strstr(line, " key=FFFFFFFF--0-63999/FFFFFFFA--5.xdr.zst.sig ") ||
        !strstr(line, " path=s3://lake/ledgers/FFFFFFFF--0-63999/FFFFFFFA--5.xdr.zst.sig ") ||
        !strstr(line, " problem=\"its bytes differ from the ring's signatures of batch 5-5\""))
        fail_msg("line: %s", line);
    assert_int_equal(cs_proc_log_count(&f->rf->proc, "level=ERROR"), 1);
    size_t len;
    uint8_t *kept = get(f, key, &len);
    assert_int_equal(len, sizeof other);
    assert_memory_equal(kept, other, len);
    free(kept);
    /* The bucket at the root is ledgers/<key> as s3rver serves it to anyone: a lake over HTTP. */
    char objkey[128];
    cs_lakee2e_key(8, objkey, sizeof objkey);
    free(get(f, strcat(objkey, ".sig"), &len));
    cs_proc b = {0};
    int st = bench_verify(f, 4, certs.sign_pub, &b);
    if (st != 0 || !strstr(b.log, "ledgers      4 (1..4)"))
        fail_msg("benchrunner --trusted-keys: status %d\n%s", st, b.log);
    cs_proc_free(&b);
    st = bench_verify(f, 8, certs.sign_pub, &b);
    if (st != 1 || !strstr(b.log, "/lake: ledger 5: its signature object is not one SIG\n"))
        fail_msg("benchrunner over the kept .sig: status %d\n%s", st, b.log);
    cs_proc_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(restart_writes_nothing_twice, setup, teardown),
        cmocka_unit_test_setup_teardown(object_in_place_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(another_lakes_config_fails_the_start, setup, teardown),
        cmocka_unit_test_setup_teardown(signed_export_verifies, setup, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
