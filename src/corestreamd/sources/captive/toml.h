/* SPDX-License-Identifier: Apache-2.0 */
/* A reader of the TOML subset captive-core configs use (CAPTIVE.md 2), with no captive rules in
 * it: coretoml.h applies those on top.
 *
 * It reads the document line by line into a flat list of items in file order: top-level and
 * in-table `KEY = value` lines (bare, quoted and dotted keys; basic and literal strings including
 * the multi-line forms, integers, floats, booleans, dates and times, arrays that may span lines
 * and hold comments, inline tables), and `[table]` / `[[array table]]` headers. Blank and comment
 * lines produce nothing. Only what captive validation needs is decoded: strings (the text),
 * integers (the int64), booleans, and whether an array holds only strings; the rest is recognised
 * and skipped, its text still found at [vstart, vend).
 *
 * Refused, as errors: syntax errors, a NUL byte anywhere, values nested deeper than
 * CS_TOML_MAX_DEPTH, a key defined twice in one table, a table header repeated, a [table] named
 * like a top-level key or an earlier [[array table]] (and vice versa). */
#ifndef CS_CORESTREAMD_SOURCES_CAPTIVE_TOML_H
#define CS_CORESTREAMD_SOURCES_CAPTIVE_TOML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define CS_TOML_MAX_DEPTH 32

/* cs_err.kind of a refusal of the text (anything else is "out of memory", kind 0). */
#define CS_TOML_ERR_SYNTAX 1

typedef enum cs_toml_kind {
    CS_TOML_STRING,
    CS_TOML_INT,
    CS_TOML_FLOAT,
    CS_TOML_BOOL,
    CS_TOML_DATETIME,
    CS_TOML_ARRAY,
    CS_TOML_TABLE, /* an inline table */
} cs_toml_kind;

typedef struct cs_toml_value {
    cs_toml_kind kind;
    char *str;         /* CS_TOML_STRING: decoded, NUL-terminated (an escaped NUL ends it early) */
    int64_t i;         /* CS_TOML_INT */
    bool b;            /* CS_TOML_BOOL */
    bool strings_only; /* CS_TOML_ARRAY: every element is a string (true when empty) */
} cs_toml_value;

typedef enum cs_toml_item_kind { CS_TOML_KEY, CS_TOML_HEADER, CS_TOML_ARRAY_HEADER } cs_toml_item_kind;

typedef struct cs_toml_item {
    cs_toml_item_kind kind;
    char *name;        /* key or table name, decoded, dotted parts joined by '.' */
    int table;         /* keys: index of the header item they belong to, -1 at top level */
    size_t line;       /* 1-based line the item starts on */
    size_t start, end; /* offsets of the item's text; end is past its newline */
    size_t vstart, vend; /* keys: offsets of the value's text */
    cs_toml_value v;   /* keys */
} cs_toml_item;

/* Owns its items and their strings; holds no pointer into the text it was read from. */
typedef struct cs_toml {
    cs_toml_item *items;
    size_t n, cap;
    size_t body;    /* where the document starts: past a UTF-8 BOM */
    size_t top_end; /* past the last top-level key (body when there is none) */
} cs_toml;

/* Reads data[0, len) — any bytes — into *doc (which it initialises). Returns 0, or -1 with
 * *doc emptied and err set: kind CS_TOML_ERR_SYNTAX and `line N: <what>` (`the file contains a
 * NUL byte` has no line), or kind 0 and `out of memory`. */
int cs_toml_read(cs_toml *doc, const char *data, size_t len, cs_err *err);
void cs_toml_free(cs_toml *doc);

#endif
