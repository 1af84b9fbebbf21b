/* SPDX-License-Identifier: Apache-2.0 */
/* The data directory: made with its parents, and locked by its one owner. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/datadir.h"

static int ensure_dir(const char *path)
{
    if (mkdir(path, 0755) == 0)
        return 0;
    int e = errno;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    errno = e == EEXIST ? ENOTDIR : e;
    return -1;
}

int cs_mkdir_all(const char *dir)
{
    char *p = strdup(dir);
    if (!p)
        return -1;
    int rc = 0;
    for (char *s = p + (*p == '/'); *s && rc == 0; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        rc = ensure_dir(p);
        *s = '/';
    }
    if (rc == 0)
        rc = ensure_dir(p);
    int e = errno;
    free(p);
    errno = e;
    return rc;
}

/* The holder's PID as it wrote it into the lock file, or "unknown". */
static void holder_pid(int fd, char *buf, size_t len)
{
    char text[32];
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    long pid = 0;
    if (n > 0) {
        text[n] = '\0';
        char *end;
        pid = strtol(text, &end, 10);
        if (end == text || (*end != '\n' && *end != '\0'))
            pid = 0;
    }
    if (pid > 0)
        snprintf(buf, len, "pid %ld", pid);
    else
        snprintf(buf, len, "pid unknown");
}

int cs_datadir_lock(const char *dir, cs_err *err)
{
    if (cs_mkdir_all(dir) != 0)
        return cs_err_set(err, 0, "data directory \"%s\": create: %s", dir, strerror(errno));
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, CS_DATADIR_LOCK_NAME) >= (int)sizeof path)
        return cs_err_set(err, 0, "data directory \"%s\": lock %s: %s", dir, CS_DATADIR_LOCK_NAME,
                          strerror(ENAMETOOLONG));
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return cs_err_set(err, 0, "data directory \"%s\": lock %s: %s", dir, CS_DATADIR_LOCK_NAME, strerror(errno));
    int rc;
    do
        rc = flock(fd, LOCK_EX | LOCK_NB);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        int e = errno;
        char who[48];
        if (e == EWOULDBLOCK)
            holder_pid(fd, who, sizeof who);
        close(fd);
        if (e == EWOULDBLOCK)
            return cs_err_set(err, 0,
                              "data directory \"%s\" is in use by another corestreamd (%s): stop it, or give this "
                              "one another --data-dir",
                              dir, who);
        return cs_err_set(err, 0, "data directory \"%s\": lock %s: %s", dir, CS_DATADIR_LOCK_NAME, strerror(e));
    }
    /* Ours now: say who holds it, for the next one to name. */
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
        int e = errno;
        close(fd);
        return cs_err_set(err, 0, "data directory \"%s\": lock %s: %s", dir, CS_DATADIR_LOCK_NAME, strerror(e));
    }
    return fd;
}
