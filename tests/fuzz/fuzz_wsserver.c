/* libFuzzer target for the server's parser of what a subscriber sends
 * (corestreamd/net/wsserver.c) and for the request-head splitter in front of the routes
 * (httphead.c), both of untrusted input.
 *
 * Input: byte 0 picks the parser (even: frames, odd: a head), the rest is the input.
 * Frames, parsed as the TLS I/O thread does (frame after frame from the start, from an exact-size
 * heap copy so ASan sees any read past it). Checked:
 *  - a result never uses more than it was given; MORE and ERROR use nothing;
 *  - a control frame is at most 2 + 4 + 125 bytes, its payload inside the input, at most 125;
 *  - the verdict on a prefix agrees with the whole: a frame complete in a prefix is the same frame
 *    (same kind, length and unmasked payload) in the whole input; MORE on a prefix is never
 *    an ERROR the whole input does not also give.
 * Heads: the splitter never reads past the input; every field and pair it gives is a string within
 * its memory; the joined value of a name starts with its first value; the body verdict is the one
 * a plain reading of the fields gives; keep-alive only on HTTP/1.1. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "corestreamd/net/httphead.h"
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

/* The body and keep-alive verdicts against a plain reading of the same fields. */
static void body_and_keep_alive(const cs_http_head *h)
{
    bool te = false, cl_bad = false;
    int cls = 0;
    unsigned long long first = 0;
    for (size_t i = 0; i < h->nfields; i++) {
        if (strcasecmp(h->fields[i].name, "transfer-encoding") == 0)
            te = true;
        if (strcasecmp(h->fields[i].name, "content-length") != 0)
            continue;
        const char *v = h->fields[i].value;
        size_t n = strlen(v);
        bool digits = n > 0 && n <= 13 && strspn(v, "0123456789") == n;
        unsigned long long x = digits ? strtoull(v, NULL, 10) : 0;
        if (!digits || (cls && x != first))
            cl_bad = true;
        if (!cls)
            first = x;
        cls++;
    }
    cs_http_body want = te ? CS_HTTP_BODY_TRANSFER
                        : cl_bad ? CS_HTTP_BODY_INVALID
                        : cls && first > 0 ? CS_HTTP_BODY_LENGTH : CS_HTTP_BODY_NONE;
    check(cs_http_head_body(h) == want, "the body verdict");
    if (strcmp(h->version, "HTTP/1.1") != 0)
        check(!cs_http_head_keep_alive(h), "keep-alive only on HTTP/1.1");
    check(cs_http_head_keep_alive(h) == cs_http_head_keep_alive(h), "keep-alive is a function of the head");
}

static void head(const uint8_t *in, size_t len)
{
    char *buf = malloc(len ? len : 1);
    check(buf != NULL, "malloc");
    if (len)
        memcpy(buf, in, len);
    cs_http_head h;
    if (cs_http_head_parse(buf, len, &h) == 0) {
        check(h.method && h.path && h.version, "the request line's parts");
        for (size_t i = 0; i < h.nfields; i++) {
            check(strlen(h.fields[i].name) < len + 1 && strlen(h.fields[i].value) < len + 1, "fields are strings");
            char *all = cs_http_head_get(&h, h.fields[i].name);
            const char *first = cs_http_head_nth(&h, h.fields[i].name, 0);
            check(all && first && strncmp(all, first, strlen(first)) == 0, "the joined value starts with the first");
            free(all);
        }
        for (size_t i = 0; i < h.npairs; i++)
            check(cs_http_head_pair(&h, i) != NULL, "every pair counted is there");
        check(cs_http_head_pair(&h, h.npairs) == NULL, "no pair past the count");
        body_and_keep_alive(&h);
    }
    cs_http_head_free(&h);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        head(data + 1, size - 1);
    else
        frames(data + 1, size - 1);
    return 0;
}
