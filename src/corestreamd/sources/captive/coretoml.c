/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/sources/captive/coretoml.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/goquote.h"
#include "common/strbuf.h"
#include "corestreamd/sources/captive/toml.h"

/* ---- the peek (docs/operations/captive.md) ---------------------------------------------- */

/* strings.TrimSpace for ASCII whitespace. */
static void trim(const char **s, size_t *n)
{
    while (*n && isspace((unsigned char)(*s)[0]))
        (*s)++, (*n)--;
    while (*n && isspace((unsigned char)(*s)[*n - 1]))
        (*n)--;
}

int cs_coretoml_peek_passphrase(const char *data, size_t len, char **out, cs_err *err)
{
    static const char key[] = "NETWORK_PASSPHRASE";
    *out = NULL;
    size_t p = 0;
    while (p < len) {
        size_t e = p;
        while (e < len && data[e] != '\n')
            e++;
        const char *line = data + p;
        size_t n = e - p;
        p = e < len ? e + 1 : e;
        trim(&line, &n);
        if (n == 0 || line[0] == '#')
            continue;
        if (line[0] == '[')
            break; /* top-level keys end at the first table */
        const char *eq = memchr(line, '=', n);
        if (!eq)
            continue;
        const char *name = line;
        size_t nn = (size_t)(eq - line);
        trim(&name, &nn);
        if (nn != sizeof key - 1 || memcmp(name, key, nn) != 0)
            continue;
        const char *v = eq + 1;
        size_t vn = (size_t)(line + n - v);
        trim(&v, &vn);
        const char *close = NULL;
        if (vn >= 2 && (v[0] == '"' || v[0] == '\''))
            close = memchr(v + 1, v[0], vn - 1);
        if (!close)
            return cs_err_set(err, 0, "%s is not a quoted string; pass --network-passphrase instead", key);
        *out = strndup(v + 1, (size_t)(close - v - 1));
        if (!*out)
            return cs_err_set(err, 0, "out of memory");
        return 0;
    }
    return cs_err_set(err, 0, "%s is not defined; define it or pass --network-passphrase", key);
}

struct cs_coretoml {
    char *data; /* the operator's text, passed through into the generated file */
    size_t len;
    cs_toml doc;
};

void cs_coretoml_free(cs_coretoml *t)
{
    if (!t)
        return;
    cs_toml_free(&t->doc);
    free(t->data);
    free(t);
}

/* ---- the SDK's rules ------------------------------------------------------------------------ */

typedef enum ftype { T_STR, T_UINT, T_INT, T_BOOL, T_STRS } ftype;

typedef struct field {
    const char *name;
    ftype type;
} field;

/* captiveCoreTomlValues (go-stellar-sdk toml.go), plus CATCHUP_COMPLETE (CAPTIVE.md 2.1). */
static const field top_fields[] = {
    {"DATABASE", T_STR},
    {"LOG_FILE_PATH", T_STR},
    {"BUCKET_DIR_PATH", T_STR},
    {"HTTP_PORT", T_UINT},
    {"PUBLIC_HTTP_PORT", T_BOOL},
    {"NODE_NAMES", T_STRS},
    {"NETWORK_PASSPHRASE", T_STR},
    {"PEER_PORT", T_UINT},
    {"FAILURE_SAFETY", T_INT},
    {"UNSAFE_QUORUM", T_BOOL},
    {"RUN_STANDALONE", T_BOOL},
    {"ARTIFICIALLY_ACCELERATE_TIME_FOR_TESTING", T_BOOL},
    {"PREFERRED_PEERS", T_STRS},
    {"PREFERRED_PEER_KEYS", T_STRS},
    {"PREFERRED_PEERS_ONLY", T_BOOL},
    {"BACKFILL_RESTORE_META", T_BOOL},
    {"BUCKETLIST_DB_INDEX_PAGE_SIZE_EXPONENT", T_UINT},
    {"BUCKETLIST_DB_INDEX_CUTOFF", T_UINT},
    {"ENABLE_SOROBAN_DIAGNOSTIC_EVENTS", T_BOOL},
    {"TESTING_MINIMUM_PERSISTENT_ENTRY_LIFETIME", T_UINT},
    {"TESTING_SOROBAN_HIGH_LIMIT_OVERRIDE", T_BOOL},
    {"ENABLE_DIAGNOSTICS_FOR_TX_SUBMISSION", T_BOOL},
    {"EMIT_SOROBAN_TRANSACTION_META_EXT_V1", T_BOOL},
    {"EMIT_LEDGER_CLOSE_META_EXT_V1", T_BOOL},
    {"HTTP_QUERY_PORT", T_UINT},
    {"QUERY_THREAD_POOL_SIZE", T_UINT},
    {"QUERY_SNAPSHOT_LEDGERS", T_UINT},
    {"BUCKETLIST_DB_MEMORY_FOR_CACHING", T_UINT},
    {"EMIT_CLASSIC_EVENTS", T_BOOL},
    {"BACKFILL_STELLAR_ASSET_EVENTS", T_BOOL},
    {"OVERRIDE_EVICTION_PARAMS_FOR_TESTING", T_BOOL},
    {"TESTING_STARTING_EVICTION_SCAN_LEVEL", T_UINT},
    {"TESTING_MAX_ENTRIES_TO_ARCHIVE", T_UINT},
    {"CATCHUP_COMPLETE", T_BOOL},
};

static const char *const validator_fields[] = {"NAME", "QUALITY", "HOME_DOMAIN", "PUBLIC_KEY", "ADDRESS", "HISTORY"};
static const char *const home_domain_fields[] = {"HOME_DOMAIN", "QUALITY"};

static const field *top_field(const char *name)
{
    for (size_t i = 0; i < sizeof top_fields / sizeof top_fields[0]; i++)
        if (strcmp(top_fields[i].name, name) == 0)
            return &top_fields[i];
    return NULL;
}

static bool in_list(const char *const *list, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], name) == 0)
            return true;
    return false;
}

/* `[NAME]` or `[NAME.…]` (the SDK's flattenTables pattern). */
static bool table_under(const char *name, const char *root)
{
    size_t n = strlen(root);
    return strncmp(name, root, n) == 0 && (name[n] == 0 || name[n] == '.');
}

static bool is_history_table(const cs_toml_item *it)
{
    return it->kind == CS_TOML_HEADER && table_under(it->name, "HISTORY");
}

static bool is_quorum_table(const cs_toml_item *it)
{
    return it->kind == CS_TOML_HEADER && table_under(it->name, "QUORUM_SET");
}

static const char *type_name(ftype t)
{
    switch (t) {
    case T_STR: return "a string";
    case T_UINT: return "a non-negative integer";
    case T_INT: return "an integer";
    case T_BOOL: return "a boolean";
    case T_STRS: return "an array of strings";
    }
    return "?";
}

static bool type_ok(const cs_toml_value *v, ftype t)
{
    switch (t) {
    case T_STR: return v->kind == CS_TOML_STRING;
    case T_UINT: return v->kind == CS_TOML_INT && v->i >= 0;
    case T_INT: return v->kind == CS_TOML_INT;
    case T_BOOL: return v->kind == CS_TOML_BOOL;
    case T_STRS: return v->kind == CS_TOML_ARRAY && v->strings_only;
    }
    return false;
}

/* Collects an unsupported name once, in file order, Go-quoted. */
static void note_unsupported(cs_strbuf *list, const char *name)
{
    char q[300];
    cs_go_quote(q, sizeof q, name);
    /* Dedupe: the quoted name surrounded by the separators. */
    if (list->p) {
        size_t qn = strlen(q);
        for (const char *s = list->p; (s = strstr(s, q)); s++)
            if ((s == list->p || s[-1] == ' ') && (s[qn] == 0 || s[qn] == ' '))
                return;
    }
    if (list->n)
        cs_strbuf_put(list, " ", 1);
    cs_strbuf_puts(list, q);
}

static const cs_toml_item *table_key(const cs_coretoml *t, size_t table, const char *name)
{
    for (size_t i = table + 1; i < t->doc.n && t->doc.items[i].kind == CS_TOML_KEY; i++)
        if (strcmp(t->doc.items[i].name, name) == 0)
            return &t->doc.items[i];
    return NULL;
}

static const char *table_string(const cs_coretoml *t, size_t table, const char *name)
{
    const cs_toml_item *it = table_key(t, table, name);
    return it && it->v.kind == CS_TOML_STRING ? it->v.str : "";
}

static int check_fields(const cs_coretoml *t, cs_err *err)
{
    cs_strbuf unsupported = CS_STRBUF_INIT;
    int rc = 0;
    for (size_t i = 0; i < t->doc.n && rc == 0; i++) {
        const cs_toml_item *it = &t->doc.items[i];
        if (it->kind == CS_TOML_KEY && it->table == -1) {
            const field *f = top_field(it->name);
            if (!f) {
                if (strcmp(it->name, "VALIDATORS") == 0 || strcmp(it->name, "HOME_DOMAINS") == 0)
                    rc = cs_err_set(err, 0, "could not unmarshal captive core toml: line %zu: write %s as [[%s]] tables",
                                    it->line, it->name, it->name);
                else
                    note_unsupported(&unsupported, it->name);
            } else if (!type_ok(&it->v, f->type)) {
                rc = cs_err_set(err, 0, "could not unmarshal captive core toml: line %zu: %s must be %s", it->line,
                                it->name, type_name(f->type));
            }
        } else if (it->kind == CS_TOML_KEY) {
            const cs_toml_item *tab = &t->doc.items[it->table];
            const char *const *list = NULL;
            size_t nlist = 0;
            if (tab->kind == CS_TOML_ARRAY_HEADER && strcmp(tab->name, "VALIDATORS") == 0) {
                list = validator_fields;
                nlist = sizeof validator_fields / sizeof validator_fields[0];
            } else if (tab->kind == CS_TOML_ARRAY_HEADER && strcmp(tab->name, "HOME_DOMAINS") == 0) {
                list = home_domain_fields;
                nlist = sizeof home_domain_fields / sizeof home_domain_fields[0];
            } else {
                continue; /* HISTORY / QUORUM_SET contents are the SDK's non-strict decode */
            }
            if (!in_list(list, nlist, it->name)) {
                char full[300];
                snprintf(full, sizeof full, "%s.%s", tab->name, it->name);
                note_unsupported(&unsupported, full);
            } else if (it->v.kind != CS_TOML_STRING) {
                rc = cs_err_set(err, 0, "could not unmarshal captive core toml: line %zu: %s.%s must be a string",
                                it->line, tab->name, it->name);
            }
        } else {
            bool known = (it->kind == CS_TOML_ARRAY_HEADER &&
                          (strcmp(it->name, "VALIDATORS") == 0 || strcmp(it->name, "HOME_DOMAINS") == 0)) ||
                         is_history_table(it) || is_quorum_table(it);
            if (!known)
                note_unsupported(&unsupported, it->name);
        }
    }
    if (rc == 0 && unsupported.failed)
        rc = cs_err_set(err, 0, "out of memory");
    if (rc == 0 && unsupported.n)
        rc = cs_err_set(err, 0, "could not unmarshal captive core toml: these fields are not supported by captive core: [%s]",
                        unsupported.p);
    cs_strbuf_free(&unsupported);
    return rc;
}

/* strkey.Decode(VersionByteAccountID, s): 56 base32 characters, version byte 6<<3, CRC16-XModem. */
static bool valid_account_id(const char *s)
{
    if (strlen(s) != 56)
        return false;
    uint8_t raw[35];
    uint32_t acc = 0;
    int bits = 0;
    size_t k = 0;
    for (size_t i = 0; i < 56; i++) {
        char c = s[i];
        uint32_t v;
        if (c >= 'A' && c <= 'Z')
            v = (uint32_t)(c - 'A');
        else if (c >= '2' && c <= '7')
            v = (uint32_t)(c - '2' + 26);
        else
            return false;
        acc = acc << 5 | v;
        bits += 5;
        if (bits >= 8) {
            bits -= 8;
            raw[k++] = (uint8_t)(acc >> bits);
        }
    }
    if (k != 35 || raw[0] != 6 << 3)
        return false;
    uint16_t crc = 0;
    for (size_t i = 0; i < 33; i++) {
        crc ^= (uint16_t)raw[i] << 8;
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)(crc << 1 ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return raw[33] == (crc & 0xff) && raw[34] == crc >> 8;
}

static bool valid_quality(const char *q)
{
    return strcmp(q, "CRITICAL") == 0 || strcmp(q, "HIGH") == 0 || strcmp(q, "MEDIUM") == 0 || strcmp(q, "LOW") == 0;
}

static int invalid(cs_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int invalid(cs_err *err, const char *fmt, ...)
{
    char msg[CS_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cs_err_set(err, 0, "invalid captive core toml: %s", msg);
}

/* CaptiveCoreToml.validate, for corestreamd's params (only the passphrase is passed). */
static int validate(const cs_coretoml *t, const char *passphrase, cs_err *err)
{
    const char *file_pass = cs_coretoml_string(t, "NETWORK_PASSPHRASE");
    if (file_pass && strcmp(file_pass, passphrase) != 0)
        return invalid(err, "NETWORK_PASSPHRASE in captive core config file: %s does not match passed configuration (%s)",
                       file_pass, passphrase);

    for (size_t i = 0; i < t->doc.n; i++) {
        const cs_toml_item *it = &t->doc.items[i];
        if (it->kind != CS_TOML_ARRAY_HEADER || strcmp(it->name, "HOME_DOMAINS") != 0)
            continue;
        const char *hd = table_string(t, i, "HOME_DOMAIN");
        for (size_t j = 0; j < i; j++)
            if (t->doc.items[j].kind == CS_TOML_ARRAY_HEADER && strcmp(t->doc.items[j].name, "HOME_DOMAINS") == 0 &&
                strcmp(table_string(t, j, "HOME_DOMAIN"), hd) == 0)
                return invalid(err, "found duplicate home domain in captive core configuration: %s", hd);
        if (!*hd)
            return invalid(err, "found invalid home domain entry which is missing a HOME_DOMAIN value");
        const char *q = table_string(t, i, "QUALITY");
        if (!*q)
            return invalid(err, "found invalid home domain entry which is missing a QUALITY value: %s", hd);
        if (!valid_quality(q))
            return invalid(err, "found invalid home domain entry which has an invalid QUALITY value: %s", hd);
    }

    for (size_t i = 0; i < t->doc.n; i++) {
        const cs_toml_item *it = &t->doc.items[i];
        if (it->kind != CS_TOML_ARRAY_HEADER || strcmp(it->name, "VALIDATORS") != 0)
            continue;
        const char *name = table_string(t, i, "NAME");
        for (size_t j = 0; j < i; j++)
            if (t->doc.items[j].kind == CS_TOML_ARRAY_HEADER && strcmp(t->doc.items[j].name, "VALIDATORS") == 0 &&
                strcmp(table_string(t, j, "NAME"), name) == 0)
                return invalid(err, "found duplicate validator in captive core configuration: %s", name);
        if (!*name)
            return invalid(err, "found invalid validator entry which is missing a NAME value: %s", name);
        const char *hd = table_string(t, i, "HOME_DOMAIN");
        if (!*hd)
            return invalid(err, "found invalid validator entry which is missing a HOME_DOMAIN value: %s", name);
        const char *pk = table_string(t, i, "PUBLIC_KEY");
        if (!*pk)
            return invalid(err, "found invalid validator entry which is missing a PUBLIC_KEY value: %s", name);
        if (!valid_account_id(pk))
            return invalid(err, "found invalid validator entry which has an invalid PUBLIC_KEY : %s", name);
        const char *q = table_string(t, i, "QUALITY");
        if (!*q) {
            bool have = false;
            for (size_t j = 0; j < t->doc.n && !have; j++)
                have = t->doc.items[j].kind == CS_TOML_ARRAY_HEADER && strcmp(t->doc.items[j].name, "HOME_DOMAINS") == 0 &&
                       strcmp(table_string(t, j, "HOME_DOMAIN"), hd) == 0;
            if (!have)
                return invalid(err, "found invalid validator entry which is missing a QUALITY value: %s", name);
        } else if (!valid_quality(q)) {
            return invalid(err, "found invalid validator entry which has an invalid QUALITY value: %s", name);
        }
    }

    const char *db = cs_coretoml_string(t, "DATABASE");
    if (db && *db && strncmp(db, "sqlite3://", 10) != 0)
        return invalid(err, "invalid DATABASE parameter: %s, for captive core config, must be valid sqlite3 db url", db);
    return 0;
}

int cs_coretoml_parse(cs_coretoml **out, const char *data, size_t len, const char *passphrase, cs_err *err)
{
    *out = NULL;
    cs_coretoml *t = calloc(1, sizeof *t);
    if (!t || !(t->data = malloc(len + 1))) {
        free(t);
        return cs_err_set(err, 0, "out of memory");
    }
    memcpy(t->data, data, len);
    t->data[len] = 0;
    t->len = len;
    if (cs_toml_read(&t->doc, data, len, err) != 0) {
        if (err && err->kind == CS_TOML_ERR_SYNTAX)
            cs_err_prefix(err, "could not unmarshal captive core toml: ");
        if (err)
            err->kind = 0;
        cs_coretoml_free(t);
        return -1;
    }
    if (check_fields(t, err) != 0) {
        cs_coretoml_free(t);
        return -1;
    }
    /* Strict: BUCKET_DIR_PATH would let two instances share buckets. Refused even when empty. */
    if (cs_coretoml_has(t, "BUCKET_DIR_PATH")) {
        cs_coretoml_free(t);
        return cs_err_set(err, 0,
                          "could not unmarshal captive core toml: setting BUCKET_DIR_PATH is disallowed for Captive Core, "
                          "use --storage-dir instead");
    }
    if (validate(t, passphrase ? passphrase : "", err) != 0) {
        cs_coretoml_free(t);
        return -1;
    }
    if (!cs_coretoml_quorum_configured(t)) {
        cs_coretoml_free(t);
        return cs_err_set(err, 0, "captive-core config file does not define any quorum set");
    }
    *out = t;
    return 0;
}

static const cs_toml_item *top_key(const cs_coretoml *t, const char *key)
{
    for (size_t i = 0; i < t->doc.n; i++)
        if (t->doc.items[i].kind == CS_TOML_KEY && t->doc.items[i].table == -1 && strcmp(t->doc.items[i].name, key) == 0)
            return &t->doc.items[i];
    return NULL;
}

bool cs_coretoml_has(const cs_coretoml *t, const char *key)
{
    return top_key(t, key) != NULL;
}

const char *cs_coretoml_string(const cs_coretoml *t, const char *key)
{
    const cs_toml_item *it = top_key(t, key);
    return it && it->v.kind == CS_TOML_STRING ? it->v.str : NULL;
}

bool cs_coretoml_history_configured(const cs_coretoml *t)
{
    for (size_t i = 0; i < t->doc.n; i++) {
        const cs_toml_item *it = &t->doc.items[i];
        if (is_history_table(it))
            return true;
        if (it->kind == CS_TOML_ARRAY_HEADER && strcmp(it->name, "VALIDATORS") == 0 && *table_string(t, i, "HISTORY"))
            return true;
    }
    return false;
}

bool cs_coretoml_quorum_configured(const cs_coretoml *t)
{
    for (size_t i = 0; i < t->doc.n; i++) {
        const cs_toml_item *it = &t->doc.items[i];
        if (is_quorum_table(it) || (it->kind == CS_TOML_ARRAY_HEADER && strcmp(it->name, "VALIDATORS") == 0))
            return true;
    }
    return false;
}

/* ---- generation ----------------------------------------------------------------------------- */

/* A TOML basic string: quotes, with '"', '\\' and control characters escaped. */
static void toml_string(cs_strbuf *b, const char *s)
{
    cs_strbuf_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            cs_strbuf_put(b, e, 2);
        } else if (c < 0x20 || c == 0x7f) {
            cs_strbuf_printf(b, "\\u%04x", c);
        } else {
            cs_strbuf_put(b, (const char *)&c, 1);
        }
    }
    cs_strbuf_put(b, "\"", 1);
}

static bool version_at_least(int major, int minor, int want_major, int want_minor)
{
    if (major == 0 && minor == 0)
        return false; /* unknown: the SDK leans to the common denominator */
    return major > want_major || (major == want_major && minor >= want_minor);
}

char *cs_coretoml_generate(const cs_coretoml *t, const cs_coretoml_params *p, size_t *len)
{
    cs_strbuf b = CS_STRBUF_INIT;
    cs_strbuf_puts(&b, "# Generated file, do not edit\n");
    const char *body = t->data + t->doc.body;
    size_t head = t->doc.top_end - t->doc.body;
    cs_strbuf_put(&b, body, head);
    if (head && body[head - 1] != '\n')
        cs_strbuf_put(&b, "\n", 1);

    cs_strbuf d = CS_STRBUF_INIT;
#define ABSENT(k) (!cs_coretoml_has(t, (k)))
    if (ABSENT("NETWORK_PASSPHRASE")) {
        cs_strbuf_puts(&d, "NETWORK_PASSPHRASE = ");
        toml_string(&d, p->network_passphrase ? p->network_passphrase : "");
        cs_strbuf_puts(&d, "\n");
    }
    if (ABSENT("DATABASE"))
        cs_strbuf_puts(&d, "DATABASE = \"sqlite3://stellar.db\"\n");
    if (ABSENT("HTTP_PORT"))
        cs_strbuf_puts(&d, "HTTP_PORT = 11626\n");
    if (ABSENT("LOG_FILE_PATH"))
        cs_strbuf_puts(&d, "LOG_FILE_PATH = \"\"\n");
    if (ABSENT("FAILURE_SAFETY"))
        cs_strbuf_puts(&d, "FAILURE_SAFETY = -1\n");
    if (ABSENT("BUCKETLIST_DB_INDEX_PAGE_SIZE_EXPONENT"))
        cs_strbuf_puts(&d, "BUCKETLIST_DB_INDEX_PAGE_SIZE_EXPONENT = 12\n");
    if (ABSENT("BUCKETLIST_DB_MEMORY_FOR_CACHING") && version_at_least(p->core_major, p->core_minor, 22, 2))
        cs_strbuf_puts(&d, "BUCKETLIST_DB_MEMORY_FOR_CACHING = 0\n");
    if (ABSENT("BACKFILL_RESTORE_META") && p->core_protocol >= 23)
        cs_strbuf_puts(&d, "BACKFILL_RESTORE_META = true\n");
    if (ABSENT("ENABLE_SOROBAN_DIAGNOSTIC_EVENTS"))
        cs_strbuf_puts(&d, "ENABLE_SOROBAN_DIAGNOSTIC_EVENTS = true\n");
    if (ABSENT("ENABLE_DIAGNOSTICS_FOR_TX_SUBMISSION"))
        cs_strbuf_puts(&d, "ENABLE_DIAGNOSTICS_FOR_TX_SUBMISSION = true\n");
    if (ABSENT("EMIT_SOROBAN_TRANSACTION_META_EXT_V1"))
        cs_strbuf_puts(&d, "EMIT_SOROBAN_TRANSACTION_META_EXT_V1 = true\n");
    if (ABSENT("EMIT_CLASSIC_EVENTS") && p->core_protocol >= 23)
        cs_strbuf_puts(&d, "EMIT_CLASSIC_EVENTS = true\n");
    if (ABSENT("CATCHUP_COMPLETE") && p->catchup_complete)
        cs_strbuf_puts(&d, "CATCHUP_COMPLETE = true\n");
#undef ABSENT
    if (d.n) {
        cs_strbuf_puts(&b, "# Defaults added by corestreamd for the keys this file does not set\n");
        cs_strbuf_put(&b, d.p, d.n);
    }
    if (d.failed)
        b.failed = true; /* a default went missing: the file would be wrong */
    cs_strbuf_free(&d);

    size_t tail = t->len - t->doc.top_end;
    if (tail) {
        cs_strbuf_put(&b, t->data + t->doc.top_end, tail);
        if (t->data[t->len - 1] != '\n')
            cs_strbuf_put(&b, "\n", 1);
    }
    if (!cs_coretoml_history_configured(t)) {
        for (size_t i = 0; i < p->nurls; i++) {
            const char *u = p->urls[i];
            size_t un = strlen(u);
            if (un && u[un - 1] == '/')
                un--; /* strings.TrimSuffix(url, "/") */
            char *get = NULL;
            if (asprintf(&get, "curl -sf %.*s/{0} -o {1}", (int)un, u) < 0) {
                b.failed = true;
                break;
            }
            cs_strbuf_printf(&b, "\n[HISTORY.h%zu]\nget = ", i);
            toml_string(&b, get);
            cs_strbuf_puts(&b, "\n");
            free(get);
        }
    }
    return cs_strbuf_take(&b, len);
}

/* ---- `stellar-core version` ----------------------------------------------------------------- */

static bool atoi_go(const char *s, size_t n, int *out)
{
    if (n == 0 || n > 9)
        return false;
    int v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (s[i] - '0');
    *out = v;
    return true;
}

void cs_coretoml_build_version(const char *s, int *major, int *minor)
{
    *major = *minor = 0;
    size_t n = strlen(s);
    /* Leftmost-first match of \D*(\d*)\.(\d*): the backtracking order of a Perl-style engine. */
    for (size_t start = 0; start <= n; start++) {
        size_t dmax = 0;
        while (start + dmax < n && !isdigit((unsigned char)s[start + dmax]))
            dmax++;
        for (size_t d = dmax + 1; d-- > 0;) {
            size_t a = start + d;
            size_t gmax = 0;
            while (a + gmax < n && isdigit((unsigned char)s[a + gmax]))
                gmax++;
            for (size_t g = gmax + 1; g-- > 0;) {
                if (a + g < n && s[a + g] == '.') {
                    size_t m = a + g + 1, mn = 0;
                    while (m + mn < n && isdigit((unsigned char)s[m + mn]))
                        mn++;
                    int v;
                    if (!atoi_go(s + a, g, &v))
                        return;
                    *major = v;
                    if (atoi_go(s + m, mn, &v))
                        *minor = v;
                    return;
                }
            }
        }
    }
}

int cs_coretoml_protocol_version(const char *out, unsigned *proto, cs_err *err)
{
    static const char lit[] = "ledger protocol version: ";
    const char *line = out;
    while (line && *line) {
        const char *nl = strchr(line, '\n');
        const char *s = line;
        const char *end = nl ? nl : line + strlen(line);
        while (s < end && (*s == ' ' || *s == '\t' || *s == '\f' || *s == '\r'))
            s++;
        if ((size_t)(end - s) >= sizeof lit - 1 && memcmp(s, lit, sizeof lit - 1) == 0) {
            s += sizeof lit - 1;
            size_t k = 0;
            while (s + k < end && isdigit((unsigned char)s[k]))
                k++;
            int v;
            if (!atoi_go(s, k, &v))
                return cs_err_set(err, 0, "error parsing protocol version from stellar-core output: strconv.Atoi: "
                                          "parsing \"%.*s\": %s",
                                  (int)k, s, k ? "value out of range" : "invalid syntax");
            *proto = (unsigned)v;
            return 0;
        }
        line = nl ? nl + 1 : NULL;
    }
    return cs_err_set(err, 0, "error parsing protocol version from stellar-core output");
}
