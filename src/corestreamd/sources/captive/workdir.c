/* SPDX-License-Identifier: Apache-2.0 */
/* The working dir, <storage>/captive-core: creating and wiping it, the paths in it, and the
 * stellar-core.conf every command is run with. */
#include "corestreamd/sources/captive/captive_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    if (remove(path) != 0 && errno != ENOENT)
        return errno;
    return 0;
}

int captive_remove_all(const char *path, cs_err *err)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : cs_err_set(err, 0, "lstat %s: %s", path, GOERR(errno));
    int rc = nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (rc != 0)
        return cs_err_set(err, 0, "remove %s: %s", path, GOERR(rc > 0 ? rc : errno));
    return 0;
}

int captive_mkdir_all(const char *path, cs_err *err)
{
    char *p = strdup(path);
    if (!p)
        return cs_err_set(err, 0, "out of memory");
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == 0) {
            char c = *s;
            *s = 0;
            struct stat st;
            if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                int e = errno;
                cs_err_set(err, 0, "mkdir %s: %s", p, GOERR(e));
                free(p);
                return -1;
            }
            if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
                cs_err_set(err, 0, "mkdir %s: not a directory", p);
                free(p);
                return -1;
            }
            *s = c;
            if (!c)
                break;
        }
    }
    free(p);
    return 0;
}

char *captive_abs_path(const char *path)
{
    char *joined = NULL;
    if (path[0] == '/') {
        joined = strdup(path);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd) || asprintf(&joined, "%s/%s", cwd, path) < 0)
            return NULL;
    }
    if (!joined)
        return NULL;
    /* Clean: drop empty and "." elements, resolve "..". */
    size_t n = strlen(joined);
    char *out = malloc(n + 2);
    if (!out) {
        free(joined);
        return NULL;
    }
    size_t o = 0;
    char *save = NULL;
    for (char *el = strtok_r(joined, "/", &save); el; el = strtok_r(NULL, "/", &save)) {
        if (strcmp(el, ".") == 0)
            continue;
        if (strcmp(el, "..") == 0) {
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0)
                o--;
            continue;
        }
        out[o++] = '/';
        size_t k = strlen(el);
        memcpy(out + o, el, k);
        o += k;
    }
    if (o == 0)
        out[o++] = '/';
    out[o] = 0;
    free(joined);
    return out;
}

int captive_write_conf(captive_source *cs, cs_err *err)
{
    if (captive_mkdir_all(cs->workdir, err) != 0)
        return cs_err_prefix(err, "failed to create storage directory (%s): ", cs->workdir);
    size_t len;
    char *text = cs_coretoml_generate(cs->toml, &cs->params, &len);
    if (!text)
        return cs_err_set(err, 0, "error writing configuration: out of memory");
    if (cs_log_enabled(CS_LOG_DEBUG))
        CS_LOG(CS_LOG_DEBUG, "captive core config file contents", KV_S("path", cs->conf), KV_S("contents", text),
               SUBSERVICE);
    int fd = open(cs->conf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = 0;
    if (fd < 0) {
        rc = cs_err_set(err, 0, "error writing configuration: open %s: %s", cs->conf, GOERR(errno));
    } else {
        for (size_t off = 0; off < len && rc == 0;) {
            ssize_t k = write(fd, text + off, len - off);
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0)
                rc = cs_err_set(err, 0, "error writing configuration: write %s: %s", cs->conf, strerror(errno));
            else
                off += (size_t)k;
        }
        if (close(fd) != 0 && rc == 0)
            rc = cs_err_set(err, 0, "error writing configuration: close %s: %s", cs->conf, strerror(errno));
    }
    free(text);
    return rc;
}
