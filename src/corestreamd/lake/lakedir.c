/* SPDX-License-Identifier: Apache-2.0 */
/* The lake in a directory: its open (what is there), its settle (the first writes) and the files'
 * names. See lakedir.h; objects are written by lakeput.c. */
#include "corestreamd/lake/lakedir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/datadir.h"
#include "common/log.h"
#include "corestreamd/lake/lakeconfig.h"
#include "corestreamd/lake/lakedir_internal.h"

/* A config file larger than this is not one of ours (ours are under 300 bytes). */
#define CONFIG_MAX 65536

void lake_tmp_name(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, ".%s.tmp", name);
}

bool lake_is_tmp_name(const char *name)
{
    size_t n = strlen(name);
    return n > 5 && name[0] == '.' && strcmp(name + n - 4, ".tmp") == 0;
}

static int start_failed(const cs_lake_dir *d, cs_err *err, const char *what)
{
    return cs_err_set(err, CS_LAKE_DIR_ERR_START, "lake: directory \"%s\": %s: %s", d->path, what, strerror(errno));
}

/* Whether path a is b or lies under it. */
static bool within(const char *a, const char *b)
{
    size_t n = strlen(b);
    return strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/' || (n > 0 && b[n - 1] == '/'));
}

/* realpath of path, which need not exist yet: its nearest existing ancestor resolved, the rest
 * appended as written (trailing slashes dropped). 0, or -1 with errno. */
static int resolve(const char *path, char out[PATH_MAX])
{
    char whole[PATH_MAX], head[PATH_MAX], base[PATH_MAX];
    size_t n = (size_t)snprintf(whole, sizeof whole, "%s", path);
    if (n >= sizeof whole) {
        errno = ENAMETOOLONG;
        return -1;
    }
    while (n > 1 && whole[n - 1] == '/')
        whole[--n] = '\0';
    memcpy(head, whole, n + 1);
    const char *tail = NULL; /* what does not exist yet, from whole */
    while (!realpath(*head ? head : ".", base)) {
        if (errno != ENOENT)
            return -1;
        char *slash = strrchr(head, '/');
        tail = whole + (slash ? slash - head + 1 : 0);
        if (slash == head)
            head[1] = '\0'; /* "/" */
        else if (slash)
            *slash = '\0';
        else
            head[0] = '\0'; /* the working directory */
    }
    int len = tail ? snprintf(out, PATH_MAX, "%s/%s", strcmp(base, "/") == 0 ? "" : base, tail)
                   : snprintf(out, PATH_MAX, "%s", base);
    if (len >= PATH_MAX) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

/* The lake must not share files with the ring, which removes what it did not write: checked
 * before the directory is made, so a refused one is not left inside the ring. */
static int check_overlap(const cs_lake_dir *d, const char *ring_dir, cs_err *err)
{
    char lake[PATH_MAX], ring[PATH_MAX], ledgers[PATH_MAX + 16];
    if (resolve(d->path, lake) != 0)
        return start_failed(d, err, "resolve");
    if (!realpath(ring_dir, ring))
        return cs_err_set(err, CS_LAKE_DIR_ERR_START, "lake: directory \"%s\": resolve the ring's \"%s\": %s",
                          d->path, ring_dir, strerror(errno));
    snprintf(ledgers, sizeof ledgers, "%s/%s", strcmp(lake, "/") == 0 ? "" : lake, CS_LAKE_DIR_LEDGERS);
    if (within(lake, ring) || within(ring, ledgers))
        return cs_err_set(err, CS_LAKE_DIR_ERR_START,
                          "lake: directory \"%s\" overlaps the ring's \"%s\": give --lake-dir outside --data-dir's "
                          "ledgers",
                          d->path, ring_dir);
    return 0;
}

/* Reads name in dirfd into buf (at most CONFIG_MAX bytes): its length; 0 with *absent when there
 * is no such file; -2 when it is not a regular file of at most CONFIG_MAX bytes; -1 with errno. */
static ssize_t read_small(int dirfd, const char *name, char *buf, bool *absent)
{
    *absent = false;
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        *absent = errno == ENOENT;
        return *absent ? 0 : errno == ELOOP ? -2 : -1;
    }
    struct stat st;
    ssize_t n = fstat(fd, &st) != 0 ? -1 : !S_ISREG(st.st_mode) || st.st_size > CONFIG_MAX ? -2 : read(fd, buf, CONFIG_MAX);
    int e = errno;
    close(fd);
    errno = e;
    return n;
}

/* A config file in place must be this lake's. *present says whether there is one. */
static int check_config(const cs_lake_dir *d, int dirfd, const char *rel, const char *name, cs_lake_conf_kind kind,
                        bool *present, cs_err *err)
{
    char *text = malloc(CONFIG_MAX);
    if (!text) {
        errno = ENOMEM;
        return start_failed(d, err, name);
    }
    bool absent;
    ssize_t n = read_small(dirfd, name, text, &absent);
    cs_err why = {0};
    if (n == -2)
        cs_err_set(&why, 0, "it is not a regular file of at most %d bytes", CONFIG_MAX);
    else if (n >= 0 && !absent)
        cs_lake_config_agrees(text, (size_t)n, kind, d->passphrase, &d->layout, &why);
    int rc = 0;
    if (n == -1 || why.kind == CS_LAKE_CONF_ERR_MEMORY) {
        char what[64];
        snprintf(what, sizeof what, "read %s%s", rel, name);
        if (why.kind == CS_LAKE_CONF_ERR_MEMORY)
            errno = ENOMEM;
        rc = start_failed(d, err, what);
    } else if (why.msg[0]) {
        rc = cs_err_set(err, CS_LAKE_DIR_ERR_START,
                        "lake: directory \"%s\": \"%s/%s%s\" is another lake's: %s; give another --lake-dir, or the "
                        "flags it was made with",
                        d->path, d->path, rel, name, why.msg);
    }
    *present = !absent && rc == 0;
    free(text);
    return rc;
}

static int add_leftover(cs_lake_dir *d, bool in_ledgers, const char *part, const char *name)
{
    lake_leftover *grown = realloc(d->leftovers, (d->nleftovers + 1) * sizeof *grown);
    if (!grown)
        return -1;
    d->leftovers = grown;
    lake_leftover *t = &grown[d->nleftovers++];
    t->in_ledgers = in_ledgers;
    snprintf(t->part, sizeof t->part, "%s", part);
    snprintf(t->name, sizeof t->name, "%s", name);
    return 0;
}

/* The directory's entries, one call of fn per name (its own descriptor: dirfd stays open). */
static int each_entry(int dirfd, int (*fn)(void *arg, const char *name), void *arg)
{
    int fd = dup(dirfd);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        errno = e;
        return -1;
    }
    rewinddir(dir);
    int rc = 0;
    struct dirent *de;
    errno = 0;
    while (rc == 0 && (de = readdir(dir)) != NULL) {
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            rc = fn(arg, de->d_name);
        errno = 0;
    }
    int e = errno; /* 0 at the directory's end; a failed fn's or readdir's errno otherwise */
    closedir(dir);
    errno = e;
    return rc != 0 || e != 0 ? -1 : 0;
}

/* ---- the newest object ------------------------------------------------------------------- */

/* One directory of objects being read: the partition it is ("" without partitions). */
typedef struct scan {
    cs_lake_dir *d;
    const char *part;
    bool found;
    cs_lake_batch newest;
    uint32_t *parts; /* partition directories' first ledgers, from the ledgers directory */
    size_t nparts;
} scan;

static int note_object(void *arg, const char *name)
{
    scan *s = arg;
    if (lake_is_tmp_name(name))
        return add_leftover(s->d, true, s->part, name);
    char path[2 * CS_LAKE_KEY_MAX + 64];
    int n = snprintf(path, sizeof path, CS_LAKE_LEDGERS_PATH "/%s%s%s", s->part, *s->part ? "/" : "", name);
    cs_lake_batch b;
    if (n > 0 && (size_t)n < sizeof path && cs_lake_key_parse(&s->d->layout, path, (size_t)n, &b, NULL) == 0 &&
        (!s->found || b.start > s->newest.start)) {
        s->found = true;
        s->newest = b;
    }
    return 0;
}

/* The first ledger of the partition directory name, when it is exactly one of this layout's. */
static bool partition_of(const cs_lake_layout *l, const char *name, uint32_t *first)
{
    const char *dash = strstr(name, "--");
    if (!dash || dash - name != 8)
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(dash + 2, &end, 10);
    cs_lake_batch b;
    if (errno || end == dash + 2 || *end != '-' || v > UINT32_MAX || cs_lake_batch_of(l, (uint32_t)v, &b, NULL) != 0)
        return false;
    char key[CS_LAKE_KEY_MAX];
    cs_lake_key(l, b, key);
    size_t n = strlen(name);
    if (strncmp(key, name, n) != 0 || key[n] != '/')
        return false;
    *first = (uint32_t)v;
    return true;
}

static int note_partition(void *arg, const char *name)
{
    scan *s = arg;
    uint32_t first;
    if (lake_is_tmp_name(name))
        return add_leftover(s->d, true, "", name);
    if (!partition_of(&s->d->layout, name, &first))
        return 0;
    uint32_t *grown = realloc(s->parts, (s->nparts + 1) * sizeof *grown);
    if (!grown)
        return -1;
    s->parts = grown;
    s->parts[s->nparts++] = first;
    return 0;
}

static int newest_first(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Partition directories newest first, down to the first that holds an object. */
static int scan_partitions(cs_lake_dir *d, scan *s, cs_err *err)
{
    if (each_entry(d->ledgers_fd, note_partition, s) != 0)
        return start_failed(d, err, "read " CS_LAKE_DIR_LEDGERS "/");
    qsort(s->parts, s->nparts, sizeof *s->parts, newest_first);
    for (size_t i = 0; i < s->nparts && !s->found; i++) {
        cs_lake_batch b;
        char key[CS_LAKE_KEY_MAX];
        cs_lake_batch_of(&d->layout, s->parts[i], &b, NULL);
        cs_lake_key(&d->layout, b, key);
        *strchr(key, '/') = '\0';
        int fd = openat(d->ledgers_fd, key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        s->part = key;
        /* Not a directory after all, or gone meanwhile: no objects there. */
        int rc = fd < 0 ? (errno == ENOTDIR || errno == ELOOP || errno == ENOENT ? 0 : -1) : each_entry(fd, note_object, s);
        if (fd >= 0)
            close(fd);
        if (rc != 0) {
            char what[CS_LAKE_KEY_MAX + 32];
            snprintf(what, sizeof what, "read " CS_LAKE_DIR_LEDGERS "/%s/", key);
            return start_failed(d, err, what);
        }
    }
    return 0;
}

static int find_newest(cs_lake_dir *d, cs_err *err)
{
    scan s = {.d = d, .part = ""};
    int rc = 0;
    if (d->layout.batches_per_partition == 1) {
        if (each_entry(d->ledgers_fd, note_object, &s) != 0)
            rc = start_failed(d, err, "read " CS_LAKE_DIR_LEDGERS "/");
    } else {
        rc = scan_partitions(d, &s, err);
    }
    free(s.parts);
    d->has_newest = s.found;
    d->newest = s.newest;
    return rc;
}

/* ---- open -------------------------------------------------------------------------------- */

static int note_root_leftover(void *arg, const char *name)
{
    return lake_is_tmp_name(name) ? add_leftover(arg, false, "", name) : 0;
}

/* What the directory holds: configs, the ledgers directory, the newest object, leftovers. */
static int look(cs_lake_dir *d, cs_err *err)
{
    d->dfd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d->dfd < 0)
        return start_failed(d, err, "open");
    if (check_config(d, d->dfd, "", CS_LAKE_CONFIG_NAME, CS_LAKE_CONF_SEP, &d->has_config, err) != 0)
        return -1;
    if (each_entry(d->dfd, note_root_leftover, d) != 0)
        return start_failed(d, err, "read");
    d->ledgers_fd = openat(d->dfd, CS_LAKE_DIR_LEDGERS, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d->ledgers_fd < 0)
        return errno == ENOENT ? 0 : start_failed(d, err, "open " CS_LAKE_DIR_LEDGERS "/");
    if (check_config(d, d->ledgers_fd, CS_LAKE_DIR_LEDGERS "/", CS_LAKE_MANIFEST_NAME, CS_LAKE_CONF_MANIFEST,
                     &d->has_manifest, err) != 0)
        return -1;
    return find_newest(d, err);
}

int cs_lake_dir_open(cs_lake_dir **out, const char *dir, const char *ring_dir, const char *passphrase,
                     const cs_lake_layout *l, cs_err *err)
{
    *out = NULL;
    cs_lake_dir *d = calloc(1, sizeof *d);
    if (d)
        d->dfd = d->ledgers_fd = d->part_fd = -1;
    if (!d || !(d->path = strdup(dir)) || !(d->passphrase = strdup(passphrase))) {
        cs_lake_dir_close(d);
        return cs_err_set(err, CS_LAKE_DIR_ERR_START, "lake: directory \"%s\": out of memory", dir);
    }
    d->layout = *l;
    struct stat st;
    d->parent_dirty = stat(dir, &st) != 0;
    int rc = check_overlap(d, ring_dir, err);
    if (rc == 0)
        rc = cs_mkdir_all(dir) != 0 ? start_failed(d, err, "create") : look(d, err);
    if (rc != 0) {
        cs_lake_dir_close(d);
        return -1;
    }
    *out = d;
    return 0;
}

bool cs_lake_dir_newest(const cs_lake_dir *d, cs_lake_batch *out)
{
    if (d->has_newest)
        *out = d->newest;
    return d->has_newest;
}

const char *cs_lake_dir_path(const cs_lake_dir *d)
{
    return d->path;
}

/* ---- settle ------------------------------------------------------------------------------ */

static int io_failed(const cs_lake_dir *d, cs_err *err, const char *what, const char *rel)
{
    return cs_err_set(err, CS_LAKE_DIR_ERR_IO, "lake: %s \"%s/%s\": %s", what, d->path, rel, strerror(errno));
}

/* ledgers/, made and flushed into the lake's directory (and that into its parent when open made
 * it). */
static int make_ledgers(cs_lake_dir *d, cs_err *err)
{
    if (d->ledgers_fd < 0) {
        if (mkdirat(d->dfd, CS_LAKE_DIR_LEDGERS, 0755) != 0 && errno != EEXIST)
            return io_failed(d, err, "create", CS_LAKE_DIR_LEDGERS);
        if (fsync(d->dfd) != 0)
            return io_failed(d, err, "flush", "");
        d->ledgers_fd = openat(d->dfd, CS_LAKE_DIR_LEDGERS, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (d->ledgers_fd < 0)
            return io_failed(d, err, "open", CS_LAKE_DIR_LEDGERS);
    }
    if (d->parent_dirty) {
        int pfd = openat(d->dfd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int rc = pfd < 0 ? -1 : fsync(pfd);
        int e = errno;
        if (pfd >= 0)
            close(pfd);
        errno = e;
        if (rc != 0)
            return io_failed(d, err, "flush", "..");
        d->parent_dirty = false;
    }
    return 0;
}

/* A config file written where absent (one another writer put there meanwhile is kept). */
static int write_config(cs_lake_dir *d, int dirfd, const char *rel, const char *name, char *text, bool *has,
                        cs_err *err)
{
    if (*has) {
        free(text);
        return 0;
    }
    if (!text)
        return -1; /* err set by the text's maker */
    const char *what = "write";
    int rc = lake_publish(dirfd, name, text, strlen(text), &what);
    free(text);
    if (rc < 0) {
        char at[64];
        snprintf(at, sizeof at, "%s%s", rel, name);
        return io_failed(d, err, what, at);
    }
    *has = true;
    return 0;
}

static int remove_leftovers(cs_lake_dir *d, cs_err *err)
{
    size_t n = d->nleftovers;
    while (d->nleftovers > 0) {
        const lake_leftover *t = &d->leftovers[d->nleftovers - 1];
        int dirfd = !t->in_ledgers ? d->dfd
                    : *t->part     ? openat(d->ledgers_fd, t->part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                                   : d->ledgers_fd;
        int rc = dirfd < 0 || (unlinkat(dirfd, t->name, 0) != 0 && errno != ENOENT) || fsync(dirfd) != 0 ? -1 : 0;
        int e = errno;
        if (dirfd >= 0 && dirfd != d->dfd && dirfd != d->ledgers_fd)
            close(dirfd);
        if (rc != 0) {
            errno = e;
            char at[2 * CS_LAKE_KEY_MAX + 32];
            snprintf(at, sizeof at, "%s%s%s%s", t->in_ledgers ? CS_LAKE_DIR_LEDGERS "/" : "", t->part,
                     *t->part ? "/" : "", t->name);
            return io_failed(d, err, "remove", at);
        }
        d->nleftovers--;
    }
    if (n > 0)
        CS_LOG(CS_LOG_INFO, "lake export: removed leftover temporary files", KV_S("dir", d->path), KV_U("files", n));
    return 0;
}

int cs_lake_dir_settle(cs_lake_dir *d, cs_err *err)
{
    if (make_ledgers(d, err) != 0)
        return -1;
    if (write_config(d, d->dfd, "", CS_LAKE_CONFIG_NAME, cs_lake_config_json(d->passphrase, &d->layout, err),
                     &d->has_config, err) != 0 ||
        write_config(d, d->ledgers_fd, CS_LAKE_DIR_LEDGERS "/", CS_LAKE_MANIFEST_NAME,
                     cs_lake_manifest_json(d->passphrase, &d->layout, err), &d->has_manifest, err) != 0)
        return -1;
    return remove_leftovers(d, err);
}

void cs_lake_dir_object_path(const cs_lake_dir *d, cs_lake_batch b, char *buf, size_t len)
{
    char key[CS_LAKE_KEY_MAX];
    cs_lake_key(&d->layout, b, key);
    snprintf(buf, len, "%s/" CS_LAKE_DIR_LEDGERS "/%s", d->path, key);
}

void cs_lake_dir_close(cs_lake_dir *d)
{
    if (!d)
        return;
    if (d->part_fd >= 0)
        close(d->part_fd);
    if (d->ledgers_fd >= 0)
        close(d->ledgers_fd);
    if (d->dfd >= 0)
        close(d->dfd);
    free(d->leftovers);
    free(d->passphrase);
    free(d->path);
    free(d);
}
