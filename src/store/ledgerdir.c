/* SPDX-License-Identifier: Apache-2.0 */
#include "store/ledgerdir.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NAME_PREFIX "ledger-"
#define NAME_SUFFIX ".xdr"

int cs_ledger_name_parse(const char *name, uint32_t *seq)
{
    size_t plen = strlen(NAME_PREFIX);
    if (strncmp(name, NAME_PREFIX, plen) != 0)
        return -1;
    const char *p = name + plen;
    if (*p < '0' || *p > '9')
        return -1;
    /* Checking the bound at every digit keeps v within 64 bits however many leading zeros. */
    uint64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > UINT32_MAX)
            return -1;
    }
    if (strcmp(p, NAME_SUFFIX) != 0)
        return -1;
    *seq = (uint32_t)v;
    return 0;
}

void cs_ledger_name_format(char *buf, size_t len, uint32_t seq)
{
    snprintf(buf, len, NAME_PREFIX "%" PRIu32 NAME_SUFFIX, seq);
}

/* Directories are skipped; everything else counts. Symlinks and file systems that do not fill
 * d_type are resolved with stat, and an entry stat cannot resolve (a dangling link) is kept, so a
 * broken dump fails loudly when the ledger is read rather than vanishing from the scan. */
static int entry_is_dir(int dfd, const struct dirent *de)
{
    if (de->d_type != DT_LNK && de->d_type != DT_UNKNOWN)
        return de->d_type == DT_DIR;
    struct stat st;
    return fstatat(dfd, de->d_name, &st, 0) == 0 && S_ISDIR(st.st_mode);
}

static int cmp_entry(const void *a, const void *b)
{
    uint32_t x = ((const cs_ledger_entry *)a)->seq, y = ((const cs_ledger_entry *)b)->seq;
    return (x > y) - (x < y);
}

static int append_entry(cs_ledger_entry **v, size_t *n, size_t *cap, uint32_t seq, const char *name)
{
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 64;
        cs_ledger_entry *nv = realloc(*v, ncap * sizeof *nv);
        if (!nv)
            return -1;
        *v = nv;
        *cap = ncap;
    }
    cs_ledger_entry *e = &(*v)[(*n)++];
    e->seq = seq;
    snprintf(e->name, sizeof e->name, "%s", name);
    return 0;
}

/* Collects the ledger-named non-directory entries of dir; on failure errno is set. */
static int collect(DIR *d, cs_ledger_entry **v, size_t *n)
{
    size_t cap = 0;
    int dfd = dirfd(d);
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de)
            return errno ? -1 : 0;
        uint32_t seq;
        if (cs_ledger_name_parse(de->d_name, &seq) != 0 || entry_is_dir(dfd, de))
            continue;
        if (append_entry(v, n, &cap, seq, de->d_name) != 0)
            return -1;
    }
}

int cs_ledger_dir_scan(const char *dir, const char *who, cs_ledger_entry **out, size_t *n, cs_err *err)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return cs_err_set(err, CS_LEDGERDIR_ERR_SCAN, "%s: scan \"%s\": %s", who, dir, strerror(errno));
    cs_ledger_entry *v = NULL;
    size_t cnt = 0;
    int rc = collect(d, &v, &cnt);
    int saved = errno;
    closedir(d);
    if (rc != 0) {
        free(v);
        return cs_err_set(err, CS_LEDGERDIR_ERR_SCAN, "%s: scan \"%s\": %s", who, dir, strerror(saved));
    }
    if (cnt > 1) /* v is NULL when nothing was found, and qsort must not see NULL */
        qsort(v, cnt, sizeof *v, cmp_entry);
    for (size_t i = 1; i < cnt; i++) {
        /* Sorted, so the difference cannot wrap; 0 is a duplicate such as 7 and 007. */
        if (v[i].seq - v[i - 1].seq != 1) {
            uint32_t a = v[i - 1].seq, b = v[i].seq;
            free(v);
            return cs_err_set(err, CS_LEDGERDIR_ERR_GAP,
                              "%s: \"%s\" holds a non-contiguous ledger range (gap between ledger %" PRIu32
                              " and %" PRIu32 ")",
                              who, dir, a, b);
        }
    }
    *out = v;
    *n = cnt;
    return 0;
}
