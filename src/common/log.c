/* SPDX-License-Identifier: Apache-2.0 */
/* slog-compatible logging: formatting follows Go's log/slog (text_handler.go, json_handler.go,
 * handler.go, level.go) and strconv.Quote, so that logfmt lines are the prototype's plus pid. */
#include "common/log.h"

#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/goquote.h"
#include "common/strbuf.h"

/* Most lines fit on the stack; longer ones are formatted again into a heap buffer. */
#define LINE_STACK 4096
#define LEVEL_NAME_MAX 24

static _Atomic int g_min_level = CS_LOG_INFO;
static _Atomic(FILE *) g_out; /* NULL: stdout */
static _Atomic int g_fmt = CS_LOG_FMT_LOGFMT;
static _Atomic long g_pid; /* 0: not recorded yet, ask getpid() */
static _Atomic bool g_out_journal; /* g_out is systemd's journal stream: lines carry <N> */

/* slog's needsQuoting. In ASCII it quotes what JSON would escape (controls, '"', but not '\\'),
 * plus space and '='; DEL is JSON-safe, so DEL alone does not force quotes (as in Go). Above
 * ASCII, invalid UTF-8, U+FFFD (utf8.RuneError), unicode.IsSpace and !unicode.IsPrint runes force
 * quotes; every non-ASCII space is also non-printable, so cs_rune_is_print covers both. */
static bool needs_quoting(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    if (n == 0)
        return true;
    while (n > 0) {
        if (*p < 0x80) {
            if (*p <= ' ' || *p == '=' || *p == '"')
                return true;
            p++;
            n--;
            continue;
        }
        uint32_t r;
        size_t w = cs_utf8_decode(p, n, &r);
        if (r == CS_RUNE_ERROR || !cs_rune_is_print(r))
            return true;
        p += w;
        n -= w;
    }
    return false;
}

/* slog's appendString. NULL is logged as the empty string rather than crashing a log call. */
static void put_value(cs_strbuf *b, const char *s)
{
    if (!s)
        s = "";
    if (needs_quoting(s))
        cs_go_quote_put(b, s);
    else
        cs_strbuf_puts(b, s);
}

size_t cs_log_quote(char *buf, size_t len, const char *s)
{
    cs_strbuf b;
    cs_strbuf_fixed(&b, buf, len);
    put_value(&b, s);
    return b.n;
}

/* ---- levels ---- */

const char *cs_log_level_name(int level, char *buf, size_t len)
{
    const char *base;
    int off;
    if (level < CS_LOG_INFO) {
        base = "DEBUG";
        off = level - CS_LOG_DEBUG;
    } else if (level < CS_LOG_WARN) {
        base = "INFO";
        off = level - CS_LOG_INFO;
    } else if (level < CS_LOG_ERROR) {
        base = "WARN";
        off = level - CS_LOG_WARN;
    } else {
        base = "ERROR";
        off = level - CS_LOG_ERROR;
    }
    if (off == 0)
        snprintf(buf, len, "%s", base);
    else
        snprintf(buf, len, "%s%+d", base, off);
    return buf;
}

/* Go's strconv.Atoi on the "+N"/"-N" suffix: one sign, then one or more decimal digits. Go
 * accepts any int64 here; an offset this far out could not land in our int level anyway, so
 * digits stop counting once past that and the caller's range check refuses it. */
static int parse_offset(const char *s, long long *out)
{
    bool neg = *s == '-';
    s++;
    if (!*s)
        return -1;
    long long v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        if (v <= (long long)INT_MAX * 2)
            v = v * 10 + (*s - '0');
    }
    *out = neg ? -v : v;
    return 0;
}

int cs_log_parse_level(const char *s, int *level)
{
    static const struct {
        const char *name;
        int level;
    } names[] = {{"DEBUG", CS_LOG_DEBUG}, {"INFO", CS_LOG_INFO}, {"WARN", CS_LOG_WARN},
                 {"ERROR", CS_LOG_ERROR}};
    if (!s)
        return -1;
    size_t name_len = strcspn(s, "+-");
    long long off = 0;
    if (s[name_len] && parse_offset(s + name_len, &off) != 0)
        return -1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strlen(names[i].name) != name_len || strncasecmp(s, names[i].name, name_len) != 0)
            continue;
        /* Go's Level is a 64-bit int; ours is an int, so levels beyond it are refused. */
        long long v = names[i].level + off;
        if (v > INT_MAX || v < INT_MIN)
            return -1;
        *level = (int)v;
        return 0;
    }
    return -1;
}

/* ---- records ---- */

static void floor_split(int64_t unix_nano, time_t *sec, int *nsec)
{
    int64_t s = unix_nano / 1000000000, ns = unix_nano % 1000000000;
    if (ns < 0) {
        ns += 1000000000;
        s--;
    }
    *sec = (time_t)s;
    *nsec = (int)ns;
}

/* Go's "2006-01-02T15:04:05.000Z07:00" in the local zone, truncated (not rounded) to the
 * millisecond like slog's appendRFC3339Millis. */
static void put_time(cs_strbuf *b, int64_t unix_nano)
{
    time_t sec;
    int nsec;
    floor_split(unix_nano, &sec, &nsec);
    struct tm tm;
    localtime_r(&sec, &tm);
    char t[64];
    int n = snprintf(t, sizeof t, "%04d-%02d-%02dT%02d:%02d:%02d.%03d", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, nsec / 1000000);
    cs_strbuf_put(b, t, (size_t)n);
    if (tm.tm_gmtoff == 0) {
        cs_strbuf_putc(b, 'Z');
        return;
    }
    /* Go drops the seconds of an offset, truncating toward zero. */
    long zone = tm.tm_gmtoff / 60;
    char sign = zone < 0 ? '-' : '+';
    if (zone < 0)
        zone = -zone;
    n = snprintf(t, sizeof t, "%c%02ld:%02ld", sign, zone / 60, zone % 60);
    cs_strbuf_put(b, t, (size_t)n);
}

static void put_kv(cs_strbuf *b, const cs_kv *kv)
{
    char num[32]; /* an int64 in decimal, or a Go duration */
    _Static_assert(CS_DUR_STR_MAX <= sizeof num, "duration text must fit");
    cs_strbuf_putc(b, ' ');
    put_value(b, kv->key);
    cs_strbuf_putc(b, '=');
    switch (kv->type) {
    case CS_KV_STR:
        put_value(b, kv->v.s);
        break;
    case CS_KV_I64:
        snprintf(num, sizeof num, "%" PRId64, kv->v.i);
        cs_strbuf_puts(b, num);
        break;
    case CS_KV_U64:
        snprintf(num, sizeof num, "%" PRIu64, kv->v.u);
        cs_strbuf_puts(b, num);
        break;
    case CS_KV_DUR:
        cs_strbuf_puts(b, cs_dur_format(kv->v.d, num, sizeof num));
        break;
    case CS_KV_BOOL:
        cs_strbuf_puts(b, kv->v.b ? "true" : "false");
        break;
    }
}

static size_t format_logfmt(cs_strbuf *b, const cs_log_record *r)
{
    char name[LEVEL_NAME_MAX];
    cs_strbuf_puts(b, "time=");
    put_time(b, r->unix_nano);
    cs_strbuf_puts(b, " level=");
    put_value(b, cs_log_level_name(r->level, name, sizeof name));
    cs_strbuf_puts(b, " msg=");
    put_value(b, r->msg);
    cs_strbuf_printf(b, " pid=%ld", r->pid);
    for (size_t i = 0; i < r->n; i++)
        put_kv(b, &r->kvs[i]);
    return b->n;
}

/* slog's appendEscapedJSONString inside quotes: encoding/json's rules without HTML escaping.
 * Invalid UTF-8 becomes U+FFFD; U+2028 and U+2029 are escaped for JavaScript's sake. */
static void put_json_string(cs_strbuf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t n = strlen((const char *)p);
    cs_strbuf_putc(b, '"');
    while (n > 0) {
        if (*p < 0x80) {
            unsigned char c = *p++;
            n--;
            if (c == '"' || c == '\\') {
                cs_strbuf_putc(b, '\\');
                cs_strbuf_putc(b, (char)c);
            } else if (c == '\n') {
                cs_strbuf_puts(b, "\\n");
            } else if (c == '\r') {
                cs_strbuf_puts(b, "\\r");
            } else if (c == '\t') {
                cs_strbuf_puts(b, "\\t");
            } else if (c < 0x20) {
                char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 0xf]};
                cs_strbuf_put(b, u, sizeof u);
            } else {
                cs_strbuf_putc(b, (char)c);
            }
            continue;
        }
        uint32_t r;
        size_t w = cs_utf8_decode(p, n, &r);
        if (r == CS_RUNE_ERROR && w == 1)
            cs_strbuf_puts(b, "\\ufffd");
        else if (r == 0x2028 || r == 0x2029)
            cs_strbuf_puts(b, r == 0x2028 ? "\\u2028" : "\\u2029");
        else
            cs_strbuf_put(b, p, w);
        p += w;
        n -= w;
    }
    cs_strbuf_putc(b, '"');
}

static void put_json_kv(cs_strbuf *b, const cs_kv *kv)
{
    cs_strbuf_putc(b, ',');
    put_json_string(b, kv->key);
    cs_strbuf_putc(b, ':');
    switch (kv->type) {
    case CS_KV_STR:
        put_json_string(b, kv->v.s);
        break;
    case CS_KV_I64:
        cs_strbuf_printf(b, "%" PRId64, kv->v.i);
        break;
    case CS_KV_U64:
        cs_strbuf_printf(b, "%" PRIu64, kv->v.u);
        break;
    case CS_KV_DUR: /* slog: a time.Duration is its int64 nanoseconds */
        cs_strbuf_printf(b, "%" PRId64, (int64_t)kv->v.d);
        break;
    case CS_KV_BOOL:
        cs_strbuf_puts(b, kv->v.b ? "true" : "false");
        break;
    }
}

static size_t format_json(cs_strbuf *b, const cs_log_record *r)
{
    char name[LEVEL_NAME_MAX];
    cs_strbuf_puts(b, "{\"time\":\"");
    put_time(b, r->unix_nano);
    cs_strbuf_puts(b, "\",\"level\":");
    put_json_string(b, cs_log_level_name(r->level, name, sizeof name));
    cs_strbuf_puts(b, ",\"msg\":");
    put_json_string(b, r->msg);
    cs_strbuf_printf(b, ",\"pid\":%ld", r->pid);
    for (size_t i = 0; i < r->n; i++)
        put_json_kv(b, &r->kvs[i]);
    cs_strbuf_putc(b, '}');
    return b->n;
}

size_t cs_log_format(char *buf, size_t len, cs_log_fmt fmt, const cs_log_record *r)
{
    cs_strbuf b;
    cs_strbuf_fixed(&b, buf, len);
    return fmt == CS_LOG_FMT_JSON ? format_json(&b, r) : format_logfmt(&b, r);
}

/* ---- output ---- */

typedef size_t (*line_fn)(char *buf, size_t len, const void *arg);

/* True when f is the stream systemd connected to the journal: JOURNAL_STREAM is "<dev>:<ino>" of
 * that stream (systemd.exec(5)), and f's descriptor is the same file. A terminal, a file or a pipe
 * of the caller's own is not, even under systemd. */
static bool is_journal_stream(FILE *f)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    char end;
    struct stat st;
    if (!js || sscanf(js, "%llu:%llu%c", &dev, &ino, &end) != 2 || fstat(fileno(f), &st) != 0)
        return false;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

/* The syslog priority journald records for a level (sd-daemon.h's <N> prefix, which it strips):
 * ERROR 3, WARN 4, INFO 6, DEBUG 7; a level between two takes the lower one's. */
static int journal_priority(int level)
{
    return level >= CS_LOG_ERROR ? 3 : level >= CS_LOG_WARN ? 4 : level >= CS_LOG_INFO ? 6 : 7;
}

/* Formats a line (stack first, heap when longer) and writes it plus '\n' with one fwrite under
 * the stream lock, flushed at once so a piped stdout shows it promptly. prio >= 0 puts "<prio>"
 * in front, for the journal. */
static void emit_line(FILE *out, int prio, line_fn fn, const void *arg)
{
    char stack[LINE_STACK];
    char *line = stack;
    size_t n = fn(stack, sizeof stack, arg);
    if (n >= sizeof stack) {
        char *big = malloc(n + 1);
        if (big) {
            fn(big, n + 1, arg);
            line = big;
        } else {
            n = sizeof stack - 1; /* out of memory: a truncated line beats none */
        }
    }
    line[n] = '\n'; /* replaces the terminating NUL */
    flockfile(out);
    if (prio >= 0)
        fprintf(out, "<%d>", prio);
    fwrite(line, 1, n + 1, out);
    fflush(out);
    funlockfile(out);
    if (line != stack)
        free(line);
}

typedef struct record {
    cs_log_fmt fmt;
    cs_log_record r;
} record;

static size_t record_line(char *buf, size_t len, const void *arg)
{
    const record *r = arg;
    return cs_log_format(buf, len, r->fmt, &r->r);
}

void cs_log_init(FILE *out, int min_level)
{
    /* localtime_r need not re-read TZ; pick up the zone now, as Go does at startup. */
    tzset();
    atomic_store(&g_pid, (long)getpid());
    atomic_store(&g_out, out);
    atomic_store(&g_out_journal, is_journal_stream(out ? out : stdout));
    atomic_store(&g_min_level, min_level);
    atomic_store(&g_fmt, CS_LOG_FMT_LOGFMT);
}

void cs_log_set_format(cs_log_fmt fmt)
{
    atomic_store(&g_fmt, (int)fmt);
}

void cs_log_set_level(int min_level)
{
    atomic_store(&g_min_level, min_level);
}

int cs_log_parse_format(const char *s, cs_log_fmt *fmt)
{
    if (s && strcmp(s, "logfmt") == 0)
        *fmt = CS_LOG_FMT_LOGFMT;
    else if (s && strcmp(s, "json") == 0)
        *fmt = CS_LOG_FMT_JSON;
    else
        return -1;
    return 0;
}

bool cs_log_enabled(int level)
{
    return level >= atomic_load(&g_min_level);
}

void cs_log_kvs(int level, const char *msg, size_t n, const cs_kv *kvs)
{
    if (!cs_log_enabled(level))
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long pid = atomic_load(&g_pid);
    record r = {
        .fmt = (cs_log_fmt)atomic_load(&g_fmt),
        .r = {.unix_nano = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec,
              .pid = pid ? pid : (long)getpid(),
              .level = level,
              .msg = msg,
              .n = n,
              .kvs = kvs},
    };
    FILE *out = atomic_load(&g_out);
    emit_line(out ? out : stdout, atomic_load(&g_out_journal) ? journal_priority(level) : -1, record_line, &r);
}

typedef struct early {
    time_t now;
    const char *msg;
    const char *error;
} early;

/* slog's default handler through the log package (LstdFlags): local "YYYY/MM/DD HH:MM:SS ",
 * the level, the message as is (unquoted), then the attributes in text form. */
static size_t early_line(char *buf, size_t len, const void *arg)
{
    const early *e = arg;
    cs_strbuf b;
    cs_strbuf_fixed(&b, buf, len);
    struct tm tm;
    localtime_r(&e->now, &tm);
    char t[64];
    int n = snprintf(t, sizeof t, "%04d/%02d/%02d %02d:%02d:%02d ERROR ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    cs_strbuf_put(&b, t, (size_t)n);
    cs_strbuf_puts(&b, e->msg ? e->msg : "");
    if (e->error) {
        cs_strbuf_puts(&b, " error=");
        put_value(&b, e->error);
    }
    return b.n;
}

void cs_log_early_error(const char *msg, const char *error)
{
    early e = {.now = time(NULL), .msg = msg, .error = error};
    emit_line(stderr, is_journal_stream(stderr) ? journal_priority(CS_LOG_ERROR) : -1, early_line, &e);
}
