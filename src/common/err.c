/* SPDX-License-Identifier: Apache-2.0 */
#include "common/err.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

int cs_err_vset(cs_err *e, int kind, const char *fmt, va_list ap)
{
    if (!e)
        return -1;
    e->kind = kind;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    return -1;
}

int cs_err_set(cs_err *e, int kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cs_err_vset(e, kind, fmt, ap);
    va_end(ap);
    return -1;
}

int cs_err_prefix(cs_err *e, const char *fmt, ...)
{
    if (!e)
        return -1;
    char prefix[CS_ERR_MSG_MAX], old[CS_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    size_t n = strlen(prefix);
    memcpy(e->msg, prefix, n + 1);
    /* Truncation is acceptable here: messages are bounded and the prefix matters most. */
    strncat(e->msg, old, sizeof e->msg - n - 1);
    return -1;
}

void cs_err_clear(cs_err *e)
{
    if (e) {
        e->kind = 0;
        e->msg[0] = '\0';
    }
}

const char *cs_go_errno(int e, char *buf, size_t len)
{
    snprintf(buf, len, "%s", strerror(e));
    /* "No such file…" becomes "no such file…"; a leading acronym ("RPC …") is kept. */
    if (buf[0] && isupper((unsigned char)buf[0]) && !(buf[1] && isupper((unsigned char)buf[1])))
        buf[0] = (char)tolower((unsigned char)buf[0]);
    return buf;
}
