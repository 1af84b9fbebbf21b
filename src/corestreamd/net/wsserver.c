/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/net/wsserver.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/goquote.h"

size_t cs_wss_parse(uint8_t *buf, size_t len, cs_wss_frame *out)
{
    memset(out, 0, sizeof *out);
    out->kind = CS_WSS_MORE;
    if (len < 2)
        return 0;
    uint8_t b0 = buf[0], b1 = buf[1], op = b0 & 0x0f;
    out->opcode = op;
    if (b0 & 0x70) {
        out->kind = CS_WSS_ERROR;
        out->err = "RSV bits set";
        return 0;
    }
    if (!(b1 & 0x80)) {
        out->kind = CS_WSS_ERROR;
        out->err = "client frames must be masked";
        return 0;
    }
    uint64_t plen = b1 & 0x7f;
    size_t hl = 2 + (plen == 126 ? 2 : plen == 127 ? 8 : 0) + 4;
    if (op == 0x0 || op == 0x1 || op == 0x2) {
        if (len < hl)
            return 0;
        out->kind = CS_WSS_DATA; /* refused whatever its length: the payload is never read */
        return hl;
    }
    if (op != CS_WSS_OP_CLOSE && op != CS_WSS_OP_PING && op != CS_WSS_OP_PONG) {
        out->kind = CS_WSS_ERROR;
        out->err = "unknown opcode";
        return 0;
    }
    if (!(b0 & 0x80) || plen > CS_WSS_MAX_CONTROL) {
        out->kind = CS_WSS_ERROR;
        out->err = (b0 & 0x80) ? "control frame longer than 125 bytes" : "fragmented control frame";
        return 0;
    }
    if (len < hl + plen)
        return 0;
    uint8_t *mask = buf + 2, *p = buf + hl;
    for (size_t i = 0; i < plen; i++)
        p[i] ^= mask[i & 3];
    out->kind = CS_WSS_CONTROL;
    out->payload = plen ? p : NULL;
    out->len = (size_t)plen;
    return hl + (size_t)plen;
}

size_t cs_wss_control(uint8_t *out, uint8_t opcode, const uint8_t *payload, size_t len)
{
    if (len > CS_WSS_MAX_CONTROL)
        len = CS_WSS_MAX_CONTROL;
    out[0] = (uint8_t)(0x80 | opcode);
    out[1] = (uint8_t)len;
    if (len)
        memcpy(out + 2, payload, len);
    return 2 + len;
}

size_t cs_wss_close(uint8_t *out, int code, const char *reason)
{
    uint8_t pl[CS_WSS_MAX_CONTROL];
    size_t rl = reason ? strlen(reason) : 0;
    if (rl > CS_WSS_MAX_CONTROL - 2)
        rl = CS_WSS_MAX_CONTROL - 2;
    pl[0] = (uint8_t)(code >> 8);
    pl[1] = (uint8_t)code;
    if (rl)
        memcpy(pl + 2, reason, rl);
    return cs_wss_control(out, CS_WSS_OP_CLOSE, pl, 2 + rl);
}

static bool sendable(int code)
{
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999);
}

static bool utf8(const uint8_t *p, size_t n)
{
    while (n > 0) {
        uint32_t r;
        size_t w = cs_utf8_decode(p, n, &r);
        if (w == 1 && r == CS_RUNE_ERROR)
            return false;
        p += w;
        n -= w;
    }
    return true;
}

int cs_wss_close_answer(const uint8_t *payload, size_t len, char *buf, const char **reason)
{
    *reason = "";
    if (len == 0)
        return 0;
    if (len == 1) {
        *reason = "close payload of one byte";
        return 1002;
    }
    int code = payload[0] << 8 | payload[1];
    if (!sendable(code)) {
        snprintf(buf, 48, "close code %d may not be sent", code);
        *reason = buf;
        return 1002;
    }
    if (!utf8(payload + 2, len - 2)) {
        *reason = "close reason is not UTF-8";
        return 1007;
    }
    return code;
}
