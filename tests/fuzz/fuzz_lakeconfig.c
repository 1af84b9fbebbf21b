/* libFuzzer target for the lake's config files read back (src/corestreamd/lake/lakeconfigread.c):
 * the config.json and .config.json an export finds in its directory or bucket, which someone else
 * may have written.
 *
 * Input: one byte choosing the file's kind (SEP-54's config or the Go SDK's manifest), then the
 * file's bytes. Checked:
 *  - the texts this lake writes (cs_lake_config_json, cs_lake_manifest_json) agree with it, each
 *    as its own kind;
 *  - any input is judged without reading past it (an exact-size heap copy), and a disagreement
 *    is CS_LAKE_CONF_ERR_DISAGREES with a message;
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
    cs_err a = {0}, b = {0};
    int ra = judge(data + 1, size - 1, kind, &l, &a), rb = judge(data + 1, size - 1, kind, &l, &b);
    check(ra == rb && strcmp(a.msg, b.msg) == 0, "the same input, the same outcome");
    check(ra == 0 || (ra == -1 && a.kind == CS_LAKE_CONF_ERR_DISAGREES && a.msg[0]), "a refusal says why");
    return 0;
}
