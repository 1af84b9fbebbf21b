/* The /stream query rules (PORTSPEC 1.5), checked before the WebSocket upgrade. */
#ifndef CS_CORESTREAMD_REQUEST_H
#define CS_CORESTREAMD_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct cs_stream_request {
    uint32_t start; /* 0 = the next live ledger */
    uint32_t end;
    bool bounded;
} cs_stream_request;

/* args are the decoded query pairs in order ("start=5", "end=", "token=abc"). Only the first value
 * of each parameter counts, and an empty value means absent. Values are base-10 uint32 (no sign,
 * no spaces; leading zeros allowed). Errors, in this order, are the 400 bodies:
 * `invalid start parameter "<v>"`, `invalid end parameter "<v>"`, `invalid end parameter: 0`,
 * `ledger 4294967295 is the last representable sequence and is not streamable`,
 * `end E is before start S`. */
int cs_stream_request_parse(const char *const *args, size_t nargs, cs_stream_request *out, cs_err *err);

#endif
