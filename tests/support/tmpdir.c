/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: per-test scratch directories. See tmpdir.h. */
#include "support/tmpdir.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *base_dir(void)
{
    const char *b = getenv("CS_TEST_TMPDIR");
    if (!b || !*b)
        b = getenv("TMPDIR");
    return b && *b ? b : "/tmp";
}

int cs_tmpdir_make(cs_tmpdir *d, const char *prefix)
{
    char tmpl[PATH_MAX];
    d->path[0] = '\0';
    int n = snprintf(tmpl, sizeof tmpl, "%s/%s-XXXXXX", base_dir(), prefix);
    if (n < 0 || (size_t)n >= sizeof tmpl) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (!mkdtemp(tmpl))
        return -1;
    if (!realpath(tmpl, d->path)) {
        int e = errno;
        rmdir(tmpl);
        d->path[0] = '\0';
        errno = e;
        return -1;
    }
    return 0;
}

char *cs_tmpdir_join(const cs_tmpdir *d, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", d->path, name);
    return buf;
}

/* nftw passes the callback no context, so the count lives here, one per thread. */
static _Thread_local size_t g_removed;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    if (++g_removed > CS_TMPDIR_MAX_ENTRIES)
        return 1; /* stop the walk: too many entries to be a test's scratch */
    return remove(path) == 0 ? 0 : -1;
}

int cs_dir_count(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; n < CS_TMPDIR_MAX_ENTRIES && (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

int cs_tmpdir_remove(cs_tmpdir *d)
{
    if (!d->path[0])
        return 0;
    g_removed = 0;
    int rc = nftw(d->path, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
    if (rc == 0)
        d->path[0] = '\0';
    return rc == 0 ? 0 : -1;
}

int cs_dir_fixture_setup(void **state, const char *prefix)
{
    cs_dir_fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    if (cs_cancel_init(&f->cancel) != 0) {
        free(f);
        return -1;
    }
    if (cs_tmpdir_make(&f->dir, prefix) != 0) {
        cs_cancel_destroy(&f->cancel);
        free(f);
        return -1;
    }
    f->root = f->dir.path;
    *state = f;
    return 0;
}

int cs_dir_fixture_teardown(void **state)
{
    cs_dir_fixture *f = *state;
    int rc = cs_tmpdir_remove(&f->dir);
    cs_cancel_destroy(&f->cancel);
    free(f);
    return rc;
}
