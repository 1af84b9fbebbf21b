/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/jetstream/idkey.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define TEXT_LEN (2 * CS_JS_ID_KEY_LEN + 1)

static int io_fail(cs_err *err, const char *what, const char *path, int e)
{
    return cs_err_set(err, 0, "jetstream: %s the message id secret \"%s\": %s", what, path, strerror(e));
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The open file fd: its mode and text into key. */
static int read_key(int fd, const char *path, uint8_t key[CS_JS_ID_KEY_LEN], cs_err *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return io_fail(err, "read", path, errno);
    if (!S_ISREG(st.st_mode))
        return cs_err_set(err, 0, "jetstream: the message id secret \"%s\" is not a regular file; move it aside to "
                                  "draw a new one",
                          path);
    if (st.st_mode & 077)
        return cs_err_set(err, 0, "jetstream: the message id secret \"%s\" has mode %04o: others may read it "
                                  "(chmod 600 it)",
                          path, (unsigned)(st.st_mode & 07777));
    char text[TEXT_LEN + 1];
    ssize_t n = pread(fd, text, sizeof text, 0);
    if (n < 0)
        return io_fail(err, "read", path, errno);
    bool ok = n == TEXT_LEN && text[TEXT_LEN - 1] == '\n';
    for (int i = 0; ok && i < CS_JS_ID_KEY_LEN; i++) {
        int hi = hex_digit(text[2 * i]), lo = hex_digit(text[2 * i + 1]);
        ok = hi >= 0 && lo >= 0;
        key[i] = (uint8_t)(hi << 4 | lo);
    }
    if (!ok)
        return cs_err_set(err, 0, "jetstream: the message id secret \"%s\" is not %d hex digits and a newline; "
                                  "move it aside to draw a new one",
                          path, 2 * CS_JS_ID_KEY_LEN);
    return 0;
}

/* Writes key to path (through path.tmp, fsync'd, renamed once on disk). */
static int write_key(const char *path, const uint8_t key[CS_JS_ID_KEY_LEN], cs_err *err)
{
    char text[TEXT_LEN + 1], tmp[PATH_MAX + 8];
    for (int i = 0; i < CS_JS_ID_KEY_LEN; i++)
        snprintf(text + 2 * i, 3, "%02x", key[i]);
    text[TEXT_LEN - 1] = '\n';
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return io_fail(err, "write", tmp, errno);
    bool ok = write(fd, text, TEXT_LEN) == TEXT_LEN && fsync(fd) == 0;
    int e = ok ? 0 : errno ? errno : ENOSPC;
    if (close(fd) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        e = errno;
    }
    if (!ok) {
        unlink(tmp);
        return io_fail(err, "write", path, e);
    }
    return 0;
}

int cs_js_id_key_load(const char *data_dir, uint8_t key[CS_JS_ID_KEY_LEN], bool *created, cs_err *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", data_dir, CS_JS_ID_KEY_FILE);
    *created = false;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        *created = true;
        if (getrandom(key, CS_JS_ID_KEY_LEN, 0) != CS_JS_ID_KEY_LEN)
            return io_fail(err, "draw", path, errno);
        return 0;
    }
    if (fd < 0)
        return io_fail(err, "read", path, errno);
    int rc = read_key(fd, path, key, err);
    close(fd);
    return rc;
}

int cs_js_id_key_save(const char *data_dir, const uint8_t key[CS_JS_ID_KEY_LEN], cs_err *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", data_dir, CS_JS_ID_KEY_FILE);
    return write_key(path, key, err);
}
