/* Finds where an HTTP/1 request head ends and judges it against the server's own limits while it
 * arrives, so that a head past them is answered (414, 431, 400) without being held whole. This is
 * not a parser of the request: it reads the request line's request-target length, counts header
 * lines and query pairs and looks for the empty line; httphead.h splits a complete head.
 *
 * Incremental: feed the whole buffer received so far each time; bytes already examined are not
 * looked at again, so a head that trickles in a byte at a time costs O(length). Pure, any thread. */
#ifndef CS_CORESTREAMD_HEADSCAN_H
#define CS_CORESTREAMD_HEADSCAN_H

#include <stdbool.h>
#include <stddef.h>

typedef struct cs_head_limits {
    size_t uri_max;    /* request-target bytes; more: CS_HEAD_URI_TOO_LONG */
    size_t head_max;   /* request line, header lines and the empty line; more: CS_HEAD_TOO_LARGE */
    size_t fields_max; /* header lines; more: CS_HEAD_TOO_LARGE */
    size_t pairs_max;  /* query pairs ('&'-separated pieces after '?'); more: CS_HEAD_TOO_MANY_PAIRS */
} cs_head_limits;

typedef enum cs_head_verdict {
    CS_HEAD_MORE,         /* no end yet and no limit passed: read on */
    CS_HEAD_DONE,         /* the head ends at *head_len, within every limit */
    CS_HEAD_URI_TOO_LONG, /* answer 414 */
    CS_HEAD_TOO_LARGE,    /* answer 431 */
    CS_HEAD_TOO_MANY_PAIRS, /* answer 400 `too many query parameters` */
    CS_HEAD_NOT_HTTP,     /* does not start like a request line (a TLS ClientHello, say): 400 */
} cs_head_verdict;

/* The scan so far; zero it (CS_HEAD_SCAN_INIT) before the first byte. */
typedef struct cs_head_scan {
    size_t pos;          /* bytes examined */
    size_t line_start;   /* offset where the current line starts */
    size_t target_start; /* offset after the request line's first space; 0: none yet */
    size_t target_len;   /* bytes of the request-target so far */
    bool in_target;
    bool in_query; /* past the target's '?' */
    size_t pairs;  /* query pairs so far */
    bool line1_done; /* the request line is complete */
    size_t fields;   /* header lines so far */
} cs_head_scan;

#define CS_HEAD_SCAN_INIT {0}

/* Examines buf[sc->pos..len) (buf[0..len) is everything received, the same bytes as before plus
 * new ones). On CS_HEAD_DONE, *head_len is the head's length including the empty line; bytes after
 * it are the request's (or WebSocket frames sent early). Any verdict but CS_HEAD_MORE is final:
 * calling again after it is not allowed. The request line's limits (URI length, query pairs)
 * are met first, as the line comes first: 414 wins over 431 on a head that passes both. */
cs_head_verdict cs_head_scan_feed(cs_head_scan *sc, const char *buf, size_t len, const cs_head_limits *lim,
                                  size_t *head_len);

#endif
