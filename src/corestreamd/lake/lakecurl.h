/* SPDX-License-Identifier: Apache-2.0 */
/* libcurl's global set-up, once per process, for the lake's HTTP clients (lakereader.c, lakes3.c).
 * Any thread. */
#ifndef CS_LAKE_LAKECURL_H
#define CS_LAKE_LAKECURL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True once curl_global_init has succeeded (it runs at the first call). */
bool cs_lake_curl_ready(void);

/* A body being received: p grows (malloc'd, the caller frees it) up to max bytes; over is set,
 * and the transfer ended, when more came. */
typedef struct cs_lake_body {
    uint8_t *p;
    size_t len, cap, max;
    bool over;
} cs_lake_body;

/* CURLOPT_WRITEFUNCTION for a cs_lake_body (CURLOPT_WRITEDATA). */
size_t cs_lake_body_write(char *data, size_t size, size_t n, void *body);

#endif
