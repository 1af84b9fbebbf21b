/* The /stream query rules (PORTSPEC 1.5) and the Origin rule, checked before the WebSocket
 * upgrade. */
#ifndef CS_CORESTREAMD_REQUEST_H
#define CS_CORESTREAMD_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cs_stream_request {
    uint32_t start; /* 0 = the next live ledger */
    uint32_t end;
    bool bounded;
} cs_stream_request;

/* The decoded query bytes the server reads (pairs NUL-terminated); the rest of a longer query is
 * dropped. */
#define CS_QUERY_MAX 4096
/* The longest 400 body: a whole query's worth of value with every byte quoted as \xNN, in its
 * sentence. */
#define CS_STREAM_BODY_MAX (4 * CS_QUERY_MAX + 64)

/* A 400 body, never cut: as in Go, an invalid value is quoted whole, however long (cs_err's
 * message would cut it, mid-escape, at CS_ERR_MSG_MAX). */
typedef struct cs_stream_error {
    char body[CS_STREAM_BODY_MAX];
} cs_stream_error;

/* args are the decoded query pairs in order ("start=5", "end=", "token=abc"). Only the first value
 * of each parameter counts, and an empty value means absent. Values are base-10 uint32 (no sign,
 * no spaces; leading zeros allowed). Errors, in this order, are the 400 bodies:
 * `invalid start parameter "<v>"`, `invalid end parameter "<v>"`, `invalid end parameter: 0`,
 * `ledger 4294967295 is the last representable sequence and is not streamable`,
 * `end E is before start S`. err may be NULL. Values of up to CS_QUERY_MAX bytes in all are quoted
 * whole; a longer one is cut at the end of the body. */
int cs_stream_request_parse(const char *const *args, size_t nargs, cs_stream_request *out,
                            cs_stream_error *err);

/* The Origin rule of the prototype's WebSocket library: an empty origin (no header) passes;
 * otherwise its host, what follows "://" up to the next '/', must equal host without regard to
 * ASCII case. Returns 0 to allow, or -1 with the 403 body in msg (cut to mlen like snprintf):
 * `request Origin "<origin>" is not a valid URL with a host` or
 * `request Origin "<origin>" is not authorized for Host "<host>"`. */
int cs_check_origin(const char *origin, const char *host, char *msg, size_t mlen);

#endif
