/* SPDX-License-Identifier: Apache-2.0 */
/* The client side of the WebSocket opening handshake: see handshake.h. */
#include "remoteledger/handshake.h"

#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/tokenlist.h"
#include "remoteledger/wsframe.h"
#include "wire/wsaccept.h"

void rli_hs_key_encode(const uint8_t nonce[16], char key[RLI_HS_KEY_LEN + 1])
{
    EVP_EncodeBlock((unsigned char *)key, nonce, 16); /* 24 characters and a NUL */
}

void rli_hs_key_new(char key[RLI_HS_KEY_LEN + 1])
{
    uint8_t nonce[16];
    rli_random_bytes(nonce, sizeof nonce);
    rli_hs_key_encode(nonce, key);
}

size_t rli_hs_request(char *out, size_t cap, const char *target, const char *host, const char *key,
                      const char *token)
{
    bool auth = token && *token;
    int n = snprintf(out, cap,
                     "GET %s HTTP/1.1\r\n"
                     "Pragma: no-cache\r\n"
                     "Cache-Control: no-cache\r\n"
                     "Host: %s\r\n"
                     "%s%s%s"
                     "Upgrade: websocket\r\n"
                     "Connection: Upgrade\r\n"
                     "Sec-WebSocket-Key: %s\r\n"
                     "Sec-WebSocket-Version: 13\r\n"
                     "\r\n",
                     target, host, auth ? "Authorization: Bearer " : "", auth ? token : "", auth ? "\r\n" : "",
                     key);
    return n < 0 ? 0 : (size_t)n;
}

void rli_hs_reader_init(rli_hs_reader *r)
{
    r->len = 0;
    r->line = 0;
    r->status = 0;
    r->tls = false;
    r->buf[0] = '\0';
}

/* corestreamd's plaintext 400 on its TLS port (it carries `x-corestream-tls: required`). */
static const char tls_port[] = "the server speaks TLS on this port (is it wss://?)";

/* The first bytes of a TLS record (handshake or alert, versions SSL 3.0 to TLS 1.3): what a TLS
 * server answers an HTTP request with, if anything. */
static bool looks_like_tls(const char *b)
{
    return (b[0] == 0x15 || b[0] == 0x16) && b[1] == 0x03 && (unsigned char)b[2] <= 0x04;
}

rli_hs_status rli_hs_feed(rli_hs_reader *r, const uint8_t *in, size_t len, size_t *used, const char *key,
                        const char **err)
{
    size_t room = RLI_HS_MAX_RESPONSE - r->len;
    size_t take = len < room ? len : room;
    size_t old = r->len;
    if (take)
        memcpy(r->buf + r->len, in, take);
    r->len += take;
    if (r->len >= 3 && looks_like_tls(r->buf)) {
        r->tls = true;
        *used = take;
        *err = "the server answered in TLS (is it wss://?)";
        return RLI_HS_FAILED;
    }
    while (r->line < r->len) {
        const char *nl = memchr(r->buf + r->line, '\n', r->len - r->line);
        if (!nl)
            break;
        size_t end = (size_t)(nl - r->buf);
        size_t content = end - r->line;
        if (content && r->buf[end - 1] == '\r')
            content--;
        r->line = end + 1;
        if (content == 0) { /* the blank line: the head is complete */
            *used = r->line - old;
            r->buf[r->line] = '\0';
            *err = rli_hs_check(r->buf, r->line, key);
            r->status = rli_hs_status_code(r->buf, r->line);
            r->tls = *err == tls_port; /* a mismatch of TLS itself, as an answer in TLS is */
            return *err ? RLI_HS_FAILED : RLI_HS_DONE;
        }
    }
    *used = take;
    if (r->len == RLI_HS_MAX_RESPONSE) {
        *err = "HS: response headers too long";
        return RLI_HS_FAILED;
    }
    return RLI_HS_MORE;
}

/* ---- checking the head ----------------------------------------------------------------------- */

typedef struct span {
    const char *p;
    size_t n;
} span;

static span trim(const char *p, size_t n)
{
    while (n && (*p == ' ' || *p == '\t')) {
        p++;
        n--;
    }
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    return (span){p, n};
}

static bool span_is(span s, const char *lit)
{
    size_t n = strlen(lit);
    return s.n == n && strncasecmp(s.p, lit, n) == 0;
}

/* "HTTP/1.x NNN ..." -> NNN, or -1. */
static int status_code(span line)
{
    const char *p = line.p;
    size_t n = line.n;
    if (n < 12 || strncmp(p, "HTTP/", 5) != 0)
        return -1;
    const char *sp = memchr(p, ' ', n);
    if (!sp)
        return -1;
    size_t i = (size_t)(sp - p);
    while (i < n && p[i] == ' ')
        i++;
    if (i + 3 > n)
        return -1;
    int code = 0;
    for (size_t k = 0; k < 3; k++) {
        if (p[i + k] < '0' || p[i + k] > '9')
            return -1;
        code = code * 10 + (p[i + k] - '0');
    }
    if (i + 3 < n && p[i + 3] != ' ')
        return -1;
    return code;
}

bool rli_hs_header(const char *head, size_t len, const char *name, const char **value, size_t *vlen)
{
    const char *p = head, *end = head + len;
    const char *nl = memchr(p, '\n', len); /* the status line is no header */
    p = nl ? nl + 1 : end;
    while (p < end) {
        nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        size_t n = (size_t)(le - p);
        if (n && p[n - 1] == '\r')
            n--;
        const char *colon = memchr(p, ':', n);
        if (colon && span_is(trim(p, (size_t)(colon - p)), name)) {
            span v = trim(colon + 1, n - (size_t)(colon + 1 - p));
            *value = v.p;
            *vlen = v.n;
            return true;
        }
        if (!nl)
            break;
        p = nl + 1;
    }
    return false;
}

int rli_hs_status_code(const char *head, size_t len)
{
    const char *nl = memchr(head, '\n', len);
    size_t n = nl ? (size_t)(nl - head) : len;
    if (n && head[n - 1] == '\r')
        n--;
    return status_code((span){head, n});
}

const char *rli_hs_check(const char *head, size_t len, const char *key)
{
    span status = {NULL, 0}, upgrade = {NULL, 0}, accept = {NULL, 0}, protocol = {NULL, 0},
         extensions = {NULL, 0};
    bool has_upgrade = false, has_accept = false, conn_upgrade = false, tls_required = false;
    const char *p = head, *end = head + len;
    bool first = true;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        size_t n = (size_t)(le - p);
        if (n && p[n - 1] == '\r')
            n--;
        if (first) {
            status = (span){p, n};
            first = false;
        } else if (n) {
            const char *colon = memchr(p, ':', n);
            if (colon) {
                span name = trim(p, (size_t)(colon - p));
                span value = trim(colon + 1, n - (size_t)(colon + 1 - p));
                if (span_is(name, "Upgrade") && !has_upgrade) {
                    upgrade = value;
                    has_upgrade = true;
                } else if (span_is(name, "Connection")) {
                    conn_upgrade = conn_upgrade || cs_list_has_token(value.p, value.n, "upgrade");
                } else if (span_is(name, "Sec-WebSocket-Accept") && !has_accept) {
                    accept = value;
                    has_accept = true;
                } else if (span_is(name, "Sec-WebSocket-Protocol") && !protocol.n) {
                    protocol = value;
                } else if (span_is(name, "Sec-WebSocket-Extensions") && !extensions.n) {
                    extensions = value;
                } else if (span_is(name, "X-Corestream-TLS")) {
                    tls_required = span_is(value, "required");
                }
            }
        }
        if (!nl)
            break;
        p = nl + 1;
    }

    int code = status_code(status);
    if (code < 0)
        return "HS: URI missing";
    if (code == 401)
        return "server requires a token (401)";
    if (code == 400 && tls_required)
        return tls_port;
    if (code != 101)
        return "HS: ws upgrade response not 101";
    if (!accept.n)
        return "HS: ACCEPT missing";
    if (!has_upgrade)
        return "HS: UPGRADE missing";
    if (!span_is(upgrade, "websocket"))
        return "HS: Upgrade to something other than websocket";
    if (!conn_upgrade)
        return "HS: UPGRADE malformed";
    if (protocol.n) /* none was offered */
        return "HS: PROTOCOL malformed";
    if (extensions.n) /* none was offered */
        return "HS: EXT: unknown ext";
    char want[CS_WS_ACCEPT_LEN + 1];
    cs_ws_accept(key, strlen(key), want);
    if (accept.n != CS_WS_ACCEPT_LEN || memcmp(accept.p, want, CS_WS_ACCEPT_LEN) != 0)
        return "HS: Accept hash wrong";
    return NULL;
}
