/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/net/request.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/goquote.h"
#include "common/tokenlist.h"
#include "corestream/wire.h"

/* The first value of name among the pairs, or NULL when absent or empty. */
static const char *first_value(const char *const *args, size_t nargs, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < nargs; i++) {
        const char *a = args[i];
        const char *eq = strchr(a, '=');
        size_t klen = eq ? (size_t)(eq - a) : strlen(a);
        if (klen == n && memcmp(a, name, n) == 0) {
            const char *v = eq ? eq + 1 : "";
            return *v ? v : NULL;
        }
    }
    return NULL;
}

/* strconv.ParseUint(v, 10, 32): decimal digits only. */
static bool parse_u32(const char *v, uint32_t *out)
{
    uint64_t x = 0;
    if (!*v)
        return false;
    for (const char *p = v; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        x = x * 10 + (uint64_t)(*p - '0');
        if (x > UINT32_MAX)
            return false;
    }
    *out = (uint32_t)x;
    return true;
}

/* Formats a 400 body; returns -1 for the caller to return. */
static int fail(cs_stream_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(cs_stream_error *err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->body, sizeof err->body, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int invalid(cs_stream_error *err, const char *which, const char *v)
{
    if (err) {
        int k = snprintf(err->body, sizeof err->body, "invalid %s parameter ", which);
        cs_go_quote(err->body + k, sizeof err->body - (size_t)k, v);
    }
    return -1;
}

int cs_stream_request_parse(const char *const *args, size_t nargs, cs_stream_request *out,
                            cs_stream_error *err)
{
    memset(out, 0, sizeof *out);
    const char *sv = first_value(args, nargs, "start");
    const char *ev = first_value(args, nargs, "end");
    if (sv && !parse_u32(sv, &out->start))
        return invalid(err, "start", sv);
    if (ev) {
        if (!parse_u32(ev, &out->end))
            return invalid(err, "end", ev);
        if (out->end == 0)
            return fail(err, "invalid end parameter: 0");
        out->bounded = true;
    }
    if (out->start == CS_LAST_SEQUENCE || (out->bounded && out->end == CS_LAST_SEQUENCE))
        return fail(err, "ledger %u is the last representable sequence and is not streamable",
                    CS_LAST_SEQUENCE);
    if (out->bounded && out->start != 0 && out->end < out->start)
        return fail(err, "end %u is before start %u", out->end, out->start);
    const char *sig = first_value(args, nargs, "sig");
    if (sig && strcmp(sig, "0") != 0 && strcmp(sig, "1") != 0)
        return invalid(err, "sig", sig);
    out->sig = sig && strcmp(sig, "1") == 0;
    return 0;
}

int cs_check_origin(const char *origin, const char *host, char *msg, size_t mlen)
{
    if (!*origin)
        return 0;
    const char *o = strstr(origin, "://");
    if (!o) {
        snprintf(msg, mlen, "request Origin \"%s\" is not a valid URL with a host", origin);
        return -1;
    }
    o += 3;
    size_t olen = strcspn(o, "/");
    if (olen != strlen(host) || strncasecmp(o, host, olen) != 0) {
        snprintf(msg, mlen, "request Origin \"%s\" is not authorized for Host \"%s\"", origin, host);
        return -1;
    }
    return 0;
}

/* Go's base64.StdEncoding.DecodeString(s) yields exactly 16 bytes: 22 symbols and "==". */
static bool key_is_16_bytes(const char *s, size_t n)
{
    if (n != 24 || s[22] != '=' || s[23] != '=')
        return false;
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < 22; i++)
        if (!s[i] || !strchr(alphabet, s[i]))
            return false;
    /* The last symbol carries 2 bits of data; Go rejects non-zero padding bits. */
    return (strchr(alphabet, s[21]) - alphabet) % 16 == 0;
}

static int refuse(cs_upgrade_refusal *out, unsigned status, const char *fmt, const char *value)
{
    memset(out, 0, sizeof *out);
    out->status = status;
    if (value) {
        char q[CS_STREAM_BODY_MAX - 128];
        cs_go_quote(q, sizeof q, value);
        snprintf(out->body, sizeof out->body, fmt, q);
    } else {
        snprintf(out->body, sizeof out->body, "%s", fmt);
    }
    return -1;
}

int cs_upgrade_check(const cs_upgrade_request *r, cs_upgrade_refusal *out)
{
    if (strcmp(r->version, "HTTP/1.1") != 0 && strncmp(r->version, "HTTP/2", 6) != 0 &&
        strncmp(r->version, "HTTP/3", 6) != 0)
        return refuse(out, 426, "WebSocket protocol violation: handshake request must be at least HTTP/1.1: %s",
                      r->version);
    if (!cs_list_has_token(r->connection, strlen(r->connection), "upgrade")) {
        refuse(out, 426, "WebSocket protocol violation: Connection header %s does not contain Upgrade",
               r->connection);
        out->offer_upgrade = true;
        return -1;
    }
    if (!cs_list_has_token(r->upgrade, strlen(r->upgrade), "websocket")) {
        refuse(out, 426, "WebSocket protocol violation: Upgrade header %s does not contain websocket", r->upgrade);
        out->offer_upgrade = true;
        return -1;
    }
    if (strcmp(r->method, "GET") != 0)
        return refuse(out, 405, "WebSocket protocol violation: handshake request method is not GET but %s",
                      r->method);
    if (strcmp(r->ws_version, "13") != 0) {
        refuse(out, 400, "unsupported WebSocket protocol version (only 13 is supported): %s", r->ws_version);
        out->offer_version = true;
        return -1;
    }
    if (r->nkeys == 0)
        return refuse(out, 400, "WebSocket protocol violation: missing Sec-WebSocket-Key", NULL);
    if (r->nkeys > 1)
        return refuse(out, 400, "WebSocket protocol violation: multiple Sec-WebSocket-Key headers", NULL);
    const char *k = r->keys[0];
    size_t n = strlen(k);
    while (n && (k[n - 1] == ' ' || k[n - 1] == '\t'))
        n--;
    while (n && (*k == ' ' || *k == '\t'))
        k++, n--;
    if (!key_is_16_bytes(k, n)) {
        char trimmed[CS_STREAM_BODY_MAX / 4];
        snprintf(trimmed, sizeof trimmed, "%.*s", (int)n, k);
        return refuse(out, 400,
                      "WebSocket protocol violation: invalid Sec-WebSocket-Key %s, must be a 16 byte base64 "
                      "encoded string",
                      trimmed);
    }
    return 0;
}
