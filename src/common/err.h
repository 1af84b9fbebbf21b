/* SPDX-License-Identifier: Apache-2.0 */
/* A small error value carried through every internal API: a kind the caller can test
 * (module-specific enum, 0 = generic) and the human message, already worded as the spec says. */
#ifndef CS_COMMON_ERR_H
#define CS_COMMON_ERR_H

#include <stdarg.h>
#include <stddef.h>

#define CS_ERR_MSG_MAX 1024

typedef struct cs_err {
    int kind;
    char msg[CS_ERR_MSG_MAX];
} cs_err;

/* Sets kind and formats msg; e may be NULL (the error is then dropped). Always returns -1 so
 * callers can write `return cs_err_set(...)`. */
int cs_err_set(cs_err *e, int kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int cs_err_vset(cs_err *e, int kind, const char *fmt, va_list ap);

/* Prefixes an existing message: "<prefix><old msg>". Keeps kind. Returns -1. */
int cs_err_prefix(cs_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void cs_err_clear(cs_err *e);

/* errno's text as Go's syscall.Errno.Error() gives it (strerror starting lower case), in
 * buf[len]; returns buf. */
const char *cs_go_errno(int e, char *buf, size_t len);

#endif
