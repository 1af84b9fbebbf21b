/* SPDX-License-Identifier: Apache-2.0 */
/* The integrity record, ledger-<seq>.rec: its one line (docs/RING.md), read and written. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/log.h"
#include "store/frames.h"
#include "wire/wire.h"
#include "store/ledgerdir.h"
#include "store/ring_internal.h"

/* The fields of a record line, without its self checksum. Version 2 adds the stored frames (version
 * 1, a ring of format 2, is read as "no frames"); version 4 the ledger's SIG (`sig=-`: none);
 * version 5 where the frames start in their segment (`frames_off=`). */
static int format_fields(char *buf, size_t len, int version, uint32_t seq, const cs_ledger_record *rec)
{
    int n = snprintf(buf, len, "corestream-ring-record %d seq=%" PRIu32 " len=%" PRIu64 " chunks=%" PRIu32
                     " chunk_size=%" PRIu32 " xxh64=%016" PRIx64, version, seq, rec->len, rec->chunks,
                     rec->chunk_size, rec->xxh64);
    if (version >= 5 && n > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " frames_len=%" PRIu64 " frames_off=%" PRIu64, rec->frames_len,
                      rec->frames_off);
    else if (version >= 2 && n > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " frames_len=%" PRIu64, rec->frames_len);
    if (version >= 2 && n > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " frames_xxh3=%016" PRIx64 " raw_xxh3=%016" PRIx64,
                      rec->frames_xxh3, rec->raw_xxh3);
    if (version >= 4 && n > 0 && (size_t)n + 6 + 2 * (size_t)rec->sig_len < len) {
        static const char hex[] = "0123456789abcdef";
        n += snprintf(buf + n, len - (size_t)n, " sig=%s", rec->sig_len ? "" : "-");
        for (size_t i = 0; i < rec->sig_len; i++) {
            buf[n++] = hex[rec->sig[i] >> 4];
            buf[n++] = hex[rec->sig[i] & 15];
        }
        buf[n] = '\0';
    }
    return n;
}

/* The line as written: the fields, from version 3 on followed by ` self=` and the XXH64 of the
 * fields' text, so a record changed on disk (one digit of xxh64=) fails its own check instead of
 * vouching for the wrong bytes. */
static int format_record_v(char *buf, size_t len, int version, uint32_t seq, const cs_ledger_record *rec)
{
    int n = format_fields(buf, len, version, seq, rec);
    if (version >= 3 && n > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " self=%016" PRIx64, (uint64_t)XXH64(buf, (size_t)n, 0));
    if (n > 0 && (size_t)n + 1 < len) {
        buf[n++] = '\n';
        buf[n] = '\0';
    }
    return n;
}

int rng_format_record(char *buf, size_t len, uint32_t seq, const cs_ledger_record *rec)
{
    return format_record_v(buf, len, RNG_RECORD_VERSION, seq, rec);
}

/* Whether the fields agree with each other and with the chunking rules (the frames' index size
 * by the format of the version's frames). */
static bool record_consistent(const cs_ledger_record *r, int version)
{
    size_t entry = version >= 3 ? CS_FRAMES_ENTRY_LEN : CS_FRAMES1_ENTRY_LEN;
    size_t index = (size_t)r->chunks * entry + CS_FRAMES_TRAILER_LEN;
    bool consistent = r->chunk_size == 0
                          ? r->chunks == 0
                          : r->chunk_size >= 4096 && r->chunk_size <= 8388608 &&
                                r->chunks == (r->len + r->chunk_size - 1) / r->chunk_size;
    /* Frames need the live chunking, and hold at least their index. */
    if (r->frames_len != 0)
        return consistent && r->chunk_size != 0 && r->frames_len >= index;
    return consistent && r->frames_xxh3 == 0 && r->raw_xxh3 == 0 && r->frames_off == 0;
}

/* The hex of a version-4 record's `sig=` ("-": none) into rec; false when it is not a SIG message
 * of ledger seq. */
static bool parse_sig(const char *hex, uint32_t seq, cs_ledger_record *r)
{
    r->sig_len = 0;
    if (strcmp(hex, "-") == 0)
        return true;
    size_t n = strlen(hex);
    if (n % 2 || n / 2 > sizeof r->sig)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = hex[i]; /* [-0-9a-f] by the scan: '-' is the only other */
        if (c == '-')
            return false;
        uint8_t v = (uint8_t)(c <= '9' ? c - '0' : c - 'a' + 10);
        r->sig[i / 2] = (uint8_t)(i % 2 ? r->sig[i / 2] | v : v << 4);
    }
    r->sig_len = (uint16_t)(n / 2);
    cs_wire_msg m;
    return cs_wire_decode(r->sig, r->sig_len, &m, NULL) == 0 && m.type == CS_WIRE_TYPE_SIG && m.seq == seq;
}

/* Parses a record strictly: it must be exactly what format_record writes (versions 1 to 3, of
 * rings written before the signature or the self checksum, are still read), consistent, and from
 * version 3 on match its own checksum. On failure problem says what is wrong. */
static int parse_record(const char *text, uint32_t want_seq, cs_ledger_record *rec, char *problem, size_t plen)
{
    uint32_t seq;
    int version = 0;
    uint64_t self = 0;
    cs_ledger_record r = {0};
    char sig[2 * CS_WIRE_SIG_MAX_LEN + 2] = "-";
    int got;
    if (sscanf(text, "corestream-ring-record %d ", &version) == 1 && version == 5) {
        got = sscanf(text, "corestream-ring-record %d seq=%" SCNu32 " len=%" SCNu64 " chunks=%" SCNu32
                           " chunk_size=%" SCNu32 " xxh64=%" SCNx64 " frames_len=%" SCNu64 " frames_off=%" SCNu64
                           " frames_xxh3=%" SCNx64 " raw_xxh3=%" SCNx64 " sig=%527[-0-9a-f] self=%" SCNx64,
                     &version, &seq, &r.len, &r.chunks, &r.chunk_size, &r.xxh64, &r.frames_len, &r.frames_off,
                     &r.frames_xxh3, &r.raw_xxh3, sig, &self);
        got -= got >= 8; /* counted like a version 4 line below */
    } else {
        got = sscanf(text, "corestream-ring-record %d seq=%" SCNu32 " len=%" SCNu64 " chunks=%" SCNu32
                           " chunk_size=%" SCNu32 " xxh64=%" SCNx64 " frames_len=%" SCNu64 " frames_xxh3=%" SCNx64
                           " raw_xxh3=%" SCNx64 " sig=%527[-0-9a-f] self=%" SCNx64,
                     &version, &seq, &r.len, &r.chunks, &r.chunk_size, &r.xxh64, &r.frames_len, &r.frames_xxh3,
                     &r.raw_xxh3, sig, &self);
    }
    if (version == 3 && got == 9) { /* a version 3 line has no sig=: its self= follows raw_xxh3 */
        const char *p = strstr(text, " self=");
        if (p && sscanf(p, " self=%" SCNx64, &self) == 1)
            got = 10;
    }
    if (!((version == 1 && got == 6) || (version == 2 && got == 9) || (version == 3 && got == 10) ||
          ((version == 4 || version == 5) && got == 11)) ||
        !parse_sig(sig, seq, &r)) {
        snprintf(problem, plen, "integrity record is unreadable");
        return -1;
    }
    char again[RECORD_MAX];
    format_record_v(again, sizeof again, version, seq, &r);
    if (version >= 3) {
        char fields[RECORD_MAX];
        int n = format_fields(fields, sizeof fields, version, seq, &r);
        if (n > 0 && strncmp(text, fields, (size_t)n) == 0 && self != XXH64(fields, (size_t)n, 0)) {
            snprintf(problem, plen, "integrity record fails its own checksum");
            return -1;
        }
    }
    if (strcmp(again, text) != 0 || !record_consistent(&r, version)) {
        snprintf(problem, plen, "integrity record is unreadable");
        return -1;
    }
    if (seq != want_seq) {
        snprintf(problem, plen, "integrity record is for ledger %" PRIu32, seq);
        return -1;
    }
    r.version = version;
    *rec = r;
    return 0;
}

int cs_ring_record_parse(const char *text, uint32_t seq, cs_ledger_record *rec, char *problem, size_t plen)
{
    return parse_record(text, seq, rec, problem, plen);
}

size_t cs_ring_record_format(char *buf, size_t len, uint32_t seq, const cs_ledger_record *rec)
{
    int n = rng_format_record(buf, len, seq, rec);
    return n < 0 ? 0 : (size_t)n;
}

int rng_parse_record(const char *text, uint32_t seq, cs_ledger_record *rec, char *problem, size_t plen)
{
    return parse_record(text, seq, rec, problem, plen);
}

int rng_read_legacy_record(int dfd, uint32_t seq, cs_ledger_record *rec, char *problem, size_t plen)
{
    char name[CS_LEDGER_NAME_MAX];
    rng_legacy_record_name(name, seq);
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        /* A symbolic link in its place is a finding (the ring never writes one), not an I/O error. */
        if (e == ELOOP)
            snprintf(problem, plen, "integrity record is a symbolic link");
        else
            snprintf(problem, plen, e == ENOENT ? "integrity record is missing" : "%s: %s", name, strerror(e));
        errno = e;
        return e == ENOENT ? -2 : e == ELOOP ? -1 : -3;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(problem, plen, "integrity record is %s", S_ISDIR(st.st_mode) ? "a directory" : "not a regular file");
        return -1;
    }
    char buf[RECORD_MAX + 1];
    ssize_t n = pread(fd, buf, RECORD_MAX, 0);
    int e = errno;
    close(fd);
    if (n < 0) {
        snprintf(problem, plen, "%s: %s", name, strerror(e));
        errno = e;
        return -3;
    }
    buf[n] = '\0';
    int rc = parse_record(buf, seq, rec, problem, plen);
    if (rc == 0 && rec->version < RNG_RECORD_VERSION) {
        /* Its frames are a file of their own, which this format does not read: the ledger is
         * replayed by re-encoding until the background pass makes frames in a segment. */
        rec->frames_len = rec->frames_off = rec->frames_xxh3 = rec->raw_xxh3 = 0;
    }
    return rc;
}
