/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/net/httphead.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/tokenlist.h"

void cs_http_head_free(cs_http_head *h)
{
    free(h->mem);
    h->mem = NULL;
}

const char *cs_http_head_nth(const cs_http_head *h, const char *name, size_t i)
{
    for (size_t k = 0; k < h->nfields; k++)
        if (strcasecmp(h->fields[k].name, name) == 0 && i-- == 0)
            return h->fields[k].value;
    return NULL;
}

char *cs_http_head_get(const cs_http_head *h, const char *name)
{
    size_t n = 0;
    for (size_t k = 0; k < h->nfields; k++)
        if (strcasecmp(h->fields[k].name, name) == 0)
            n += strlen(h->fields[k].value) + 1;
    char *v = malloc(n + 1), *w = v;
    if (!v)
        return NULL;
    for (size_t k = 0; k < h->nfields; k++)
        if (strcasecmp(h->fields[k].name, name) == 0) {
            if (w != v)
                *w++ = ',';
            size_t l = strlen(h->fields[k].value);
            memcpy(w, h->fields[k].value, l);
            w += l;
        }
    *w = '\0';
    return v;
}

const char *cs_http_head_pair(const cs_http_head *h, size_t i)
{
    if (i >= h->npairs)
        return NULL;
    const char *p = h->query;
    while (i--)
        p += strlen(p) + 1;
    return p;
}

cs_http_body cs_http_head_body(const cs_http_head *h)
{
    if (cs_http_head_nth(h, "transfer-encoding", 0))
        return CS_HTTP_BODY_TRANSFER;
    unsigned long long total = 0;
    bool seen = false;
    for (size_t i = 0;; i++) {
        const char *v = cs_http_head_nth(h, "content-length", i);
        if (!v)
            break;
        unsigned long long n = 0;
        size_t k = 0;
        for (; v[k] >= '0' && v[k] <= '9' && k < 13; k++)
            n = n * 10 + (unsigned)(v[k] - '0');
        if (k == 0 || v[k] != '\0' || (seen && n != total))
            return CS_HTTP_BODY_INVALID;
        total = n;
        seen = true;
    }
    return total > 0 ? CS_HTTP_BODY_LENGTH : CS_HTTP_BODY_NONE;
}

bool cs_http_head_keep_alive(const cs_http_head *h)
{
    if (strcmp(h->version, "HTTP/1.1") != 0)
        return false;
    for (size_t i = 0;; i++) {
        const char *v = cs_http_head_nth(h, "connection", i);
        if (!v)
            return true;
        if (cs_list_has_token(v, strlen(v), "close"))
            return false;
    }
}
