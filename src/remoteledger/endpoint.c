/* SPDX-License-Identifier: Apache-2.0 */
/* The subscription URL: Go net/url parsing rules (only what the prototype's messages can show), the
 * endpoint for a range, and the limits derived from the options. See rl_stream_new in
 * remoteledger.h. */
#include "remoteledger/endpoint.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/goquote.h"
#include "common/strbuf.h"
#include "remoteledger/urlescape.h"
#include "corestream/wire.h"


/* ---- net/url: parsing ------------------------------------------------------------------------- */

static bool valid_optional_port(const char *p, size_t n)
{
    if (n == 0)
        return true;
    if (p[0] != ':')
        return false;
    for (size_t i = 1; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return false;
    return true;
}

static bool valid_userinfo(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (rli_is_alnum(c))
            continue;
        switch (c) {
        case '-': case '.': case '_': case ':': case '~': case '!': case '$': case '&': case '\'':
        case '(': case ')': case '*': case '+': case ',': case ';': case '=': case '%': case '@':
            continue;
        default:
            return false;
        }
    }
    return true;
}

static const char *find_last(const char *s, size_t n, char c)
{
    for (size_t i = n; i > 0; i--)
        if (s[i - 1] == c)
            return s + i - 1;
    return NULL;
}

/* parseHost: decodes the host (brackets and port included, as Go keeps them in u.Host). */
static int parse_host(const char *h, size_t n, cs_strbuf *host, cs_strbuf *detail)
{
    if (n > 0 && h[0] == '[') {
        const char *rb = find_last(h, n, ']');
        if (!rb) {
            cs_strbuf_puts(detail, "missing ']' in host");
            return -1;
        }
        size_t i = (size_t)(rb - h);
        if (!valid_optional_port(rb + 1, n - i - 1)) {
            cs_strbuf_puts(detail, "invalid port ");
            cs_go_quote_put_n(detail, rb + 1, n - i - 1);
            cs_strbuf_puts(detail, " after host");
            return -1;
        }
        const char *zone = NULL;
        for (size_t k = 0; k + 3 <= i; k++)
            if (h[k] == '%' && h[k + 1] == '2' && h[k + 2] == '5') {
                zone = h + k;
                break;
            }
        if (zone) {
            size_t z = (size_t)(zone - h);
            if (rli_unescape(h, z, ENC_HOST, host, detail) || rli_unescape(zone, i - z, ENC_ZONE, host, detail) ||
                rli_unescape(rb, n - i, ENC_HOST, host, detail))
                return -1;
            return 0;
        }
    } else {
        const char *colon = find_last(h, n, ':');
        if (colon && !valid_optional_port(colon, n - (size_t)(colon - h))) {
            cs_strbuf_puts(detail, "invalid port ");
            cs_go_quote_put_n(detail, colon, n - (size_t)(colon - h));
            cs_strbuf_puts(detail, " after host");
            return -1;
        }
    }
    return rli_unescape(h, n, ENC_HOST, host, detail);
}

static void set_err(cs_err *err, cs_strbuf *msg)
{
    cs_err_set(err, RL_ERR_INVALID, "%s", msg->failed ? "remoteledger: out of memory" : msg->p);
    cs_strbuf_free(msg);
}

static int url_error(cs_err *err, const char *raw, const char *rest_fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int url_error(cs_err *err, const char *raw, const char *rest_fmt, ...)
{
    cs_strbuf m = {0};
    cs_strbuf_puts(&m, "remoteledger: url ");
    cs_go_quote_put_n(&m, raw, strlen(raw));
    char tail[256];
    va_list ap;
    va_start(ap, rest_fmt);
    vsnprintf(tail, sizeof tail, rest_fmt, ap);
    va_end(ap);
    cs_strbuf_puts(&m, tail);
    set_err(err, &m);
    return -1;
}

/* `remoteledger: invalid url "<raw>": parse "<which>": <detail>` */
static int parse_error(cs_err *err, const char *raw, const char *which, size_t which_len, cs_strbuf *detail)
{
    cs_strbuf m = {0};
    cs_strbuf_puts(&m, "remoteledger: invalid url ");
    cs_go_quote_put_n(&m, raw, strlen(raw));
    cs_strbuf_puts(&m, ": parse ");
    cs_go_quote_put_n(&m, which, which_len);
    cs_strbuf_puts(&m, ": ");
    cs_strbuf_put(&m, detail->p ? detail->p : "", detail->n);
    cs_strbuf_free(detail);
    set_err(err, &m);
    return -1;
}

static char *dup_n(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

void rli_url_free(rli_url *u)
{
    if (!u)
        return;
    free(u->scheme);
    free(u->userinfo);
    free(u->host);
    free(u->hostname);
    free(u->path);
    free(u->raw_query);
    free(u->fragment);
    memset(u, 0, sizeof *u);
}

static int oom(cs_err *err)
{
    return cs_err_set(err, RL_ERR_NOMEM, "remoteledger: out of memory");
}

/* A URL cut into its parts the way url.Parse cuts it, before anything is decoded. Every pointer
 * is into the raw string. */
typedef struct url_cut {
    const char *hash;   /* the '#' the fragment follows, NULL when none */
    size_t ulen;        /* the length before it: errors before the fragment quote this much */
    size_t scheme_len;  /* 0: no scheme */
    char scheme[16];    /* lower-cased, when scheme_ok */
    bool scheme_ok;     /* there is a scheme and it fits scheme[] */
    const char *query;  /* after the '?', NULL when none */
    size_t querylen;
    const char *auth;   /* after the "//", NULL when there is no authority */
    size_t authlen;
    const char *path;
    size_t pathlen;
    bool opaque;        /* "ws:box": an opaque URL, which has no host */
} url_cut;

/* The parts decoded; the owner frees them with decoded_free. */
typedef struct url_decoded {
    cs_strbuf host, user, pass, path, frag;
    bool has_user, has_pass;
} url_decoded;

static void decoded_free(url_decoded *d)
{
    cs_strbuf_free(&d->host);
    cs_strbuf_free(&d->user);
    cs_strbuf_free(&d->pass);
    cs_strbuf_free(&d->path);
    cs_strbuf_free(&d->frag);
}

/* url.Parse's first check, on the URL without its fragment. -1 with the detail. */
static int check_controls(const char *raw, size_t ulen, cs_strbuf *detail)
{
    for (size_t i = 0; i < ulen; i++) {
        unsigned char c = (unsigned char)raw[i];
        if (c < 0x20 || c == 0x7f) {
            cs_strbuf_puts(detail, "net/url: invalid control character in URL");
            return -1;
        }
    }
    return 0;
}

/* getScheme: the scheme of raw[0..ulen), lower-cased into cut->scheme; *rest is what follows its
 * ':', or raw when there is none. -1 with the detail when the URL starts with ':'. */
static int cut_scheme(url_cut *cut, const char *raw, const char **rest, cs_strbuf *detail)
{
    cut->scheme_len = 0;
    *rest = raw;
    for (size_t i = 0; i < cut->ulen; i++) {
        unsigned char c = (unsigned char)raw[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            continue;
        if ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.') {
            if (i == 0)
                break;
            continue;
        }
        if (c == ':') {
            if (i == 0) {
                cs_strbuf_puts(detail, "missing protocol scheme");
                return -1;
            }
            cut->scheme_len = i;
            *rest = raw + i + 1;
        }
        break;
    }
    cut->scheme[0] = '\0';
    cut->scheme_ok = cut->scheme_len > 0 && cut->scheme_len < sizeof cut->scheme;
    if (cut->scheme_ok) {
        for (size_t i = 0; i < cut->scheme_len; i++) {
            char c = raw[i];
            cut->scheme[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
        }
        cut->scheme[cut->scheme_len] = '\0';
    }
    return 0;
}

/* The query: a lone trailing '?' is ForceQuery; otherwise cut at the first '?', which *restlen
 * then ends before. */
static void cut_query(url_cut *cut, const char *rest, size_t *restlen)
{
    cut->query = NULL;
    cut->querylen = 0;
    const char *q = memchr(rest, '?', *restlen);
    if (q) {
        cut->query = q + 1;
        cut->querylen = *restlen - (size_t)(q + 1 - rest);
        *restlen = (size_t)(q - rest);
    }
}

/* The authority ("//host" of a hierarchical URL) and the path of rest[0..restlen). -1 with the
 * detail when a scheme-less first segment holds a colon. */
static int cut_authority(url_cut *cut, const char *rest, size_t restlen, cs_strbuf *detail)
{
    cut->auth = NULL;
    cut->authlen = 0;
    cut->path = rest;
    cut->pathlen = restlen;
    cut->opaque = false;
    if (restlen == 0 || rest[0] != '/') {
        if (cut->scheme_len > 0) {
            cut->opaque = true; /* "ws:box": an opaque URL, which has no host */
        } else {
            /* A scheme-less first segment may not hold a colon. */
            const char *colon = memchr(rest, ':', restlen);
            const char *slash = memchr(rest, '/', restlen);
            if (colon && (!slash || colon < slash)) {
                cs_strbuf_puts(detail, "first path segment in URL cannot contain colon");
                return -1;
            }
        }
    }
    if (!cut->opaque && restlen >= 2 && rest[0] == '/' && rest[1] == '/' &&
        (cut->scheme_len > 0 || restlen < 3 || rest[2] != '/')) {
        cut->auth = rest + 2;
        const char *slash = memchr(cut->auth, '/', restlen - 2);
        cut->authlen = slash ? (size_t)(slash - cut->auth) : restlen - 2;
        cut->path = cut->auth + cut->authlen;
        cut->pathlen = restlen - 2 - cut->authlen;
    }
    return 0;
}

/* The authority decoded: the host after the last '@' (parseHost), then the userinfo before it.
 * -1 with the detail. */
static int decode_authority(const url_cut *cut, url_decoded *d, cs_strbuf *detail)
{
    const char *auth = cut->auth;
    size_t authlen = cut->authlen;
    const char *at = find_last(auth, authlen, '@');
    const char *h = at ? at + 1 : auth;
    size_t hl = authlen - (size_t)(h - auth);
    if (parse_host(h, hl, &d->host, detail))
        return -1;
    if (at) {
        size_t ul = (size_t)(at - auth);
        if (!valid_userinfo(auth, ul)) {
            cs_strbuf_puts(detail, "net/url: invalid userinfo");
            return -1;
        }
        const char *colon = memchr(auth, ':', ul);
        size_t nl = colon ? (size_t)(colon - auth) : ul;
        d->has_user = true;
        if (rli_unescape(auth, nl, ENC_USERPASS, &d->user, detail))
            return -1;
        if (colon) {
            d->has_pass = true;
            if (rli_unescape(colon + 1, ul - nl - 1, ENC_USERPASS, &d->pass, detail))
                return -1;
        }
    }
    return 0;
}

/* Step 2: ws and http mean ws://, wss and https wss://; false for any other scheme. */
static bool map_scheme(const url_cut *cut, bool *tls, const char **ws_scheme)
{
    if (cut->scheme_ok && (!strcmp(cut->scheme, "ws") || !strcmp(cut->scheme, "http"))) {
        *tls = false;
        *ws_scheme = "ws";
    } else if (cut->scheme_ok && (!strcmp(cut->scheme, "wss") || !strcmp(cut->scheme, "https"))) {
        *tls = true;
        *ws_scheme = "wss";
    } else {
        return false;
    }
    return true;
}

/* Dial target: Hostname() and Port() of the decoded host, into u->hostname (malloc'd; NULL when
 * out of memory) and u->port (by u->tls when the host names none). */
static void set_dial_target(rli_url *u, const cs_strbuf *host)
{
    const char *hp = host->p;
    size_t hn = host->n;
    const char *portp = NULL;
    size_t portn = 0;
    const char *name = hp;
    size_t namen = hn;
    if (hp[0] == '[') {
        const char *rb = find_last(hp, hn, ']');
        name = hp + 1;
        namen = (size_t)(rb - hp) - 1;
        if ((size_t)(rb - hp) + 1 < hn) {
            portp = rb + 2;
            portn = hn - (size_t)(rb - hp) - 2;
        }
    } else {
        const char *colon = find_last(hp, hn, ':');
        if (colon) {
            namen = (size_t)(colon - hp);
            portp = colon + 1;
            portn = hn - namen - 1;
        }
    }
    u->hostname = namen ? dup_n(name, namen) : dup_n("localhost", 9);
    u->port = u->tls ? 443 : 80;
    if (portp && portn) {
        long v = 0;
        for (size_t i = 0; i < portn && v <= 65535; i++)
            v = v * 10 + (portp[i] - '0');
        u->port = v > 65535 ? -1 : (int)v;
    }
}

/* The printed forms of what follows the host: userinfo, path (step 4), query and fragment, into
 * u (malloc'd; NULL where out of memory: the caller checks). scratch is empty before and after. */
static void set_printed_parts(rli_url *u, size_t rawlen, const url_cut *cut, const url_decoded *d,
                              cs_strbuf *scratch)
{
    if (d->has_user) {
        rli_escape_into(scratch, d->user.p ? d->user.p : "", d->user.n, ENC_USERPASS);
        if (d->has_pass) {
            cs_strbuf_putc(scratch, ':');
            rli_escape_into(scratch, d->pass.p ? d->pass.p : "", d->pass.n, ENC_USERPASS);
        }
        u->userinfo = cs_strbuf_take(scratch, NULL);
    }

    /* Step 4: the path. */
    if (d->path.n == 0 || (d->path.n == 1 && d->path.p[0] == '/'))
        cs_strbuf_puts(scratch, CS_WIRE_STREAM_PATH);
    else
        rli_escaped_form(scratch, cut->path, cut->pathlen, &d->path, ENC_PATH);
    u->path = cs_strbuf_take(scratch, NULL);

    if (cut->query)
        u->raw_query = dup_n(cut->query, cut->querylen);
    if (cut->hash) {
        rli_escaped_form(scratch, cut->hash + 1, rawlen - cut->ulen - 1, &d->frag, ENC_FRAGMENT);
        u->fragment = cs_strbuf_take(scratch, NULL);
    }
}

int rli_url_parse(rli_url *u, const char *raw, cs_err *err)
{
    memset(u, 0, sizeof *u);
    size_t rawlen = strlen(raw);
    cs_strbuf detail = {0}, scratch = {0};
    int rc = -1;

    /* url.Parse: the fragment is cut off first; errors before it quote the URL without it. */
    url_cut cut = {0};
    cut.hash = memchr(raw, '#', rawlen);
    cut.ulen = cut.hash ? (size_t)(cut.hash - raw) : rawlen;
    const char *rest;
    if (check_controls(raw, cut.ulen, &detail) || cut_scheme(&cut, raw, &rest, &detail))
        return parse_error(err, raw, raw, cut.ulen, &detail);
    size_t restlen = cut.ulen - (size_t)(rest - raw);
    cut_query(&cut, rest, &restlen);
    if (cut_authority(&cut, rest, restlen, &detail))
        return parse_error(err, raw, raw, cut.ulen, &detail);

    url_decoded d = {0};
    if (cut.auth && decode_authority(&cut, &d, &detail))
        goto parse_fail;
    if (!cut.opaque && rli_unescape(cut.path, cut.pathlen, ENC_PATH, &d.path, &detail))
        goto parse_fail;
    if (cut.hash && rli_unescape(cut.hash + 1, rawlen - cut.ulen - 1, ENC_FRAGMENT, &d.frag, &detail)) {
        /* setFragment errors quote the whole URL */
        decoded_free(&d);
        return parse_error(err, raw, raw, rawlen, &detail);
    }

    /* Step 2: the scheme. */
    bool tls;
    const char *ws_scheme;
    if (!map_scheme(&cut, &tls, &ws_scheme)) {
        url_error(err, raw, " must use ws, wss, http or https");
        goto out;
    }
    /* Step 3: a host. */
    if (d.host.n == 0) {
        url_error(err, raw, " has no host");
        goto out;
    }

    u->tls = tls;
    u->scheme = dup_n(ws_scheme, strlen(ws_scheme));

    /* Printed host: escape(u.Host, encodeHost). */
    rli_escape_into(&scratch, d.host.p, d.host.n, ENC_HOST);
    u->host = cs_strbuf_take(&scratch, NULL);

    set_dial_target(u, &d.host);
    set_printed_parts(u, rawlen, &cut, &d, &scratch);
    if (!u->scheme || !u->host || !u->hostname || !u->path || (d.has_user && !u->userinfo) ||
        (cut.query && !u->raw_query) || (cut.hash && !u->fragment)) {
        rli_url_free(u);
        oom(err);
        goto out;
    }
    rc = 0;
    goto out;

parse_fail:
    parse_error(err, raw, raw, cut.ulen, &detail);
out:
    decoded_free(&d);
    cs_strbuf_free(&scratch);
    cs_strbuf_free(&detail);
    return rc;
}

/* ---- the endpoint for a range ----------------------------------------------------------------- */

void rli_range_format(rl_range r, char *buf, size_t len)
{
    if (r.bounded)
        snprintf(buf, len, "[%" PRIu32 ",%" PRIu32 "]", r.from, r.to);
    else
        snprintf(buf, len, "[%" PRIu32 ",latest)", r.from);
}

typedef struct qpair {
    char *k, *v;
    size_t kl, vl;
    size_t order;
} qpair;

static int qpair_cmp(const void *a, const void *b)
{
    const qpair *x = a, *y = b;
    size_t n = x->kl < y->kl ? x->kl : y->kl;
    int c = memcmp(x->k, y->k, n);
    if (c)
        return c;
    if (x->kl != y->kl)
        return x->kl < y->kl ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static bool key_is(const qpair *p, const char *name)
{
    return p->kl == strlen(name) && memcmp(p->k, name, p->kl) == 0;
}

static void free_pairs(qpair *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].k);
        free(v[i].v);
    }
    free(v);
}

/* url.ParseQuery, keeping what it keeps: pairs with a ';' or a bad escape are dropped. */
static int parse_query(const char *q, size_t n, qpair **out, size_t *count)
{
    qpair *v = NULL;
    size_t len = 0, cap = 0;
    size_t i = 0;
    while (i < n) {
        const char *amp = memchr(q + i, '&', n - i);
        size_t seg_end = amp ? (size_t)(amp - q) : n;
        const char *seg = q + i;
        size_t sl = seg_end - i;
        i = amp ? seg_end + 1 : n;
        if (sl == 0 || memchr(seg, ';', sl))
            continue;
        const char *eq = memchr(seg, '=', sl);
        size_t kl = eq ? (size_t)(eq - seg) : sl;
        cs_strbuf k = {0}, val = {0}, detail = {0};
        int bad = rli_unescape(seg, kl, ENC_QUERY, &k, &detail);
        if (!bad && eq)
            bad = rli_unescape(eq + 1, sl - kl - 1, ENC_QUERY, &val, &detail);
        cs_strbuf_free(&detail);
        if (bad) {
            cs_strbuf_free(&k);
            cs_strbuf_free(&val);
            continue;
        }
        if (len == cap) {
            size_t nc = cap ? cap * 2 : 8;
            qpair *nv = realloc(v, nc * sizeof *nv);
            if (!nv) {
                cs_strbuf_free(&k);
                cs_strbuf_free(&val);
                free_pairs(v, len);
                return -1;
            }
            v = nv;
            cap = nc;
        }
        qpair *p = &v[len];
        p->kl = k.n;
        p->vl = val.n;
        p->k = cs_strbuf_take(&k, NULL);
        p->v = cs_strbuf_take(&val, NULL);
        p->order = len;
        len++;
        if (!p->k || !p->v) {
            free_pairs(v, len);
            return -1;
        }
    }
    *out = v;
    *count = len;
    return 0;
}

static int add_pair(qpair **v, size_t *n, const char *k, const char *val)
{
    qpair *nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv)
        return -1;
    *v = nv;
    qpair *p = &nv[*n];
    p->k = dup_n(k, strlen(k));
    p->v = dup_n(val, strlen(val));
    p->kl = strlen(k);
    p->vl = strlen(val);
    p->order = *n;
    (*n)++;
    return p->k && p->v ? 0 : -1;
}

int rli_endpoint_build(const rli_url *u, rl_range r, bool sig, char **endpoint, char **target, cs_err *err)
{
    *endpoint = *target = NULL;
    char rs[64];
    if (r.from == CS_LAST_SEQUENCE || (r.bounded && r.to == CS_LAST_SEQUENCE)) {
        rli_range_format(r, rs, sizeof rs);
        return cs_err_set(err, RL_ERR_INVALID,
                          "remoteledger: range %s reaches ledger %" PRIu32
                          ", the last representable sequence",
                          rs, (uint32_t)CS_LAST_SEQUENCE);
    }

    qpair *pairs = NULL;
    size_t n = 0;
    if (u->raw_query && parse_query(u->raw_query, strlen(u->raw_query), &pairs, &n))
        return oom(err);
    /* The range owns start and end: whatever the configured URL carried is stale. */
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (key_is(&pairs[i], "start") || key_is(&pairs[i], "end") || (sig && key_is(&pairs[i], "sig"))) {
            free(pairs[i].k);
            free(pairs[i].v);
            continue;
        }
        pairs[kept++] = pairs[i];
    }
    n = kept;
    char num[16];
    snprintf(num, sizeof num, "%" PRIu32, r.from);
    if (add_pair(&pairs, &n, "start", num)) {
        free_pairs(pairs, n);
        return oom(err);
    }
    if (sig && add_pair(&pairs, &n, "sig", "1")) {
        free_pairs(pairs, n);
        return oom(err);
    }
    if (r.bounded) {
        if (r.to < r.from) {
            free_pairs(pairs, n);
            rli_range_format(r, rs, sizeof rs);
            return cs_err_set(err, RL_ERR_INVALID, "remoteledger: range %s ends before it starts", rs);
        }
        snprintf(num, sizeof num, "%" PRIu32, r.to);
        if (add_pair(&pairs, &n, "end", num)) {
            free_pairs(pairs, n);
            return oom(err);
        }
    }
    for (size_t i = 0; i < n; i++)
        pairs[i].order = i;
    qsort(pairs, n, sizeof *pairs, qpair_cmp);

    cs_strbuf q = {0};
    for (size_t i = 0; i < n; i++) {
        if (i)
            cs_strbuf_putc(&q, '&');
        rli_escape_into(&q, pairs[i].k, pairs[i].kl, ENC_QUERY);
        cs_strbuf_putc(&q, '=');
        rli_escape_into(&q, pairs[i].v, pairs[i].vl, ENC_QUERY);
    }
    free_pairs(pairs, n);

    cs_strbuf t = {0}, e = {0};
    cs_strbuf_puts(&t, u->path);
    cs_strbuf_putc(&t, '?');
    cs_strbuf_put(&t, q.p ? q.p : "", q.n);

    cs_strbuf_puts(&e, u->scheme);
    cs_strbuf_puts(&e, "://");
    if (u->userinfo) {
        cs_strbuf_puts(&e, u->userinfo);
        cs_strbuf_putc(&e, '@');
    }
    cs_strbuf_puts(&e, u->host);
    cs_strbuf_put(&e, t.p ? t.p : "", t.n);
    if (u->fragment && u->fragment[0]) {
        cs_strbuf_putc(&e, '#');
        cs_strbuf_puts(&e, u->fragment);
    }
    cs_strbuf_free(&q);
    *target = cs_strbuf_take(&t, NULL);
    *endpoint = cs_strbuf_take(&e, NULL);
    if (!*target || !*endpoint) {
        free(*target);
        free(*endpoint);
        *endpoint = *target = NULL;
        return oom(err);
    }
    return 0;
}

/* ---- limits ------------------------------------------------------------------------------------ */

int64_t rli_read_limit(int64_t max_chunk_size)
{
    int64_t n = max_chunk_size;
    if (n < 0)
        return -1;
    if (n == 0)
        n = CS_MAX_CHUNK_SIZE;
    if (n > INT64_MAX - (CS_WIRE_CHUNK_HEADER_LEN + 1))
        return INT64_MAX - 1;
    n += CS_WIRE_CHUNK_HEADER_LEN;
    return n < CS_WIRE_SIG_MAX_LEN ? CS_WIRE_SIG_MAX_LEN : n;
}

size_t rli_expand_bound(int64_t max_chunk_size)
{
    if (max_chunk_size <= 0 || max_chunk_size > CS_MAX_CHUNK_SIZE)
        return CS_MAX_CHUNK_SIZE;
    return (size_t)max_chunk_size;
}
