/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/net/httpanswer.h"

#include <string.h>
#include <time.h>

const char *cs_http_status_text(unsigned status)
{
    switch (status) {
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Request Entity Too Large";
    case 414: return "Request URI Too Long";
    case 426: return "Upgrade Required";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "";
    }
}

/* The status line and the headers, through the empty line. */
static void head(cs_strbuf *out, unsigned status, const char *ctype, size_t len, const cs_http_meta *m, unsigned extra)
{
    cs_strbuf_printf(out, "HTTP/1.1 %u %s\r\ncontent-type: %s\r\ncontent-length: %zu\r\n"
                          "x-content-type-options: nosniff\r\n",
                     status, cs_http_status_text(status), ctype, len);
    if (extra & CS_ANS_UPGRADE)
        cs_strbuf_puts(out, extra & CS_ANS_CLOSE ? "connection: Upgrade, close\r\nupgrade: websocket\r\n"
                                                 : "connection: Upgrade\r\nupgrade: websocket\r\n");
    else if (extra & CS_ANS_CLOSE)
        cs_strbuf_puts(out, "connection: close\r\n");
    if (extra & CS_ANS_WS_VERSION)
        cs_strbuf_puts(out, "sec-websocket-version: 13\r\n");
    if (extra & CS_ANS_BEARER)
        cs_strbuf_puts(out, "www-authenticate: Bearer realm=\"corestream\"\r\n");
    if (extra & CS_ANS_ALLOW)
        cs_strbuf_puts(out, "allow: GET, HEAD\r\n");
    if (extra & CS_ANS_TLS_REQUIRED)
        cs_strbuf_puts(out, CS_HTTP_TLS_REQUIRED_HEADER "\r\n");
    if (m && m->etag)
        cs_strbuf_printf(out, "etag: %s\r\n", m->etag);
    if (m && m->last_modified > 0) {
        char date[40];
        time_t t = (time_t)m->last_modified;
        struct tm tm;
        if (gmtime_r(&t, &tm) && strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm) > 0)
            cs_strbuf_printf(out, "last-modified: %s\r\n", date); /* C locale: English names */
    }
    if (m && m->retry_after)
        cs_strbuf_printf(out, "retry-after: %u\r\n", m->retry_after);
    if (m && m->cache)
        cs_strbuf_printf(out, "cache-control: %s\r\n", m->cache);
    cs_strbuf_puts(out, "\r\n");
}

void cs_http_answer_bytes(cs_strbuf *out, unsigned status, const char *ctype, const void *body, size_t len,
                          const cs_http_meta *meta, unsigned extra)
{
    head(out, status, ctype, len, meta, extra);
    if (!(extra & CS_ANS_NO_BODY))
        cs_strbuf_put(out, body, len);
}

void cs_http_answer(cs_strbuf *out, unsigned status, const char *ctype, const char *body, unsigned extra)
{
    cs_http_answer_bytes(out, status, ctype, body, strlen(body), NULL, extra);
}

void cs_http_answer_101(cs_strbuf *out, const char *accept, const cs_http_header *extra, size_t n)
{
    cs_strbuf_printf(out, "HTTP/1.1 101 %s\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: %s\r\n",
                     cs_http_status_text(101), accept);
    for (size_t i = 0; i < n; i++)
        cs_strbuf_printf(out, "%s: %s\r\n", extra[i].name, extra[i].value);
    cs_strbuf_puts(out, "\r\n");
}

void cs_http_answer_text(cs_strbuf *out, unsigned status, const char *msg, unsigned extra)
{
    size_t n = strlen(msg);
    head(out, status, "text/plain; charset=utf-8", n + 1, NULL, extra);
    if (!(extra & CS_ANS_NO_BODY)) {
        cs_strbuf_put(out, msg, n);
        cs_strbuf_putc(out, '\n');
    }
}
