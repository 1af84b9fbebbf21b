/* SPDX-License-Identifier: Apache-2.0 */
/* Structured logs in the shape of Go's slog handlers, with the process id attached to every
 * record as slog's Logger.With("pid", os.Getpid()) would place it (right after msg):
 *   logfmt (TextHandler, the default):
 *     time=2026-08-22T13:00:39.123+01:00 level=INFO msg="corestreamd listening" pid=4242 addr=[::]:8462
 *   json (JSONHandler, one object per line):
 *     {"time":"2026-08-22T13:00:39.123+01:00","level":"INFO","msg":"corestreamd listening","pid":4242,"addr":"[::]:8462"}
 * Time is RFC3339 with milliseconds in the local zone ("Z" for UTC) in both. In logfmt a value
 * (or key) is quoted Go-style (strconv.Quote) when it is empty or contains a space, '=', '"', a
 * control or non-printable character, or invalid UTF-8. In JSON strings are escaped as slog's
 * JSONHandler does (no HTML escaping; invalid UTF-8 becomes U+FFFD), numbers and booleans are
 * bare, and a duration is its count of nanoseconds, as slog writes a time.Duration. One line is
 * written with one locked write, so lines from different threads never interleave.
 *
 * Under systemd, when the stream a line goes to is the journal's (JOURNAL_STREAM names its device
 * and inode), the line starts with its syslog priority, "<3>" for ERROR, "<4>" WARN, "<6>" INFO,
 * "<7>" DEBUG, which journald strips and records as PRIORITY=, so `journalctl -p err` finds the
 * errors. On a terminal, a file or a pipe, lines are unchanged. */
#ifndef CS_COMMON_LOG_H
#define CS_COMMON_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/godur.h"

/* slog's numeric levels. */
enum { CS_LOG_DEBUG = -4, CS_LOG_INFO = 0, CS_LOG_WARN = 4, CS_LOG_ERROR = 8 };

typedef enum cs_kv_type { CS_KV_STR, CS_KV_I64, CS_KV_U64, CS_KV_DUR, CS_KV_BOOL } cs_kv_type;

typedef struct cs_kv {
    const char *key;
    cs_kv_type type;
    union {
        const char *s;
        int64_t i;
        uint64_t u;
        cs_dur d;
        bool b;
    } v;
} cs_kv;

#define KV_S(k, val) ((cs_kv){.key = (k), .type = CS_KV_STR, .v.s = (val)})
#define KV_I(k, val) ((cs_kv){.key = (k), .type = CS_KV_I64, .v.i = (int64_t)(val)})
#define KV_U(k, val) ((cs_kv){.key = (k), .type = CS_KV_U64, .v.u = (uint64_t)(val)})
#define KV_D(k, val) ((cs_kv){.key = (k), .type = CS_KV_DUR, .v.d = (cs_dur)(val)})
#define KV_B(k, val) ((cs_kv){.key = (k), .type = CS_KV_BOOL, .v.b = (val)})

typedef enum cs_log_fmt { CS_LOG_FMT_LOGFMT, CS_LOG_FMT_JSON } cs_log_fmt;

/* Configures the process logger: destination (NULL = stdout) and minimum level, in logfmt.
 * Before this is called, logs go to stdout at INFO in logfmt. Records the pid printed in every
 * line, and whether the destination is the journal (read from JOURNAL_STREAM now). Call before
 * other threads log. */
void cs_log_init(FILE *out, int min_level);
/* The line format; any time, from any thread (a line is formatted whole in one or the other). */
void cs_log_set_format(cs_log_fmt fmt);
/* The minimum level, for a reload (SIGHUP); any thread. */
void cs_log_set_level(int min_level);
bool cs_log_enabled(int level);

/* "logfmt" or "json" (exactly, lower case). Returns 0 and sets *fmt, or -1. */
int cs_log_parse_format(const char *s, cs_log_fmt *fmt);

/* slog.Level.UnmarshalText: "debug", "INFO", "warn", "error", with "+N"/"-N" offsets
 * ("info+2"), case-insensitive. Returns 0 and sets *level, or -1 when unparseable. */
int cs_log_parse_level(const char *s, int *level);

/* Level names as slog prints them: DEBUG, INFO, WARN, ERROR, or with offsets "INFO+2", "DEBUG-1". */
const char *cs_log_level_name(int level, char *buf, size_t len);

void cs_log_kvs(int level, const char *msg, size_t n, const cs_kv *kvs);

/* CS_LOG(level, msg, KV_S("addr", a), KV_U("n", 3)); CS_LOG0 for a message with no fields. */
#define CS_LOG(level, msg, ...)                                                                    \
    cs_log_kvs((level), (msg), sizeof((cs_kv[]){__VA_ARGS__}) / sizeof(cs_kv), (cs_kv[]){__VA_ARGS__})
#define CS_LOG0(level, msg) cs_log_kvs((level), (msg), 0, NULL)

/* One record as formatted: the time and pid are given explicitly, so tests can pin them. */
typedef struct cs_log_record {
    int64_t unix_nano;
    long pid;
    int level;
    const char *msg;
    size_t n;
    const cs_kv *kvs;
} cs_log_record;

/* Formats one record into buf (no trailing newline): used by cs_log_kvs and by tests. Returns the
 * length that would have been written (snprintf rule). */
size_t cs_log_format(char *buf, size_t len, cs_log_fmt fmt, const cs_log_record *r);

/* Go's default log format on stderr, used for errors before the logger exists:
 *   2026/08/22 13:00:39 ERROR corestreamd failed error="…" */
void cs_log_early_error(const char *msg, const char *error);

/* Appends value to buf with slog's quoting rule applied. Returns bytes needed (snprintf rule). */
size_t cs_log_quote(char *buf, size_t len, const char *s);

#endif
