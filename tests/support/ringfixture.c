/* SPDX-License-Identifier: Apache-2.0 */
#include "support/ringfixture.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/datadir.h"

int cs_ringfx_setup(void **state, const char *tag)
{
    cs_ringfx *f = calloc(1, sizeof *f);
    if (!f || cs_tmpdir_make(&f->dir, tag) != 0) {
        free(f);
        return -1;
    }
    if (strlen(f->dir.path) > sizeof f->data - 16) {
        cs_tmpdir_remove(&f->dir);
        free(f);
        return -1;
    }
    /* The length is checked above: both fit. */
    size_t n = strlen(f->dir.path);
    memcpy(f->data, f->dir.path, n);
    strcpy(f->data + n, "/data");
    strcpy(f->ring, f->data);
    strcat(f->ring, "/ledgers");
    *state = f;
    return 0;
}

int cs_ringfx_teardown(void **state)
{
    cs_ringfx *f = *state;
    if (f->started)
        cs_proc_free(&f->proc);
    chmod(f->ring, 0755);
    cs_tmpdir_remove(&f->dir);
    free(f);
    return 0;
}

void cs_ringfx_start(cs_ringfx *f, const char *mount_script, const char *bin, const char *const *args)
{
    const char *argv[64];
    int n = 0;
    static char script[4200];
    if (mount_script) {
        argv[n++] = "/usr/bin/unshare";
        argv[n++] = "-rm";
        argv[n++] = "/bin/sh";
        argv[n++] = "-c";
        snprintf(script, sizeof script, "%s && exec \"$0\" \"$@\"", mount_script);
        argv[n++] = script;
    }
    argv[n++] = bin;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--data-dir";
    argv[n++] = f->data;
    while (*args) {
        assert_true(n < 63);
        argv[n++] = *args++;
    }
    argv[n] = NULL;
    assert_int_equal(cs_proc_start(&f->proc, (char *const *)argv), 0);
    f->started = true;
}

const char *cs_ringfx_with_pid(const cs_ringfx *f, const char *needle)
{
    static char buf[8192];
    const char *m = strstr(needle, "msg=\"");
    const char *q = m ? strchr(m + 5, '"') : NULL;
    while (q && q[-1] == '\\') /* an escaped quote inside the message */
        q = strchr(q + 1, '"');
    if (!q || q[1] != ' ')
        return needle;
    snprintf(buf, sizeof buf, "%.*s pid=%d%s", (int)(q + 1 - needle), needle, (int)f->proc.pid, q + 1);
    return buf;
}

void cs_ringfx_wait_line(cs_ringfx *f, const char *needle, int timeout_ms)
{
    needle = cs_ringfx_with_pid(f, needle);
    if (cs_proc_wait_line(&f->proc, needle, timeout_ms) != 0)
        fail_msg("no log line with %s; log:\n%s", needle, f->proc.log);
}

void cs_ringfx_run_to_exit(cs_ringfx *f, const char *bin, const char *const *args, int timeout_ms)
{
    cs_ringfx_start(f, NULL, bin, args);
    int st = cs_proc_wait_exit(&f->proc, timeout_ms);
    cs_proc_drain(&f->proc);
    if (st != 0)
        fail_msg("exit %d:\n%s", st, f->proc.log);
}

void cs_ringfx_free_proc(cs_ringfx *f)
{
    cs_proc_free(&f->proc);
    f->started = false;
}

static int cmp_names(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* Folds dir into h, by name, in name order: each entry's name, a file's bytes, a directory's
 * entries (recursively). */
static void digest_into(XXH64_state_t *h, const char *dir)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, cmp_names);
    assert_true(n >= 0);
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        char path[PATH_MAX + 300];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        XXH64_update(h, name, strlen(name) + 1);
        struct stat st;
        if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0 && lstat(path, &st) == 0) {
            if (S_ISDIR(st.st_mode)) {
                digest_into(h, path);
            } else if (S_ISREG(st.st_mode) && strcmp(name, CS_DATADIR_LOCK_NAME) != 0) {
                /* The lock file holds its holder's PID: that it exists is what counts. */
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                char buf[65536];
                ssize_t got;
                while (fd >= 0 && (got = read(fd, buf, sizeof buf)) > 0)
                    XXH64_update(h, buf, (size_t)got);
                if (fd >= 0)
                    close(fd);
            }
        }
        free(names[i]);
    }
    free(names);
}

uint64_t cs_ringfx_dir_digest(const char *dir)
{
    XXH64_state_t *h = XXH64_createState();
    XXH64_reset(h, 0);
    digest_into(h, dir);
    uint64_t d = XXH64_digest(h);
    XXH64_freeState(h);
    return d;
}
