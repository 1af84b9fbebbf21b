#include "corestreamd/net/headscan.h"

/* A method longer than this is no method at all: the bytes are not HTTP. */
#define METHOD_MAX 16

cs_head_verdict cs_head_scan_feed(cs_head_scan *sc, const char *buf, size_t len, const cs_head_limits *lim,
                                  size_t *head_len)
{
    if (len > 0 && sc->pos == 0 && !(buf[0] >= 'A' && buf[0] <= 'Z'))
        return CS_HEAD_NOT_HTTP;
    for (; sc->pos < len; sc->pos++) {
        if (sc->pos + 1 > lim->head_max)
            return CS_HEAD_TOO_LARGE; /* the head is longer than this byte's offset already */
        char c = buf[sc->pos];
        if (!sc->line1_done) {
            if (c == '\n') {
                sc->line1_done = true;
                sc->in_target = false;
                sc->line_start = sc->pos + 1;
                continue;
            }
            if (!sc->target_start) {
                if (c == ' ') {
                    sc->target_start = sc->pos + 1;
                    sc->in_target = true;
                } else if (sc->pos >= METHOD_MAX) {
                    return CS_HEAD_NOT_HTTP;
                }
                continue;
            }
            if (sc->in_target) {
                if (c == ' ' || c == '\r') {
                    sc->in_target = false;
                    continue;
                }
                if (++sc->target_len > lim->uri_max)
                    return CS_HEAD_URI_TOO_LONG;
                if (c == '?' && !sc->in_query) {
                    sc->in_query = true;
                    sc->pairs = 1;
                } else if (c == '&' && sc->in_query && ++sc->pairs > lim->pairs_max) {
                    return CS_HEAD_TOO_MANY_PAIRS;
                }
            }
        } else if (c == '\n') {
            size_t n = sc->pos - sc->line_start; /* the line's bytes before its LF */
            if (n == 0 || (n == 1 && buf[sc->line_start] == '\r')) {
                *head_len = sc->pos + 1;
                sc->pos++;
                return CS_HEAD_DONE;
            }
            if (++sc->fields > lim->fields_max)
                return CS_HEAD_TOO_LARGE;
            sc->line_start = sc->pos + 1;
        }
    }
    return CS_HEAD_MORE;
}
