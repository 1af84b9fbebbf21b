#include "corestreamd/net/httpanswer.h"

#include <string.h>

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
    case 411: return "Length Required";
    case 413: return "Request Entity Too Large";
    case 414: return "Request URI Too Long";
    case 426: return "Upgrade Required";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "";
    }
}

/* body, then suffix: content-length counts both. */
static void answer(cs_strbuf *out, unsigned status, const char *ctype, const char *body, const char *suffix,
                   unsigned extra)
{
    cs_strbuf_printf(out, "HTTP/1.1 %u %s\r\ncontent-type: %s\r\ncontent-length: %zu\r\n"
                          "x-content-type-options: nosniff\r\n",
                     status, cs_http_status_text(status), ctype, strlen(body) + strlen(suffix));
    if (extra & CS_ANS_UPGRADE)
        cs_strbuf_puts(out, "connection: Upgrade\r\nupgrade: websocket\r\n");
    if (extra & CS_ANS_WS_VERSION)
        cs_strbuf_puts(out, "sec-websocket-version: 13\r\n");
    if (extra & CS_ANS_BEARER)
        cs_strbuf_puts(out, "www-authenticate: Bearer realm=\"corestream\"\r\n");
    if (extra & CS_ANS_ALLOW)
        cs_strbuf_puts(out, "allow: GET, HEAD\r\n");
    if (extra & CS_ANS_TLS_REQUIRED)
        cs_strbuf_puts(out, CS_HTTP_TLS_REQUIRED_HEADER "\r\n");
    cs_strbuf_puts(out, "\r\n");
    if (!(extra & CS_ANS_NO_BODY)) {
        cs_strbuf_puts(out, body);
        cs_strbuf_puts(out, suffix);
    }
}

void cs_http_answer(cs_strbuf *out, unsigned status, const char *ctype, const char *body, unsigned extra)
{
    answer(out, status, ctype, body, "", extra);
}

void cs_http_answer_text(cs_strbuf *out, unsigned status, const char *msg, unsigned extra)
{
    answer(out, status, "text/plain; charset=utf-8", msg, "\n", extra);
}
