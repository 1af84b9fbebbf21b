/* SPDX-License-Identifier: Apache-2.0 */
/* The lake's object keys (corestreamd/lake/lakekey.h) against the keys the Go SDK's
 * GetObjectKeyFromSequenceNumber forms, their reading back from request paths, and config.json
 * (lakeconfig.h). Expected keys were worked out with the SDK's uint32 arithmetic. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corestreamd/lake/lakeconfig.h"
#include "corestreamd/lake/lakekey.h"

static const char k_pubnet[] = "Public Global Stellar Network ; September 2015";

/* The key of the batch holding seq under (lpb, bpp); fails the test when there is none. */
static const char *key_of(uint32_t lpb, uint32_t bpp, uint32_t seq)
{
    static char key[CS_LAKE_KEY_MAX];
    cs_lake_layout l = {lpb, bpp};
    cs_lake_batch b;
    cs_err err = {0};
    if (cs_lake_layout_check(&l, &err) != 0 || cs_lake_batch_of(&l, seq, &b, &err) != 0)
        fail_msg("layout %u/%u ledger %u: %s", lpb, bpp, seq, err.msg);
    size_t n = cs_lake_key(&l, b, key);
    assert_int_equal(n, strlen(key));
    return key;
}

static void test_default_layout_keys(void **state)
{
    (void)state;
    cs_lake_layout d = cs_lake_layout_default();
    assert_int_equal(d.ledgers_per_batch, 1);
    assert_int_equal(d.batches_per_partition, 64000);
    assert_string_equal(key_of(1, 64000, 53312000), "FCD285FF--53312000-53375999/FCD285FF--53312000.xdr.zst");
    assert_string_equal(key_of(1, 64000, 53312001), "FCD285FF--53312000-53375999/FCD285FE--53312001.xdr.zst");
    assert_string_equal(key_of(1, 64000, 2), "FFFFFFFF--0-63999/FFFFFFFD--2.xdr.zst");
}

/* SEP-54's own example (2 ledgers a batch, 8 batches a partition) and batches of 64. */
static void test_batches_of_many_ledgers(void **state)
{
    (void)state;
    assert_string_equal(key_of(2, 8, 18), "FFFFFFEF--16-31/FFFFFFED--18-19.xdr.zst");
    assert_string_equal(key_of(2, 8, 19), "FFFFFFEF--16-31/FFFFFFED--18-19.xdr.zst");
    assert_string_equal(key_of(2, 8, 15), "FFFFFFFF--0-15/FFFFFFF1--14-15.xdr.zst");
    assert_string_equal(key_of(64, 10, 1000), "FFFFFD7F--640-1279/FFFFFC3F--960-1023.xdr.zst");
    assert_string_equal(key_of(64, 10, 960), "FFFFFD7F--640-1279/FFFFFC3F--960-1023.xdr.zst");
}

static void test_partition_of_one_batch(void **state)
{
    (void)state;
    assert_string_equal(key_of(64, 1, 1000), "FFFFFC3F--960-1023.xdr.zst");
    assert_string_equal(key_of(1, 1, 5), "FFFFFFFA--5.xdr.zst");
}

/* At 4294967295 the SDK's partition end wraps (kept, it is the key a client asks for); a batch
 * that would end past it cannot be made. */
static void test_ceiling(void **state)
{
    (void)state;
    assert_string_equal(key_of(1, 64000, 4294967295u), "0000D7FF--4294912000-8703/00000000--4294967295.xdr.zst");
    assert_string_equal(key_of(64, 1, 4294967295u), "0000003F--4294967232-4294967295.xdr.zst");
    assert_string_equal(key_of(64, 64000, 4294967295u),
                        "0023FFFF--4292608000-1736703/0000003F--4294967232-4294967295.xdr.zst");
    assert_string_equal(key_of(10, 1, 4294967289u), "0000000F--4294967280-4294967289.xdr.zst");
    cs_lake_layout l = {10, 1};
    cs_lake_batch b;
    cs_err err = {0};
    assert_int_equal(cs_lake_batch_of(&l, 4294967290u, &b, &err), -1);
    assert_int_equal(err.kind, CS_LAKE_KEY_ERR_CEILING);
    assert_string_equal(err.msg, "lake: ledger 4294967290: its batch of 10 ledgers would end past 4294967295");
}

static void expect_layout_refused(uint32_t lpb, uint32_t bpp, const char *msg)
{
    cs_lake_layout l = {lpb, bpp};
    cs_err err = {0};
    assert_int_equal(cs_lake_layout_check(&l, &err), -1);
    assert_int_equal(err.kind, CS_LAKE_KEY_ERR_LAYOUT);
    assert_string_equal(err.msg, msg);
}

static void test_layout_check(void **state)
{
    (void)state;
    expect_layout_refused(0, 64000, "lake: ledgers per batch must be at least 1, got 0");
    expect_layout_refused(1, 0, "lake: batches per partition must be at least 1, got 0");
    expect_layout_refused(65536, 65536,
                          "lake: a partition of 65536 batches of 65536 ledgers holds 4294967296 ledgers, more than "
                          "4294967295");
    cs_lake_layout ok = {65536, 65535};
    assert_int_equal(cs_lake_layout_check(&ok, NULL), 0);
}

/* Every batch key, under the ledgers path, reads back as its batch. */
static void test_parse_round_trips(void **state)
{
    (void)state;
    static const uint32_t layouts[][2] = {{1, 64000}, {1, 1}, {64, 1}, {64, 10}, {2, 8}, {10, 1}, {65536, 65535}};
    static const uint32_t seqs[] = {1, 2, 63, 64, 999, 53312000, 53375999, 4294967231u, 4294967279u};
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        cs_lake_layout l = {layouts[i][0], layouts[i][1]};
        for (size_t j = 0; j < sizeof seqs / sizeof seqs[0]; j++) {
            cs_lake_batch b, got;
            assert_int_equal(cs_lake_batch_of(&l, seqs[j], &b, NULL), 0);
            char key[CS_LAKE_KEY_MAX], path[200];
            cs_lake_key(&l, b, key);
            int n = snprintf(path, sizeof path, "%s/%s", CS_LAKE_LEDGERS_PATH, key);
            cs_err err = {0};
            if (cs_lake_key_parse(&l, path, (size_t)n, &got, &err) != 0)
                fail_msg("%s: %s", path, err.msg);
            assert_int_equal(got.start, b.start);
            assert_int_equal(got.end, b.end);
        }
    }
}

static void expect_not_key(uint32_t lpb, uint32_t bpp, const char *path, size_t len)
{
    cs_lake_layout l = {lpb, bpp};
    cs_lake_batch b = {7, 7};
    cs_err err = {0};
    if (cs_lake_key_parse(&l, path, len, &b, &err) != -1)
        fail_msg("%s was read as batch %u-%u", path, b.start, b.end);
    assert_int_equal(err.kind, CS_LAKE_KEY_ERR_NOT_KEY);
    assert_int_equal(b.start, 7);
}

#define NOT_KEY(lpb, bpp, path) expect_not_key(lpb, bpp, path, strlen(path))

static void test_parse_refusals(void **state)
{
    (void)state;
    NOT_KEY(1, 64000, "");
    NOT_KEY(1, 64000, "/lake/ledgers");
    NOT_KEY(1, 64000, "/lake/ledgers/");
    NOT_KEY(1, 64000, "/lake/ledger/FCD285FF--53312000-53375999/FCD285FF--53312000.xdr.zst");
    NOT_KEY(1, 64000, "/other/FCD285FF--53312000-53375999/FCD285FF--53312000.xdr.zst");
    NOT_KEY(1, 64000, "lake/ledgers/FCD285FF--53312000-53375999/FCD285FF--53312000.xdr.zst");
    NOT_KEY(1, 64000, "/lake/ledgers//FCD285FF--53312000-53375999/FCD285FF--53312000.xdr.zst");
    NOT_KEY(1, 64000, "/lake/ledgers/fcd285ff--53312000-53375999/fcd285ff--53312000.xdr.zst");
    NOT_KEY(1, 64000, "/lake/ledgers/FCD285FF--53312000-53375999/fcd285ff--53312000.xdr.zst");
    NOT_KEY(1, 64000, "/lake/ledgers/FCD285FF--53312000-53375999/FCD285FF--053312000.xdr.zst");
    NOT_KEY(1, 64000, "/lake/ledgers/FCD285FF--53312000-53375999/FCD285FE--53312000.xdr.zst");
    NOT_KEY(1, 64000, "/lake/ledgers/FCD285FF--53312000-53375999/FCD285FF--53312000.xdr.zstd");
    NOT_KEY(1, 64000, "/lake/ledgers/FCD285FF--53312000-53375999/FCD285FF--53312000.xdr.zst/");
    NOT_KEY(1, 64000, "/lake/ledgers/FCD285FF--53312000-53375999/FCD285FF--53312000.xdr.zst?x=1");
    NOT_KEY(1, 64000, "/lake/ledgers/FCD285FF--53312000-53375999/FCD285FF--53312000-53312000.xdr.zst");
    NOT_KEY(1, 64000, "/lake/ledgers/FCD285FF--53312000.xdr.zst");
    NOT_KEY(1, 64000, "/lake/ledgers/FCD2857F--53312128-53376127/FCD285FF--53312000.xdr.zst");
    NOT_KEY(1, 64000, "/lake/ledgers/x/FCD285FF--53312000-53375999/FCD285FF--53312000.xdr.zst");
    NOT_KEY(1, 1, "/lake/ledgers/FFFFFFFF--0-0/FFFFFFFA--5.xdr.zst");
    NOT_KEY(1, 1, "/lake/ledgers/FFFFFFFF--4294967296.xdr.zst");
    NOT_KEY(1, 1, "/lake/ledgers/FFFFFFFF--42949672950.xdr.zst");
    NOT_KEY(1, 1, "/lake/ledgers/FFFFFFFA--.xdr.zst");
    NOT_KEY(1, 1, "/lake/ledgers/FFFFFFFA-5.xdr.zst");
    NOT_KEY(64, 1, "/lake/ledgers/FFFFFC3F--960.xdr.zst");
    NOT_KEY(64, 1, "/lake/ledgers/FFFFFC3E--961-1024.xdr.zst");
    NOT_KEY(10, 1, "/lake/ledgers/00000005--4294967290-4294967299.xdr.zst");
    NOT_KEY(10, 1, "/lake/ledgers/00000005--4294967290-3.xdr.zst");
    static const char nul[] = "/lake/ledgers/FFFFFFFA--5.xdr.zst\0";
    expect_not_key(1, 1, nul, sizeof nul - 1);
}

/* A refusal names the path, quoted, and cuts a long one. */
static void test_parse_refusal_message(void **state)
{
    (void)state;
    cs_lake_layout l = cs_lake_layout_default();
    cs_lake_batch b;
    cs_err err = {0};
    assert_int_equal(cs_lake_key_parse(&l, "/lake/x\n", 8, &b, &err), -1);
    assert_string_equal(err.msg, "lake: \"/lake/x\\n\" is not a ledger object key of this lake");
    char long_path[600];
    memset(long_path, 'a', sizeof long_path);
    assert_int_equal(cs_lake_key_parse(&l, long_path, sizeof long_path, &b, &err), -1);
    assert_non_null(strstr(err.msg, "\" (cut) is not a ledger object key of this lake"));
    assert_true(strlen(err.msg) < 300);
}

static void test_config_json(void **state)
{
    (void)state;
    cs_lake_layout d = cs_lake_layout_default();
    char *text = cs_lake_config_json(k_pubnet, &d, NULL);
    assert_non_null(text);
    assert_string_equal(text, "{\"networkPassphrase\":\"Public Global Stellar Network ; September 2015\","
                              "\"ledgersPath\":\"/lake/ledgers\",\"compression\":\"zstd\","
                              "\"ledgersPerBatch\":1,\"batchesPerPartition\":64000}");
    free(text);
    cs_lake_layout sep = {2, 8};
    text = cs_lake_config_json("a \"quoted\\\" net\n\x01", &sep, NULL);
    assert_non_null(text);
    assert_string_equal(text, "{\"networkPassphrase\":\"a \\\"quoted\\\\\\\" net\\u000a\\u0001\","
                              "\"ledgersPath\":\"/lake/ledgers\",\"compression\":\"zstd\","
                              "\"ledgersPerBatch\":2,\"batchesPerPartition\":8}");
    free(text);
}

/* The SDK's manifest: its json.Marshal of DatastoreManifest, field for field. */
static void test_manifest_json(void **state)
{
    (void)state;
    cs_lake_layout d = cs_lake_layout_default();
    char *text = cs_lake_manifest_json(k_pubnet, &d, NULL);
    assert_non_null(text);
    assert_string_equal(text, "{\"networkPassphrase\":\"Public Global Stellar Network ; September 2015\","
                              "\"version\":\"1.0\",\"compression\":\"zstd\","
                              "\"ledgersPerBatch\":1,\"batchesPerPartition\":64000}");
    free(text);
}

static void expect_disagrees(const char *text, cs_lake_conf_kind kind, const char *msg)
{
    cs_lake_layout d = cs_lake_layout_default();
    cs_err err = {0};
    assert_int_equal(cs_lake_config_agrees(text, strlen(text), kind, k_pubnet, &d, &err), -1);
    assert_int_equal(err.kind, CS_LAKE_CONF_ERR_DISAGREES);
    assert_string_equal(err.msg, msg);
}

/* Our own texts agree; so do other spellings of the same values (white space, member order,
 * escapes, numbers of the same value, members the check does not read, nested or not, a member
 * written twice whose last value is right, as encoding/json reads it); each difference is named
 * with both values. */
static void test_config_agrees(void **state)
{
    (void)state;
    cs_lake_layout d = cs_lake_layout_default();
    char *sep = cs_lake_config_json(k_pubnet, &d, NULL), *man = cs_lake_manifest_json(k_pubnet, &d, NULL);
    assert_int_equal(cs_lake_config_agrees(sep, strlen(sep), CS_LAKE_CONF_SEP, k_pubnet, &d, NULL), 0);
    assert_int_equal(cs_lake_config_agrees(man, strlen(man), CS_LAKE_CONF_MANIFEST, k_pubnet, &d, NULL), 0);
    /* Each file is the other kind's only by its one member of its own. */
    expect_disagrees(man, CS_LAKE_CONF_SEP, "its ledgersPath is absent, this lake's is \"/lake/ledgers\"");
    expect_disagrees(sep, CS_LAKE_CONF_MANIFEST, "its version is absent, this lake's is \"1.0\"");
    free(sep);
    free(man);
    const char *spelt = " {\n \"batchesPerPartition\" : 64000 , \"extra\": [1, {\"a\": 2}],\n"
                        " \"ledgersPerBatch\":1, \"compression\":\"zs\\u0074d\", \"version\":\"1.0\",\n"
                        " \"networkPassphrase\":\"Public Global Stellar Network \\u003b September 2015\"}\n";
    cs_err err = {0};
    if (cs_lake_config_agrees(spelt, strlen(spelt), CS_LAKE_CONF_MANIFEST, k_pubnet, &d, &err) != 0)
        fail_msg("%s", err.msg);
    const char *twice = "{\"networkPassphrase\":\"Public Global Stellar Network ; September 2015\",\"version\":\"1.0\","
                        "\"compression\":\"zstd\",\"ledgersPerBatch\":64,\"batchesPerPartition\":6.4e4,"
                        "\"ledgersPerBatch\":1.0}";
    if (cs_lake_config_agrees(twice, strlen(twice), CS_LAKE_CONF_MANIFEST, k_pubnet, &d, &err) != 0)
        fail_msg("%s", err.msg);
    const char *flat = " {\n \"batchesPerPartition\" : 64000 , \"extra\": null,\n"
                       " \"ledgersPerBatch\":1, \"compression\":\"zs\\u0074d\", \"version\":\"1.0\",\n"
                       " \"networkPassphrase\":\"Public Global Stellar Network \\u003b September 2015\"}\n";
    assert_int_equal(cs_lake_config_agrees(flat, strlen(flat), CS_LAKE_CONF_MANIFEST, k_pubnet, &d, NULL), 0);
    expect_disagrees("{\"networkPassphrase\":\"Test SDF Network ; September 2015\",\"version\":\"1.0\","
                     "\"compression\":\"zstd\",\"ledgersPerBatch\":1,\"batchesPerPartition\":64000}",
                     CS_LAKE_CONF_MANIFEST,
                     "its networkPassphrase is \"Test SDF Network ; September 2015\", this lake's is "
                     "\"Public Global Stellar Network ; September 2015\" (--network-passphrase)");
    expect_disagrees("{\"networkPassphrase\":\"Public Global Stellar Network ; September 2015\",\"version\":\"1.0\","
                     "\"compression\":\"zstd\",\"ledgersPerBatch\":64,\"batchesPerPartition\":64000}",
                     CS_LAKE_CONF_MANIFEST, "its ledgersPerBatch is 64, this lake's is 1 (--lake-ledgers-per-batch)");
    expect_disagrees("{\"networkPassphrase\":\"Public Global Stellar Network ; September 2015\",\"version\":\"1.0\","
                     "\"compression\":\"zstd\",\"ledgersPerBatch\":1,\"batchesPerPartition\":\"64000\"}",
                     CS_LAKE_CONF_MANIFEST,
                     "its batchesPerPartition is \"64000\", this lake's is 64000 (--lake-batches-per-partition)");
    expect_disagrees("{\"networkPassphrase\":\"Public Global Stellar Network ; September 2015\",\"version\":\"2.0\","
                     "\"compression\":\"zstd\",\"ledgersPerBatch\":1,\"batchesPerPartition\":64000}",
                     CS_LAKE_CONF_MANIFEST, "its version is \"2.0\", this lake's is \"1.0\"");
    expect_disagrees("{\"networkPassphrase\":\"Public Global Stellar Network ; September 2015\",\"ledgersPath\":\"/x\","
                     "\"compression\":\"gzip\",\"ledgersPerBatch\":1,\"batchesPerPartition\":64000}",
                     CS_LAKE_CONF_SEP, "its compression is \"gzip\", this lake's is \"zstd\"");
    expect_disagrees("{\"networkPassphrase\":\"Public Global Stellar Network ; September 2015\",\"version\":\"1.0\","
                     "\"compression\":\"zstd\",\"ledgersPerBatch\":[1],\"batchesPerPartition\":64000}",
                     CS_LAKE_CONF_MANIFEST, "its ledgersPerBatch is [1], this lake's is 1 (--lake-ledgers-per-batch)");
    /* Where cJSON stops reading, or what the text is instead of an object. */
    expect_disagrees("", CS_LAKE_CONF_SEP, "it is not a JSON object of strings and numbers: invalid JSON at byte 0");
    expect_disagrees("{\"networkPassphrase\":\"a\"", CS_LAKE_CONF_SEP,
                     "it is not a JSON object of strings and numbers: invalid JSON at byte 23");
    expect_disagrees("{} {}", CS_LAKE_CONF_SEP, "it is not a JSON object of strings and numbers: text after the object at byte 3");
    expect_disagrees("{\"a\":\"\\q\"}", CS_LAKE_CONF_SEP,
                     "it is not a JSON object of strings and numbers: invalid JSON at byte 6");
    expect_disagrees("[1, 2]", CS_LAKE_CONF_SEP, "it is not a JSON object of strings and numbers: a JSON array, not an object");
    expect_disagrees("{}", CS_LAKE_CONF_SEP,
                     "its networkPassphrase is absent, this lake's is \"Public Global Stellar Network ; September "
                     "2015\" (--network-passphrase)");
}

/* \u escapes: a surrogate pair is one rune, as encoding/json reads it; a lone surrogate, which
 * encoding/json reads as U+FFFD but neither writer makes, is refused (cJSON does not read it). */
static void test_config_unicode(void **state)
{
    (void)state;
    cs_lake_layout d = cs_lake_layout_default();
    const char *pair = "{\"networkPassphrase\":\"\\ud83d\\ude00 \\u00e9\",\"ledgersPath\":\"/lake/ledgers\","
                       "\"compression\":\"zstd\",\"ledgersPerBatch\":1,\"batchesPerPartition\":64000}";
    assert_int_equal(cs_lake_config_agrees(pair, strlen(pair), CS_LAKE_CONF_SEP, "\xf0\x9f\x98\x80 \xc3\xa9", &d, NULL), 0);
    const char *lone = "{\"networkPassphrase\":\"\\ud83dx\",\"ledgersPath\":\"/lake/ledgers\","
                       "\"compression\":\"zstd\",\"ledgersPerBatch\":1,\"batchesPerPartition\":64000}";
    expect_disagrees(lone, CS_LAKE_CONF_SEP, "it is not a JSON object of strings and numbers: invalid JSON at byte 22");
}

/* The one reader of the config files: each member this lake reads, as found (a string decoded, a
 * number with its JSON, anything else as JSON, or absent), and the counts a layout takes. */
static void test_conf_read(void **state)
{
    (void)state;
    const char *text = "{\"networkPassphrase\":\"a\\u00e9\",\"ledgersPath\":[\"x\", {}],\"compression\":null,"
                       "\"ledgersPerBatch\":1e2,\"batchesPerPartition\":-3,\"other\":{\"version\":\"1.0\"}}";
    cs_lake_conf c;
    cs_err err = {0};
    assert_int_equal(cs_lake_conf_read(text, strlen(text), &c, &err), 0);
    assert_int_equal(c.passphrase.type, CS_LAKE_CONF_STRING);
    assert_string_equal(c.passphrase.str, "a\xc3\xa9");
    assert_int_equal(c.ledgers_path.type, CS_LAKE_CONF_OTHER);
    assert_string_equal(c.ledgers_path.json, "[\"x\",{}]");
    assert_int_equal(c.compression.type, CS_LAKE_CONF_OTHER);
    assert_string_equal(c.compression.json, "null");
    assert_int_equal(c.version.type, CS_LAKE_CONF_ABSENT);
    uint32_t n = 0;
    assert_int_equal(c.ledgers_per_batch.type, CS_LAKE_CONF_NUMBER);
    assert_string_equal(c.ledgers_per_batch.json, "100");
    assert_true(cs_lake_conf_count(&c.ledgers_per_batch, &n));
    assert_int_equal(n, 100);
    assert_false(cs_lake_conf_count(&c.batches_per_partition, &n));
    assert_false(cs_lake_conf_count(&c.compression, &n));
    cs_lake_conf_free(&c);
    cs_lake_conf_free(&c); /* twice: a no-op */
    assert_int_equal(cs_lake_conf_read("\"s\"", 3, &c, &err), -1);
    assert_int_equal(err.kind, CS_LAKE_CONF_ERR_SYNTAX);
    assert_string_equal(err.msg, "a JSON string, not an object");
    assert_int_equal(c.passphrase.type, CS_LAKE_CONF_ABSENT);
    /* Read within len: the byte after it is not looked at. */
    assert_int_equal(cs_lake_conf_read("{}x", 2, &c, &err), 0);
    cs_lake_conf_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_layout_keys),   cmocka_unit_test(test_batches_of_many_ledgers),
        cmocka_unit_test(test_partition_of_one_batch), cmocka_unit_test(test_ceiling),
        cmocka_unit_test(test_layout_check),          cmocka_unit_test(test_parse_round_trips),
        cmocka_unit_test(test_parse_refusals),        cmocka_unit_test(test_parse_refusal_message),
        cmocka_unit_test(test_config_json),           cmocka_unit_test(test_manifest_json),
        cmocka_unit_test(test_config_agrees),         cmocka_unit_test(test_config_unicode),
        cmocka_unit_test(test_conf_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
