/* SPDX-License-Identifier: Apache-2.0 */
/* strconv.Quote and its UTF-8 / rune-class primitives; see goquote.h. */
#include "common/goquote.h"

#include <string.h>

size_t cs_utf8_decode(const unsigned char *s, size_t n, uint32_t *rune)
{
    if (n == 0) {
        *rune = CS_RUNE_ERROR;
        return 0;
    }
    unsigned char c = s[0];
    size_t w;
    unsigned char lo = 0x80, hi = 0xBF; /* accepted range of the second byte */
    uint32_t v;
    if (c < 0x80) {
        *rune = c;
        return 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
        w = 2;
        v = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        w = 3;
        v = c & 0x0F;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        else if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        w = 4;
        v = c & 0x07;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        else if (c == 0xF4)
            hi = 0x8F; /* past U+10FFFF */
    } else {
        goto invalid;
    }
    if (n < w)
        goto invalid;
    /* Bytes are checked in order, so a NUL (never a continuation byte) stops the reading. */
    for (size_t i = 1; i < w; i++) {
        unsigned char cc = s[i];
        if (i == 1 ? (cc < lo || cc > hi) : (cc < 0x80 || cc > 0xBF))
            goto invalid;
        v = (v << 6) | (cc & 0x3F);
    }
    *rune = v;
    return w;
invalid:
    *rune = CS_RUNE_ERROR;
    return 1;
}

void cs_utf8_put(cs_strbuf *b, uint32_t r)
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
    cs_strbuf_put(b, u, n);
}

bool cs_rune_is_print(uint32_t r)
{
    /* Non-printing ranges above ASCII: C1 controls, spaces other than U+0020, line and
     * paragraph separators, format characters, surrogates, private use, noncharacters, tags. */
    static const uint32_t notprint[][2] = {
        {0x80, 0xA0},       {0xAD, 0xAD},       {0x600, 0x605},     {0x61C, 0x61C},
        {0x6DD, 0x6DD},     {0x70F, 0x70F},     {0x890, 0x891},     {0x8E2, 0x8E2},
        {0x1680, 0x1680},   {0x180E, 0x180E},   {0x2000, 0x200F},   {0x2028, 0x202F},
        {0x205F, 0x206F},   {0x3000, 0x3000},   {0xD800, 0xDFFF},   {0xE000, 0xF8FF},
        {0xFDD0, 0xFDEF},   {0xFEFF, 0xFEFF},   {0xFFF0, 0xFFFB},   {0x110BD, 0x110BD},
        {0x110CD, 0x110CD}, {0x13430, 0x1343F}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A},
        {0xE0000, 0xE00FF}, {0xE01F0, 0x10FFFF},
    };
    if (r < 0x80)
        return r >= 0x20 && r < 0x7F;
    if (r > 0x10FFFF || (r & 0xFFFE) == 0xFFFE) /* U+xxFFFE and U+xxFFFF in every plane */
        return false;
    for (size_t i = 0; i < sizeof notprint / sizeof notprint[0]; i++)
        if (r >= notprint[i][0] && r <= notprint[i][1])
            return false;
    return true;
}

static void put_escape(cs_strbuf *b, char kind, uint32_t v, int digits)
{
    static const char lowerhex[] = "0123456789abcdef";
    char e[10] = {'\\', kind};
    for (int i = 0; i < digits; i++)
        e[2 + i] = lowerhex[(v >> (4 * (digits - 1 - i))) & 0xF];
    cs_strbuf_put(b, e, 2 + (size_t)digits);
}

void cs_go_quote_put_n(cs_strbuf *b, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    cs_strbuf_put(b, "\"", 1);
    while (n > 0) {
        uint32_t r;
        size_t w = cs_utf8_decode(s, n, &r);
        if (w == 1 && r == CS_RUNE_ERROR) { /* invalid UTF-8: the raw byte */
            put_escape(b, 'x', s[0], 2);
        } else if (r == '"' || r == '\\') {
            char e[2] = {'\\', (char)r};
            cs_strbuf_put(b, e, 2);
        } else if (cs_rune_is_print(r)) {
            cs_strbuf_put(b, (const char *)s, w);
        } else {
            static const char esc[] = "\a\b\f\n\r\t\v", code[] = "abfnrtv";
            const char *e = r != 0 && r < 0x80 ? strchr(esc, (int)r) : NULL;
            if (e) {
                char b2[2] = {'\\', code[e - esc]};
                cs_strbuf_put(b, b2, 2);
            } else if (r < 0x20 || r == 0x7F) {
                put_escape(b, 'x', r, 2);
            } else if (r < 0x10000) {
                put_escape(b, 'u', r, 4);
            } else {
                put_escape(b, 'U', r, 8);
            }
        }
        s += w;
        n -= w;
    }
    cs_strbuf_put(b, "\"", 1);
}

void cs_go_quote_put(cs_strbuf *b, const char *s)
{
    cs_go_quote_put_n(b, s, strlen(s));
}

size_t cs_go_quote_n(char *buf, size_t len, const char *s, size_t n)
{
    cs_strbuf b;
    cs_strbuf_fixed(&b, buf, len);
    cs_go_quote_put_n(&b, s, n);
    return b.n;
}

size_t cs_go_quote(char *buf, size_t len, const char *s)
{
    return cs_go_quote_n(buf, len, s, strlen(s));
}
