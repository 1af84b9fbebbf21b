/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the lake's config files read back (src/corestreamd/lake/lakeconfigread.c):
 * the one reader of config.json and .config.json, cJSON's (cs_lake_conf_read), and the check an
 * export makes of the files it finds in its directory or bucket, which someone else may have
 * written (cs_lake_config_agrees); the lake reader reads a lake's config.json with the same.
 *
 * Input: one byte choosing the file's kind (SEP-54's config or the Go SDK's manifest), then the
 * file's bytes. Checked:
 *  - the texts this lake writes (cs_lake_config_json, cs_lake_manifest_json) agree with it, each
 *    as its own kind;
 *  - any input is read without reading past it (an exact-size heap copy); a text read has each
 *    member as its type says (a string's value, a number's or another value's JSON, nothing when
 *    absent); a refusal is CS_LAKE_CONF_ERR_SYNTAX (or _MEMORY) with a message and nothing read;
 *  - the check agrees with the reader: a text the reader refuses is CS_LAKE_CONF_ERR_DISAGREES
 *    `it is not a JSON object of strings and numbers: <the reader's message>`, any other refusal
 *    names a member (`its …`);
 *  - the same input gives the same outcome twice.
 *
 * Build and run: tests/fuzz/CMakeLists.txt (clang, -DCS_FUZZ=ON). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corestreamd/lake/lakeconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PASSPHRASE "Test SDF Network ; September 2015"

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_lakeconfig: property violated: %s\n", what);
        abort();
    }
}

static int judge(const uint8_t *text, size_t len, cs_lake_conf_kind kind, const cs_lake_layout *l, cs_err *err)
{
    char *copy = malloc(len ? len : 1);
    check(copy != NULL, "malloc");
    if (len)
        memcpy(copy, text, len);
    int rc = cs_lake_config_agrees(copy, len, kind, PASSPHRASE, l, err);
    free(copy);
    return rc;
}

static void check_value(const cs_lake_conf_value *v)
{
    switch (v->type) {
    case CS_LAKE_CONF_ABSENT:
        check(!v->str && !v->json, "an absent member holds nothing");
        break;
    case CS_LAKE_CONF_STRING:
        check(v->str && !v->json, "a string member holds its value");
        break;
    default:
        check(!v->str && v->json && v->json[0], "another member holds its JSON");
    }
}

/* The reader on an exact-size copy: its outcome, the members checked; *err its refusal. */
static int read_conf(const uint8_t *text, size_t len, cs_err *err)
{
    char *copy = malloc(len ? len : 1);
    check(copy != NULL, "malloc");
    if (len)
        memcpy(copy, text, len);
    cs_lake_conf c;
    int rc = cs_lake_conf_read(copy, len, &c, err);
    free(copy);
    const cs_lake_conf_value *vs[] = {&c.passphrase,  &c.ledgers_path,      &c.version,
                                      &c.compression, &c.ledgers_per_batch, &c.batches_per_partition};
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
        check(rc == 0 || vs[i]->type == CS_LAKE_CONF_ABSENT, "a refusal reads nothing");
        check_value(vs[i]);
    }
    check(rc == 0 || (rc == -1 && (err->kind == CS_LAKE_CONF_ERR_SYNTAX || err->kind == CS_LAKE_CONF_ERR_MEMORY) &&
                      err->msg[0]),
          "a reader's refusal says why");
    cs_lake_conf_free(&c);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const cs_lake_layout l = {1, 64000};
    static bool checked_own;
    if (!checked_own) {
        cs_err err = {0};
        char *sep = cs_lake_config_json(PASSPHRASE, &l, &err), *sdk = cs_lake_manifest_json(PASSPHRASE, &l, &err);
        check(sep && sdk, "own texts");
        check(judge((const uint8_t *)sep, strlen(sep), CS_LAKE_CONF_SEP, &l, &err) == 0, "own config.json agrees");
        check(judge((const uint8_t *)sdk, strlen(sdk), CS_LAKE_CONF_MANIFEST, &l, &err) == 0, "own manifest agrees");
        free(sep);
        free(sdk);
        checked_own = true;
    }
    if (size < 1)
        return 0;
    cs_lake_conf_kind kind = data[0] & 1 ? CS_LAKE_CONF_MANIFEST : CS_LAKE_CONF_SEP;
    cs_err r = {0}, a = {0}, b = {0};
    int rr = read_conf(data + 1, size - 1, &r);
    int ra = judge(data + 1, size - 1, kind, &l, &a), rb = judge(data + 1, size - 1, kind, &l, &b);
    check(ra == rb && strcmp(a.msg, b.msg) == 0, "the same input, the same outcome");
    check(ra == 0 || (ra == -1 && (a.kind == CS_LAKE_CONF_ERR_DISAGREES || a.kind == CS_LAKE_CONF_ERR_MEMORY) &&
                      a.msg[0]),
          "a refusal says why");
    if (rr != 0 && r.kind == CS_LAKE_CONF_ERR_SYNTAX) {
        char want[CS_ERR_MSG_MAX + 64];
        snprintf(want, sizeof want, "it is not a JSON object of strings and numbers: %s", r.msg);
        check(ra == -1 && strcmp(a.msg, want) == 0, "the check refuses what the reader refuses, with its words");
    } else if (rr == 0) {
        check(ra == 0 || strncmp(a.msg, "its ", 4) == 0 || a.kind == CS_LAKE_CONF_ERR_MEMORY,
              "a text read is judged by its members");
    }
    return 0;
}
