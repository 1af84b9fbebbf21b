/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger internals: GET /healthz and its answer. See healthz.h. */
#include "remoteledger/healthz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "remoteledger/handshake.h"

char *rli_hz_target(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t keep = slash ? (size_t)(slash - path) + 1 : 0;
    char *t = malloc(keep + sizeof "/healthz");
    if (!t)
        return NULL;
    if (keep == 0)
        t[keep++] = '/';
    else
        memcpy(t, path, keep);
    memcpy(t + keep, "healthz", sizeof "healthz");
    return t;
}

size_t rli_hz_request(char *out, size_t cap, const char *target, const char *host, const char *token)
{
    bool auth = token && *token;
    int n = snprintf(out, cap,
                     "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\n%s%s%sConnection: close\r\n\r\n",
                     target, host, auth ? "Authorization: Bearer " : "", auth ? token : "", auth ? "\r\n" : "");
    return n < 0 ? 0 : (size_t)n;
}

/* The end of the head (just past its blank line) in buf[0..len), or 0 when it is not complete. */
static size_t head_end(const char *buf, size_t len)
{
    for (size_t i = 0; i + 3 < len; i++)
        if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n')
            return i + 4;
    return 0;
}

/* A Content-Length header's value in the head: 1 with *n, 0 when there is none, -1 when it is
 * not a number (or several disagree). */
static int content_length(const char *head, size_t len, size_t *n)
{
    static const char name[] = "content-length:";
    int found = 0;
    for (size_t i = 0; i < len;) {
        const char *eol = memchr(head + i, '\n', len - i);
        size_t line_len = eol ? (size_t)(eol - (head + i)) : len - i;
        if (line_len >= sizeof name - 1 && strncasecmp(head + i, name, sizeof name - 1) == 0) {
            size_t j = i + sizeof name - 1, end = i + line_len;
            while (j < end && (head[j] == ' ' || head[j] == '\t'))
                j++;
            size_t v = 0, digits = 0;
            for (; j < end && head[j] >= '0' && head[j] <= '9'; j++, digits++) {
                if (v > RLI_HZ_MAX_ANSWER)
                    return -1;
                v = v * 10 + (size_t)(head[j] - '0');
            }
            while (j < end && (head[j] == ' ' || head[j] == '\t' || head[j] == '\r'))
                j++;
            if (digits == 0 || j != end || (found && v != *n))
                return -1;
            *n = v;
            found = 1;
        }
        i += line_len + 1;
    }
    return found;
}

/* The unsigned 32-bit number after "key": in body[0..len): true with *v. */
static bool field(const char *body, size_t len, const char *key, uint32_t *v)
{
    size_t klen = strlen(key);
    for (size_t i = 0; i + klen <= len; i++) {
        if (memcmp(body + i, key, klen) != 0)
            continue;
        size_t j = i + klen;
        while (j < len && (body[j] == ' ' || body[j] == '\t'))
            j++;
        if (j >= len || body[j] != ':')
            continue;
        j++;
        while (j < len && (body[j] == ' ' || body[j] == '\t'))
            j++;
        uint64_t x = 0;
        size_t digits = 0;
        for (; j < len && body[j] >= '0' && body[j] <= '9'; j++, digits++) {
            x = x * 10 + (uint64_t)(body[j] - '0');
            if (x > UINT32_MAX)
                return false;
        }
        if (digits == 0)
            return false;
        *v = (uint32_t)x;
        return true;
    }
    return false;
}

rli_hz_status rli_hz_parse(const char *buf, size_t len, bool eof, int *status, uint32_t *oldest, uint32_t *latest,
                           const char **why)
{
    size_t h = head_end(buf, len);
    if (h == 0) {
        if (len >= RLI_HZ_MAX_ANSWER) {
            *why = "the answer's head is too long";
            return RLI_HZ_FAILED;
        }
        if (eof) {
            *why = len ? "the answer ended inside its head" : "the server closed without answering";
            return RLI_HZ_FAILED;
        }
        return RLI_HZ_MORE;
    }
    *status = rli_hs_status_code(buf, h);
    if (*status < 0) {
        *why = "the answer is not HTTP";
        return RLI_HZ_FAILED;
    }
    if (*status != 200)
        return RLI_HZ_DONE; /* the body does not matter */
    size_t cl = 0, body_len = len - h;
    int has_cl = content_length(buf, h, &cl);
    if (has_cl < 0 || (has_cl && h + cl > RLI_HZ_MAX_ANSWER)) {
        *why = "the answer's Content-Length is unusable";
        return RLI_HZ_FAILED;
    }
    if (has_cl && body_len < cl) {
        if (eof) {
            *why = "the answer ended inside its body";
            return RLI_HZ_FAILED;
        }
        return RLI_HZ_MORE;
    }
    if (!has_cl && !eof) {
        if (len >= RLI_HZ_MAX_ANSWER) {
            *why = "the answer is too long";
            return RLI_HZ_FAILED;
        }
        return RLI_HZ_MORE;
    }
    if (has_cl)
        body_len = cl;
    if (!field(buf + h, body_len, "\"oldest\"", oldest) || !field(buf + h, body_len, "\"latest\"", latest)) {
        *why = "the answer has no \"oldest\" and \"latest\" numbers";
        return RLI_HZ_FAILED;
    }
    return RLI_HZ_DONE;
}
