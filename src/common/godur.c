/* SPDX-License-Identifier: Apache-2.0 */
/* Go time.Duration text, following src/time/format.go (ParseDuration) and src/time/time.go
 * (Duration.String) step by step so that edge cases, overflow included, behave identically. */
#include "common/godur.h"

#include <string.h>

static const char lowerhex[] = "0123456789abcdef";

/* time's private quote(): unlike strconv.Quote it hex-escapes every byte of a control or
 * non-ASCII character (so "µ" becomes "\xc2\xb5"), and escapes only '"' and '\\'. */
static void time_quote(char *dst, size_t cap, const char *s, size_t n)
{
    size_t w = 0;
#define PUT(c)                                                                                     \
    do {                                                                                           \
        if (w + 1 < cap)                                                                           \
            dst[w++] = (c);                                                                        \
    } while (0)
    PUT('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80 || c < ' ') {
            PUT('\\');
            PUT('x');
            PUT(lowerhex[c >> 4]);
            PUT(lowerhex[c & 0xF]);
        } else {
            if (c == '"' || c == '\\')
                PUT('\\');
            PUT((char)c);
        }
    }
    PUT('"');
#undef PUT
    dst[w] = '\0';
}

/* Long enough for any quoted argument we would report; longer ones are cut, as is the message. */
#define QUOTE_MAX CS_ERR_MSG_MAX

static int invalid(const char *orig, cs_err *err)
{
    char q[QUOTE_MAX];
    time_quote(q, sizeof q, orig, strlen(orig));
    return cs_err_set(err, 0, "time: invalid duration %s", q);
}

/* leadingInt: consumes [0-9]*, failing once the value passes 1<<63. */
static int leading_int(const char **s, uint64_t *x)
{
    uint64_t v = 0;
    const char *p = *s;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_C(1) << 63) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > UINT64_C(1) << 63)
            return -1;
    }
    *s = p;
    *x = v;
    return 0;
}

/* leadingFraction: consumes [0-9]* after the dot; on overflow it keeps consuming digits but
 * stops accumulating precision. */
static void leading_fraction(const char **s, uint64_t *x, double *scale)
{
    uint64_t v = 0;
    double sc = 1;
    int overflow = 0;
    const char *p = *s;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (overflow)
            continue;
        if (v > (uint64_t)INT64_MAX / 10) { /* a positive wrap is possible, so stop early */
            overflow = 1;
            continue;
        }
        uint64_t y = v * 10 + (uint64_t)(*p - '0');
        if (y > UINT64_C(1) << 63) {
            overflow = 1;
            continue;
        }
        v = y;
        sc *= 10;
    }
    *s = p;
    *x = v;
    *scale = sc;
}

static const struct {
    const char *name;
    uint64_t ns;
} units[] = {
    {"ns", 1},
    {"us", 1000},
    {"\xc2\xb5s", 1000}, /* U+00B5 micro sign */
    {"\xce\xbcs", 1000}, /* U+03BC Greek mu */
    {"ms", 1000000},
    {"s", 1000000000},
    {"m", UINT64_C(60) * 1000000000},
    {"h", UINT64_C(3600) * 1000000000},
};

static int lookup_unit(const char *u, size_t n, uint64_t *ns)
{
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strlen(units[i].name) == n && memcmp(units[i].name, u, n) == 0) {
            *ns = units[i].ns;
            return 0;
        }
    }
    return -1;
}

int cs_dur_parse(const char *orig, cs_dur *out, cs_err *err)
{
    const char *s = orig;
    uint64_t d = 0;
    int neg = 0;

    if (*s == '-' || *s == '+') {
        neg = *s == '-';
        s++;
    }
    if (strcmp(s, "0") == 0) {
        *out = 0;
        return 0;
    }
    if (*s == '\0')
        return invalid(orig, err);
    while (*s != '\0') {
        uint64_t v, f = 0;
        double scale = 1;

        if (!(*s == '.' || (*s >= '0' && *s <= '9')))
            return invalid(orig, err);
        const char *start = s;
        if (leading_int(&s, &v) < 0)
            return invalid(orig, err);
        int pre = s != start;

        int post = 0;
        if (*s == '.') {
            s++;
            start = s;
            leading_fraction(&s, &f, &scale);
            post = s != start;
        }
        if (!pre && !post) /* no digits, e.g. ".s" */
            return invalid(orig, err);

        size_t i = 0;
        while (s[i] != '\0' && s[i] != '.' && !(s[i] >= '0' && s[i] <= '9'))
            i++;
        if (i == 0) {
            char q[QUOTE_MAX];
            time_quote(q, sizeof q, orig, strlen(orig));
            return cs_err_set(err, 0, "time: missing unit in duration %s", q);
        }
        uint64_t unit;
        if (lookup_unit(s, i, &unit) < 0) {
            char qu[QUOTE_MAX / 2], q[QUOTE_MAX / 2];
            time_quote(qu, sizeof qu, s, i);
            time_quote(q, sizeof q, orig, strlen(orig));
            return cs_err_set(err, 0, "time: unknown unit %s in duration %s", qu, q);
        }
        s += i;
        if (v > (UINT64_C(1) << 63) / unit)
            return invalid(orig, err);
        v *= unit;
        if (f > 0) {
            /* Same float64 arithmetic as Go, so fractions of hours round identically. */
            v += (uint64_t)((double)f * ((double)unit / scale));
            if (v > UINT64_C(1) << 63)
                return invalid(orig, err);
        }
        d += v; /* wraps exactly like Go's uint64 */
        if (d > UINT64_C(1) << 63)
            return invalid(orig, err);
    }
    if (neg) {
        *out = (cs_dur)(0 - d);
        return 0;
    }
    if (d > (uint64_t)INT64_MAX)
        return invalid(orig, err);
    *out = (cs_dur)d;
    return 0;
}

/* fmtFrac: writes v/10^prec's fraction before buf[w], dropping trailing zeros and the dot when
 * the fraction is zero. Returns the new start and v/10^prec through *v. */
static size_t fmt_frac(char *buf, size_t w, uint64_t *v, int prec)
{
    int print = 0;
    for (int i = 0; i < prec; i++) {
        uint64_t digit = *v % 10;
        print = print || digit != 0;
        if (print)
            buf[--w] = (char)('0' + digit);
        *v /= 10;
    }
    if (print)
        buf[--w] = '.';
    return w;
}

static size_t fmt_int(char *buf, size_t w, uint64_t v)
{
    if (v == 0)
        buf[--w] = '0';
    for (; v > 0; v /= 10)
        buf[--w] = (char)('0' + v % 10);
    return w;
}

char *cs_dur_format(cs_dur d, char *out, size_t len)
{
    char buf[CS_DUR_STR_MAX];
    size_t w = sizeof buf;
    uint64_t u = (uint64_t)d;
    int neg = d < 0;
    if (neg)
        u = 0 - u; /* INT64_MIN maps to 1<<63, as in Go */

    if (u < (uint64_t)CS_SEC) {
        /* Under a second: a smaller unit, e.g. "1.2ms". */
        int prec = 0;
        buf[--w] = 's';
        if (u == 0) {
            buf[--w] = '0';
        } else {
            if (u < (uint64_t)CS_US) {
                buf[--w] = 'n';
            } else if (u < (uint64_t)CS_MS) {
                prec = 3;
                buf[--w] = '\xb5'; /* U+00B5 micro sign, UTF-8 0xC2 0xB5 */
                buf[--w] = '\xc2';
            } else {
                prec = 6;
                buf[--w] = 'm';
            }
            w = fmt_frac(buf, w, &u, prec);
            w = fmt_int(buf, w, u);
        }
    } else {
        buf[--w] = 's';
        w = fmt_frac(buf, w, &u, 9);
        w = fmt_int(buf, w, u % 60); /* u is whole seconds */
        u /= 60;
        if (u > 0) {
            buf[--w] = 'm';
            w = fmt_int(buf, w, u % 60);
            u /= 60;
            /* Stop at hours because days can be different lengths. */
            if (u > 0) {
                buf[--w] = 'h';
                w = fmt_int(buf, w, u);
            }
        }
    }
    if (neg)
        buf[--w] = '-';

    if (len > 0) {
        size_t n = sizeof buf - w;
        if (n > len - 1)
            n = len - 1;
        memcpy(out, buf + w, n);
        out[n] = '\0';
    }
    return out;
}
