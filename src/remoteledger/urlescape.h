/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger internals: Go net/url's percent-encoding (escape, unescape, the checks), as
 * the URL parser and the endpoint builder need it. Pure functions; any thread. */
#ifndef RL_URLESCAPE_H
#define RL_URLESCAPE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/strbuf.h"

/* Which part of a URL a string is escaped for (Go's encoding modes). */
typedef enum enc_mode {
    ENC_PATH,
    ENC_HOST,
    ENC_ZONE,
    ENC_USERPASS,
    ENC_QUERY,
    ENC_FRAGMENT,
} enc_mode;

/* An ASCII letter or digit. */
bool rli_is_alnum(unsigned char c);

/* net/url's unescape: appends the decoded s to out, or describes the error in detail (the text
 * url.Error wraps: `invalid URL escape "%zz"`, `invalid character " " in host name`). */
int rli_unescape(const char *s, size_t n, enc_mode mode, cs_strbuf *out, cs_strbuf *detail);

/* net/url's escape. */
void rli_escape_into(cs_strbuf *out, const char *s, size_t n, enc_mode mode);

/* The printed form of a path or fragment written as raw (already unescaped successfully): the raw
 * text when it is a valid encoding (RawPath / RawFragment), otherwise the canonical escape of the
 * decoded text. */
void rli_escaped_form(cs_strbuf *out, const char *raw, size_t n, const cs_strbuf *decoded, enc_mode mode);

#endif
