/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/lake/lakecurl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static CURLcode g_init;

static void init_once(void)
{
    g_init = curl_global_init(CURL_GLOBAL_DEFAULT);
}

bool cs_lake_curl_ready(void)
{
    pthread_once(&g_once, init_once);
    return g_init == CURLE_OK;
}

size_t cs_lake_body_write(char *data, size_t size, size_t n, void *arg)
{
    cs_lake_body *b = arg;
    size_t k = size * n;
    if (b->len + k > b->max) {
        b->over = true;
        return 0;
    }
    if (b->cap - b->len < k) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap - b->len < k)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p)
            return 0;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, k);
    b->len += k;
    return k;
}
