/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the server's parsing of request bytes that need no server: the
 * /stream query rules (cs_stream_request_parse), the Origin/Host check (cs_check_origin) and the
 * peer address formatting (cs_format_sockaddr) that names a subscriber in logs.
 *
 * Input: byte 0 picks the parser (mod 4), the rest feeds it.
 *  0  query pairs, split on '&' and NUL (at most 32, as the server reads them), each an exact-size
 *     heap string. The answer must be the one PORTSPEC 1.5 gives (request.h): the documented 400
 *     body for the first failing rule, byte for byte with the value quoted whole, or a
 *     request with start != 4294967295 and, when bounded, 0 < end != 4294967295 and end >= start
 *     unless start is 0, and sig as its first value says (0, 1 or absent; anything else is the
 *     last 400); the same answer twice and with a NULL err.
 *  1  "origin\nhost": allowed exactly when the origin is empty or its host matches Host without
 *     regard to ASCII case; otherwise the documented 403 body, cut like snprintf to any length.
 *  2  family, port and address bytes: the formatted "ip:port" / "[ip6]:port" parses back to the
 *     same address and port, and a short buffer gets a NUL-terminated prefix of it.
 *  3  "method\nversion\nconnection\nupgrade\nws-version\nkey..." for the handshake rules
 *     (cs_upgrade_check): a refusal has one of the documented statuses and sentences; an accepted
 *     handshake really is a GET over HTTP/1.1 or later with an Upgrade token in Connection, a
 *     websocket token in Upgrade, version 13 and exactly one 24-character key; the same answer
 *     twice.
 *
 * Build and run: tests/fuzz/CMakeLists.txt (clang, -DCS_FUZZ=ON). */
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/goquote.h"
#include "corestream/wire.h"
#include "corestreamd/net/listener.h"
#include "corestreamd/net/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_QUERY_ARGS 32 /* as in server.c */
#define REMOTE_LEN 64     /* a subscriber's remote[] in server.c */

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_request: property violated: %s\n", what);
        abort();
    }
}

/* ---- the query --------------------------------------------------------------------------- */

/* url.Values.Get: the first pair named name; an empty value is absent. */
static const char *first_value(char **args, size_t n, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i < n; i++) {
        if (strncmp(args[i], name, nl) == 0 && (args[i][nl] == '=' || args[i][nl] == '\0'))
            return args[i][nl] == '=' && args[i][nl + 1] ? args[i] + nl + 1 : NULL;
    }
    return NULL;
}

/* strconv.ParseUint(v, 10, 32), checked on the digit string rather than by arithmetic. */
static bool oracle_u32(const char *v, uint32_t *out)
{
    size_t n = strlen(v);
    if (n == 0 || strspn(v, "0123456789") != n)
        return false;
    while (n > 1 && *v == '0')
        v++, n--;
    if (n > 10 || (n == 10 && strcmp(v, "4294967295") > 0))
        return false;
    *out = (uint32_t)strtoul(v, NULL, 10);
    return true;
}

/* The expected 400 body in want (NUL-terminated, malloc'd), or NULL with the expected request. */
static char *oracle_request(char **args, size_t n, cs_stream_request *want)
{
    memset(want, 0, sizeof *want);
    const char *sv = first_value(args, n, "start"), *ev = first_value(args, n, "end");
    const char *which = NULL, *bad = NULL, *sig = NULL;
    if (sv && !oracle_u32(sv, &want->start))
        which = "start", bad = sv;
    else if (ev && !oracle_u32(ev, &want->end))
        which = "end", bad = ev;
    /* The fixed bodies are under 100 bytes; a quoted value is as long as Go's quoting makes it. */
    size_t qn = bad ? cs_go_quote(NULL, 0, bad) : 0;
    char *body = malloc(qn + 100);
    check(body != NULL, "malloc");
    if (which) {
        int k = sprintf(body, "invalid %s parameter ", which);
        cs_go_quote(body + k, qn + 1, bad);
        return body;
    }
    want->bounded = ev != NULL;
    if (want->bounded && want->end == 0)
        strcpy(body, "invalid end parameter: 0");
    else if (want->start == CS_LAST_SEQUENCE || (want->bounded && want->end == CS_LAST_SEQUENCE))
        strcpy(body, "ledger 4294967295 is the last representable sequence and is not streamable");
    else if (want->bounded && want->start != 0 && want->end < want->start)
        sprintf(body, "end %u is before start %u", want->end, want->start);
    else if ((sig = first_value(args, n, "sig")) && strcmp(sig, "0") != 0 && strcmp(sig, "1") != 0) {
        free(body);
        qn = cs_go_quote(NULL, 0, sig);
        body = malloc(qn + 100);
        check(body != NULL, "malloc");
        int k = sprintf(body, "invalid sig parameter ");
        cs_go_quote(body + k, qn + 1, sig);
    } else {
        want->sig = sig && strcmp(sig, "1") == 0;
        free(body);
        return NULL;
    }
    return body;
}

static void fuzz_query(const uint8_t *data, size_t size)
{
    char *args[MAX_QUERY_ARGS];
    size_t n = 0, from = 0;
    for (size_t i = 0; i <= size && n < MAX_QUERY_ARGS; i++) {
        if (i < size && data[i] != '&' && data[i] != '\0')
            continue;
        args[n] = malloc(i - from + 1);
        check(args[n] != NULL, "malloc");
        memcpy(args[n], data + from, i - from);
        args[n++][i - from] = '\0';
        from = i + 1;
    }
    cs_stream_request want, got, again;
    char *body = oracle_request(args, n, &want);
    /* Static: a body holds a whole query quoted, too big for libFuzzer's stack. */
    static cs_stream_error err, err2;
    int rc = cs_stream_request_parse((const char *const *)args, n, &got, &err);
    if (body) {
        check(rc == -1, "a bad query fails");
        check(strcmp(err.body, body) == 0, "the documented 400 body for the first failing rule");
    } else {
        check(rc == 0, "a good query parses");
        check(got.start == want.start && got.end == want.end && got.bounded == want.bounded &&
                  got.sig == want.sig,
              "the request the rules give");
        check(got.start != CS_LAST_SEQUENCE, "start is streamable");
        if (got.bounded)
            check(got.end != 0 && got.end != CS_LAST_SEQUENCE && (got.start == 0 || got.end >= got.start),
                  "a bounded range is well-formed");
        else
            check(got.end == 0, "an unbounded request has no end");
    }
    check(cs_stream_request_parse((const char *const *)args, n, &again, &err2) == rc, "deterministic");
    check(rc != 0 || memcmp(&again, &got, sizeof got) == 0, "deterministic request");
    check(rc == 0 || strcmp(err2.body, err.body) == 0, "deterministic body");
    check(cs_stream_request_parse((const char *const *)args, n, &again, NULL) == rc, "NULL err");
    free(body);
    for (size_t i = 0; i < n; i++)
        free(args[i]);
}

/* ---- Origin against Host ----------------------------------------------------------------- */

static char *dup_exact(const uint8_t *p, size_t n)
{
    char *s = malloc(n + 1);
    check(s != NULL, "malloc");
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

static void fuzz_origin(const uint8_t *data, size_t size)
{
    /* Neither header can hold a NUL: the strings end at the first. */
    const uint8_t *nul = memchr(data, '\0', size);
    if (nul)
        size = (size_t)(nul - data);
    const uint8_t *nl = memchr(data, '\n', size);
    size_t olen = nl ? (size_t)(nl - data) : size;
    char *origin = dup_exact(data, olen);
    char *host = nl ? dup_exact(nl + 1, size - olen - 1) : dup_exact(data, 0);

    /* The verdict, found by lower-casing both sides rather than by a caseless compare. */
    char *full = malloc(2 * size + 128);
    check(full != NULL, "malloc");
    bool allow = false;
    const char *sep = strstr(origin, "://");
    if (!*origin) {
        allow = true;
    } else if (!sep) {
        sprintf(full, "request Origin \"%s\" is not a valid URL with a host", origin);
    } else {
        const char *oh = sep + 3;
        size_t ohl = strcspn(oh, "/"), hl = strlen(host);
        allow = ohl == hl;
        for (size_t i = 0; allow && i < hl; i++)
            allow = tolower((unsigned char)oh[i]) == tolower((unsigned char)host[i]);
        if (!allow)
            sprintf(full, "request Origin \"%s\" is not authorized for Host \"%s\"", origin, host);
    }

    size_t mlen = 2 * size + 128;
    char *msg = malloc(mlen);
    check(msg != NULL, "malloc");
    int rc = cs_check_origin(origin, host, msg, mlen);
    check(rc == (allow ? 0 : -1), "allowed exactly when the hosts match");
    if (!allow) {
        check(strcmp(msg, full) == 0, "the documented 403 body");
        /* Any shorter buffer gets the body cut like snprintf. */
        size_t cut = (size_t)data[0] % (strlen(full) + 2) + 1;
        char *small = malloc(cut);
        check(small != NULL, "malloc");
        check(cs_check_origin(origin, host, small, cut) == -1, "the verdict does not depend on mlen");
        check(strlen(small) == (cut - 1 < strlen(full) ? cut - 1 : strlen(full)) &&
                  strncmp(small, full, strlen(small)) == 0,
              "a short buffer gets a NUL-terminated prefix");
        free(small);
    }
    free(msg);
    free(full);
    free(origin);
    free(host);
}

/* ---- the peer address -------------------------------------------------------------------- */

static void fuzz_sockaddr(const uint8_t *data, size_t size)
{
    uint8_t b[1 + 2 + 16 + 1] = {0}; /* family knob, port, address, buffer-length knob */
    memcpy(b, data, size < sizeof b ? size : sizeof b);
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    uint16_t port = (uint16_t)(b[1] << 8 | b[2]);
    int family = b[0] % 3 == 0 ? AF_INET : b[0] % 3 == 1 ? AF_INET6 : AF_UNIX;
    ss.ss_family = (sa_family_t)family;
    if (family == AF_INET) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_port = htons(port);
        memcpy(&s4->sin_addr, b + 3, 4);
    } else if (family == AF_INET6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_port = htons(port);
        memcpy(&s6->sin6_addr, b + 3, 16);
    }
    char out[REMOTE_LEN];
    memset(out, 'x', sizeof out);
    cs_format_sockaddr((struct sockaddr *)&ss, out, sizeof out);
    size_t n = strnlen(out, sizeof out);
    check(n < sizeof out, "NUL-terminated in a subscriber's remote[]");

    if (family == AF_UNIX) {
        check(strcmp(out, "?") == 0, "an unknown family formats as ?");
    } else {
        const char *colon = strrchr(out, ':');
        check(colon != NULL, "a port separator");
        char *end;
        unsigned long p = strtoul(colon + 1, &end, 10);
        check(colon[1] >= '0' && colon[1] <= '9' && *end == '\0' && p == port, "the port parses back");
        char host[REMOTE_LEN];
        uint8_t addr[16];
        if (family == AF_INET) {
            memcpy(host, out, (size_t)(colon - out));
            host[colon - out] = '\0';
            check(inet_pton(AF_INET, host, addr) == 1 && memcmp(addr, b + 3, 4) == 0,
                  "the IPv4 address parses back");
        } else {
            check(out[0] == '[' && colon > out + 1 && colon[-1] == ']', "an IPv6 address in brackets");
            memcpy(host, out + 1, (size_t)(colon - out - 2));
            host[colon - out - 2] = '\0';
            check(inet_pton(AF_INET6, host, addr) == 1 && memcmp(addr, b + 3, 16) == 0,
                  "the IPv6 address parses back");
        }
    }
    size_t len = (size_t)b[19] % sizeof out + 1;
    char small[REMOTE_LEN];
    cs_format_sockaddr((struct sockaddr *)&ss, small, len);
    check(strlen(small) == (len - 1 < n ? len - 1 : n) && strncmp(small, out, strlen(small)) == 0,
          "a short buffer gets a NUL-terminated prefix");
}

/* Whether token appears as a comma-separated item of v, by lower-casing a copy. */
static bool has_token_slow(const char *v, const char *token)
{
    size_t n = strlen(v), tl = strlen(token);
    char *low = malloc(n + 1);
    check(low != NULL, "malloc");
    for (size_t i = 0; i <= n; i++)
        low[i] = (char)tolower((unsigned char)v[i]);
    bool found = false;
    for (char *item = strtok(low, ","); item && !found; item = strtok(NULL, ",")) {
        while (*item == ' ' || *item == '\t')
            item++;
        size_t il = strlen(item);
        while (il && (item[il - 1] == ' ' || item[il - 1] == '\t'))
            il--;
        found = il == tl && memcmp(item, token, tl) == 0;
    }
    free(low);
    return found;
}

static void fuzz_upgrade(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    check(text != NULL, "malloc");
    memcpy(text, data, size);
    text[size] = '\0';
    enum { FIELDS = 5, MAX_KEYS = 8 };
    const char *f[FIELDS] = {"", "", "", "", ""}, *keys[MAX_KEYS];
    size_t nf = 0, nkeys = 0;
    for (char *line = text, *next; line && nkeys < MAX_KEYS; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (nf < FIELDS)
            f[nf++] = line;
        else
            keys[nkeys++] = line;
    }
    cs_upgrade_request r = {f[0], f[1], f[2], f[3], f[4], keys, nkeys};
    static cs_upgrade_refusal a, b;
    int rc = cs_upgrade_check(&r, &a);
    check(rc == cs_upgrade_check(&r, &b), "the same verdict twice");
    if (rc != 0) {
        check(rc == -1, "refusals are -1");
        check(a.status == b.status && strcmp(a.body, b.body) == 0, "the same refusal twice");
        check(a.status == 426 || a.status == 405 || a.status == 400, "a documented status");
        check(strncmp(a.body, "WebSocket protocol violation: ", 30) == 0 ||
                  strncmp(a.body, "unsupported WebSocket protocol version (only 13 is supported): ", 63) == 0,
              "a documented sentence");
        check(!a.offer_version || (a.status == 400 && strstr(a.body, "version")), "13 offered with the version");
        check(!a.offer_upgrade || a.status == 426, "Upgrade offered with a 426");
    } else {
        check(strcmp(f[0], "GET") == 0, "accepted only for GET");
        check(strcmp(f[1], "HTTP/1.1") == 0 || strncmp(f[1], "HTTP/2", 6) == 0 || strncmp(f[1], "HTTP/3", 6) == 0,
              "accepted only for HTTP/1.1 or later");
        check(has_token_slow(f[2], "upgrade") && has_token_slow(f[3], "websocket"), "accepted only with the tokens");
        check(strcmp(f[4], "13") == 0 && nkeys == 1, "accepted only for version 13 and one key");
        const char *k = keys[0];
        while (*k == ' ' || *k == '\t')
            k++;
        size_t kl = strlen(k);
        while (kl && (k[kl - 1] == ' ' || k[kl - 1] == '\t'))
            kl--;
        check(kl == 24 && k[22] == '=' && k[23] == '=', "accepted only a 16-byte base64 key");
    }
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    switch (data[0] % 4) {
    case 0:
        fuzz_query(data + 1, size - 1);
        break;
    case 1:
        fuzz_origin(data + 1, size - 1);
        break;
    case 2:
        fuzz_sockaddr(data + 1, size - 1);
        break;
    default:
        fuzz_upgrade(data + 1, size - 1);
        break;
    }
    return 0;
}
