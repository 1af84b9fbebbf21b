/* SPDX-License-Identifier: Apache-2.0 */
/* --lake-dir end to end (docs/LAKE.md "Export to a directory"): the real corestreamd exports its
 * ring as a SEP-54 lake directory. Public network ledger 53312000 (../shared/realmeta, read in
 * place; skipped, saying so, where absent) replayed by `--source file` lands at its key as exactly
 * Galexie's object once decompressed; a synthetic run stopped by SIGTERM and started again leaves
 * every object it wrote as it was (inode, mtime) and misses none; an object another writer put at
 * a key ahead of the export (through `--source pipe`, whose ledgers the test writes one by one)
 * is kept, with an ERROR naming its key, and counted on /metrics. A signing run (--signing-key,
 * keys made by the openssl CLI, support/certs.h) writes each ledger's <key>.sig beside its
 * object, and benchrunner --mode lake --trusted-keys verifies the directory with them (and refuses
 * another key); a different .sig already at a key (another ledger's, as from a mirror mixed up) is
 * kept, with the ERROR naming that .sig's key, and the reader with the trusted key refuses it. */
#include <stdarg.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zstd.h>

#include "support/certs.h"
#include "support/files.h"
#include "support/lakee2e.h"
#include "support/metabuild.h"
#include "support/ringfixture.h"
#include "support/wait.h"
#include "support/wsclient.h"

#ifndef CS_REALMETA_DIR
#error "CS_REALMETA_DIR must name ../shared/realmeta"
#endif
#ifndef BENCHRUNNER_BIN
#error "BENCHRUNNER_BIN must name the benchrunner binary"
#endif

#define STOP_MS 20000
#define PUBNET "Public Global Stellar Network ; September 2015"
#define TESTNET "Test SDF Network ; September 2015"
#define PATHLEN (PATH_MAX + 200)

typedef cs_ringfx fixture;

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

static int setup(void **state)
{
    return cs_ringfx_setup(state, "lakee2e");
}

static int teardown(void **state)
{
    return cs_ringfx_teardown(state);
}

static char *lake_path(const fixture *f, const char *rel, char *buf, size_t len)
{
    snprintf(buf, len, "%s/lake%s%s", f->dir.path, *rel ? "/" : "", rel);
    return buf;
}

static void write_file(const char *path, const void *bytes, size_t len)
{
    if (cs_write_file(path, bytes, len) != 0)
        fail_msg("write %s: %s", path, strerror(errno));
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Whether ledger seq's object (suffix "") or its signature object (".sig") is in the lake. */
static bool file_exists(const fixture *f, uint32_t seq, const char *suffix)
{
    char key[128], path[PATHLEN];
    struct stat st;
    cs_lakee2e_key(seq, key, sizeof key);
    strcat(key, suffix);
    return stat(lake_path(f, key, path, sizeof path), &st) == 0;
}

static bool object_exists(const fixture *f, uint32_t seq)
{
    return file_exists(f, seq, "");
}

static bool sig_exists(const fixture *f, uint32_t seq)
{
    return file_exists(f, seq, ".sig");
}

typedef struct exists_arg {
    const fixture *f;
    uint32_t seq;
    const char *suffix;
} exists_arg;

static bool exists_pred(void *arg)
{
    exists_arg *a = arg;
    return file_exists(a->f, a->seq, a->suffix);
}

/* Objects (and a .sig after its object) appear as the exporter writes them; nothing announces
 * one to the test. */
static void wait_file(fixture *f, uint32_t seq, const char *suffix)
{
    exists_arg a = {f, seq, suffix};
    if (cs_wait_until(exists_pred, &a, WAIT_MS) != 0) {
        cs_proc_drain(&f->proc);
        fail_msg("no %s for ledger %" PRIu32 ":\n%s", *suffix ? suffix : "object", seq, f->proc.log);
    }
}

static void wait_object(fixture *f, uint32_t seq)
{
    wait_file(f, seq, "");
}

static void wait_line(fixture *f, const char *needle)
{
    if (cs_proc_wait_line(&f->proc, needle, WAIT_MS) != 0) {
        fprintf(stderr, "%s", f->proc.log);
        fail_msg("no \"%s\" in the log above", needle);
    }
}

/* ---- a real ledger: Galexie's object made again ---- */

static void galexie_object_exported(void **state)
{
    fixture *f = *state;
    size_t glen;
    uint8_t *galexie = cs_galexie_batch_53312000(CS_REALMETA_DIR, &glen);
    if (!galexie)
        skip();
    assert_true(glen > 12);
    assert_int_equal(be32(galexie + 8), 1);
    /* The dump --source file replays: the batch's one LedgerCloseMeta, as ledger-53312000.xdr. */
    char dump[PATHLEN], file[PATHLEN + 32], lake[PATHLEN];
    snprintf(dump, sizeof dump, "%s/dump", f->dir.path);
    assert_int_equal(mkdir(dump, 0755), 0);
    snprintf(file, sizeof file, "%s/ledger-53312000.xdr", dump);
    write_file(file, galexie + 12, glen - 12);
    lake_path(f, "", lake, sizeof lake);
    const char *const args[] = {"--source", "file", "--file-dir", dump, "--start-ledger", "53312000", "--file-count",
                                "1", "--background-nice", "0", "--network-passphrase", PUBNET, "--lake-dir", lake,
                                NULL};
    cs_ringfx_run_to_exit(f, CORESTREAMD_BIN, args, WAIT_MS);
    char path[PATHLEN];
    size_t olen, mlen;
    uint8_t *obj = cs_slurp(lake_path(f, "ledgers/FCD285FF--53312000-53375999/FCD285FF--53312000.xdr.zst", path, sizeof path),
                         &olen);
    if (!obj)
        fail_msg("no object at %s:\n%s", path, f->proc.log);
    uint8_t *mine = cs_unzstd(obj, olen, &mlen);
    assert_non_null(mine);
    assert_int_equal(mlen, glen);
    assert_memory_equal(mine, galexie, glen);
    size_t clen;
    char *config = (char *)cs_slurp(lake_path(f, "config.json", path, sizeof path), &clen);
    assert_non_null(config);
    assert_true(clen > 0 && memmem(config, clen, "\"networkPassphrase\":\"" PUBNET "\",\"ledgersPath\":\"/lake/ledgers\"",
                                   strlen("\"networkPassphrase\":\"" PUBNET "\",\"ledgersPath\":\"/lake/ledgers\"")));
    free(config);
    free(mine);
    free(obj);
    free(galexie);
}

/* ---- a synthetic run stopped and started again ---- */

static uint8_t *object_of(void *arg, uint32_t seq, size_t *len)
{
    char key[128], path[PATHLEN];
    uint8_t *z = cs_slurp(lake_path(arg, cs_lakee2e_key(seq, key, sizeof key), path, sizeof path), len);
    if (!z)
        fail_msg("no object at %s", path);
    return z;
}

static void stat_object(void *arg, uint32_t seq, struct stat *st)
{
    fixture *f = arg;
    char key[128], path[PATHLEN];
    if (stat(lake_path(f, cs_lakee2e_key(seq, key, sizeof key), path, sizeof path), st) != 0)
        fail_msg("no object at %s", path);
}

static bool exists_seq(void *arg, uint32_t seq)
{
    return object_exists(arg, seq);
}

static cs_lakee2e_lake lake_of(fixture *f)
{
    return (cs_lakee2e_lake){.exists = exists_seq, .object = object_of, .stat = stat_object, .arg = f};
}

static long metric(const char *body, const char *name)
{
    const char *p = strstr(body, name);
    while (p && p > body && p[-1] != '\n')
        p = strstr(p + 1, name);
    if (!p)
        return -1;
    return strtol(p + strlen(name), NULL, 10);
}

typedef struct metric_want {
    fixture *f;
    const char *name;
    long value;
    bool at_least; /* value or more; else exactly value */
} metric_want;

static bool metric_is(void *arg)
{
    metric_want *w = arg;
    char body[65536];
    if (cs_http_get("127.0.0.1", w->f->proc.port, "/metrics", WAIT_MS, body, sizeof body, NULL, 0) != 200)
        return false;
    long v = metric(body, w->name);
    return w->at_least ? v >= w->value : v == w->value;
}

static void start_synthetic(fixture *f, const char *lake)
{
    /* The background threads (the exporter among them) at the daemon's own priority, as the ring
     * frames tests run them: beside busy loops nice 19 gets next to nothing. */
    const char *const args[] = {"--source", "synthetic", "--synthetic-size", "4096", "--synthetic-interval", "20ms",
                                "--background-nice", "0", "--network-passphrase", TESTNET, "--lake-dir", lake, NULL};
    cs_ringfx_start(f, NULL, CORESTREAMD_BIN, args);
    if (cs_proc_wait_listening(&f->proc, WAIT_MS) != 0)
        fail_msg("not listening:\n%s", f->proc.log);
}

static void stop_run(fixture *f)
{
    int st = cs_proc_stop(&f->proc, SIGTERM, STOP_MS);
    if (st != 0)
        fail_msg("stop: status %d\n%s", st, f->proc.log);
}

static void restart_writes_nothing_twice(void **state)
{
    fixture *f = *state;
    char lake[PATHLEN];
    lake_path(f, "", lake, sizeof lake);
    start_synthetic(f, lake);
    wait_object(f, 10);
    /* The counter follows the files a moment later: looked at until it does, for WAIT_MS. */
    metric_want w = {f, "corestreamd_lake_export_objects_total ", 10, true};
    if (cs_wait_until(metric_is, &w, WAIT_MS) != 0)
        fail_msg("objects_total did not reach 10");
    char body[65536];
    assert_int_equal(cs_http_get("127.0.0.1", f->proc.port, "/metrics", WAIT_MS, body, sizeof body, NULL, 0), 200);
    assert_true(metric(body, "corestreamd_lake_export_bytes_total ") > 0);
    assert_int_equal(metric(body, "corestreamd_lake_export_errors_total{kind=\"conflict\"} "), 0);
    assert_int_equal(metric(body, "corestreamd_lake_export_lost_total "), 0);
    assert_true(metric(body, "corestreamd_lake_export_lag_ledgers ") >= 0);
    stop_run(f);
    /* The stop exports what the ring held: the objects run to the ring's latest. */
    cs_lakee2e_lake l = lake_of(f);
    uint32_t first_end = cs_lakee2e_newest(&l, 10);
    struct stat *before = cs_lakee2e_stat_run(&l, first_end);
    cs_ringfx_free_proc(f);

    start_synthetic(f, lake);
    wait_line(f, "msg=\"lake export starts\"");
    /* It resumes after the newest object (the stop's drain wrote what the ring held, unless a busy
     * machine gave it too little time: the rest comes now, from the ring). */
    char line[1024], want[128];
    cs_proc_line(&f->proc, line, sizeof line);
    snprintf(want, sizeof want, " next=%" PRIu32 " newest=%" PRIu32 " ring_oldest=1 ", first_end + 1, first_end);
    if (!strstr(line, want))
        fail_msg("resumed elsewhere: %s (objects end at %" PRIu32 ")", line, first_end);
    wait_object(f, first_end + 10);
    stop_run(f);
    uint32_t end = cs_lakee2e_newest(&l, first_end + 10);
    cs_lakee2e_expect_kept(&l, end, before, first_end);
    free(before);
    assert_int_equal(cs_proc_log_count(&f->proc, "level=ERROR"), 0);
    assert_int_equal(cs_proc_log_count(&f->proc, "level=WARN msg=\"lake export"), 0);
}

/* ---- another writer's object ahead of the export ---- */

#define TAIL 3000

/* Frames of from..to written through the FIFO by a `cat` that exits at their end. */
static void feed(fixture *f, const char *fifo, uint32_t from, uint32_t to)
{
    char why[600];
    if (cs_mb_feed_fifo(f->dir.path, fifo, from, to, TAIL, why, sizeof why) != 0)
        fail_msg("%s", why);
}

static void object_in_place_kept(void **state)
{
    fixture *f = *state;
    char fifo[PATHLEN], lake[PATHLEN];
    snprintf(fifo, sizeof fifo, "%s/meta.fifo", f->dir.path);
    lake_path(f, "", lake, sizeof lake);
    const char *const args[] = {"--source", "pipe", "--pipe-path", fifo, "--background-nice", "0",
                                "--network-passphrase", TESTNET, "--lake-dir", lake, NULL};
    cs_ringfx_start(f, NULL, CORESTREAMD_BIN, args);
    if (cs_proc_wait_listening(&f->proc, WAIT_MS) != 0)
        fail_msg("not listening:\n%s", f->proc.log);
    feed(f, fifo, 1, 2);
    wait_object(f, 2);
    /* Another writer's object at ledger 3's key, before the ring has ledger 3. */
    char key[128], path[PATHLEN];
    static const char other[] = "another writer's ledger 3";
    uint8_t z[256];
    size_t zlen = ZSTD_compress(z, sizeof z, other, sizeof other, 3);
    assert_false(ZSTD_isError(zlen));
    write_file(lake_path(f, cs_lakee2e_key(3, key, sizeof key), path, sizeof path), z, zlen);
    feed(f, fifo, 3, 4);
    wait_line(f, "level=ERROR msg=\"lake export: an object in place differs from the ring's batch; it is kept\"");
    char line[2048];
    cs_proc_line(&f->proc, line, sizeof line);
    if (!strstr(line, " key=FFFFFFFF--0-63999/FFFFFFFC--3.xdr.zst ") ||
        !strstr(line, " problem=\"its content differs from the ring's batch 3-3\""))
        fail_msg("line: %s", line);
    wait_object(f, 4);
    size_t len;
    uint8_t *kept = cs_slurp(path, &len);
    assert_non_null(kept);
    assert_int_equal(len, zlen);
    assert_memory_equal(kept, z, zlen);
    free(kept);
    /* The counters follow the files a moment later: looked at until they do, for WAIT_MS. */
    metric_want w = {f, "corestreamd_lake_export_objects_total ", 3, false};
    if (cs_wait_until(metric_is, &w, WAIT_MS) != 0)
        fail_msg("objects_total did not reach 3");
    char body[65536];
    assert_int_equal(cs_http_get("127.0.0.1", f->proc.port, "/metrics", WAIT_MS, body, sizeof body, NULL, 0), 200);
    assert_int_equal(metric(body, "corestreamd_lake_export_errors_total{kind=\"conflict\"} "), 1);
    stop_run(f);
}

/* ---- signed runs: the .sig objects ---- */

/* benchrunner --mode lake over the lake directory, ledgers 1..end, checking them with the public
 * keys in pub: its exit status; its output in p (freed by the caller). */
static int bench_verify(const fixture *f, uint32_t end, const char *pub, cs_proc *p)
{
    char lake[PATHLEN], last[16];
    lake_path(f, "", lake, sizeof lake);
    snprintf(last, sizeof last, "%" PRIu32, end);
    char *const argv[] = {BENCHRUNNER_BIN, "--mode", "lake", "--url", lake, "--start", "1", "--end", last,
                          "--quiet", "--trusted-keys", (char *)pub, NULL};
    assert_int_equal(cs_proc_start(p, argv), 0);
    return cs_proc_wait_exit(p, WAIT_MS);
}

static void signed_export_verifies(void **state)
{
    fixture *f = *state;
    char lake[PATHLEN];
    lake_path(f, "", lake, sizeof lake);
    const char *const args[] = {"--source", "synthetic", "--synthetic-size", "4096", "--synthetic-interval", "20ms",
                                "--synthetic-count", "8", "--background-nice", "0", "--network-passphrase", TESTNET,
                                "--lake-dir", lake, "--signing-key", certs.sign_key, NULL};
    cs_ringfx_run_to_exit(f, CORESTREAMD_BIN, args, WAIT_MS);
    for (uint32_t seq = 1; seq <= 8; seq++)
        if (!object_exists(f, seq) || !sig_exists(f, seq))
            fail_msg("ledger %" PRIu32 ": no object or no .sig:\n%s", seq, f->proc.log);
    assert_int_equal(cs_proc_log_count(&f->proc, "level=ERROR"), 0);
    cs_proc b = {0};
    int st = bench_verify(f, 8, certs.sign_pub, &b);
    if (st != 0 || !strstr(b.log, "ledgers      8 (1..8)"))
        fail_msg("benchrunner --trusted-keys: status %d\n%s", st, b.log);
    cs_proc_free(&b);
    st = bench_verify(f, 8, certs.other_sign_pub, &b);
    if (st != 1 || !strstr(b.log, "lake: signature: ledger 1: signed by ") ||
        !strstr(b.log, "which is not a trusted key"))
        fail_msg("benchrunner with another key: status %d\n%s", st, b.log);
    cs_proc_free(&b);
}

static void sig_in_place_kept(void **state)
{
    fixture *f = *state;
    char fifo[PATHLEN], lake[PATHLEN];
    snprintf(fifo, sizeof fifo, "%s/meta.fifo", f->dir.path);
    lake_path(f, "", lake, sizeof lake);
    const char *const args[] = {"--source", "pipe", "--pipe-path", fifo, "--background-nice", "0",
                                "--network-passphrase", TESTNET, "--lake-dir", lake, "--signing-key", certs.sign_key,
                                NULL};
    cs_ringfx_start(f, NULL, CORESTREAMD_BIN, args);
    if (cs_proc_wait_listening(&f->proc, WAIT_MS) != 0)
        fail_msg("not listening:\n%s", f->proc.log);
    feed(f, fifo, 1, 2);
    wait_file(f, 2, ".sig");
    /* Ledger 2's signatures, signed by the trusted key, at ledger 3's .sig before the ring has 3. */
    char key[128], path2[PATHLEN], path3[PATHLEN];
    cs_lakee2e_key(2, key, sizeof key);
    strcat(key, ".sig");
    size_t len;
    uint8_t *two = cs_slurp(lake_path(f, key, path2, sizeof path2), &len);
    assert_non_null(two);
    cs_lakee2e_key(3, key, sizeof key);
    strcat(key, ".sig");
    write_file(lake_path(f, key, path3, sizeof path3), two, len);
    feed(f, fifo, 3, 4);
    wait_line(f, "level=ERROR msg=\"lake export: an object in place differs from the ring's batch; it is kept\"");
    char line[2048];
    cs_proc_line(&f->proc, line, sizeof line);
    if (!strstr(line, " key=FFFFFFFF--0-63999/FFFFFFFC--3.xdr.zst.sig ") ||
        !strstr(line, "/lake/ledgers/FFFFFFFF--0-63999/FFFFFFFC--3.xdr.zst.sig ") ||
        !strstr(line, " problem=\"its bytes differ from the ring's signatures of batch 3-3\""))
        fail_msg("line: %s", line);
    wait_object(f, 4);
    size_t klen;
    uint8_t *kept = cs_slurp(path3, &klen);
    assert_non_null(kept);
    assert_int_equal(klen, len);
    assert_memory_equal(kept, two, len);
    free(kept);
    free(two);
    /* The counters follow the files a moment later, and a .sig its object: looked at until they
     * do, for WAIT_MS. */
    metric_want w = {f, "corestreamd_lake_export_signatures_total ", 3, false};
    if (cs_wait_until(metric_is, &w, WAIT_MS) != 0)
        fail_msg("signatures_total did not reach 3");
    assert_true(object_exists(f, 3) && sig_exists(f, 4));
    char body[65536];
    assert_int_equal(cs_http_get("127.0.0.1", f->proc.port, "/metrics", WAIT_MS, body, sizeof body, NULL, 0), 200);
    assert_int_equal(metric(body, "corestreamd_lake_export_errors_total{kind=\"conflict\"} "), 1);
    assert_int_equal(metric(body, "corestreamd_lake_export_objects_total "), 4);
    stop_run(f);
    /* A reader holding the key refuses the lake at ledger 3: its .sig is another ledger's. */
    cs_proc b = {0};
    int st = bench_verify(f, 4, certs.sign_pub, &b);
    if (st != 1 || !strstr(b.log, "benchrunner: lake: signature: ledger 3: bytes differ from the signed SHA-256\n"))
        fail_msg("benchrunner: status %d\n%s", st, b.log);
    cs_proc_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(galexie_object_exported, setup, teardown),
        cmocka_unit_test_setup_teardown(restart_writes_nothing_twice, setup, teardown),
        cmocka_unit_test_setup_teardown(object_in_place_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(signed_export_verifies, setup, teardown),
        cmocka_unit_test_setup_teardown(sig_in_place_kept, setup, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
