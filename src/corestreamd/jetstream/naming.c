/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/jetstream/naming.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "corestream/wire.h"
#include "wire/wire.h"

int cs_js_validate_stream_name(const char *name, cs_err *err)
{
    size_t n = strlen(name);
    bool ok = n >= 1 && n <= 32;
    for (size_t i = 0; ok && i < n; i++) {
        char c = name[i];
        ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    }
    if (!ok)
        return cs_err_set(err, 0, "--jetstream-stream \"%.64s\" must be 1 to 32 characters of A-Z a-z 0-9 _ -",
                          name);
    return 0;
}

void cs_js_run_id(char *out, size_t len, const char *kind, const char *defined_by)
{
    snprintf(out, len, "%.24s-%016llx", kind, (unsigned long long)XXH64(defined_by, strlen(defined_by), 0));
}

void cs_js_subject(char *out, size_t len, const char *stream, const char *run, uint32_t seq)
{
    snprintf(out, len, "%s.%s.%u", stream, run, seq);
}

void cs_js_run_filter(char *out, size_t len, const char *stream, const char *run)
{
    snprintf(out, len, "%s.%s.*", stream, run);
}

void cs_js_stream_subjects(char *out, size_t len, const char *stream)
{
    snprintf(out, len, "%s.>", stream);
}

int cs_js_msg_id(char *out, size_t len, const char *run, uint32_t seq, uint32_t item,
                 const uint8_t key[CS_JS_ID_KEY_LEN], uint64_t gen)
{
    char input[CS_JS_SUBJECT_MAX + 24];
    int n = snprintf(input, sizeof input, "%s:%u:%u:%llu", run, seq, item, (unsigned long long)gen);
    uint8_t mac[EVP_MAX_MD_SIZE];
    unsigned int maclen = 0;
    if (n <= 0 || (size_t)n >= sizeof input ||
        !HMAC(EVP_sha256(), key, CS_JS_ID_KEY_LEN, (const uint8_t *)input, (size_t)n, mac, &maclen) ||
        maclen < CS_JS_ID_TAG_HEX / 2)
        return -1;
    char tag[CS_JS_ID_TAG_HEX + 1];
    for (unsigned i = 0; i < CS_JS_ID_TAG_HEX / 2; i++)
        snprintf(tag + 2 * i, 3, "%02x", mac[i]);
    snprintf(out, len, "%s:%u:%u:%s", run, seq, item, tag);
    return 0;
}

int cs_js_pos_after(const uint8_t *msg, size_t len, cs_js_pos *next, cs_err *err)
{
    cs_wire_msg m;
    cs_err e;
    if (cs_wire_decode(msg, len, &m, &e) != 0)
        return cs_err_set(err, 0, "jetstream: last message of the run is not a wire message: %s", e.msg);
    switch (m.type) {
    case CS_WIRE_TYPE_BEGIN:
        *next = (cs_js_pos){m.seq, 1};
        return 0;
    case CS_WIRE_TYPE_CHUNK:
        if (m.chunk_idx > UINT32_MAX - 2)
            break;
        *next = (cs_js_pos){m.seq, m.chunk_idx + 2};
        return 0;
    case CS_WIRE_TYPE_SIG:
        *next = (cs_js_pos){m.seq, CS_JS_ITEM_END};
        return 0;
    default:
        if (m.seq == UINT32_MAX)
            break;
        *next = (cs_js_pos){m.seq + 1, 0};
        return 0;
    }
    return cs_err_set(err, 0, "jetstream: last message of the run is not a wire message: ledger %u has no successor",
                      m.seq);
}
