/* SPDX-License-Identifier: Apache-2.0 */
/* Go's flag package (FlagSet with ContinueOnError) and the strconv pieces it relies on, ported
 * from src/flag/flag.go and src/strconv/atoi.go; %q quoting is common/goquote's strconv.Quote. */
#include "common/flags.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/goquote.h"

/* ---- strconv.ParseUint / ParseInt with base 0 and bitSize 64 ---- */

static unsigned char lower(unsigned char c) { return c | ('x' - 'X'); }

/* underscoreOK: underscores only between digits, or between a base prefix and a digit. */
static int underscore_ok(const char *s)
{
    char saw = '^'; /* ^ start, 0 digit or prefix, _ underscore, ! anything else */
    size_t i = 0, n;
    int hex = 0;
    if (*s == '-' || *s == '+')
        s++;
    n = strlen(s);
    if (n >= 2 && s[0] == '0' &&
        (lower((unsigned char)s[1]) == 'b' || lower((unsigned char)s[1]) == 'o' ||
         lower((unsigned char)s[1]) == 'x')) {
        i = 2;
        saw = '0'; /* the prefix counts as a digit */
        hex = lower((unsigned char)s[1]) == 'x';
    }
    for (; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= '0' && c <= '9') || (hex && lower(c) >= 'a' && lower(c) <= 'f')) {
            saw = '0';
            continue;
        }
        if (c == '_') {
            if (saw != '0')
                return 0;
            saw = '_';
            continue;
        }
        if (saw == '_')
            return 0;
        saw = '!';
    }
    return saw != '_';
}

int cs_parse_uint64(const char *s0, uint64_t *out)
{
    const char *s = s0;
    unsigned base = 10;
    int underscores = 0;
    uint64_t n = 0;

    if (*s == '\0')
        return -1;
    if (s[0] == '0') {
        /* A prefix needs a digit after it; a bare "0x" falls back to octal and fails there. */
        unsigned char p = strlen(s) >= 3 ? lower((unsigned char)s[1]) : 0;
        int prefixed = p == 'b' || p == 'o' || p == 'x';
        base = p == 'b' ? 2 : p == 'x' ? 16 : 8;
        s += prefixed ? 2 : 1;
    }
    const uint64_t cutoff = UINT64_MAX / base + 1; /* smallest n with n*base overflowing */
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s, d;
        if (c == '_') {
            underscores = 1;
            continue;
        } else if (c >= '0' && c <= '9') {
            d = c - '0';
        } else if (lower(c) >= 'a' && lower(c) <= 'z') {
            d = lower(c) - 'a' + 10;
        } else {
            return -1;
        }
        if (d >= base)
            return -1;
        /* Go reports overflow as soon as it happens, before looking at the rest. */
        if (n >= cutoff)
            return -2;
        n *= base;
        uint64_t n1 = n + d;
        if (n1 < n)
            return -2;
        n = n1;
    }
    if (underscores && !underscore_ok(s0))
        return -1;
    *out = n;
    return 0;
}

int cs_parse_int64(const char *s0, int64_t *out)
{
    const char *s = s0;
    int neg = 0;
    uint64_t un = 0;

    if (*s == '\0')
        return -1;
    if (*s == '+') {
        s++;
    } else if (*s == '-') {
        neg = 1;
        s++;
    }
    int rc = cs_parse_uint64(s, &un);
    if (rc == -1)
        return -1;
    const uint64_t cutoff = UINT64_C(1) << 63;
    if (rc == -2 || (!neg && un >= cutoff) || (neg && un > cutoff))
        return -2;
    *out = neg ? (int64_t)(0 - un) : (int64_t)un;
    return 0;
}

/* strconv.ParseBool. */
static int parse_bool(const char *s, bool *out)
{
    static const char *const t[] = {"1", "t", "T", "true", "TRUE", "True"};
    static const char *const f[] = {"0", "f", "F", "false", "FALSE", "False"};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (strcmp(s, t[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcmp(s, f[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -1;
}

/* ---- parsing ---- */

static const cs_flag *lookup(const cs_flagset *fs, const char *name, size_t n)
{
    for (size_t i = 0; i < fs->nflags; i++)
        if (strlen(fs->flags[i].name) == n && memcmp(fs->flags[i].name, name, n) == 0)
            return &fs->flags[i];
    return NULL;
}

/* Value.Set for the non-bool types. Returns 0, or the error text Go's flag package shows. */
static const char *set_value(const cs_flag *f, const char *v)
{
    int rc = 0;
    switch (f->type) {
    case CS_FLAG_INT: {
        int64_t x;
        if ((rc = cs_parse_int64(v, &x)) == 0)
            *(int64_t *)f->target = x;
        break;
    }
    case CS_FLAG_UINT: {
        uint64_t x;
        if ((rc = cs_parse_uint64(v, &x)) == 0)
            *(uint64_t *)f->target = x;
        break;
    }
    case CS_FLAG_DURATION: {
        cs_dur x;
        /* flag hides time's message behind errParse. */
        if ((rc = cs_dur_parse(v, &x, NULL)) == 0)
            *(cs_dur *)f->target = x;
        break;
    }
    case CS_FLAG_STRING:
        *(const char **)f->target = v;
        break;
    case CS_FLAG_BOOL: /* handled by the caller: booleans never take the next argument */
        break;
    }
    return rc == 0 ? NULL : rc == -2 ? "value out of range" : "parse error";
}

static int fail_quoted(cs_err *err, const char *fmt_head, const char *value, const char *fmt_tail,
                       const char *name, size_t nlen, const char *why)
{
    char q[CS_ERR_MSG_MAX];
    cs_go_quote(q, sizeof q, value);
    cs_err_set(err, 0, "%s%s%s%.*s: %s", fmt_head, q, fmt_tail, (int)nlen, name, why);
    return CS_FLAGS_ERROR;
}

int cs_flags_parse(const cs_flagset *fs, int argc, char **argv, int *first_arg, cs_err *err)
{
    int i = 1;
    while (i < argc) {
        const char *s = argv[i];
        if (strlen(s) < 2 || s[0] != '-')
            break; /* first non-flag argument ("-" included) */
        size_t dashes = 1;
        if (s[1] == '-') {
            dashes = 2;
            if (s[2] == '\0') { /* "--" terminates the flags and is consumed */
                i++;
                break;
            }
        }
        const char *name = s + dashes;
        if (name[0] == '\0' || name[0] == '-' || name[0] == '=') {
            cs_err_set(err, 0, "bad flag syntax: %s", s);
            return CS_FLAGS_ERROR;
        }
        i++;

        const char *eq = strchr(name + 1, '='); /* the name cannot start with '=' */
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const char *value = eq ? eq + 1 : NULL;

        const cs_flag *f = lookup(fs, name, nlen);
        if (!f) {
            if ((nlen == 4 && memcmp(name, "help", 4) == 0) || (nlen == 1 && name[0] == 'h'))
                return CS_FLAGS_HELP;
            cs_err_set(err, 0, "flag provided but not defined: -%.*s", (int)nlen, name);
            return CS_FLAGS_ERROR;
        }

        if (f->type == CS_FLAG_BOOL) {
            /* "-x false" does not consume "false": booleans need "-x=false". */
            bool b = true;
            if (value && parse_bool(value, &b) < 0)
                return fail_quoted(err, "invalid boolean value ", value, " for -", name, nlen,
                                   "parse error");
            *(bool *)f->target = b;
            continue;
        }
        if (!value) {
            if (i >= argc) {
                cs_err_set(err, 0, "flag needs an argument: -%.*s", (int)nlen, name);
                return CS_FLAGS_ERROR;
            }
            value = argv[i++];
        }
        const char *why = set_value(f, value);
        if (why)
            return fail_quoted(err, "invalid value ", value, " for flag -", name, nlen, why);
    }
    *first_arg = i;
    return CS_FLAGS_OK;
}

/* ---- usage ---- */

/* Writes usage text with each newline followed by the flag-body indent, like PrintDefaults. */
static void put_usage(FILE *out, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\n')
            fputs("\n    \t", out);
        else
            fputc(s[i], out);
    }
}

/* fmt's %q of a string, written to a stream. */
static void fput_quoted(FILE *out, const char *s)
{
    char small[256];
    size_t need = cs_go_quote(small, sizeof small, s);
    char *big = need < sizeof small ? NULL : malloc(need + 1);
    if (big)
        cs_go_quote(big, need + 1, s);
    else if (need >= sizeof small)
        need = sizeof small - 1; /* out of memory: the quote is cut short */
    fwrite(big ? big : small, 1, need, out);
    free(big);
}

static void print_flag(const cs_flag *f, FILE *out)
{
    static const char *const type_names[] = {
        [CS_FLAG_BOOL] = "",           [CS_FLAG_INT] = "int", [CS_FLAG_UINT] = "uint",
        [CS_FLAG_STRING] = "string",   [CS_FLAG_DURATION] = "duration",
    };
    const char *usage = f->usage ? f->usage : "";
    const char *tname = type_names[f->type];
    size_t tlen = strlen(tname);

    /* UnquoteUsage: the first back-quoted word names the value; a lone backquote is ignored. */
    const char *bq1 = strchr(usage, '`');
    const char *bq2 = bq1 ? strchr(bq1 + 1, '`') : NULL;
    if (bq2) {
        tname = bq1 + 1;
        tlen = (size_t)(bq2 - tname);
    }

    size_t head = 3 + strlen(f->name); /* "  -name" */
    fprintf(out, "  -%s", f->name);
    if (tlen > 0) {
        fprintf(out, " %.*s", (int)tlen, tname);
        head += 1 + tlen;
    }
    /* One-letter bool flags keep their usage on the same line. */
    fputs(head <= 4 ? "\t" : "\n    \t", out);
    if (bq2) {
        put_usage(out, usage, (size_t)(bq1 - usage));
        put_usage(out, bq1 + 1, tlen);
        put_usage(out, bq2 + 1, strlen(bq2 + 1));
    } else {
        put_usage(out, usage, strlen(usage));
    }

    /* The default is shown only when it differs from the type's zero value. */
    switch (f->type) {
    case CS_FLAG_BOOL:
        if (*(const bool *)f->target)
            fputs(" (default true)", out);
        break;
    case CS_FLAG_INT:
        if (*(const int64_t *)f->target != 0)
            fprintf(out, " (default %" PRId64 ")", *(const int64_t *)f->target);
        break;
    case CS_FLAG_UINT:
        if (*(const uint64_t *)f->target != 0)
            fprintf(out, " (default %" PRIu64 ")", *(const uint64_t *)f->target);
        break;
    case CS_FLAG_STRING: {
        const char *v = *(const char *const *)f->target;
        if (v && *v) {
            fputs(" (default ", out);
            fput_quoted(out, v);
            fputs(")", out);
        }
        break;
    }
    case CS_FLAG_DURATION: {
        cs_dur d = *(const cs_dur *)f->target;
        char b[CS_DUR_STR_MAX];
        if (d != 0)
            fprintf(out, " (default %s)", cs_dur_format(d, b, sizeof b));
        break;
    }
    }
    fputc('\n', out);
}

void cs_flags_usage(const cs_flagset *fs, FILE *out)
{
    if (fs->prog && *fs->prog)
        fprintf(out, "Usage of %s:\n", fs->prog);
    else
        fputs("Usage:\n", out);
    if (fs->synopsis)
        fprintf(out, "%s\n", fs->synopsis);

    /* Sorted by name without reordering or copying the caller's table: repeatedly pick the
     * smallest name above the previous one (names are unique, as Go requires). */
    const cs_flag *prev = NULL;
    for (size_t k = 0; k < fs->nflags; k++) {
        const cs_flag *next = NULL;
        for (size_t i = 0; i < fs->nflags; i++) {
            const cs_flag *f = &fs->flags[i];
            if ((!prev || strcmp(f->name, prev->name) > 0) &&
                (!next || strcmp(f->name, next->name) < 0))
                next = f;
        }
        if (!next)
            break;
        print_flag(next, out);
        prev = next;
    }
}
