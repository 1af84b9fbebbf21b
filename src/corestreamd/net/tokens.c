/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/net/tokens.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/goquote.h"

#define FILE_MAX (1 << 20)

typedef struct entry {
    char name[CS_TOKEN_NAME_MAX + 1];
    uint8_t digest[CS_TOKEN_DIGEST_LEN];
} entry;

struct cs_tokens {
    entry *e;
    size_t n;
};

static void digest_of(const char *s, size_t n, uint8_t out[CS_TOKEN_DIGEST_LEN])
{
    unsigned int len = CS_TOKEN_DIGEST_LEN;
    if (EVP_Digest(s, n, out, &len, EVP_sha256(), NULL) != 1)
        memset(out, 0, CS_TOKEN_DIGEST_LEN); /* cannot happen with the default provider */
}

static bool b64token_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~' || c == '+' || c == '/';
}

/* RFC 6750 b64token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=" */
static bool is_b64token(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && b64token_char((unsigned char)s[i]))
        i++;
    if (i == 0)
        return false;
    while (i < n && s[i] == '=')
        i++;
    return i == n;
}

int cs_tokens_parse(cs_tokens **out, const char *data, size_t len, cs_err *err)
{
    *out = NULL;
    cs_tokens *t = calloc(1, sizeof *t);
    if (!t)
        return cs_err_set(err, 0, "out of memory");
    size_t cap = 0, lineno = 0;
    int rc = 0;
    for (size_t pos = 0; pos < len && rc == 0;) {
        const char *l = data + pos, *nl = memchr(l, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - l) : len - pos;
        pos += n + (nl ? 1 : 0);
        lineno++;
        if (n && l[n - 1] == '\r')
            n--;
        size_t i = 0;
        while (i < n && (l[i] == ' ' || l[i] == '\t'))
            i++;
        if (i == n || l[i] == '#')
            continue;
        const char *fields[3];
        size_t flen[3], nf = 0;
        while (i < n && nf < 3) {
            size_t j = i;
            while (j < n && l[j] != ' ' && l[j] != '\t')
                j++;
            fields[nf] = l + i;
            flen[nf++] = j - i;
            while (j < n && (l[j] == ' ' || l[j] == '\t'))
                j++;
            i = j;
        }
        if (nf != 2) {
            rc = cs_err_set(err, 0, "line %zu: want \"name token\"", lineno);
            break;
        }
        char name[CS_TOKEN_NAME_MAX + 1];
        bool name_ok = flen[0] <= CS_TOKEN_NAME_MAX;
        for (size_t k = 0; name_ok && k < flen[0]; k++)
            name_ok = fields[0][k] > 0x20 && fields[0][k] < 0x7f;
        if (!name_ok) {
            rc = cs_err_set(err, 0, "line %zu: a name is 1 to %d printable ASCII characters", lineno,
                            CS_TOKEN_NAME_MAX);
            break;
        }
        memcpy(name, fields[0], flen[0]);
        name[flen[0]] = '\0';
        char qname[2 * CS_TOKEN_NAME_MAX + 3]; /* room for every '"' and '\\' escaped */
        cs_go_quote(qname, sizeof qname, name);
        if (flen[1] < CS_TOKEN_MIN || flen[1] > CS_TOKEN_MAX) {
            rc = cs_err_set(err, 0, "line %zu: token for %s is %zu characters; %d to %d are required", lineno,
                            qname, flen[1], CS_TOKEN_MIN, CS_TOKEN_MAX);
            break;
        }
        if (!is_b64token(fields[1], flen[1])) {
            rc = cs_err_set(err, 0,
                            "line %zu: token for %s has a character outside A-Z a-z 0-9 - . _ ~ + / "
                            "(and trailing =)",
                            lineno, qname);
            break;
        }
        uint8_t d[CS_TOKEN_DIGEST_LEN];
        digest_of(fields[1], flen[1], d);
        for (size_t k = 0; k < t->n && rc == 0; k++) {
            if (strcmp(t->e[k].name, name) == 0)
                rc = cs_err_set(err, 0, "line %zu: name %s appears twice", lineno, qname);
            else if (memcmp(t->e[k].digest, d, sizeof d) == 0)
                rc = cs_err_set(err, 0, "line %zu: the token for %s is already another name's", lineno, qname);
        }
        if (rc != 0)
            break;
        if (t->n == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            entry *ne = realloc(t->e, ncap * sizeof *ne);
            if (!ne) {
                rc = cs_err_set(err, 0, "out of memory");
                break;
            }
            t->e = ne;
            cap = ncap;
        }
        memcpy(t->e[t->n].name, name, sizeof name);
        memcpy(t->e[t->n].digest, d, sizeof d);
        t->n++;
    }
    if (rc == 0 && t->n == 0)
        rc = cs_err_set(err, 0, "no tokens");
    if (rc != 0) {
        cs_tokens_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

int cs_tokens_load(cs_tokens **out, const char *path, cs_err *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        char why[128];
        return cs_err_set(err, 0, "--auth-tokens %s: %s", path, cs_go_errno(errno, why, sizeof why));
    }
    char *buf = malloc(FILE_MAX + 1);
    size_t got = 0;
    ssize_t k = 0;
    while (buf && got <= FILE_MAX && (k = read(fd, buf + got, FILE_MAX + 1 - got)) > 0)
        got += (size_t)k;
    int saved = errno;
    close(fd);
    int rc;
    if (!buf)
        rc = cs_err_set(err, 0, "--auth-tokens %s: out of memory", path);
    else if (k < 0) {
        char why[128];
        rc = cs_err_set(err, 0, "--auth-tokens %s: %s", path, cs_go_errno(saved, why, sizeof why));
    } else if (got > FILE_MAX)
        rc = cs_err_set(err, 0, "--auth-tokens %s: larger than 1 MiB", path);
    else if ((rc = cs_tokens_parse(out, buf, got, err)) != 0)
        cs_err_prefix(err, "--auth-tokens %s: ", path);
    if (buf)
        OPENSSL_cleanse(buf, got);
    free(buf);
    return rc;
}

void cs_tokens_free(cs_tokens *t)
{
    if (t) {
        free(t->e);
        free(t);
    }
}

size_t cs_tokens_count(const cs_tokens *t)
{
    return t ? t->n : 0;
}

const char *cs_tokens_match(const cs_tokens *t, const char *token, size_t len,
                            uint8_t digest[CS_TOKEN_DIGEST_LEN])
{
    uint8_t d[CS_TOKEN_DIGEST_LEN];
    digest_of(token, len, d);
    const char *found = NULL;
    for (size_t i = 0; i < t->n; i++) /* no early exit: every entry costs the same */
        if (CRYPTO_memcmp(t->e[i].digest, d, sizeof d) == 0)
            found = t->e[i].name;
    if (found && digest)
        memcpy(digest, d, sizeof d);
    return found;
}

bool cs_tokens_has(const cs_tokens *t, const uint8_t digest[CS_TOKEN_DIGEST_LEN])
{
    bool found = false;
    for (size_t i = 0; i < t->n; i++)
        found |= CRYPTO_memcmp(t->e[i].digest, digest, CS_TOKEN_DIGEST_LEN) == 0;
    return found;
}

bool cs_bearer_token(const char *header, const char **token, size_t *len)
{
    while (*header == ' ' || *header == '\t')
        header++;
    if (strncasecmp(header, "bearer", 6) != 0 || (header[6] != ' ' && header[6] != '\t'))
        return false;
    const char *p = header + 7;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strlen(p);
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    if (n == 0)
        return false;
    *token = p;
    *len = n;
    return true;
}
