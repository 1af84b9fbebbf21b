/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the client's subscription URL parser and endpoint builder
 * (remoteledger/endpoint.c).
 *
 * Input: byte 0 picks the range (low 2 bits: unbounded from byte 0 >> 2, bounded over a few
 * ledgers, bounded backwards, or touching the last representable sequence); the rest is the URL
 * (a C string: it ends at the first NUL). Checked:
 *  - parsing is deterministic: a second parse gives the same verdict, message and fields;
 *  - a failure is RL_ERR_INVALID (or NOMEM) with a "remoteledger: " message and an empty url;
 *  - a success has a ws/wss scheme matching tls, a non-empty host and dial name, a port in
 *    -1..65535 (-1: out of range, fails at dial) and a path starting with '/';
 *  - the endpoint for the range is scheme://[userinfo@]host + target [#fragment], the target the
 *    path and '?' and a query; the endpoint parses back to the same url with that query as its
 *    raw query, and building from it again gives the same endpoint and target (a fixed point).
 *
 * Build and run: tests/fuzz/CMakeLists.txt (clang, -DCS_FUZZ=ON). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corestream/wire.h"
#include "remoteledger/endpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_endpoint: property violated: %s\n", what);
        abort();
    }
}

static bool same_str(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

static bool same_url(const rli_url *a, const rli_url *b)
{
    return a->tls == b->tls && a->port == b->port && same_str(a->scheme, b->scheme) &&
           same_str(a->userinfo, b->userinfo) && same_str(a->host, b->host) &&
           same_str(a->hostname, b->hostname) && same_str(a->path, b->path) &&
           same_str(a->raw_query, b->raw_query) && same_str(a->fragment, b->fragment);
}

static bool is_empty(const rli_url *u)
{
    return !u->scheme && !u->userinfo && !u->host && !u->hostname && !u->path && !u->raw_query &&
           !u->fragment;
}

static void check_url(const rli_url *u)
{
    check(same_str(u->scheme, u->tls ? "wss" : "ws"), "scheme ws or wss, as tls says");
    check(u->host && u->host[0], "a host");
    check(u->hostname && u->hostname[0], "a name to dial");
    check(u->port >= -1 && u->port <= 65535, "port in range");
    check(u->path && u->path[0] == '/', "the path starts with '/'");
}

/* Go's own limit: an IPv6 zone holding bytes past ASCII prints them as %XX, which its parser
 * refuses inside a zone (url.Parse(u.String()) fails alike), so such a url cannot round-trip. */
static bool zone_past_ascii(const rli_url *u)
{
    const char *zone = u->host[0] == '[' ? strchr(u->hostname, '%') : NULL;
    for (const unsigned char *p = (const unsigned char *)zone; p && *p; p++)
        if (*p >= 0x80)
            return true;
    return false;
}

static void check_endpoint(const rli_url *u, rl_range r)
{
    char *endpoint, *target;
    cs_err err;
    if (rli_endpoint_build(u, r, false, &endpoint, &target, &err) != 0) {
        check(endpoint == NULL && target == NULL, "nothing built on failure");
        check(err.kind == RL_ERR_NOMEM || strncmp(err.msg, "remoteledger: range ", 20) == 0,
              "only the range can fail");
        return;
    }
    size_t pl = strlen(u->path);
    check(strncmp(target, u->path, pl) == 0 && target[pl] == '?', "the target is the path and '?'");
    const char *query = target + pl + 1;
    check(strstr(query, "start=") != NULL, "the range's start is in the query");

    size_t cap = strlen(endpoint) + 1;
    char *want = malloc(cap);
    check(want != NULL, "malloc");
    int n = snprintf(want, cap, "%s://%s%s%s%s%s%s", u->scheme, u->userinfo ? u->userinfo : "",
                     u->userinfo ? "@" : "", u->host, target, u->fragment && u->fragment[0] ? "#" : "",
                     u->fragment && u->fragment[0] ? u->fragment : "");
    check(n >= 0 && (size_t)n + 1 == cap && strcmp(want, endpoint) == 0, "endpoint = scheme://host + target");
    free(want);
    if (zone_past_ascii(u)) {
        free(endpoint);
        free(target);
        return;
    }

    rli_url back;
    check(rli_url_parse(&back, endpoint, &err) == 0, "the endpoint parses");
    check(same_str(back.raw_query, query), "the query round-trips as the raw query");
    /* An empty fragment is not printed, so it comes back absent. */
    bool frag_ok = same_str(back.fragment, u->fragment) ||
                   (back.fragment == NULL && u->fragment && u->fragment[0] == '\0');
    check(back.tls == u->tls && back.port == u->port && same_str(back.scheme, u->scheme) &&
              same_str(back.userinfo, u->userinfo) && same_str(back.host, u->host) &&
              same_str(back.hostname, u->hostname) && same_str(back.path, u->path) && frag_ok,
          "the endpoint parses back to the same url");
    char *endpoint2, *target2;
    check(rli_endpoint_build(&back, r, false, &endpoint2, &target2, &err) == 0, "the endpoint builds again");
    check(strcmp(endpoint, endpoint2) == 0 && strcmp(target, target2) == 0, "building is a fixed point");
    free(endpoint2);
    free(target2);
    rli_url_free(&back);
    free(endpoint);
    free(target);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint32_t from = data[0] >> 2;
    rl_range r;
    switch (data[0] & 3) {
    case 0: r = rl_unbounded_range(from); break;
    case 1: r = rl_bounded_range(from, from + 3); break;
    case 2: r = rl_bounded_range(from + 3, from); break;
    default: r = rl_bounded_range(CS_LAST_SEQUENCE - from, CS_LAST_SEQUENCE); break;
    }
    char *raw = malloc(size);
    check(raw != NULL, "malloc");
    memcpy(raw, data + 1, size - 1);
    raw[size - 1] = '\0';

    rli_url u, again;
    cs_err err, err2;
    int rc = rli_url_parse(&u, raw, &err);
    int rc2 = rli_url_parse(&again, raw, &err2);
    check(rc == 0 || rc == -1, "0 or -1");
    check(rc == rc2, "the same verdict twice");
    if (rc != 0) {
        check(err.kind == RL_ERR_INVALID || err.kind == RL_ERR_NOMEM, "error kind");
        check(strncmp(err.msg, "remoteledger: ", 14) == 0, "error message");
        check(strcmp(err.msg, err2.msg) == 0, "the same message twice");
        check(is_empty(&u), "nothing kept on failure");
    } else {
        check(same_url(&u, &again), "the same url twice");
        check_url(&u);
        check_endpoint(&u, r);
    }
    rli_url_free(&u);
    rli_url_free(&again);
    free(raw);
    return 0;
}
