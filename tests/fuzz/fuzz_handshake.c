/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the client's reading of the WebSocket handshake response
 * (remoteledger/handshake.c), for the key of RFC 6455's example.
 *
 * Input: byte 0 says how many split sizes follow (1-8), then those sizes; the rest is what the
 * server sends. The response is fed once whole and once in pieces of the given sizes in turn
 * (0: an empty feed, then one byte), each an exact-size heap copy so ASan sees reads past it.
 * Checked:
 *  - the outcome is the same whatever the split: still reading, failed with the same message, or
 *    done at the same offset;
 *  - a feed never reports using more than it got, and while reading it takes everything;
 *  - a completed head is a prefix of the input ending at its first blank line, with a 101 status
 *    and the Sec-WebSocket-Accept for the key (checked here independently of rli_hs_check);
 *  - a header value found in it (rli_hs_header, as the client reads X-Corestream-Run) lies inside
 *    the head, within one line, trimmed.
 *
 * Build and run: tests/fuzz/CMakeLists.txt (clang, -DCS_FUZZ=ON). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "remoteledger/handshake.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define KEY "dGhlIHNhbXBsZSBub25jZQ=="
#define ACCEPT "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" /* RFC 6455 1.3 */

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_handshake: property violated: %s\n", what);
        abort();
    }
}

typedef struct outcome {
    rli_hs_status st;
    size_t head_len; /* DONE: where the head ends in the stream */
    const char *err;
} outcome;

/* Feeds p[0..n) as an exact-size copy; returns true when the reader has decided. */
static bool feed(rli_hs_reader *r, const uint8_t *p, size_t n, size_t *offset, outcome *o)
{
    uint8_t *copy = malloc(n ? n : 1);
    check(copy != NULL, "malloc");
    if (n)
        memcpy(copy, p, n);
    size_t used = (size_t)-1;
    const char *err = NULL;
    rli_hs_status st = rli_hs_feed(r, copy, n, &used, KEY, &err);
    free(copy);
    check(st == RLI_HS_MORE || st == RLI_HS_DONE || st == RLI_HS_FAILED, "status");
    o->st = st;
    if (st == RLI_HS_MORE) {
        check(used == n, "while reading, all of the input is taken");
        *offset += n;
        return false;
    }
    if (st == RLI_HS_DONE) {
        check(used <= n, "used no more than was given");
        *offset += used;
        o->head_len = *offset;
        return true;
    }
    check(err && err[0], "a failure says why");
    o->err = err;
    return true;
}

static bool name_is(const char *p, size_t n, const char *name)
{
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    while (n && (*p == ' ' || *p == '\t')) {
        p++;
        n--;
    }
    return n == strlen(name) && strncasecmp(p, name, n) == 0;
}

/* The head is stream[0..len): one status line, header lines, the blank line last. */
static void check_accepted(const uint8_t *stream, size_t len)
{
    const char *h = (const char *)stream;
    check(len >= 2 && h[len - 1] == '\n', "the head ends with a line feed");
    check(h[len - 2] == '\n' || (len >= 3 && h[len - 2] == '\r' && h[len - 3] == '\n'),
          "the head ends with a blank line");
    check(len >= 5 && memcmp(h, "HTTP/", 5) == 0, "a status line");
    const char *sp = memchr(h, ' ', len);
    check(sp != NULL, "a status code");
    while ((size_t)(sp - h) < len && *sp == ' ')
        sp++;
    check((size_t)(sp - h) + 3 <= len && memcmp(sp, "101", 3) == 0, "status 101");
    bool accepted = false;
    const char *line = memchr(h, '\n', len) + 1;
    while (line < h + len) {
        const char *nl = memchr(line, '\n', (size_t)(h + len - line));
        size_t n = (size_t)(nl - line);
        if (n && line[n - 1] == '\r')
            n--;
        check(n > 0 || nl == h + len - 1, "no blank line before the end of the head");
        const char *colon = memchr(line, ':', n);
        if (colon && name_is(line, (size_t)(colon - line), "Sec-WebSocket-Accept") &&
            name_is(colon + 1, n - (size_t)(colon + 1 - line), ACCEPT))
            accepted = true;
        line = nl + 1;
    }
    check(accepted, "the accept for the key");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t nsplit = (size_t)(data[0] % 8) + 1;
    if (size < 1 + nsplit)
        return 0;
    const uint8_t *splits = data + 1;
    const uint8_t *stream = data + 1 + nsplit;
    size_t len = size - 1 - nsplit;

    rli_hs_reader *r = malloc(sizeof *r);
    check(r != NULL, "malloc");

    outcome whole = {0};
    size_t off = 0;
    rli_hs_reader_init(r);
    feed(r, stream, len, &off, &whole);

    outcome cut = {0};
    size_t pos = 0;
    off = 0;
    rli_hs_reader_init(r);
    bool decided = false;
    for (size_t i = 0; pos < len && !decided; i++) {
        size_t n = splits[i % nsplit];
        if (n == 0) {
            decided = feed(r, stream + pos, 0, &off, &cut);
            n = 1;
        }
        if (n > len - pos)
            n = len - pos;
        if (!decided)
            decided = feed(r, stream + pos, n, &off, &cut);
        pos += n;
    }

    check(whole.st == cut.st, "the same outcome whatever the split");
    if (whole.st == RLI_HS_FAILED)
        check(strcmp(whole.err, cut.err) == 0, "the same failure whatever the split");
    if (whole.st == RLI_HS_DONE) {
        check(whole.head_len == cut.head_len, "the head ends at the same byte whatever the split");
        check(whole.head_len <= RLI_HS_MAX_RESPONSE, "the head within its bound");
        check(memcmp(r->buf, stream, whole.head_len) == 0, "the head is what was sent");
        check_accepted(stream, whole.head_len);
    }

    /* The X-Corestream-Run lookup, on the head read and on the input as it is. */
    for (int k = 0; k < 2; k++) {
        const char *head = k == 0 ? r->buf : (const char *)stream;
        size_t hlen = k == 0 ? (whole.st == RLI_HS_DONE ? whole.head_len : 0) : len;
        const char *v = NULL;
        size_t vlen = 0;
        if (hlen && rli_hs_header(head, hlen, "X-Corestream-Run", &v, &vlen)) {
            check(v >= head && vlen <= hlen && (size_t)(v - head) <= hlen - vlen, "a header value inside the head");
            check(!memchr(v, '\n', vlen), "a header value within its line");
            check(vlen == 0 || (v[0] != ' ' && v[0] != '\t' && v[vlen - 1] != ' ' && v[vlen - 1] != '\t'),
                  "a header value trimmed");
        }
    }
    free(r);

    /* The checker on its own, on an exact-size buffer that need not be a head at all. */
    char *copy = malloc(len ? len : 1);
    check(copy != NULL, "malloc");
    if (len)
        memcpy(copy, stream, len);
    (void)rli_hs_check(copy, len, KEY);
    free(copy);
    return 0;
}
