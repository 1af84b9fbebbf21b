/* SPDX-License-Identifier: Apache-2.0 */
/* Sec-WebSocket-Accept: see wsaccept.h. */
#include "wire/wsaccept.h"

#include <openssl/evp.h>
#include <openssl/sha.h>
#include <string.h>

void cs_ws_accept(const char *key, size_t key_len, char out[CS_WS_ACCEPT_LEN + 1])
{
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    uint8_t md[SHA_DIGEST_LENGTH];
    unsigned mdlen = 0;
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    if (!c || EVP_DigestInit_ex(c, EVP_sha1(), NULL) != 1 || EVP_DigestUpdate(c, key, key_len) != 1 ||
        EVP_DigestUpdate(c, guid, sizeof guid - 1) != 1 || EVP_DigestFinal_ex(c, md, &mdlen) != 1)
        memset(md, 0, sizeof md);
    EVP_MD_CTX_free(c);
    EVP_EncodeBlock((unsigned char *)out, md, SHA_DIGEST_LENGTH); /* 28 characters and a NUL */
}
