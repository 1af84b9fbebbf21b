#include "corestreamd/sources/captive/coretoml.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/goquote.h"

/* ---- the peek (PORTSPEC 1.4d) -------------------------------------------------------------- */

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

/* ---- a growable string ---------------------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_puts(sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof tmp) {
        sb_put(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb_put(b, big, (size_t)n);
    free(big);
}

/* A TOML basic string: quotes, with '"', '\\' and control characters escaped. */
static void sb_toml_string(sbuf *b, const char *s)
{
    sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            sb_put(b, e, 2);
        } else if (c < 0x20 || c == 0x7f) {
            sb_printf(b, "\\u%04x", c);
        } else {
            sb_put(b, (const char *)&c, 1);
        }
    }
    sb_put(b, "\"", 1);
}

/* ---- the reader ----------------------------------------------------------------------------- */

typedef enum vkind { V_STRING, V_INT, V_FLOAT, V_BOOL, V_DATETIME, V_ARRAY, V_TABLE } vkind;

typedef struct value {
    vkind kind;
    char *str;          /* V_STRING: decoded */
    int64_t i;          /* V_INT */
    bool b;             /* V_BOOL */
    bool strings_only;  /* V_ARRAY: every element is a string */
} value;

typedef enum item_kind { IT_KEY, IT_TABLE, IT_ARRAY_TABLE } item_kind;

typedef struct item {
    item_kind kind;
    char *name;  /* key (dotted parts joined by '.') or table name */
    int table;   /* keys: index of the header they belong to, -1 at top level */
    size_t line; /* 1-based */
    size_t end;  /* offset just past the item's text and its newline */
    value v;     /* keys */
} item;

struct cs_coretoml {
    char *data;
    size_t len;
    size_t body; /* past a UTF-8 BOM */
    item *items;
    size_t n, cap;
    size_t insert_at; /* where the defaults go: past the last top-level key */
};

typedef struct parser {
    const char *s;
    size_t n, p, line;
    cs_err *err;
} parser;

#define MAX_DEPTH 32

static int perr(parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(parser *ps, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cs_err_set(ps->err, 0, "could not unmarshal captive core toml: line %zu: %s", ps->line, msg);
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

static void put_utf8(sbuf *b, uint32_t r)
{
    char u[4];
    size_t n;
    if (r < 0x80) {
        u[0] = (char)r;
        n = 1;
    } else if (r < 0x800) {
        u[0] = (char)(0xC0 | r >> 6);
        u[1] = (char)(0x80 | (r & 0x3F));
        n = 2;
    } else if (r < 0x10000) {
        u[0] = (char)(0xE0 | r >> 12);
        u[1] = (char)(0x80 | (r >> 6 & 0x3F));
        u[2] = (char)(0x80 | (r & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | r >> 18);
        u[1] = (char)(0x80 | (r >> 12 & 0x3F));
        u[2] = (char)(0x80 | (r >> 6 & 0x3F));
        u[3] = (char)(0x80 | (r & 0x3F));
        n = 4;
    }
    sb_put(b, u, n);
}

/* A string at ps->p (on its opening quote): basic or literal, one-line or multi-line. Stores
 * the decoded text in *out (malloc'd). */
static int parse_string(parser *ps, char **out)
{
    char q = ps->s[ps->p];
    bool multi = peek(ps, 1) == q && peek(ps, 2) == q;
    bool basic = q == '"';
    sbuf b = {0};
    ps->p += multi ? 3 : 1;
    if (multi && ps->p < ps->n && at_eol(ps))
        eat_eol(ps); /* a newline right after the opening delimiter is trimmed */
    for (;;) {
        if (ps->p >= ps->n) {
            free(b.p);
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
                sb_put(&b, ps->s + ps->p, extra);
                ps->p += 3 + extra;
                break;
            }
            sb_put(&b, &c, 1);
            ps->p++;
            continue;
        }
        if (c == '\n' || (c == '\r' && peek(ps, 1) == '\n')) {
            if (!multi) {
                free(b.p);
                return perr(ps, "newline in a one-line string");
            }
            size_t w = c == '\r' ? 2 : 1;
            sb_put(&b, ps->s + ps->p, w);
            ps->p += w;
            ps->line++;
            continue;
        }
        if (basic && c == '\\') {
            int e = peek(ps, 1);
            ps->p += 2;
            switch (e) {
            case 'b': sb_put(&b, "\b", 1); break;
            case 't': sb_put(&b, "\t", 1); break;
            case 'n': sb_put(&b, "\n", 1); break;
            case 'f': sb_put(&b, "\f", 1); break;
            case 'r': sb_put(&b, "\r", 1); break;
            case '"': sb_put(&b, "\"", 1); break;
            case '\\': sb_put(&b, "\\", 1); break;
            case 'u':
            case 'U': {
                size_t digits = e == 'u' ? 4 : 8;
                uint32_t r = 0;
                for (size_t i = 0; i < digits; i++) {
                    int h = peek(ps, 0);
                    if (h < 0 || !isxdigit(h)) {
                        free(b.p);
                        return perr(ps, "invalid unicode escape");
                    }
                    r = r * 16 + (uint32_t)(isdigit(h) ? h - '0' : (tolower(h) - 'a' + 10));
                    ps->p++;
                }
                if (r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF)) {
                    free(b.p);
                    return perr(ps, "invalid unicode escape");
                }
                put_utf8(&b, r);
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
                free(b.p);
                return perr(ps, "invalid escape sequence");
            }
            continue;
        }
        sb_put(&b, &c, 1);
        ps->p++;
    }
    if (b.oom) {
        free(b.p);
        return cs_err_set(ps->err, 0, "out of memory");
    }
    *out = b.p ? b.p : strdup("");
    if (!*out)
        return cs_err_set(ps->err, 0, "out of memory");
    return 0;
}

/* One key part, bare or quoted. */
static int parse_key_part(parser *ps, sbuf *name)
{
    int c = peek(ps, 0);
    if (c == '"' || c == '\'') {
        if (peek(ps, 1) == c && peek(ps, 2) == c)
            return perr(ps, "multi-line strings cannot be keys");
        char *s;
        if (parse_string(ps, &s) != 0)
            return -1;
        sb_puts(name, s);
        free(s);
        return 0;
    }
    size_t start = ps->p;
    while (ps->p < ps->n && (isalnum((unsigned char)ps->s[ps->p]) || ps->s[ps->p] == '_' || ps->s[ps->p] == '-'))
        ps->p++;
    if (ps->p == start)
        return perr(ps, at_eol(ps) ? "expected a key" : "unexpected character '%c'", ps->s[ps->p]);
    sb_put(name, ps->s + start, ps->p - start);
    return 0;
}

/* A key, dotted parts joined by '.'. */
static int parse_key(parser *ps, char **out)
{
    sbuf name = {0};
    for (;;) {
        if (parse_key_part(ps, &name) != 0) {
            free(name.p);
            return -1;
        }
        skip_ws(ps);
        if (peek(ps, 0) != '.')
            break;
        ps->p++;
        skip_ws(ps);
        sb_put(&name, ".", 1);
    }
    if (name.oom || !name.p) {
        free(name.p);
        return cs_err_set(ps->err, 0, "out of memory");
    }
    *out = name.p;
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

static void value_free(value *v)
{
    if (v->kind == V_STRING)
        free(v->str);
    v->str = NULL;
}

static int parse_value(parser *ps, value *v, int depth);

static int parse_array(parser *ps, value *v, int depth)
{
    ps->p++; /* '[' */
    v->kind = V_ARRAY;
    v->strings_only = true;
    for (;;) {
        skip_ws_nl(ps);
        if (ps->p >= ps->n)
            return perr(ps, "unterminated array");
        if (ps->s[ps->p] == ']') {
            ps->p++;
            return 0;
        }
        value e = {0};
        if (parse_value(ps, &e, depth + 1) != 0)
            return -1;
        if (e.kind != V_STRING)
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

static int parse_inline_table(parser *ps, value *v, int depth)
{
    ps->p++; /* '{' */
    v->kind = V_TABLE;
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
        value e = {0};
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

static int parse_value(parser *ps, value *v, int depth)
{
    if (depth > MAX_DEPTH)
        return perr(ps, "values nested too deeply");
    int c = peek(ps, 0);
    if (c < 0 || at_eol(ps))
        return perr(ps, "expected a value");
    if (c == '"' || c == '\'') {
        v->kind = V_STRING;
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
        v->kind = V_BOOL;
        v->b = true;
        return 0;
    }
    if (n == 5 && memcmp(tok, "false", 5) == 0) {
        v->kind = V_BOOL;
        v->b = false;
        return 0;
    }
    if (n > 0 && parse_int(tok, n, &v->i)) {
        v->kind = V_INT;
        return 0;
    }
    if (n > 0 && is_float(tok, n)) {
        v->kind = V_FLOAT;
        return 0;
    }
    if (is_datetime(tok, n)) {
        v->kind = V_DATETIME;
        return 0;
    }
    if (n == 0)
        return perr(ps, "unexpected character '%c'", ps->s[ps->p]);
    return perr(ps, "invalid value %.*s", (int)(n > 64 ? 64 : n), tok);
}

static item *add_item(cs_coretoml *t)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 32;
        item *p = realloc(t->items, cap * sizeof *p);
        if (!p)
            return NULL;
        t->items = p;
        t->cap = cap;
    }
    item *it = &t->items[t->n++];
    memset(it, 0, sizeof *it);
    return it;
}

void cs_coretoml_free(cs_coretoml *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++) {
        free(t->items[i].name);
        value_free(&t->items[i].v);
    }
    free(t->items);
    free(t->data);
    free(t);
}

/* The structural pass: every line becomes nothing (blank, comment) or one item. */
static int read_items(cs_coretoml *t, cs_err *err)
{
    parser ps = {.s = t->data, .n = t->len, .p = t->body, .line = 1, .err = err};
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
        item it = {.line = line, .table = -1};
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
            it.kind = array ? IT_ARRAY_TABLE : IT_TABLE;
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
            if (parse_value(&ps, &it.v, 0) != 0) {
                free(it.name);
                value_free(&it.v);
                return -1;
            }
            it.kind = IT_KEY;
            it.table = table;
        }
        skip_ws(&ps);
        skip_comment(&ps);
        if (!at_eol(&ps)) {
            free(it.name);
            value_free(&it.v);
            return perr(&ps, "expected the end of the line after %s", it.kind == IT_KEY ? "a value" : "a table header");
        }
        eat_eol(&ps);
        it.end = ps.p;

        /* Duplicates: a key twice in one table, a table defined twice, a table named like a key. */
        for (size_t i = 0; i < t->n; i++) {
            const item *o = &t->items[i];
            bool clash = false;
            if (it.kind == IT_KEY)
                clash = o->kind == IT_KEY && o->table == it.table && strcmp(o->name, it.name) == 0;
            else if (it.kind == IT_TABLE)
                clash = (o->kind != IT_KEY || o->table == -1) && strcmp(o->name, it.name) == 0;
            else
                clash = (o->kind == IT_TABLE || (o->kind == IT_KEY && o->table == -1)) && strcmp(o->name, it.name) == 0;
            if (clash) {
                cs_err_set(err, 0, "could not unmarshal captive core toml: line %zu: %s %s is already defined (line %zu)",
                           line, it.kind == IT_KEY ? "key" : "table", it.name, o->line);
                free(it.name);
                value_free(&it.v);
                return -1;
            }
        }
        item *slot = add_item(t);
        if (!slot) {
            free(it.name);
            value_free(&it.v);
            return cs_err_set(err, 0, "out of memory");
        }
        *slot = it;
        if (it.kind != IT_KEY)
            table = (int)(t->n - 1);
        else if (it.table == -1)
            t->insert_at = it.end;
    }
    return 0;
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

static bool is_history_table(const item *it)
{
    return it->kind == IT_TABLE && table_under(it->name, "HISTORY");
}

static bool is_quorum_table(const item *it)
{
    return it->kind == IT_TABLE && table_under(it->name, "QUORUM_SET");
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

static bool type_ok(const value *v, ftype t)
{
    switch (t) {
    case T_STR: return v->kind == V_STRING;
    case T_UINT: return v->kind == V_INT && v->i >= 0;
    case T_INT: return v->kind == V_INT;
    case T_BOOL: return v->kind == V_BOOL;
    case T_STRS: return v->kind == V_ARRAY && v->strings_only;
    }
    return false;
}

/* Collects an unsupported name once, in file order, Go-quoted. */
static void note_unsupported(sbuf *list, const char *name)
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
        sb_put(list, " ", 1);
    sb_puts(list, q);
}

static const item *table_key(const cs_coretoml *t, size_t table, const char *name)
{
    for (size_t i = table + 1; i < t->n && t->items[i].kind == IT_KEY; i++)
        if (strcmp(t->items[i].name, name) == 0)
            return &t->items[i];
    return NULL;
}

static const char *table_string(const cs_coretoml *t, size_t table, const char *name)
{
    const item *it = table_key(t, table, name);
    return it && it->v.kind == V_STRING ? it->v.str : "";
}

static int check_fields(const cs_coretoml *t, cs_err *err)
{
    sbuf unsupported = {0};
    int rc = 0;
    for (size_t i = 0; i < t->n && rc == 0; i++) {
        const item *it = &t->items[i];
        if (it->kind == IT_KEY && it->table == -1) {
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
        } else if (it->kind == IT_KEY) {
            const item *tab = &t->items[it->table];
            const char *const *list = NULL;
            size_t nlist = 0;
            if (tab->kind == IT_ARRAY_TABLE && strcmp(tab->name, "VALIDATORS") == 0) {
                list = validator_fields;
                nlist = sizeof validator_fields / sizeof validator_fields[0];
            } else if (tab->kind == IT_ARRAY_TABLE && strcmp(tab->name, "HOME_DOMAINS") == 0) {
                list = home_domain_fields;
                nlist = sizeof home_domain_fields / sizeof home_domain_fields[0];
            } else {
                continue; /* HISTORY / QUORUM_SET contents are the SDK's non-strict decode */
            }
            if (!in_list(list, nlist, it->name)) {
                char full[300];
                snprintf(full, sizeof full, "%s.%s", tab->name, it->name);
                note_unsupported(&unsupported, full);
            } else if (it->v.kind != V_STRING) {
                rc = cs_err_set(err, 0, "could not unmarshal captive core toml: line %zu: %s.%s must be a string",
                                it->line, tab->name, it->name);
            }
        } else {
            bool known = (it->kind == IT_ARRAY_TABLE &&
                          (strcmp(it->name, "VALIDATORS") == 0 || strcmp(it->name, "HOME_DOMAINS") == 0)) ||
                         is_history_table(it) || is_quorum_table(it);
            if (!known)
                note_unsupported(&unsupported, it->name);
        }
    }
    if (rc == 0 && unsupported.oom)
        rc = cs_err_set(err, 0, "out of memory");
    if (rc == 0 && unsupported.n)
        rc = cs_err_set(err, 0, "could not unmarshal captive core toml: these fields are not supported by captive core: [%s]",
                        unsupported.p);
    free(unsupported.p);
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

    for (size_t i = 0; i < t->n; i++) {
        const item *it = &t->items[i];
        if (it->kind != IT_ARRAY_TABLE || strcmp(it->name, "HOME_DOMAINS") != 0)
            continue;
        const char *hd = table_string(t, i, "HOME_DOMAIN");
        for (size_t j = 0; j < i; j++)
            if (t->items[j].kind == IT_ARRAY_TABLE && strcmp(t->items[j].name, "HOME_DOMAINS") == 0 &&
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

    for (size_t i = 0; i < t->n; i++) {
        const item *it = &t->items[i];
        if (it->kind != IT_ARRAY_TABLE || strcmp(it->name, "VALIDATORS") != 0)
            continue;
        const char *name = table_string(t, i, "NAME");
        for (size_t j = 0; j < i; j++)
            if (t->items[j].kind == IT_ARRAY_TABLE && strcmp(t->items[j].name, "VALIDATORS") == 0 &&
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
            for (size_t j = 0; j < t->n && !have; j++)
                have = t->items[j].kind == IT_ARRAY_TABLE && strcmp(t->items[j].name, "HOME_DOMAINS") == 0 &&
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
    if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0)
        t->body = 3;
    t->insert_at = t->body;
    if (memchr(data, 0, len)) {
        cs_coretoml_free(t);
        return cs_err_set(err, 0, "could not unmarshal captive core toml: the file contains a NUL byte");
    }
    if (read_items(t, err) != 0 || check_fields(t, err) != 0) {
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

static const item *top_key(const cs_coretoml *t, const char *key)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->items[i].kind == IT_KEY && t->items[i].table == -1 && strcmp(t->items[i].name, key) == 0)
            return &t->items[i];
    return NULL;
}

bool cs_coretoml_has(const cs_coretoml *t, const char *key)
{
    return top_key(t, key) != NULL;
}

const char *cs_coretoml_string(const cs_coretoml *t, const char *key)
{
    const item *it = top_key(t, key);
    return it && it->v.kind == V_STRING ? it->v.str : NULL;
}

bool cs_coretoml_history_configured(const cs_coretoml *t)
{
    for (size_t i = 0; i < t->n; i++) {
        const item *it = &t->items[i];
        if (is_history_table(it))
            return true;
        if (it->kind == IT_ARRAY_TABLE && strcmp(it->name, "VALIDATORS") == 0 && *table_string(t, i, "HISTORY"))
            return true;
    }
    return false;
}

bool cs_coretoml_quorum_configured(const cs_coretoml *t)
{
    for (size_t i = 0; i < t->n; i++) {
        const item *it = &t->items[i];
        if (is_quorum_table(it) || (it->kind == IT_ARRAY_TABLE && strcmp(it->name, "VALIDATORS") == 0))
            return true;
    }
    return false;
}

/* ---- generation ----------------------------------------------------------------------------- */

static bool version_at_least(int major, int minor, int want_major, int want_minor)
{
    if (major == 0 && minor == 0)
        return false; /* unknown: the SDK leans to the common denominator */
    return major > want_major || (major == want_major && minor >= want_minor);
}

char *cs_coretoml_generate(const cs_coretoml *t, const cs_coretoml_params *p, size_t *len)
{
    sbuf b = {0};
    sb_puts(&b, "# Generated file, do not edit\n");
    const char *body = t->data + t->body;
    size_t head = t->insert_at - t->body;
    sb_put(&b, body, head);
    if (head && body[head - 1] != '\n')
        sb_put(&b, "\n", 1);

    sbuf d = {0};
#define ABSENT(k) (!cs_coretoml_has(t, (k)))
    if (ABSENT("NETWORK_PASSPHRASE")) {
        sb_puts(&d, "NETWORK_PASSPHRASE = ");
        sb_toml_string(&d, p->network_passphrase ? p->network_passphrase : "");
        sb_puts(&d, "\n");
    }
    if (ABSENT("DATABASE"))
        sb_puts(&d, "DATABASE = \"sqlite3://stellar.db\"\n");
    if (ABSENT("HTTP_PORT"))
        sb_puts(&d, "HTTP_PORT = 11626\n");
    if (ABSENT("LOG_FILE_PATH"))
        sb_puts(&d, "LOG_FILE_PATH = \"\"\n");
    if (ABSENT("FAILURE_SAFETY"))
        sb_puts(&d, "FAILURE_SAFETY = -1\n");
    if (ABSENT("BUCKETLIST_DB_INDEX_PAGE_SIZE_EXPONENT"))
        sb_puts(&d, "BUCKETLIST_DB_INDEX_PAGE_SIZE_EXPONENT = 12\n");
    if (ABSENT("BUCKETLIST_DB_MEMORY_FOR_CACHING") && version_at_least(p->core_major, p->core_minor, 22, 2))
        sb_puts(&d, "BUCKETLIST_DB_MEMORY_FOR_CACHING = 0\n");
    if (ABSENT("BACKFILL_RESTORE_META") && p->core_protocol >= 23)
        sb_puts(&d, "BACKFILL_RESTORE_META = true\n");
    if (ABSENT("ENABLE_SOROBAN_DIAGNOSTIC_EVENTS"))
        sb_puts(&d, "ENABLE_SOROBAN_DIAGNOSTIC_EVENTS = true\n");
    if (ABSENT("ENABLE_DIAGNOSTICS_FOR_TX_SUBMISSION"))
        sb_puts(&d, "ENABLE_DIAGNOSTICS_FOR_TX_SUBMISSION = true\n");
    if (ABSENT("EMIT_SOROBAN_TRANSACTION_META_EXT_V1"))
        sb_puts(&d, "EMIT_SOROBAN_TRANSACTION_META_EXT_V1 = true\n");
    if (ABSENT("EMIT_CLASSIC_EVENTS") && p->core_protocol >= 23)
        sb_puts(&d, "EMIT_CLASSIC_EVENTS = true\n");
    if (ABSENT("CATCHUP_COMPLETE") && p->catchup_complete)
        sb_puts(&d, "CATCHUP_COMPLETE = true\n");
#undef ABSENT
    if (d.n) {
        sb_puts(&b, "# Defaults added by corestreamd for the keys this file does not set\n");
        sb_put(&b, d.p, d.n);
    }
    if (d.oom)
        b.oom = true;
    free(d.p);

    size_t tail = t->len - t->insert_at;
    if (tail) {
        sb_put(&b, t->data + t->insert_at, tail);
        if (t->data[t->len - 1] != '\n')
            sb_put(&b, "\n", 1);
    }
    if (!cs_coretoml_history_configured(t)) {
        for (size_t i = 0; i < p->nurls; i++) {
            const char *u = p->urls[i];
            size_t un = strlen(u);
            if (un && u[un - 1] == '/')
                un--; /* strings.TrimSuffix(url, "/") */
            char *get = NULL;
            if (asprintf(&get, "curl -sf %.*s/{0} -o {1}", (int)un, u) < 0) {
                b.oom = true;
                break;
            }
            sb_printf(&b, "\n[HISTORY.h%zu]\nget = ", i);
            sb_toml_string(&b, get);
            sb_puts(&b, "\n");
            free(get);
        }
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    if (len)
        *len = b.n;
    return b.p;
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
