/* SPDX-License-Identifier: Apache-2.0 */
/* Secrets kept in files: see secretfile.h. */
#define _DEFAULT_SOURCE /* explicit_bzero */
#include "common/secretfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cs_open_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
        int e = S_ISDIR(st.st_mode) ? EISDIR : errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static bool blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

int cs_read_secret_line(const char *path, char *out, size_t len, cs_err *err)
{
    int fd = cs_open_file(path);
    if (fd < 0)
        return cs_err_set(err, 0, "%s", strerror(errno));
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    int e = errno;
    close(fd);
    if (n < 0)
        return cs_err_set(err, 0, "%s", strerror(e));
    buf[n] = '\0';
    char *s = buf;
    while (blank(*s))
        s++;
    size_t k = strcspn(s, "\r\n");
    while (k > 0 && (s[k - 1] == ' ' || s[k - 1] == '\t'))
        k--;
    int rc = 0;
    if (k == 0)
        rc = cs_err_set(err, 0, "the file is empty");
    else if (k >= len)
        rc = cs_err_set(err, 0, "its first line is longer than %zu bytes", len - 1);
    else {
        memcpy(out, s, k);
        out[k] = '\0';
    }
    explicit_bzero(buf, sizeof buf);
    if (rc != 0 && len)
        explicit_bzero(out, len);
    return rc;
}
