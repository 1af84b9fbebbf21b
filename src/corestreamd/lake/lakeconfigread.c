/* A lake config found in place, read back and compared with this lake's: see lakeconfig.h. The
 * reader takes what the SDK's encoding/json and ours write: one flat JSON object whose members are
 * strings, numbers, true, false or null. */
#include "corestreamd/lake/lakeconfig.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/goquote.h"

/* The longest string member kept (a passphrase is far shorter); a longer one compares unequal. */
#define VALUE_MAX 512

/* A member this check reads, as found. */
typedef struct member {
    const char *name;
    bool found;
    bool is_string;
    char text[VALUE_MAX]; /* a string's value (decoded), or a literal's text as written */
    size_t len;
} member;

typedef struct reader {
    const char *p;
    size_t len;
    size_t at;
    const char *what; /* why the text is not read: set once */
} reader;

static bool fail_at(reader *r, const char *what)
{
    if (!r->what)
        r->what = what;
    return false;
}

static void skip_ws(reader *r)
{
    while (r->at < r->len && (r->p[r->at] == ' ' || r->p[r->at] == '\t' || r->p[r->at] == '\n' || r->p[r->at] == '\r'))
        r->at++;
}

/* Appends rune c as UTF-8 to the member's text (cut at VALUE_MAX: the member then compares
 * unequal, its length saying so). */
static void put_rune(member *m, uint32_t c)
{
    cs_strbuf b;
    cs_strbuf_fixed(&b, m->text + m->len, VALUE_MAX - m->len);
    cs_utf8_put(&b, c);
    m->len += b.n;
    if (m->len >= VALUE_MAX)
        m->len = VALUE_MAX - 1;
}

/* Four hex digits at r->at. */
static bool hex4(reader *r, uint32_t *v)
{
    if (r->len - r->at < 4)
        return fail_at(r, "a \\u escape cut short");
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = r->p[r->at++];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return fail_at(r, "a \\u escape without four hex digits");
        *v = *v << 4 | (uint32_t)d;
    }
    return true;
}

/* \uXXXX, a surrogate pair joined; a lone surrogate is U+FFFD, as Go decodes it. */
static bool unicode_escape(reader *r, member *m)
{
    uint32_t c;
    if (!hex4(r, &c))
        return false;
    if (c >= 0xD800 && c < 0xDC00 && r->len - r->at >= 6 && r->p[r->at] == '\\' && r->p[r->at + 1] == 'u') {
        size_t back = r->at;
        uint32_t lo;
        r->at += 2;
        if (hex4(r, &lo) && lo >= 0xDC00 && lo < 0xE000) {
            put_rune(m, 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00));
            return true;
        }
        r->at = back;
    }
    put_rune(m, c >= 0xD800 && c < 0xE000 ? CS_RUNE_ERROR : c);
    return true;
}

static bool escape(reader *r, member *m)
{
    if (r->at >= r->len)
        return fail_at(r, "a string cut short");
    char c = r->p[r->at++];
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *k = strchr(from, c);
    if (c && k) {
        put_rune(m, (unsigned char)to[k - from]);
        return true;
    }
    if (c == 'u')
        return unicode_escape(r, m);
    return fail_at(r, "an unknown escape");
}

/* A string at r->at (its opening quote), decoded into m (NULL: skipped). */
static bool string(reader *r, member *m)
{
    member scratch;
    if (!m)
        m = &scratch;
    m->len = 0;
    m->text[0] = '\0';
    if (r->at >= r->len || r->p[r->at] != '"')
        return fail_at(r, "a string expected");
    r->at++;
    while (r->at < r->len) {
        unsigned char c = (unsigned char)r->p[r->at++];
        if (c == '"')
            return true;
        if (c < 0x20)
            return fail_at(r, "a control character in a string");
        if (c == '\\') {
            if (!escape(r, m))
                return false;
        } else if (m->len < VALUE_MAX - 1) {
            m->text[m->len++] = (char)c;
            m->text[m->len] = '\0';
        }
    }
    return fail_at(r, "a string cut short");
}

/* A number, true, false or null, kept as written. */
static bool literal(reader *r, member *m)
{
    size_t start = r->at;
    while (r->at < r->len && r->p[r->at] != '\0' && strchr("0123456789+-.eEtrufalsn", r->p[r->at]))
        r->at++;
    size_t n = r->at - start;
    if (n == 0)
        return fail_at(r, r->at < r->len && (r->p[r->at] == '{' || r->p[r->at] == '[') ? "a nested value"
                                                                                        : "a value expected");
    m->len = n < VALUE_MAX ? n : VALUE_MAX - 1;
    memcpy(m->text, r->p + start, m->len);
    m->text[m->len] = '\0';
    return true;
}

static member *find(member *ms, size_t n, const member *key)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(ms[i].name) == key->len && memcmp(ms[i].name, key->text, key->len) == 0)
            return &ms[i];
    return NULL;
}

/* One member: its name, a colon, its value (kept when it is one of ms; the last one wins, as in
 * encoding/json). */
static bool one_member(reader *r, member *ms, size_t n)
{
    member key, value;
    if (!string(r, &key))
        return false;
    skip_ws(r);
    if (r->at >= r->len || r->p[r->at] != ':')
        return fail_at(r, "a colon expected");
    r->at++;
    skip_ws(r);
    value.is_string = r->at < r->len && r->p[r->at] == '"';
    if (!(value.is_string ? string(r, &value) : literal(r, &value)))
        return false;
    member *m = find(ms, n, &key);
    if (m) {
        const char *name = m->name;
        *m = value;
        m->name = name;
        m->found = true;
    }
    return true;
}

/* The whole text: one object, nothing after it but white space. */
static bool read_object(reader *r, member *ms, size_t n)
{
    skip_ws(r);
    if (r->at >= r->len || r->p[r->at] != '{')
        return fail_at(r, "an object expected");
    r->at++;
    skip_ws(r);
    bool first = true;
    while (r->at < r->len && !(first && r->p[r->at] == '}')) {
        if (!one_member(r, ms, n))
            return false;
        first = false;
        skip_ws(r);
        if (r->at < r->len && r->p[r->at] == ',') {
            r->at++;
            skip_ws(r);
            continue;
        }
        break;
    }
    if (r->at >= r->len || r->p[r->at] != '}')
        return fail_at(r, "a comma or the object's end expected");
    r->at++;
    skip_ws(r);
    return r->at == r->len || fail_at(r, "text after the object");
}

/* The member as the message shows it: a string Go-quoted, a literal as written. */
static void shown(const member *m, char *buf, size_t len)
{
    if (!m->found)
        snprintf(buf, len, "absent");
    else if (m->is_string)
        cs_go_quote(buf, len, m->text);
    else
        snprintf(buf, len, "%s", m->text);
}

/* 0 when m holds want: that string, or with number that literal (a number written as this lake
 * writes it: no sign, fraction or exponent); else -1 with the difference. */
static int compare(const member *m, const char *want, const char *flag, bool number, cs_err *err)
{
    bool same = m->found && m->is_string != number && strcmp(m->text, want) == 0;
    if (same)
        return 0;
    char got[VALUE_MAX + 64], w[VALUE_MAX + 64];
    shown(m, got, sizeof got);
    if (number)
        snprintf(w, sizeof w, "%s", want);
    else
        cs_go_quote(w, sizeof w, want);
    return cs_err_set(err, CS_LAKE_CONF_ERR_DISAGREES, "its %s is %s, this lake's is %s%s%s%s", m->name, got, w,
                      flag ? " (" : "", flag ? flag : "", flag ? ")" : "");
}

int cs_lake_config_agrees(const char *text, size_t len, cs_lake_conf_kind kind, const char *passphrase,
                          const cs_lake_layout *l, cs_err *err)
{
    member ms[] = {{.name = "networkPassphrase"}, {.name = "compression"}, {.name = "ledgersPerBatch"},
                   {.name = "batchesPerPartition"}, {.name = kind == CS_LAKE_CONF_SEP ? "ledgersPath" : "version"}};
    reader r = {.p = text, .len = len};
    if (!read_object(&r, ms, sizeof ms / sizeof ms[0]))
        return cs_err_set(err, CS_LAKE_CONF_ERR_DISAGREES, "it is not a JSON object of strings and numbers: %s at byte %zu",
                          r.what, r.at);
    char lpb[16], bpp[16];
    snprintf(lpb, sizeof lpb, "%" PRIu32, l->ledgers_per_batch);
    snprintf(bpp, sizeof bpp, "%" PRIu32, l->batches_per_partition);
    if (compare(&ms[0], passphrase, "--network-passphrase", false, err) != 0 ||
        compare(&ms[1], "zstd", NULL, false, err) != 0 ||
        compare(&ms[2], lpb, "--lake-ledgers-per-batch", true, err) != 0 ||
        compare(&ms[3], bpp, "--lake-batches-per-partition", true, err) != 0)
        return -1;
    return compare(&ms[4], kind == CS_LAKE_CONF_SEP ? CS_LAKE_LEDGERS_PATH : CS_LAKE_MANIFEST_VERSION, NULL, false,
                   err);
}
