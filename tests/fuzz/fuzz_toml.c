/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the captive-core toml: the TOML subset reader (toml.h) on arbitrary bytes,
 * then the captive rules and the generated stellar-core.conf (coretoml.h) on the same text.
 *
 * Properties checked beyond "no crash, no out-of-bounds read, no leak":
 *  - an error is kind CS_TOML_ERR_SYNTAX with `line N: …` (or the NUL-byte message), or "out of
 *    memory", and leaves the document empty;
 *  - a document is well formed: items in file order, their spans and value spans inside the
 *    input and not overlapping, lines rising, keys pointing at the header they follow, decoded
 *    strings no longer than their source text, booleans spelled as decoded, no key twice in a
 *    table, top_end past the last top-level key;
 *  - reading is deterministic (a second read gives identical items);
 *  - a round trip: each item written back canonically (names as basic strings, values as their
 *    source text) reads back to the same items;
 *  - a toml the captive rules accept generates a stellar-core.conf those rules accept again,
 *    with every key of the operator's file still set.
 *
 * Build and run: tests/fuzz/CMakeLists.txt (clang, -DCS_FUZZ=ON). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strbuf.h"
#include "corestreamd/sources/captive/coretoml.h"
#include "corestreamd/sources/captive/toml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TESTNET "Test SDF Network ; September 2015"

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_toml: property violated: %s\n", what);
        abort();
    }
}

static bool str_eq(const char *a, const char *b)
{
    return (a == NULL) == (b == NULL) && (!a || strcmp(a, b) == 0);
}

/* The items' meaning: kinds, names, tables and decoded values (not their positions). */
static bool same_items(const cs_toml *a, const cs_toml *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++) {
        const cs_toml_item *x = &a->items[i], *y = &b->items[i];
        if (x->kind != y->kind || strcmp(x->name, y->name) != 0 || x->table != y->table)
            return false;
        if (x->kind != CS_TOML_KEY)
            continue;
        if (x->v.kind != y->v.kind || !str_eq(x->v.str, y->v.str))
            return false;
        if ((x->v.kind == CS_TOML_INT && x->v.i != y->v.i) || (x->v.kind == CS_TOML_BOOL && x->v.b != y->v.b) ||
            (x->v.kind == CS_TOML_ARRAY && x->v.strings_only != y->v.strings_only))
            return false;
    }
    return true;
}

static void check_error(const cs_toml *doc, const cs_err *e)
{
    check(doc->n == 0 && doc->items == NULL, "a failed read leaves the document empty");
    check(e->msg[0] != 0 && memchr(e->msg, 0, sizeof e->msg) != NULL, "an error has a NUL-terminated message");
    if (e->kind == CS_TOML_ERR_SYNTAX)
        check(strncmp(e->msg, "line ", 5) == 0 || strcmp(e->msg, "the file contains a NUL byte") == 0,
              "a syntax error names its line");
    else
        check(e->kind == 0 && strcmp(e->msg, "out of memory") == 0, "any other error is out of memory");
}

static void check_doc(const cs_toml *doc, const char *s, size_t len)
{
    size_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += s[i] == '\n';
    check(doc->body == 0 || (doc->body == 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0), "body skips only a BOM");
    check(doc->body <= doc->top_end && doc->top_end <= len, "top_end inside the input");
    size_t prev_end = doc->body, prev_line = 1, top_end = doc->body;
    int header = -1;
    for (size_t i = 0; i < doc->n; i++) {
        const cs_toml_item *it = &doc->items[i];
        check(it->name && strlen(it->name) <= len, "a name is a C string no longer than the input");
        check(it->line >= prev_line && it->line <= lines, "lines rise within the input");
        check(prev_end <= it->start && it->start < it->end && it->end <= len, "item spans in order, inside");
        prev_end = it->end;
        prev_line = it->line;
        if (it->kind != CS_TOML_KEY) {
            check(it->table == -1, "a header belongs to no table");
            header = (int)i;
            continue;
        }
        check(it->table == header, "a key belongs to the header before it");
        check(it->start < it->vstart && it->vstart < it->vend && it->vend <= it->end, "the value inside its item");
        const char *v = s + it->vstart;
        size_t vn = it->vend - it->vstart;
        switch (it->v.kind) {
        case CS_TOML_STRING:
            check(it->v.str && strlen(it->v.str) <= vn, "a decoded string is no longer than its text");
            check(v[0] == '"' || v[0] == '\'', "a string starts with a quote");
            break;
        case CS_TOML_BOOL:
            check(vn == (it->v.b ? 4u : 5u) && memcmp(v, it->v.b ? "true" : "false", vn) == 0,
                  "a boolean is spelled as decoded");
            break;
        case CS_TOML_ARRAY:
            check(v[0] == '[' && v[vn - 1] == ']', "an array is bracketed");
            break;
        case CS_TOML_TABLE:
            check(v[0] == '{' && v[vn - 1] == '}', "an inline table is braced");
            break;
        case CS_TOML_INT:
        case CS_TOML_FLOAT:
        case CS_TOML_DATETIME:
            check(v[0] != '"' && v[0] != '\'' && v[0] != '[' && v[0] != '{', "a scalar is bare");
            break;
        default:
            check(false, "a value kind is known");
        }
        if (it->v.kind != CS_TOML_STRING)
            check(it->v.str == NULL, "only strings carry text");
        if (it->table == -1)
            top_end = it->end;
        for (size_t j = 0; j < i; j++)
            check(doc->items[j].kind != CS_TOML_KEY || doc->items[j].table != it->table ||
                      strcmp(doc->items[j].name, it->name) != 0,
                  "no key twice in a table");
    }
    check(doc->top_end == top_end, "top_end is past the last top-level key");
}

/* A TOML basic string for a name: '"', '\\' and control bytes escaped, the rest as is. */
static void put_quoted(cs_strbuf *b, const char *s)
{
    cs_strbuf_putc(b, '"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            cs_strbuf_printf(b, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            cs_strbuf_printf(b, "\\u%04x", c);
        else
            cs_strbuf_putc(b, (char)c);
    }
    cs_strbuf_putc(b, '"');
}

static void round_trip(const cs_toml *doc, const char *s)
{
    cs_strbuf b = CS_STRBUF_INIT;
    for (size_t i = 0; i < doc->n; i++) {
        const cs_toml_item *it = &doc->items[i];
        if (it->kind == CS_TOML_KEY) {
            put_quoted(&b, it->name);
            cs_strbuf_puts(&b, " = ");
            cs_strbuf_put(&b, s + it->vstart, it->vend - it->vstart);
        } else {
            cs_strbuf_puts(&b, it->kind == CS_TOML_HEADER ? "[" : "[[");
            put_quoted(&b, it->name);
            cs_strbuf_puts(&b, it->kind == CS_TOML_HEADER ? "]" : "]]");
        }
        cs_strbuf_putc(&b, '\n');
    }
    size_t n;
    char *text = cs_strbuf_take(&b, &n);
    if (!text)
        return; /* out of memory: nothing to compare */
    cs_toml again;
    cs_err e;
    int rc = cs_toml_read(&again, text, n, &e);
    if (rc != 0)
        fprintf(stderr, "fuzz_toml: canonical form refused: %s\n--\n%s--\n", e.msg, text);
    check(rc == 0, "the canonical form reads back");
    check(same_items(doc, &again), "the canonical form reads back to the same items");
    cs_toml_free(&again);
    free(text);
}

/* The captive path on the same text, as cs_captive_source_new and the start sequence run it. */
static void captive_rules(const char *s, size_t len)
{
    char *pass = NULL;
    cs_err e;
    if (cs_coretoml_peek_passphrase(s, len, &pass, &e) == 0)
        check(pass && strlen(pass) < len, "a peeked passphrase lies within the input");
    else
        check(e.msg[0] != 0 && !pass, "a failed peek says why");
    const char *use = pass ? pass : TESTNET;
    cs_coretoml *t;
    if (cs_coretoml_parse(&t, s, len, use, &e) != 0) {
        check(e.msg[0] != 0 && t == NULL, "a refused toml says why");
        free(pass);
        return;
    }
    const char *urls[] = {"https://history.stellar.org/prd/core-testnet/core_testnet_001/"};
    cs_coretoml_params p = {.network_passphrase = use, .urls = urls, .nurls = 1, .core_major = 22, .core_minor = 3,
                            .core_protocol = 23, .catchup_complete = true};
    size_t gn;
    char *gen = cs_coretoml_generate(t, &p, &gn);
    if (gen) {
        check(strlen(gen) == gn, "the generated conf is one C string");
        cs_coretoml *g;
        int rc = cs_coretoml_parse(&g, gen, gn, use, &e);
        if (rc != 0)
            fprintf(stderr, "fuzz_toml: generated conf refused: %s\n--\n%s--\n", e.msg, gen);
        check(rc == 0, "the generated conf passes the captive rules");
        cs_toml doc;
        if (cs_toml_read(&doc, s, len, &e) == 0) {
            for (size_t i = 0; i < doc.n; i++)
                if (doc.items[i].kind == CS_TOML_KEY && doc.items[i].table == -1)
                    check(cs_coretoml_has(g, doc.items[i].name), "the generated conf keeps every top-level key");
            cs_toml_free(&doc);
        }
        check(cs_coretoml_has(g, "NETWORK_PASSPHRASE") && cs_coretoml_has(g, "DATABASE"), "the defaults are set");
        cs_coretoml_free(g);
        free(gen);
    }
    cs_coretoml_free(t);
    free(pass);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    cs_toml doc, again;
    cs_err e, e2;
    int rc = cs_toml_read(&doc, s, size, &e);
    int rc2 = cs_toml_read(&again, s, size, &e2);
    check(rc == 0 || rc == -1, "the result is 0 or -1");
    check(rc == rc2, "reading is deterministic");
    if (rc != 0) {
        check_error(&doc, &e);
        check(e.kind == e2.kind && strcmp(e.msg, e2.msg) == 0, "errors are deterministic");
    } else {
        check_doc(&doc, s, size);
        check(same_items(&doc, &again) && doc.top_end == again.top_end, "reading is deterministic");
        for (size_t i = 0; i < doc.n; i++)
            check(doc.items[i].line == again.items[i].line && doc.items[i].end == again.items[i].end,
                  "positions are deterministic");
        round_trip(&doc, s);
    }
    cs_toml_free(&doc);
    cs_toml_free(&again);
    captive_rules(s, size);
    return 0;
}
