/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger internals: asking a corestreamd for its retained bounds (GET /healthz), the
 * request and the reading of the answer, independent of the transport.
 *
 * The answer is corestreamd's one-line JSON, {"oldest":O,"latest":L,...}: only those two numbers
 * are read, wherever they are in the object, so fields added later change nothing. The head is
 * HTTP/1.x; the body ends at Content-Length, or at the end of the stream without one (the request
 * says Connection: close). Everything is bounded: a head over RLI_HZ_MAX_ANSWER bytes, or a body
 * that would pass it, is an error. */
#ifndef RLI_HEALTHZ_H
#define RLI_HEALTHZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RLI_HZ_MAX_ANSWER 65536 /* bound on the whole answer, head and body */

/* The request target for a stream URL's escaped path: its last segment replaced by "healthz"
 * ("/stream" -> "/healthz", "/core/stream" -> "/core/healthz"), malloc'd; NULL when out of
 * memory. */
char *rli_hz_target(const char *path);

/* Writes the GET for target on host into out[0..cap), snprintf style (returns the full length).
 * token: sent as "Authorization: Bearer <token>" when not NULL or "". */
size_t rli_hz_request(char *out, size_t cap, const char *target, const char *host, const char *token);

typedef enum rli_hz_status {
    RLI_HZ_MORE = 0,   /* incomplete: read more (never when eof) */
    RLI_HZ_DONE = 1,   /* *status is the HTTP status; when 200, *oldest and *latest are set */
    RLI_HZ_FAILED = -1 /* *why says what is wrong with the answer */
} rli_hz_status;

/* Reads the answer so far, buf[0..len): eof says the stream has ended. */
rli_hz_status rli_hz_parse(const char *buf, size_t len, bool eof, int *status, uint32_t *oldest, uint32_t *latest,
                           const char **why);

#endif
