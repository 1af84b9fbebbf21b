#include "common/err.h"

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
