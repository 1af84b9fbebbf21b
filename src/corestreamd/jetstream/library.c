/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/jetstream/library.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static natsStatus opened = NATS_OK;

static void open_once(void)
{
    opened = nats_Open(0);
}

natsStatus cs_js_library_open(void)
{
    pthread_once(&once, open_once);
    return opened;
}

/* nats.c's own encoder of the signature it sends in CONNECT (base64, URL alphabet, no padding),
 * corrected. nats.c 3.4.1 (Debian 12's libnats3.4) starts it with `if (nats_IsStringEmpty(src))
 * return NATS_OK`, leaving *pDest NULL: it takes the 64-byte Ed25519 signature of the server's
 * nonce for a C string, so a signature whose first byte is 0x00 (one in 256) is "empty", and
 * CONNECT goes out with the nkey (or the user JWT of a .creds file) and no "sig". nats-server logs
 * "Signature missing" (at debug) and refuses the client: `authentication error - Nkey "U..."`,
 * `-ERR 'Authorization Violation'`. Later nats.c releases test srcLen instead.
 *
 * libnats exports the function and calls it through its PLT, so this definition in the program
 * takes precedence over the library's (the program's dynamic symbols come first in the lookup);
 * it is linked into every program that calls cs_js_library_open, corestreamd and the tests that
 * connect with nkeys. Same contract: NATS_OK with *pDest NULL for no input, else a NUL-terminated
 * string nats.c frees with free(). test_js_connect holds a nonce whose signature begins with 0x00
 * and checks that CONNECT carries it, through the library's own call. */
natsStatus nats_Base64RawURL_EncodeString(const unsigned char *src, int srcLen, char **pDest);

natsStatus nats_Base64RawURL_EncodeString(const unsigned char *src, int srcLen, char **pDest)
{
    static const char map[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    *pDest = NULL;
    if (!src || srcLen <= 0)
        return NATS_OK;
    size_t n = (size_t)srcLen;
    char *dst = malloc((n * 8 + 5) / 6 + 1);
    if (!dst)
        return NATS_NO_MEMORY;
    size_t o = 0, i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)src[i] << 16 | (uint32_t)src[i + 1] << 8 | src[i + 2];
        dst[o++] = map[v >> 18 & 63];
        dst[o++] = map[v >> 12 & 63];
        dst[o++] = map[v >> 6 & 63];
        dst[o++] = map[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)src[i] << 16 | (i + 1 < n ? (uint32_t)src[i + 1] << 8 : 0);
        dst[o++] = map[v >> 18 & 63];
        dst[o++] = map[v >> 12 & 63];
        if (i + 1 < n)
            dst[o++] = map[v >> 6 & 63];
    }
    dst[o] = '\0';
    *pDest = dst;
    return NATS_OK;
}
