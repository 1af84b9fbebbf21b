/* SPDX-License-Identifier: Apache-2.0 */
/* Go's strconv.Quote (what fmt's %q does to a string) and the UTF-8 and rune-class primitives it
 * rests on, shared by the flag parser, the logger and the request parser so that they quote
 * byte-for-byte alike. Ported from src/strconv/quote.go and src/unicode/utf8/utf8.go. */
#ifndef CS_COMMON_GOQUOTE_H
#define CS_COMMON_GOQUOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"

/* utf8.RuneError, U+FFFD. */
#define CS_RUNE_ERROR 0xFFFDu

/* utf8.DecodeRune on the n bytes at s: returns the width consumed and sets *rune. Overlong forms,
 * surrogates, values past U+10FFFF and sequences truncated by n are invalid: *rune is
 * CS_RUNE_ERROR and the width 1 (a literal U+FFFD decodes with width 3). With n == 0, returns 0
 * and CS_RUNE_ERROR. Never reads past a NUL byte, so n may overstate a NUL-terminated string. */
size_t cs_utf8_decode(const unsigned char *s, size_t n, uint32_t *rune);

/* utf8.AppendRune for r below U+110000 that is not a surrogate (the caller maps those to
 * CS_RUNE_ERROR first): one to four bytes appended to b. */
void cs_utf8_put(cs_strbuf *b, uint32_t r);

/* strconv.IsPrint: letters, marks, numbers, punctuation, symbols and U+0020. In ASCII it is exact
 * (0x20..0x7E). Above ASCII it is an approximation of Go's tables: every assigned code point of
 * the BMP and planes 1-2 agrees with Go 1.19; unassigned code points count as printable (Go
 * escapes them); surrogates, private use, noncharacters, plane 14 past the variation selectors
 * and anything past U+10FFFF are not printable. */
bool cs_rune_is_print(uint32_t r);

/* strconv.Quote(s), surrounding double quotes included: printable runes kept as is, '"' and '\\'
 * backslashed, \a \b \f \n \r \t \v named, other ASCII controls, DEL and invalid UTF-8 bytes as
 * \xNN, other non-printable runes as \uNNNN or \UNNNNNNNN. snprintf rules: returns the length
 * of the full quoted string, writes at most len - 1 bytes of it (cut at any byte) and always
 * NUL-terminates when len > 0; buf may be NULL when len == 0. */
size_t cs_go_quote(char *buf, size_t len, const char *s);
/* cs_go_quote of the n bytes at s, which may hold NULs (quoted as \x00) and need no terminator:
 * a piece of a URL, a close reason from the network. */
size_t cs_go_quote_n(char *buf, size_t len, const char *s, size_t n);

/* The same quotings appended to b (growable or bounded). */
void cs_go_quote_put(cs_strbuf *b, const char *s);
void cs_go_quote_put_n(cs_strbuf *b, const char *s, size_t n);

#endif
