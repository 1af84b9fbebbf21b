/* libcurl's global set-up, once per process, for the lake's HTTP clients (lakereader.c, lakes3.c).
 * Any thread. */
#ifndef CS_LAKE_LAKECURL_H
#define CS_LAKE_LAKECURL_H

#include <stdbool.h>

/* True once curl_global_init has succeeded (it runs at the first call). */
bool cs_lake_curl_ready(void);

#endif
