/* SPDX-License-Identifier: Apache-2.0 */
/* Go net/url's percent-encoding, as the subscription URL needs it (urlescape.h). */
#include "remoteledger/urlescape.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "common/goquote.h"

/* ---- net/url: escaping ------------------------------------------------------------------------ */


bool rli_is_alnum(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool should_escape(unsigned char c, enc_mode mode)
{
    if (rli_is_alnum(c))
        return false;
    if (mode == ENC_HOST || mode == ENC_ZONE) {
        switch (c) {
        case '!': case '$': case '&': case '\'': case '(': case ')': case '*': case '+': case ',':
        case ';': case '=': case ':': case '[': case ']': case '<': case '>': case '"':
            return false;
        default:
            break;
        }
    }
    switch (c) {
    case '-': case '_': case '.': case '~':
        return false;
    case '$': case '&': case '+': case ',': case '/': case ':': case ';': case '=': case '?':
    case '@':
        switch (mode) {
        case ENC_PATH: return c == '?';
        case ENC_USERPASS: return c == '@' || c == '/' || c == '?' || c == ':';
        case ENC_QUERY: return true;
        case ENC_FRAGMENT: return false;
        default: break;
        }
        break;
    default:
        break;
    }
    if (mode == ENC_FRAGMENT) {
        switch (c) {
        case '!': case '(': case ')': case '*':
            return false;
        default:
            break;
        }
    }
    return true;
}

static bool is_hex(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static unsigned unhex(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return c - 'A' + 10;
}

/* net/url's unescape: appends the decoded s to out, or describes the error in detail (the text
 * url.Error wraps: `invalid URL escape "%zz"`, `invalid character " " in host name`). */
int rli_unescape(const char *s, size_t n, enc_mode mode, cs_strbuf *out, cs_strbuf *detail)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        if (c == '%') {
            if (i + 2 >= n || !is_hex(u[i + 1]) || !is_hex(u[i + 2])) {
                size_t k = n - i < 3 ? n - i : 3;
                cs_strbuf_puts(detail, "invalid URL escape ");
                cs_go_quote_put_n(detail, s + i, k);
                return -1;
            }
            unsigned v = unhex(u[i + 1]) << 4 | unhex(u[i + 2]);
            bool pct25 = u[i + 1] == '2' && u[i + 2] == '5';
            if ((mode == ENC_HOST && unhex(u[i + 1]) < 8 && !pct25) ||
                (mode == ENC_ZONE && !pct25 && v != ' ' && should_escape((unsigned char)v, ENC_HOST))) {
                cs_strbuf_puts(detail, "invalid URL escape ");
                cs_go_quote_put_n(detail, s + i, 3);
                return -1;
            }
            cs_strbuf_putc(out, (char)v);
            i += 3;
        } else if (c == '+') {
            cs_strbuf_putc(out, mode == ENC_QUERY ? ' ' : '+');
            i++;
        } else {
            if ((mode == ENC_HOST || mode == ENC_ZONE) && c < 0x80 && should_escape(c, mode)) {
                cs_strbuf_puts(detail, "invalid character ");
                cs_go_quote_put_n(detail, s + i, 1);
                cs_strbuf_puts(detail, " in host name");
                return -1;
            }
            cs_strbuf_putc(out, (char)c);
            i++;
        }
    }
    return 0;
}

/* net/url's escape. */
void rli_escape_into(cs_strbuf *out, const char *s, size_t n, enc_mode mode)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!should_escape(c, mode)) {
            cs_strbuf_putc(out, (char)c);
        } else if (c == ' ' && mode == ENC_QUERY) {
            cs_strbuf_putc(out, '+');
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            cs_strbuf_put(out, e, 3);
        }
    }
}

/* net/url's validEncoded: may this raw text stand as the escaped form? */
static bool valid_encoded(const char *s, size_t n, enc_mode mode)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '!': case '$': case '&': case '\'': case '(': case ')': case '*': case '+': case ',':
        case ';': case '=': case ':': case '@': case '[': case ']': case '%':
            break;
        default:
            if (should_escape(c, mode))
                return false;
        }
    }
    return true;
}

/* The printed form of a path or fragment written as raw (already unescaped successfully): the raw
 * text when it is a valid encoding (RawPath / RawFragment), otherwise the canonical escape of the
 * decoded text. */
void rli_escaped_form(cs_strbuf *out, const char *raw, size_t n, const cs_strbuf *decoded, enc_mode mode)
{
    if (valid_encoded(raw, n, mode))
        cs_strbuf_put(out, raw, n);
    else
        rli_escape_into(out, decoded->p ? decoded->p : "", decoded->n, mode);
}
