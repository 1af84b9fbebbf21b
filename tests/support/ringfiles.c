/* SPDX-License-Identifier: Apache-2.0 */
#include "support/ringfiles.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>

void cs_ringfiles_log_path(char *buf, size_t len, const char *ring, uint32_t seq)
{
    snprintf(buf, len, "%s/records-%" PRIu32 ".log", ring, seq - seq % CS_RINGFILES_SEG);
}

void cs_ringfiles_seg_path(char *buf, size_t len, const char *ring, uint32_t seq)
{
    snprintf(buf, len, "%s/frames-%" PRIu32 ".seg", ring, seq - seq % CS_RINGFILES_SEG);
}

/* The whole file (NUL-terminated) and its length, or NULL. */
static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap + 1);
    for (size_t got; buf && (got = fread(buf + len, 1, cap - len, f)) > 0;) {
        len += got;
        if (len == cap) {
            char *g = realloc(buf, 2 * cap + 1);
            if (!g) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = g;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    *n = len;
    return buf;
}

/* The sequence a line names (" seq=S "), or -1. */
static int64_t line_seq(const char *line)
{
    const char *p = strstr(line, " seq=");
    char *end;
    if (!p)
        return -1;
    unsigned long long v = strtoull(p + 5, &end, 10);
    return end != p + 5 && *end == ' ' && v <= UINT32_MAX ? (int64_t)v : -1;
}

/* Offset of seq's current line in text, or -1. */
static long find_line(const char *text, size_t n, uint32_t seq)
{
    long found = -1;
    for (size_t at = 0; at < n;) {
        const char *nl = memchr(text + at, '\n', n - at);
        if (!nl)
            break;
        char line[1100];
        size_t l = (size_t)(nl - (text + at));
        if (l < sizeof line) {
            memcpy(line, text + at, l);
            line[l] = '\0';
            if (line_seq(line) == (int64_t)seq)
                found = strncmp(line, "corestream-ring-gone ", 21) == 0 ? -1 : (long)at;
        }
        at = (size_t)(nl - text) + 1;
    }
    return found;
}

bool cs_ringfiles_record(const char *ring, uint32_t seq, char *buf, size_t len, long *off)
{
    char path[1100];
    size_t n;
    cs_ringfiles_log_path(path, sizeof path, ring, seq);
    char *text = slurp(path, &n);
    long at = text ? find_line(text, n, seq) : -1;
    if (at >= 0) {
        const char *nl = strchr(text + at, '\n');
        size_t l = (size_t)(nl - (text + at)) + 1;
        snprintf(buf, len, "%.*s", (int)l, text + at);
        if (off)
            *off = at;
    }
    free(text);
    return at >= 0;
}

int cs_ringfiles_count_records(const char *ring)
{
    DIR *d = opendir(ring);
    int count = 0;
    if (!d)
        return 0;
    for (struct dirent *de; (de = readdir(d));) {
        unsigned long base;
        char tail[8];
        if (sscanf(de->d_name, "records-%lu.%7s", &base, tail) != 2 || strcmp(tail, "log") != 0)
            continue;
        for (uint32_t k = 0; k < CS_RINGFILES_SEG; k++) {
            char line[1100];
            count += cs_ringfiles_record(ring, (uint32_t)base + k, line, sizeof line, NULL);
        }
    }
    closedir(d);
    return count;
}

bool cs_ringfiles_replace_record(const char *ring, uint32_t seq, const char *text)
{
    char path[1100], line[1100];
    long off;
    if (!cs_ringfiles_record(ring, seq, line, sizeof line, &off))
        return false;
    cs_ringfiles_log_path(path, sizeof path, ring, seq);
    size_t n;
    char *all = slurp(path, &n);
    if (!all)
        return false;
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(all, 1, (size_t)off, f) == (size_t)off && fputs(text, f) >= 0 &&
              fwrite(all + off + strlen(line), 1, n - (size_t)off - strlen(line), f) == n - (size_t)off - strlen(line);
    if (f && fclose(f) != 0)
        ok = false;
    free(all);
    return ok;
}

bool cs_ringfiles_frames(const char *ring, uint32_t seq, uint64_t *off, uint64_t *len)
{
    char line[1100];
    if (!cs_ringfiles_record(ring, seq, line, sizeof line, NULL))
        return false;
    const char *l = strstr(line, " frames_len="), *o = strstr(line, " frames_off=");
    if (!l || !o)
        return false;
    *len = strtoull(l + 12, NULL, 10);
    *off = strtoull(o + 12, NULL, 10);
    return *len != 0;
}

bool cs_ringfiles_is_segment(const char *name)
{
    unsigned long base;
    char tail[8];
    return (sscanf(name, "records-%lu.%7s", &base, tail) == 2 && strcmp(tail, "log") == 0) ||
           (sscanf(name, "frames-%lu.%7s", &base, tail) == 2 && strcmp(tail, "seg") == 0);
}
