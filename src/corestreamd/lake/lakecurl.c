#include "corestreamd/lake/lakecurl.h"

#include <pthread.h>

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
