/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the server's parser of what a subscriber sends
 * (corestreamd/net/wsserver.c), untrusted input.
 *
 * Input: the frames, parsed as the stream I/O threads do (frame after frame from the start, from
 * an exact-size heap copy so ASan sees any read past it). Checked:
 *  - a result never uses more than it was given; MORE and ERROR use nothing;
 *  - a control frame is at most 2 + 4 + 125 bytes, its payload inside the input, at most 125;
 *  - the verdict on a prefix agrees with the whole: a frame complete in a prefix is the same frame
 *    (same kind, length and unmasked payload) in the whole input; MORE on a prefix is never
 *    an ERROR the whole input does not also give.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corestreamd/net/wsserver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_wsserver: property violated: %s\n", what);
        abort();
    }
}

static void frames(const uint8_t *in, size_t len)
{
    uint8_t *whole = malloc(len ? len : 1);
    check(whole != NULL, "malloc");
    if (len)
        memcpy(whole, in, len);
    size_t off = 0;
    for (int guard = 0; guard < 100000 && off < len; guard++) {
        /* The same frame from a copy cut one byte short of where the whole one ends. */
        cs_wss_frame f;
        size_t rest = len - off;
        uint8_t *copy = malloc(rest);
        check(copy != NULL, "malloc");
        memcpy(copy, whole + off, rest);
        size_t used = cs_wss_parse(whole + off, rest, &f);
        check(used <= rest, "uses no more than given");
        if (f.kind == CS_WSS_MORE || f.kind == CS_WSS_ERROR) {
            check(used == 0, "MORE and ERROR use nothing");
            check(f.kind != CS_WSS_ERROR || (f.err && f.err[0]), "an error says why");
            free(copy);
            break;
        }
        check(used >= 2, "a frame has a header");
        if (f.kind == CS_WSS_CONTROL) {
            check(used <= CS_WSS_MAX_FRAME, "a control frame is small");
            check(f.len <= CS_WSS_MAX_CONTROL, "a control payload is at most 125 bytes");
            check(f.len == 0 || (f.payload >= whole + off && f.payload + f.len == whole + off + used),
                  "the payload ends the frame, in place");
        }
        if (used > 2) {
            uint8_t *cut = malloc(used - 1);
            check(cut != NULL, "malloc");
            memcpy(cut, copy, used - 1);
            cs_wss_frame g;
            size_t u2 = cs_wss_parse(cut, used - 1, &g);
            check(g.kind == CS_WSS_MORE && u2 == 0, "a frame cut short asks for more");
            free(cut);
        }
        cs_wss_frame h;
        size_t u3 = cs_wss_parse(copy, used, &h); /* exactly the frame: the same verdict */
        check(u3 == used && h.kind == f.kind && h.len == f.len, "a frame alone parses the same");
        check(h.len == 0 || memcmp(h.payload, f.payload, h.len) == 0, "the same unmasked payload");
        free(copy);
        off += used;
    }
    free(whole);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    frames(data, size);
    return 0;
}
