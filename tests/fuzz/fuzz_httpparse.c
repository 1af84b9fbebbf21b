/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the one request parser (corestreamd/net/httpparse.h), which sees a
 * stranger's bytes before anything else does, and the head it makes (httphead.h).
 *
 * Input: byte 0 picks the limits' scale and the feeding step, the rest is what a peer sends.
 * Checked:
 *  - the verdict, head length and refusal are the same fed whole as fed in pieces;
 *  - a refusal has a status of 400, 414, 431 or 505 and a text; more than head_max bytes are
 *    never MORE;
 *  - a whole head is within the input and head_max and ends in CRLF CRLF; what it holds is what
 *    RFC 9112 allows: a method of tchars, a path of visible ASCII, HTTP/1.0 or HTTP/1.1, field
 *    names of tchars, values without control characters but tab, exactly one Host on HTTP/1.1;
 *  - the head made from it: every field and pair a string, the joined value of a name starting
 *    with its first, the body verdict the one a plain reading of the fields gives, keep-alive
 *    only on HTTP/1.1.
 *
 * Build and run: tests/fuzz/CMakeLists.txt (clang, -DCS_FUZZ=ON). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "corestreamd/net/httpparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_httpparse: property violated: %s\n", what);
        abort();
    }
}

static bool tchars(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              strchr("!#$%&'*+-.^_`|~", *s)))
            return false;
    return true;
}

static bool no_ctl(const char *s, bool tab)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c < 0x20 && !(tab && c == '\t')) || c == 0x7f)
            return false;
    }
    return true;
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

/* The head a whole parse found, against RFC 9112 and against itself. */
static void whole_head(const cs_http_parser *p, const char *buf, size_t len)
{
    check(p->head_len <= len && p->head_len <= p->lim.head_max && p->head_len >= 4, "the head is within");
    check(memcmp(buf + p->head_len - 4, "\r\n\r\n", 4) == 0, "the head ends in CRLF CRLF");
    cs_http_head h;
    if (cs_http_head_make(p, buf, &h) != 0) {
        cs_http_head_free(&h);
        return;
    }
    check(tchars(h.method) && strlen(h.method) <= 16, "a method of tchars");
    check(no_ctl(h.path, false) && !strchr(h.path, ' '), "a path of visible ASCII (empty before a query)");
    check(strcmp(h.version, "HTTP/1.1") == 0 || strcmp(h.version, "HTTP/1.0") == 0, "HTTP/1.0 or HTTP/1.1");
    size_t hosts = 0;
    for (size_t i = 0; i < h.nfields; i++) {
        check(tchars(h.fields[i].name), "field names of tchars");
        check(no_ctl(h.fields[i].value, true), "values without control characters");
        hosts += strcasecmp(h.fields[i].name, "host") == 0;
        char *all = cs_http_head_get(&h, h.fields[i].name);
        const char *first = cs_http_head_nth(&h, h.fields[i].name, 0);
        check(all && first && strncmp(all, first, strlen(first)) == 0, "the joined value starts with the first");
        free(all);
    }
    check(hosts == 1 || (hosts == 0 && strcmp(h.version, "HTTP/1.0") == 0), "one Host");
    for (size_t i = 0; i < h.npairs; i++)
        check(cs_http_head_pair(&h, i) != NULL, "every pair counted is there");
    check(cs_http_head_pair(&h, h.npairs) == NULL, "no pair past the count");
    body_and_keep_alive(&h);
    cs_http_head_free(&h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned sel = data[0];
    size_t len = size - 1;
    char *buf = malloc(len ? len : 1); /* an exact-size copy: ASan sees a read past it */
    check(buf != NULL, "malloc");
    if (len)
        memcpy(buf, data + 1, len);
    cs_head_limits lim = {.uri_max = 8 + (sel & 7) * 64,
                          .head_max = 16 + ((sel >> 3) & 3) * 512,
                          .fields_max = 1 + ((sel >> 5) & 7) * 4,
                          .pairs_max = 1 + (sel & 3) * 8};
    size_t step = 1 + (sel % 5);
    cs_http_parser a, b;
    cs_http_parser_init(&a, &lim);
    cs_http_parser_init(&b, &lim);
    cs_http_verdict whole = cs_http_parser_feed(&a, buf, len);
    cs_http_verdict piece = CS_HTTP_MORE;
    for (size_t i = 0; i < len && piece == CS_HTTP_MORE;) {
        i = i + step > len ? len : i + step;
        piece = cs_http_parser_feed(&b, buf, i);
    }
    check(whole == piece && a.head_len == b.head_len && a.status == b.status && a.why == b.why,
          "whole and in pieces agree");
    if (whole == CS_HTTP_REFUSE)
        check((a.status == 400 || a.status == 414 || a.status == 431 || a.status == 505) && a.why && *a.why,
              "a refusal has a status and a text");
    if (whole == CS_HTTP_MORE)
        check(len <= lim.head_max, "past head_max is never MORE");
    if (whole == CS_HTTP_DONE)
        whole_head(&a, buf, len);
    free(buf);
    return 0;
}
