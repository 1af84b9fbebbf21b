/* SPDX-License-Identifier: Apache-2.0 */
/* The lake's config files read back, with cJSON: see lakeconfig.h. The one reader of them: the
 * export's check of what it finds in place (cs_lake_config_agrees) and the lake reader's
 * config.json (lakereader.c) both go through cs_lake_conf_read. */
#include "corestreamd/lake/lakeconfig.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/goquote.h"

/* The last member of object root named name (as encoding/json takes the last), or NULL. */
static const cJSON *member(const cJSON *root, const char *name)
{
    const cJSON *found = NULL, *m;
    cJSON_ArrayForEach(m, root)
    {
        if (m->string && strcmp(m->string, name) == 0)
            found = m;
    }
    return found;
}

/* Member name of root into *v: 0, or -1 when out of memory. */
static int value_of(const cJSON *root, const char *name, cs_lake_conf_value *v)
{
    const cJSON *m = member(root, name);
    *v = (cs_lake_conf_value){.type = CS_LAKE_CONF_ABSENT};
    if (!m)
        return 0;
    if (cJSON_IsString(m)) {
        v->type = CS_LAKE_CONF_STRING;
        v->str = strdup(m->valuestring);
        return v->str ? 0 : -1;
    }
    v->type = cJSON_IsNumber(m) ? CS_LAKE_CONF_NUMBER : CS_LAKE_CONF_OTHER;
    v->num = cJSON_IsNumber(m) ? m->valuedouble : 0;
    char *json = cJSON_PrintUnformatted(m);
    v->json = json ? strdup(json) : NULL;
    cJSON_free(json);
    return v->json ? 0 : -1;
}

/* What a JSON value that is not an object is, for the message. */
static const char *kind_of(const cJSON *v)
{
    return cJSON_IsArray(v) ? "a JSON array" : cJSON_IsString(v) ? "a JSON string" : cJSON_IsNumber(v) ? "a JSON number"
           : cJSON_IsBool(v) ? "a JSON boolean"
                             : "JSON null";
}

/* Where white space ends, from at. */
static size_t skip_ws(const char *text, size_t len, size_t at)
{
    while (at < len && (text[at] == ' ' || text[at] == '\t' || text[at] == '\n' || text[at] == '\r'))
        at++;
    return at;
}

static int read_members(const cJSON *root, cs_lake_conf *c)
{
    return value_of(root, "networkPassphrase", &c->passphrase) | value_of(root, "ledgersPath", &c->ledgers_path) |
           value_of(root, "version", &c->version) | value_of(root, "compression", &c->compression) |
           value_of(root, "ledgersPerBatch", &c->ledgers_per_batch) |
           value_of(root, "batchesPerPartition", &c->batches_per_partition);
}

int cs_lake_conf_read(const char *text, size_t len, cs_lake_conf *out, cs_err *err)
{
    *out = (cs_lake_conf){0};
    const char *end = text;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) /* cJSON answers NULL for a failed allocation too: below 64 KiB, not told apart */
        return cs_err_set(err, CS_LAKE_CONF_ERR_SYNTAX, "invalid JSON at byte %zu",
                          end >= text && end <= text + len ? (size_t)(end - text) : 0);
    size_t after = skip_ws(text, len, (size_t)(end - text));
    int rc = 0;
    if (after < len)
        rc = cs_err_set(err, CS_LAKE_CONF_ERR_SYNTAX, "text after the object at byte %zu", after);
    else if (!cJSON_IsObject(root))
        rc = cs_err_set(err, CS_LAKE_CONF_ERR_SYNTAX, "%s, not an object", kind_of(root));
    else if (read_members(root, out) != 0)
        rc = cs_err_set(err, CS_LAKE_CONF_ERR_MEMORY, "out of memory");
    cJSON_Delete(root);
    if (rc != 0)
        cs_lake_conf_free(out);
    return rc;
}

static void value_free(cs_lake_conf_value *v)
{
    free(v->str);
    free(v->json);
    *v = (cs_lake_conf_value){.type = CS_LAKE_CONF_ABSENT};
}

void cs_lake_conf_free(cs_lake_conf *c)
{
    value_free(&c->passphrase);
    value_free(&c->ledgers_path);
    value_free(&c->version);
    value_free(&c->compression);
    value_free(&c->ledgers_per_batch);
    value_free(&c->batches_per_partition);
}

bool cs_lake_conf_count(const cs_lake_conf_value *v, uint32_t *out)
{
    if (v->type != CS_LAKE_CONF_NUMBER || !(v->num >= 1 && v->num <= 4294967295.0) || v->num != (double)(uint32_t)v->num)
        return false;
    *out = (uint32_t)v->num;
    return true;
}

/* ---- this lake's? ------------------------------------------------------------------------ */

/* The value as a message shows it: a string Go-quoted, anything else as JSON, or "absent". */
static void shown(const cs_lake_conf_value *v, char *buf, size_t len)
{
    if (v->type == CS_LAKE_CONF_ABSENT)
        snprintf(buf, len, "absent");
    else if (v->type == CS_LAKE_CONF_STRING)
        cs_go_quote(buf, len, v->str);
    else
        snprintf(buf, len, "%s", v->json);
}

/* The difference, when there is one: its member's name and value, this lake's value (Go-quoted
 * when a string) and the flag that sets it. Always -1. */
static int differs(const char *name, const cs_lake_conf_value *v, const char *want, const char *flag, cs_err *err)
{
    char got[512], w[512];
    shown(v, got, sizeof got);
    cs_go_quote(w, sizeof w, want);
    return cs_err_set(err, CS_LAKE_CONF_ERR_DISAGREES, "its %s is %s, this lake's is %s%s%s%s", name, got, w,
                      flag ? " (" : "", flag ? flag : "", flag ? ")" : "");
}

static int same_string(const char *name, const cs_lake_conf_value *v, const char *want, const char *flag, cs_err *err)
{
    return v->type == CS_LAKE_CONF_STRING && strcmp(v->str, want) == 0 ? 0 : differs(name, v, want, flag, err);
}

static int same_count(const char *name, const cs_lake_conf_value *v, uint32_t want, const char *flag, cs_err *err)
{
    uint32_t n;
    if (cs_lake_conf_count(v, &n) && n == want)
        return 0;
    char got[512];
    shown(v, got, sizeof got);
    return cs_err_set(err, CS_LAKE_CONF_ERR_DISAGREES, "its %s is %s, this lake's is %" PRIu32 " (%s)", name, got, want,
                      flag);
}

int cs_lake_config_agrees(const char *text, size_t len, cs_lake_conf_kind kind, const char *passphrase,
                          const cs_lake_layout *l, cs_err *err)
{
    cs_lake_conf c;
    cs_err why = {0};
    if (cs_lake_conf_read(text, len, &c, &why) != 0)
        return why.kind == CS_LAKE_CONF_ERR_MEMORY
                   ? cs_err_set(err, CS_LAKE_CONF_ERR_MEMORY, "%s", why.msg)
                   : cs_err_set(err, CS_LAKE_CONF_ERR_DISAGREES, "it is not a JSON object of strings and numbers: %s",
                                why.msg);
    int rc = same_string("networkPassphrase", &c.passphrase, passphrase, "--network-passphrase", err);
    if (rc == 0)
        rc = same_string("compression", &c.compression, "zstd", NULL, err);
    if (rc == 0)
        rc = same_count("ledgersPerBatch", &c.ledgers_per_batch, l->ledgers_per_batch, "--lake-ledgers-per-batch", err);
    if (rc == 0)
        rc = same_count("batchesPerPartition", &c.batches_per_partition, l->batches_per_partition,
                        "--lake-batches-per-partition", err);
    if (rc == 0)
        rc = kind == CS_LAKE_CONF_SEP ? same_string("ledgersPath", &c.ledgers_path, CS_LAKE_LEDGERS_PATH, NULL, err)
                                      : same_string("version", &c.version, CS_LAKE_MANIFEST_VERSION, NULL, err);
    cs_lake_conf_free(&c);
    return rc;
}
