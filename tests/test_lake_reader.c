/* SPDX-License-Identifier: Apache-2.0 */
/* The lake reader's config.json (corestreamd/lake/lakereader.h, docs/LAKE.md "Reading"), from a
 * directory in scratch: a lake's config read into its layout, network and objects' place; members
 * it does not know ignored at any depth; each config it cannot read refused with its exact
 * message and kind. (The reader over HTTP is tests/lake_client.py's and benchrunner's.) */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corestreamd/lake/lakereader.h"
#include "support/files.h"
#include "support/tmpdir.h"

typedef struct fixture {
    cs_tmpdir dir;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || cs_tmpdir_make(&f->dir, "lakereader") != 0) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    int rc = cs_tmpdir_remove(&f->dir);
    free(f);
    return rc;
}

static void write_config(fixture *f, const char *text)
{
    char path[PATH_MAX];
    cs_tmpdir_join(&f->dir, "config.json", path, sizeof path);
    if (cs_write_file(path, text, strlen(text)) != 0)
        fail_msg("write %s", path);
}

/* The reader refuses the directory's config.json with exactly msg (`@` stands for the directory). */
static void expect_refused(fixture *f, const char *text, int kind, const char *msg)
{
    if (text)
        write_config(f, text);
    char want[2 * PATH_MAX];
    const char *at = strchr(msg, '@');
    snprintf(want, sizeof want, "%.*s%s%s", (int)(at - msg), msg, f->dir.path, at + 1);
    cs_lake_reader_opts o = {.url = f->dir.path};
    cs_lake_reader *r = NULL;
    cs_err err = {0};
    assert_int_equal(cs_lake_reader_open(&r, &o, &err), -1);
    assert_null(r);
    assert_string_equal(err.msg, want);
    assert_int_equal(err.kind, kind);
}

/* A lake's config (as corestreamd writes it, or spelt otherwise with members the reader does not
 * know, nested or not) gives its layout and network; objects are looked for at ledgersPath's last
 * component in the directory. */
static void test_config_read(void **state)
{
    fixture *f = *state;
    write_config(f, " {\"ledgersPerBatch\": 4, \"extra\": {\"a\": [1, {\"b\": null}]}, \"batchesPerPartition\": 2,\n"
                    "  \"compression\": \"zs\\u0074d\", \"ledgersPath\": \"/lake/ledgers\", \"version\": true,\n"
                    "  \"networkPassphrase\": \"Test SDF Network \\u003b September 2015\"}\n");
    cs_lake_reader_opts o = {.url = f->dir.path};
    cs_lake_reader *r = NULL;
    cs_err err = {0};
    if (cs_lake_reader_open(&r, &o, &err) != 0)
        fail_msg("open: %s", err.msg);
    assert_int_equal(cs_lake_reader_layout(r)->ledgers_per_batch, 4);
    assert_int_equal(cs_lake_reader_layout(r)->batches_per_partition, 2);
    assert_string_equal(cs_lake_reader_passphrase(r), "Test SDF Network ; September 2015");
    cs_lake_batch b;
    uint8_t *xdr = NULL;
    size_t len;
    assert_int_equal(cs_lake_reader_get(r, 9, &b, &xdr, &len, &err), -1);
    assert_int_equal(err.kind, CS_LAKE_READ_ERR_NOT_FOUND);
    char want[2 * PATH_MAX];
    snprintf(want, sizeof want, "lake: %s: ledger 9: no object at FFFFFFF7--8-15/FFFFFFF7--8-11.xdr.zst", f->dir.path);
    assert_string_equal(err.msg, want);
    cs_lake_reader_free(r);
}

static void test_config_refusals(void **state)
{
    fixture *f = *state;
    expect_refused(f, NULL, CS_LAKE_READ_ERR_NOT_FOUND, "lake: @/config.json: not found: not a SEP-54 lake");
    expect_refused(f, "[1, 2]", CS_LAKE_READ_ERR_FORMAT, "lake: @/config.json is not a JSON object");
    expect_refused(f, "{\"networkPassphrase\":\"n\",\"compression\":\"zstd\"}", CS_LAKE_READ_ERR_FORMAT,
                   "lake: @/config.json lacks networkPassphrase or ledgersPath");
    expect_refused(f, "{\"networkPassphrase\":\"n\",\"ledgersPath\":\"\"}", CS_LAKE_READ_ERR_FORMAT,
                   "lake: @/config.json lacks networkPassphrase or ledgersPath");
    expect_refused(f, "{\"networkPassphrase\":\"n\",\"ledgersPath\":\"l\",\"compression\":\"gzip\"}",
                   CS_LAKE_READ_ERR_FORMAT, "lake: @/config.json: compression gzip: only zstd is read");
    expect_refused(f, "{\"networkPassphrase\":\"n\",\"ledgersPath\":\"l\",\"compression\":3}", CS_LAKE_READ_ERR_FORMAT,
                   "lake: @/config.json: compression (none): only zstd is read");
    static const char *const counts[] = {"0", "1.5", "4294967296", "-1", "\"64000\"", "null"};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        char text[256];
        snprintf(text, sizeof text,
                 "{\"networkPassphrase\":\"n\",\"ledgersPath\":\"l\",\"compression\":\"zstd\",\"ledgersPerBatch\":1,"
                 "\"batchesPerPartition\":%s}",
                 counts[i]);
        expect_refused(f, text, CS_LAKE_READ_ERR_FORMAT,
                       "lake: @/config.json: batchesPerPartition is not a count of 1 or more");
    }
    expect_refused(f,
                   "{\"networkPassphrase\":\"n\",\"ledgersPath\":\"l\",\"compression\":\"zstd\",\"batchesPerPartition\":1}",
                   CS_LAKE_READ_ERR_FORMAT, "lake: @/config.json: ledgersPerBatch is not a count of 1 or more");
}

/* Text that is not one JSON object: refused as such, saying where it stops. */
static void test_config_not_json(void **state)
{
    fixture *f = *state;
    expect_refused(f, "not json", CS_LAKE_READ_ERR_FORMAT, "lake: @/config.json is not a JSON object");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_config_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_not_json, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
