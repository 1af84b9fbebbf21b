/* SPDX-License-Identifier: Apache-2.0 */
/* The shim of faultfs.h: openat remembers each descriptor's name (close forgets it), and openat,
 * pread, fstatat, write and fsync fail when the armed fault matches. The real calls are found with dlsym(RTLD_NEXT). */
#include "support/faultfs.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FDS 4096

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_names[MAX_FDS][64]; /* the last name each descriptor was opened under (its tail) */
static struct {
    cs_fault_op op;
    char suffix[64];
    int err;
    int left; /* -1: unlimited */
    bool armed;
    int hits;
} g_fault;

void cs_fault_arm(cs_fault_op op, const char *suffix, int err, int times)
{
    pthread_mutex_lock(&g_mu);
    g_fault.op = op;
    snprintf(g_fault.suffix, sizeof g_fault.suffix, "%s", suffix);
    g_fault.err = err;
    g_fault.left = times;
    g_fault.hits = 0;
    g_fault.armed = true;
    pthread_mutex_unlock(&g_mu);
}

void cs_fault_disarm(void)
{
    pthread_mutex_lock(&g_mu);
    g_fault.armed = false;
    pthread_mutex_unlock(&g_mu);
}

int cs_fault_hits(void)
{
    pthread_mutex_lock(&g_mu);
    int n = g_fault.hits;
    pthread_mutex_unlock(&g_mu);
    return n;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The errno to fail op on name with, or 0. */
static int fault_for(cs_fault_op op, const char *name)
{
    int e = 0;
    pthread_mutex_lock(&g_mu);
    if (g_fault.armed && g_fault.op == op && name && g_fault.left != 0 && ends_with(name, g_fault.suffix)) {
        e = g_fault.err;
        g_fault.hits++;
        if (g_fault.left > 0)
            g_fault.left--;
    }
    pthread_mutex_unlock(&g_mu);
    return e;
}

static void remember(int fd, const char *name)
{
    if (fd < 0 || fd >= MAX_FDS)
        return;
    size_t n = strlen(name);
    const char *tail = n >= sizeof g_names[0] ? name + n - (sizeof g_names[0] - 1) : name;
    pthread_mutex_lock(&g_mu);
    snprintf(g_names[fd], sizeof g_names[0], "%s", tail);
    pthread_mutex_unlock(&g_mu);
}

static int fd_fault(cs_fault_op op, int fd)
{
    char name[64] = "";
    if (fd >= 0 && fd < MAX_FDS) {
        pthread_mutex_lock(&g_mu);
        memcpy(name, g_names[fd], sizeof name);
        pthread_mutex_unlock(&g_mu);
    }
    return name[0] ? fault_for(op, name) : 0;
}

/* Whether the armed fault fails this call; errno set when it does. */
static bool failed(int e)
{
    if (e)
        errno = e;
    return e != 0;
}

typedef int (*openat_fn)(int, const char *, int, ...);
typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);
typedef int (*fstatat_fn)(int, const char *, struct stat *, int);
typedef int (*fstatat64_fn)(int, const char *, struct stat64 *, int);
typedef ssize_t (*pread64_fn)(int, void *, size_t, off64_t);
typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef int (*fsync_fn)(int);
typedef int (*close_fn)(int);

static int do_openat(const char *sym, int dfd, const char *name, int flags, mode_t mode)
{
    if (failed(fault_for(CS_FAULT_OPEN, name)))
        return -1;
    openat_fn real = (openat_fn)dlsym(RTLD_NEXT, sym);
    int fd = real(dfd, name, flags, mode);
    remember(fd, name);
    return fd;
}

/* The mode argument of an open that creates (O_CREAT, O_TMPFILE), else 0. */
#define OPEN_MODE(flags, mode)                                                                       \
    do {                                                                                           \
        (mode) = 0;                                                                                \
        if ((flags) & (O_CREAT | O_TMPFILE)) {                                                     \
            va_list ap;                                                                            \
            va_start(ap, flags);                                                                   \
            (mode) = (mode_t)va_arg(ap, int);                                                      \
            va_end(ap);                                                                            \
        }                                                                                          \
    } while (0)

int openat(int dfd, const char *name, int flags, ...)
{
    mode_t mode;
    OPEN_MODE(flags, mode);
    return do_openat("openat", dfd, name, flags, mode);
}

int openat64(int dfd, const char *name, int flags, ...)
{
    mode_t mode;
    OPEN_MODE(flags, mode);
    return do_openat("openat64", dfd, name, flags, mode);
}

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    if (failed(fd_fault(CS_FAULT_READ, fd)))
        return -1;
    return ((pread_fn)dlsym(RTLD_NEXT, "pread"))(fd, buf, n, off);
}

ssize_t pread64(int fd, void *buf, size_t n, off64_t off)
{
    if (failed(fd_fault(CS_FAULT_READ, fd)))
        return -1;
    return ((pread64_fn)dlsym(RTLD_NEXT, "pread64"))(fd, buf, n, off);
}

int fstatat(int dfd, const char *name, struct stat *st, int flags)
{
    if (failed(fault_for(CS_FAULT_STAT, name)))
        return -1;
    return ((fstatat_fn)dlsym(RTLD_NEXT, "fstatat"))(dfd, name, st, flags);
}

int fstatat64(int dfd, const char *name, struct stat64 *st, int flags)
{
    if (failed(fault_for(CS_FAULT_STAT, name)))
        return -1;
    return ((fstatat64_fn)dlsym(RTLD_NEXT, "fstatat64"))(dfd, name, st, flags);
}

ssize_t write(int fd, const void *buf, size_t n)
{
    if (failed(fd_fault(CS_FAULT_WRITE, fd)))
        return -1;
    return ((write_fn)dlsym(RTLD_NEXT, "write"))(fd, buf, n);
}

int fsync(int fd)
{
    if (failed(fd_fault(CS_FAULT_SYNC, fd)))
        return -1;
    return ((fsync_fn)dlsym(RTLD_NEXT, "fsync"))(fd);
}

/* A closed descriptor forgets its name: the number may come back from an open this shim does not
 * see (fopen, socket, pipe), whose writes must not meet a fault meant for a file. */
int close(int fd)
{
    if (fd >= 0 && fd < MAX_FDS) {
        pthread_mutex_lock(&g_mu);
        g_names[fd][0] = '\0';
        pthread_mutex_unlock(&g_mu);
    }
    return ((close_fn)dlsym(RTLD_NEXT, "close"))(fd);
}
