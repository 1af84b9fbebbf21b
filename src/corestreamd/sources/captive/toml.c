/* SPDX-License-Identifier: Apache-2.0 */
/* The TOML subset reader; see toml.h. */
#include "corestreamd/sources/captive/toml.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/goquote.h"
#include "common/strbuf.h"

typedef struct parser {
    const char *s;
    size_t n, p, line;
    cs_err *err;
} parser;

static int perr(parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(parser *ps, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cs_err_set(ps->err, CS_TOML_ERR_SYNTAX, "line %zu: %s", ps->line, msg);
}

static int peek(const parser *ps, size_t ahead)
{
    return ps->p + ahead < ps->n ? (unsigned char)ps->s[ps->p + ahead] : -1;
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->n && (ps->s[ps->p] == ' ' || ps->s[ps->p] == '\t'))
        ps->p++;
}

static bool at_eol(const parser *ps)
{
    return ps->p >= ps->n || ps->s[ps->p] == '\n' || (ps->s[ps->p] == '\r' && peek(ps, 1) == '\n');
}

static void skip_comment(parser *ps)
{
    if (peek(ps, 0) != '#')
        return;
    while (ps->p < ps->n && ps->s[ps->p] != '\n' && !(ps->s[ps->p] == '\r' && peek(ps, 1) == '\n'))
        ps->p++;
}

/* Consumes a newline (at EOF: nothing). */
static void eat_eol(parser *ps)
{
    if (ps->p >= ps->n)
        return;
    if (ps->s[ps->p] == '\r')
        ps->p++;
    if (ps->p < ps->n && ps->s[ps->p] == '\n') {
        ps->p++;
        ps->line++;
    }
}

/* Whitespace, newlines and comments, as allowed between array elements. */
static void skip_ws_nl(parser *ps)
{
    for (;;) {
        skip_ws(ps);
        if (peek(ps, 0) == '#')
            skip_comment(ps);
        if (ps->p < ps->n && at_eol(ps)) {
            eat_eol(ps);
            continue;
        }
        return;
    }
}

/* A string at ps->p (on its opening quote): basic or literal, one-line or multi-line. Stores
 * the decoded text in *out (malloc'd). */
static int parse_string(parser *ps, char **out)
{
    char q = ps->s[ps->p];
    bool multi = peek(ps, 1) == q && peek(ps, 2) == q;
    bool basic = q == '"';
    cs_strbuf b = CS_STRBUF_INIT;
    ps->p += multi ? 3 : 1;
    if (multi && ps->p < ps->n && at_eol(ps))
        eat_eol(ps); /* a newline right after the opening delimiter is trimmed */
    for (;;) {
        if (ps->p >= ps->n) {
            cs_strbuf_free(&b);
            return perr(ps, "unterminated string");
        }
        char c = ps->s[ps->p];
        if (c == q) {
            if (!multi) {
                ps->p++;
                break;
            }
            if (peek(ps, 1) == q && peek(ps, 2) == q) {
                /* Up to two more quotes may close the string as content ("""a"""" is a"). */
                size_t extra = 0;
                while (extra < 2 && peek(ps, 3 + extra) == q)
                    extra++;
                cs_strbuf_put(&b, ps->s + ps->p, extra);
                ps->p += 3 + extra;
                break;
            }
            cs_strbuf_put(&b, &c, 1);
            ps->p++;
            continue;
        }
        if (c == '\n' || (c == '\r' && peek(ps, 1) == '\n')) {
            if (!multi) {
                cs_strbuf_free(&b);
                return perr(ps, "newline in a one-line string");
            }
            size_t w = c == '\r' ? 2 : 1;
            cs_strbuf_put(&b, ps->s + ps->p, w);
            ps->p += w;
            ps->line++;
            continue;
        }
        if (basic && c == '\\') {
            int e = peek(ps, 1);
            ps->p += 2;
            switch (e) {
            case 'b': cs_strbuf_put(&b, "\b", 1); break;
            case 't': cs_strbuf_put(&b, "\t", 1); break;
            case 'n': cs_strbuf_put(&b, "\n", 1); break;
            case 'f': cs_strbuf_put(&b, "\f", 1); break;
            case 'r': cs_strbuf_put(&b, "\r", 1); break;
            case '"': cs_strbuf_put(&b, "\"", 1); break;
            case '\\': cs_strbuf_put(&b, "\\", 1); break;
            case 'u':
            case 'U': {
                size_t digits = e == 'u' ? 4 : 8;
                uint32_t r = 0;
                for (size_t i = 0; i < digits; i++) {
                    int h = peek(ps, 0);
                    if (h < 0 || !isxdigit(h)) {
                        cs_strbuf_free(&b);
                        return perr(ps, "invalid unicode escape");
                    }
                    r = r * 16 + (uint32_t)(isdigit(h) ? h - '0' : (tolower(h) - 'a' + 10));
                    ps->p++;
                }
                if (r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF)) {
                    cs_strbuf_free(&b);
                    return perr(ps, "invalid unicode escape");
                }
                cs_utf8_put(&b, r);
                break;
            }
            default:
                if (multi && (e == ' ' || e == '\t' || e == '\n' || e == '\r')) {
                    /* Line-ending backslash: drop the whitespace and newlines that follow. */
                    ps->p--;
                    for (;;) {
                        skip_ws(ps);
                        if (ps->p < ps->n && at_eol(ps)) {
                            eat_eol(ps);
                            continue;
                        }
                        break;
                    }
                    break;
                }
                cs_strbuf_free(&b);
                return perr(ps, "invalid escape sequence");
            }
            continue;
        }
        cs_strbuf_put(&b, &c, 1);
        ps->p++;
    }
    if (!(*out = cs_strbuf_take(&b, NULL)))
        return cs_err_set(ps->err, 0, "out of memory");
    return 0;
}

/* One key part, bare or quoted. */
static int parse_key_part(parser *ps, cs_strbuf *name)
{
    int c = peek(ps, 0);
    if (c == '"' || c == '\'') {
        if (peek(ps, 1) == c && peek(ps, 2) == c)
            return perr(ps, "multi-line strings cannot be keys");
        char *s;
        if (parse_string(ps, &s) != 0)
            return -1;
        cs_strbuf_puts(name, s);
        free(s);
        return 0;
    }
    size_t start = ps->p;
    while (ps->p < ps->n && (isalnum((unsigned char)ps->s[ps->p]) || ps->s[ps->p] == '_' || ps->s[ps->p] == '-'))
        ps->p++;
    if (ps->p == start) {
        /* At the end of the input there is no character to name (the text need not end in NUL). */
        if (at_eol(ps))
            return perr(ps, "expected a key");
        return perr(ps, "unexpected character '%c'", ps->s[ps->p]);
    }
    cs_strbuf_put(name, ps->s + start, ps->p - start);
    return 0;
}

/* A key, dotted parts joined by '.'. */
static int parse_key(parser *ps, char **out)
{
    cs_strbuf name = CS_STRBUF_INIT;
    for (;;) {
        if (parse_key_part(ps, &name) != 0) {
            cs_strbuf_free(&name);
            return -1;
        }
        skip_ws(ps);
        if (peek(ps, 0) != '.')
            break;
        ps->p++;
        skip_ws(ps);
        cs_strbuf_put(&name, ".", 1);
    }
    /* An empty quoted key ("" = 1) is a key named "", not a failure. */
    if (!(*out = cs_strbuf_take(&name, NULL)))
        return cs_err_set(ps->err, 0, "out of memory");
    return 0;
}

static bool digits_ok(const char *s, size_t n, int base)
{
    /* Digits of the base, underscores only between digits. */
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '_') {
            if (i == 0 || i + 1 == n || s[i + 1] == '_')
                return false;
            continue;
        }
        int d = isdigit((unsigned char)c) ? c - '0' : isalpha((unsigned char)c) ? tolower(c) - 'a' + 10 : 99;
        if (d >= base)
            return false;
    }
    return true;
}

static bool parse_int(const char *tok, size_t n, int64_t *out)
{
    char buf[80];
    size_t k = 0;
    int base = 10;
    size_t i = 0;
    bool neg = false;
    if (n >= 2 && tok[0] == '0' && (tok[1] == 'x' || tok[1] == 'o' || tok[1] == 'b')) {
        base = tok[1] == 'x' ? 16 : tok[1] == 'o' ? 8 : 2;
        i = 2;
    } else {
        if (tok[0] == '+' || tok[0] == '-') {
            neg = tok[0] == '-';
            i = 1;
        }
        /* No leading zeros in decimal. */
        if (n - i > 1 && tok[i] == '0')
            return false;
    }
    if (!digits_ok(tok + i, n - i, base))
        return false;
    for (; i < n && k + 1 < sizeof buf; i++)
        if (tok[i] != '_')
            buf[k++] = tok[i];
    buf[k] = 0;
    errno = 0;
    char *end;
    unsigned long long u = strtoull(buf, &end, base);
    if (errno || *end)
        return false;
    if (neg) {
        if (u > (unsigned long long)INT64_MAX + 1)
            return false;
        *out = u == (unsigned long long)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u;
    } else {
        if (u > (unsigned long long)INT64_MAX)
            return false;
        *out = (int64_t)u;
    }
    return true;
}

static bool is_float(const char *tok, size_t n)
{
    size_t i = (tok[0] == '+' || tok[0] == '-') ? 1 : 0;
    if (n - i == 3 && (memcmp(tok + i, "inf", 3) == 0 || memcmp(tok + i, "nan", 3) == 0))
        return true;
    /* int part, then '.' digits and/or exponent */
    size_t a = i;
    while (i < n && (isdigit((unsigned char)tok[i]) || tok[i] == '_'))
        i++;
    if (!digits_ok(tok + a, i - a, 10) || (i - a > 1 && tok[a] == '0'))
        return false;
    bool frac = false, exp = false;
    if (i < n && tok[i] == '.') {
        size_t f = ++i;
        while (i < n && (isdigit((unsigned char)tok[i]) || tok[i] == '_'))
            i++;
        if (!digits_ok(tok + f, i - f, 10))
            return false;
        frac = true;
    }
    if (i < n && (tok[i] == 'e' || tok[i] == 'E')) {
        i++;
        if (i < n && (tok[i] == '+' || tok[i] == '-'))
            i++;
        size_t e = i;
        while (i < n && (isdigit((unsigned char)tok[i]) || tok[i] == '_'))
            i++;
        if (!digits_ok(tok + e, i - e, 10))
            return false;
        exp = true;
    }
    return i == n && (frac || exp);
}

static bool is_datetime(const char *tok, size_t n)
{
    /* 1979-05-27, 1979-05-27T07:32:00Z, 07:32:00, with offsets and fractions. */
    bool date = n >= 10 && isdigit((unsigned char)tok[0]) && isdigit((unsigned char)tok[3]) && tok[4] == '-' &&
                tok[7] == '-';
    bool time = n >= 8 && isdigit((unsigned char)tok[0]) && tok[2] == ':' && tok[5] == ':';
    if (!date && !time)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = tok[i];
        if (!(isdigit((unsigned char)c) || c == '-' || c == ':' || c == '.' || c == '+' || c == 'T' || c == 't' ||
              c == 'Z' || c == 'z' || c == ' '))
            return false;
    }
    return true;
}

static void value_free(cs_toml_value *v)
{
    if (v->kind == CS_TOML_STRING)
        free(v->str);
    v->str = NULL;
}

static int parse_value(parser *ps, cs_toml_value *v, int depth);

static int parse_array(parser *ps, cs_toml_value *v, int depth)
{
    ps->p++; /* '[' */
    v->kind = CS_TOML_ARRAY;
    v->strings_only = true;
    for (;;) {
        skip_ws_nl(ps);
        if (ps->p >= ps->n)
            return perr(ps, "unterminated array");
        if (ps->s[ps->p] == ']') {
            ps->p++;
            return 0;
        }
        cs_toml_value e = {0};
        if (parse_value(ps, &e, depth + 1) != 0)
            return -1;
        if (e.kind != CS_TOML_STRING)
            v->strings_only = false;
        value_free(&e);
        skip_ws_nl(ps);
        if (peek(ps, 0) == ',') {
            ps->p++;
            continue;
        }
        if (peek(ps, 0) == ']') {
            ps->p++;
            return 0;
        }
        return perr(ps, ps->p >= ps->n ? "unterminated array" : "expected ',' or ']' in an array");
    }
}

static int parse_inline_table(parser *ps, cs_toml_value *v, int depth)
{
    ps->p++; /* '{' */
    v->kind = CS_TOML_TABLE;
    skip_ws(ps);
    if (peek(ps, 0) == '}') {
        ps->p++;
        return 0;
    }
    for (;;) {
        skip_ws(ps);
        char *k;
        if (parse_key(ps, &k) != 0)
            return -1;
        free(k);
        skip_ws(ps);
        if (peek(ps, 0) != '=')
            return perr(ps, "expected '=' after a key");
        ps->p++;
        skip_ws(ps);
        cs_toml_value e = {0};
        if (parse_value(ps, &e, depth + 1) != 0)
            return -1;
        value_free(&e);
        skip_ws(ps);
        if (peek(ps, 0) == ',') {
            ps->p++;
            continue;
        }
        if (peek(ps, 0) == '}') {
            ps->p++;
            return 0;
        }
        return perr(ps, "expected ',' or '}' in an inline table");
    }
}

static int parse_value(parser *ps, cs_toml_value *v, int depth)
{
    if (depth > CS_TOML_MAX_DEPTH)
        return perr(ps, "values nested too deeply");
    int c = peek(ps, 0);
    if (c < 0 || at_eol(ps))
        return perr(ps, "expected a value");
    if (c == '"' || c == '\'') {
        v->kind = CS_TOML_STRING;
        return parse_string(ps, &v->str);
    }
    if (c == '[')
        return parse_array(ps, v, depth);
    if (c == '{')
        return parse_inline_table(ps, v, depth);
    size_t start = ps->p;
    while (ps->p < ps->n) {
        char ch = ps->s[ps->p];
        if (ch == ' ' || ch == '\t' || ch == ',' || ch == ']' || ch == '}' || ch == '#' || ch == '\n' || ch == '\r') {
            /* A date and a time may be separated by one space. */
            if (ch == ' ' && ps->p - start == 10 && is_datetime(ps->s + start, 10) && peek(ps, 1) >= 0 &&
                isdigit(peek(ps, 1))) {
                ps->p++;
                continue;
            }
            break;
        }
        ps->p++;
    }
    const char *tok = ps->s + start;
    size_t n = ps->p - start;
    if (n == 4 && memcmp(tok, "true", 4) == 0) {
        v->kind = CS_TOML_BOOL;
        v->b = true;
        return 0;
    }
    if (n == 5 && memcmp(tok, "false", 5) == 0) {
        v->kind = CS_TOML_BOOL;
        v->b = false;
        return 0;
    }
    if (n > 0 && parse_int(tok, n, &v->i)) {
        v->kind = CS_TOML_INT;
        return 0;
    }
    if (n > 0 && is_float(tok, n)) {
        v->kind = CS_TOML_FLOAT;
        return 0;
    }
    if (is_datetime(tok, n)) {
        v->kind = CS_TOML_DATETIME;
        return 0;
    }
    if (n == 0)
        return perr(ps, "unexpected character '%c'", ps->s[ps->p]);
    return perr(ps, "invalid value %.*s", (int)(n > 64 ? 64 : n), tok);
}

static cs_toml_item *add_item(cs_toml *t)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 32;
        cs_toml_item *p = realloc(t->items, cap * sizeof *p);
        if (!p)
            return NULL;
        t->items = p;
        t->cap = cap;
    }
    cs_toml_item *it = &t->items[t->n++];
    memset(it, 0, sizeof *it);
    return it;
}

/* The structural pass: every line becomes nothing (blank, comment) or one item. */
static int read_items(cs_toml *t, const char *data, size_t len, cs_err *err)
{
    parser ps = {.s = data, .n = len, .p = t->body, .line = 1, .err = err};
    int table = -1;
    while (ps.p < ps.n) {
        skip_ws(&ps);
        if (at_eol(&ps)) {
            eat_eol(&ps);
            continue;
        }
        if (peek(&ps, 0) == '#') {
            skip_comment(&ps);
            eat_eol(&ps);
            continue;
        }
        size_t line = ps.line;
        cs_toml_item it = {.line = line, .table = -1, .start = ps.p};
        if (peek(&ps, 0) == '[') {
            bool array = peek(&ps, 1) == '[';
            ps.p += array ? 2 : 1;
            skip_ws(&ps);
            if (parse_key(&ps, &it.name) != 0)
                return -1;
            skip_ws(&ps);
            if (peek(&ps, 0) != ']' || (array && peek(&ps, 1) != ']')) {
                free(it.name);
                return perr(&ps, array ? "expected ']]' to close a table header" : "expected ']' to close a table header");
            }
            ps.p += array ? 2 : 1;
            it.kind = array ? CS_TOML_ARRAY_HEADER : CS_TOML_HEADER;
        } else {
            if (parse_key(&ps, &it.name) != 0)
                return -1;
            skip_ws(&ps);
            if (peek(&ps, 0) != '=') {
                perr(&ps, "expected '=' after the key %s", it.name);
                free(it.name);
                return -1;
            }
            ps.p++;
            skip_ws(&ps);
            it.vstart = ps.p;
            if (parse_value(&ps, &it.v, 0) != 0) {
                free(it.name);
                value_free(&it.v);
                return -1;
            }
            it.vend = ps.p;
            it.kind = CS_TOML_KEY;
            it.table = table;
        }
        skip_ws(&ps);
        skip_comment(&ps);
        if (!at_eol(&ps)) {
            free(it.name);
            value_free(&it.v);
            return perr(&ps, "expected the end of the line after %s", it.kind == CS_TOML_KEY ? "a value" : "a table header");
        }
        eat_eol(&ps);
        it.end = ps.p;

        /* Duplicates: a key twice in one table, a table defined twice, a table named like a key. */
        for (size_t i = 0; i < t->n; i++) {
            const cs_toml_item *o = &t->items[i];
            bool clash = false;
            if (it.kind == CS_TOML_KEY)
                clash = o->kind == CS_TOML_KEY && o->table == it.table && strcmp(o->name, it.name) == 0;
            else if (it.kind == CS_TOML_HEADER)
                clash = (o->kind != CS_TOML_KEY || o->table == -1) && strcmp(o->name, it.name) == 0;
            else
                clash = (o->kind == CS_TOML_HEADER || (o->kind == CS_TOML_KEY && o->table == -1)) && strcmp(o->name, it.name) == 0;
            if (clash) {
                cs_err_set(err, CS_TOML_ERR_SYNTAX, "line %zu: %s %s is already defined (line %zu)", line, it.kind == CS_TOML_KEY ? "key" : "table", it.name, o->line);
                free(it.name);
                value_free(&it.v);
                return -1;
            }
        }
        cs_toml_item *slot = add_item(t);
        if (!slot) {
            free(it.name);
            value_free(&it.v);
            return cs_err_set(err, 0, "out of memory");
        }
        *slot = it;
        if (it.kind != CS_TOML_KEY)
            table = (int)(t->n - 1);
        else if (it.table == -1)
            t->top_end = it.end;
    }
    return 0;
}

void cs_toml_free(cs_toml *doc)
{
    for (size_t i = 0; i < doc->n; i++) {
        free(doc->items[i].name);
        value_free(&doc->items[i].v);
    }
    free(doc->items);
    memset(doc, 0, sizeof *doc);
}

int cs_toml_read(cs_toml *doc, const char *data, size_t len, cs_err *err)
{
    memset(doc, 0, sizeof *doc);
    /* Names and strings are C strings: a NUL would cut them short unseen. */
    if (memchr(data, 0, len))
        return cs_err_set(err, CS_TOML_ERR_SYNTAX, "the file contains a NUL byte");
    if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0)
        doc->body = 3;
    doc->top_end = doc->body;
    if (read_items(doc, data, len, err) != 0) {
        cs_toml_free(doc);
        return -1;
    }
    return 0;
}

