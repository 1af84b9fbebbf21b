#include "corestreamd/server/request.h"

#include <string.h>

#include "common/goquote.h"
#include "corestream/wire.h"

/* The first value of name among the pairs, or NULL when absent or empty. */
static const char *first_value(const char *const *args, size_t nargs, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < nargs; i++) {
        const char *a = args[i];
        const char *eq = strchr(a, '=');
        size_t klen = eq ? (size_t)(eq - a) : strlen(a);
        if (klen == n && memcmp(a, name, n) == 0) {
            const char *v = eq ? eq + 1 : "";
            return *v ? v : NULL;
        }
    }
    return NULL;
}

/* strconv.ParseUint(v, 10, 32): decimal digits only. */
static bool parse_u32(const char *v, uint32_t *out)
{
    uint64_t x = 0;
    if (!*v)
        return false;
    for (const char *p = v; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        x = x * 10 + (uint64_t)(*p - '0');
        if (x > UINT32_MAX)
            return false;
    }
    *out = (uint32_t)x;
    return true;
}

static int invalid(cs_err *err, const char *which, const char *v)
{
    char q[CS_ERR_MSG_MAX];
    cs_go_quote(q, sizeof q, v);
    return cs_err_set(err, 0, "invalid %s parameter %s", which, q);
}

int cs_stream_request_parse(const char *const *args, size_t nargs, cs_stream_request *out, cs_err *err)
{
    memset(out, 0, sizeof *out);
    const char *sv = first_value(args, nargs, "start");
    const char *ev = first_value(args, nargs, "end");
    if (sv && !parse_u32(sv, &out->start))
        return invalid(err, "start", sv);
    if (ev) {
        if (!parse_u32(ev, &out->end))
            return invalid(err, "end", ev);
        if (out->end == 0)
            return cs_err_set(err, 0, "invalid end parameter: 0");
        out->bounded = true;
    }
    if (out->start == CS_LAST_SEQUENCE || (out->bounded && out->end == CS_LAST_SEQUENCE))
        return cs_err_set(err, 0, "ledger %u is the last representable sequence and is not streamable",
                          CS_LAST_SEQUENCE);
    if (out->bounded && out->start != 0 && out->end < out->start)
        return cs_err_set(err, 0, "end %u is before start %u", out->end, out->start);
    return 0;
}
