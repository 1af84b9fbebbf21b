/* SPDX-License-Identifier: Apache-2.0 */
/* Reassembly and verification of BEGIN, CHUNK..., END flows (docs/PROTOCOL.md, section 2),
 * transport-free. */
#include "remoteledger/assemble.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <xxhash.h>
#include <zstd.h>

#include "corestream/wire.h"
#include "wire/wire.h"

#define PROTOCOL_PREFIX "remoteledger: protocol violation: "
#define GAP_PREFIX "remoteledger: ledger sequence gap: "
#define MIN_BUFFER (64u << 10)
/* Where the chunk bound comes from, for the messages: the caller's option, or the server's
 * answer when that is smaller (rli_asm_set_server_bound). */
#define BOUND_OPTION "max_chunk_size"
#define BOUND_SERVER "the server's X-Corestream-Chunk-Size"
/* zstd frames cannot legitimately need a window past one chunk (8 MiB); leave a margin. */
#define ZSTD_WINDOW_LOG_MAX 24

/* Where the bytes of the current message go. */
enum {
    M_HDR,  /* collecting the header (a whole BEGIN, END or SIG; a CHUNK's first 11 bytes) */
    M_RAW,  /* a raw CHUNK's payload: appended and hashed as it arrives */
    M_ZSTD, /* a zstd CHUNK's payload: referenced (whole) or gathered (fragments) */
    M_SKIP, /* the rest is not needed: an error is pending, or the message is already too long */
};

struct rli_asm {
    int64_t cap;
    size_t bound; /* the most one CHUNK may carry or decode to */
    size_t option_bound;    /* ...as the caller set it */
    const char *bound_name; /* BOUND_OPTION or BOUND_SERVER */

    /* sequence tracker */
    uint32_t expected;
    bool exhausted;

    /* the assembly */
    bool active;
    uint32_t seq;
    int64_t emit_start;
    uint32_t chunks;
    uint32_t discarded;
    uint8_t *buf;
    size_t len, bufcap;
    XXH64_state_t *hash;
    EVP_MD_CTX *sha;   /* SHA-256 of the raw bytes, when rli_asm_want_sha256 asked for it */
    uint8_t sig[CS_WIRE_SIG_MAX_LEN]; /* the ledger's SIG message, sig_len 0 when none came */
    size_t sig_len;
    ZSTD_DCtx *dctx;

    /* the message being fed */
    int mode;
    bool chunk_open; /* the header was a well-formed CHUNK header */
    bool whole;      /* fed by rli_asm_message: the payload may be referenced in place */
    uint8_t hdr[CS_WIRE_SIG_MAX_LEN];
    size_t hdr_len;
    uint64_t msg_len;
    uint64_t size_hint;
    uint32_t chunk_idx;
    size_t chunk_len; /* the CHUNK's payload bytes so far (raw, or compressed) */
    const uint8_t *direct;
    size_t direct_len;
    uint8_t *scratch;
    size_t scratch_len, scratch_cap;
    bool pending;
    cs_err perr;

    rl_ledger_info info;
    uint8_t digest[32]; /* SHA-256 of the ledger completed last (with sha) */
    uint64_t xxh64;     /* ...and its XXH64, as its END carried it */
};

rli_asm *rli_asm_new(int64_t max_payload, size_t chunk_bound)
{
    rli_asm *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->cap = max_payload;
    a->option_bound = a->bound = chunk_bound ? chunk_bound : CS_MAX_CHUNK_SIZE;
    a->bound_name = BOUND_OPTION;
    a->hash = XXH64_createState();
    a->dctx = ZSTD_createDCtx();
    if (!a->hash || !a->dctx) {
        rli_asm_free(a);
        return NULL;
    }
    ZSTD_DCtx_setParameter(a->dctx, ZSTD_d_windowLogMax, ZSTD_WINDOW_LOG_MAX);
    XXH64_reset(a->hash, 0);
    return a;
}

void rli_asm_free(rli_asm *a)
{
    if (!a)
        return;
    if (a->hash)
        XXH64_freeState(a->hash);
    EVP_MD_CTX_free(a->sha);
    ZSTD_freeDCtx(a->dctx);
    free(a->buf);
    free(a->scratch);
    free(a);
}

void rli_asm_reset(rli_asm *a, uint32_t from)
{
    a->expected = from;
    a->exhausted = false;
    a->active = false;
    a->seq = 0;
    a->emit_start = 0;
    a->chunks = 0;
    a->discarded = 0;
    a->len = 0;
    a->sig_len = 0;
    a->mode = M_HDR;
    a->chunk_open = false;
    a->pending = false;
    a->hdr_len = 0;
    a->msg_len = 0;
    memset(&a->info, 0, sizeof a->info);
}

uint32_t rli_asm_expected(const rli_asm *a) { return a->expected; }

bool rli_asm_active(const rli_asm *a, uint32_t *seq)
{
    if (a->active && seq)
        *seq = a->seq;
    return a->active;
}

size_t rli_asm_capacity(const rli_asm *a) { return a->bufcap; }

bool rli_asm_want_sha256(rli_asm *a)
{
    if (!a->sha)
        a->sha = EVP_MD_CTX_new();
    return a->sha && EVP_DigestInit_ex(a->sha, EVP_sha256(), NULL) == 1;
}

const uint8_t *rli_asm_sig(const rli_asm *a, size_t *len)
{
    *len = a->sig_len;
    return a->sig_len ? a->sig : NULL;
}

const uint8_t *rli_asm_sha256(const rli_asm *a) { return a->sha ? a->digest : NULL; }

uint64_t rli_asm_xxh64(const rli_asm *a) { return a->xxh64; }

/* Both hashes over bytes just appended to the ledger. */
static void hash_update(rli_asm *a, const uint8_t *p, size_t n)
{
    XXH64_update(a->hash, p, n);
    if (a->sha)
        EVP_DigestUpdate(a->sha, p, n);
}

void rli_asm_set_server_bound(rli_asm *a, size_t announced)
{
    bool server = announced && announced < a->option_bound;
    a->bound = server ? announced : a->option_bound;
    a->bound_name = server ? BOUND_SERVER : BOUND_OPTION;
}

size_t rli_asm_footprint(const rli_asm *a)
{
    return sizeof *a + a->bufcap + a->scratch_cap + ZSTD_sizeof_DCtx(a->dctx);
}

const uint8_t *rli_asm_partial(const rli_asm *a, size_t *len, uint32_t *discarded)
{
    *len = a->len;
    *discarded = a->discarded;
    return a->buf;
}

const uint8_t *rli_asm_ledger(const rli_asm *a, size_t *len, rl_ledger_info *info)
{
    if (len)
        *len = a->len;
    if (info)
        *info = a->info;
    static const uint8_t empty[1];
    return a->buf ? a->buf : empty; /* never NULL, even for an empty first ledger */
}

/* ---- buffers ---------------------------------------------------------------------------------- */

/* Geometric growth of the assembly buffer, never past the ledger cap (a need within the cap is
 * all the callers ask for), so the buffer is at most the cap; never shrinks. */
static bool reserve(rli_asm *a, size_t need)
{
    if (need <= a->bufcap)
        return true;
    size_t cap = a->bufcap > MIN_BUFFER ? a->bufcap : MIN_BUFFER;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (a->cap >= 0 && (uint64_t)cap > (uint64_t)a->cap)
        cap = (uint64_t)a->cap > need ? (size_t)a->cap : need;
    uint8_t *p = realloc(a->buf, cap);
    if (!p)
        return false;
    a->buf = p;
    a->bufcap = cap;
    return true;
}

/* Room for n more compressed bytes (scratch_len + n is within the chunk bound): geometric growth,
 * never past the bound; never shrinks. */
static bool scratch_reserve(rli_asm *a, size_t n)
{
    size_t need = a->scratch_len + n;
    if (need <= a->scratch_cap)
        return true;
    size_t cap = a->scratch_cap ? a->scratch_cap : MIN_BUFFER;
    while (cap < need)
        cap *= 2;
    if (cap > a->bound)
        cap = a->bound > need ? a->bound : need;
    uint8_t *s = realloc(a->scratch, cap);
    if (!s)
        return false;
    a->scratch = s;
    a->scratch_cap = cap;
    return true;
}

static bool scratch_append(rli_asm *a, const uint8_t *p, size_t n)
{
    if (!scratch_reserve(a, n))
        return false;
    if (p != a->scratch + a->scratch_len) /* else received in place (rli_asm_recv_slot) */
        memcpy(a->scratch + a->scratch_len, p, n);
    a->scratch_len += n;
    return true;
}

/* ---- errors ----------------------------------------------------------------------------------- */

/* Keeps the first error of the message; it is reported when the message is complete. */
static void pend(rli_asm *a, int kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void pend(rli_asm *a, int kind, const char *fmt, ...)
{
    if (!a->pending) {
        va_list ap;
        va_start(ap, fmt);
        cs_err_vset(&a->perr, kind, fmt, ap);
        va_end(ap);
        a->pending = true;
    }
    a->mode = M_SKIP;
}

static rli_asm_status fail_pending(rli_asm *a, cs_err *err)
{
    if (err)
        *err = a->perr;
    a->mode = M_HDR;
    return RLI_ASM_ERROR;
}

static rli_asm_status fail(cs_err *err, int kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static rli_asm_status fail(cs_err *err, int kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cs_err_vset(err, kind, fmt, ap);
    va_end(ap);
    return RLI_ASM_ERROR;
}

/* ---- feeding ---------------------------------------------------------------------------------- */

void rli_asm_msg_begin(rli_asm *a, uint64_t size_hint)
{
    a->mode = M_HDR;
    a->chunk_open = false;
    a->whole = false;
    a->hdr_len = 0;
    a->msg_len = 0;
    a->size_hint = size_hint;
    a->chunk_len = 0;
    a->direct = NULL;
    a->direct_len = 0;
    a->scratch_len = 0;
    a->pending = false;
}

/* The header of a well-formed CHUNK has arrived: check the flow and the index now, so the payload
 * can go straight where it belongs (or nowhere). */
static void open_chunk(rli_asm *a)
{
    uint32_t seq = cs_wire_get_u32(a->hdr + 2);
    uint32_t idx = cs_wire_get_u32(a->hdr + 6);
    a->chunk_open = true;
    a->chunk_idx = idx;
    a->chunk_len = 0;
    if (!a->active || seq != a->seq) {
        pend(a, RL_ERR_PROTOCOL, PROTOCOL_PREFIX "CHUNK for ledger %" PRIu32 " outside its flow", seq);
        return;
    }
    if (a->sig_len) {
        pend(a, RL_ERR_PROTOCOL, PROTOCOL_PREFIX "ledger %" PRIu32 " chunk %" PRIu32 " arrived after its SIG", seq,
             idx);
        return;
    }
    if (idx != a->chunks) {
        pend(a, RL_ERR_PROTOCOL,
             PROTOCOL_PREFIX "ledger %" PRIu32 " chunk %" PRIu32 " arrived, expected chunk %" PRIu32,
             seq, idx, a->chunks);
        return;
    }
    if (a->hdr[10] == CS_CODEC_RAW) {
        a->mode = M_RAW;
        /* Pre-size for the whole payload when the transport knows it and the bounds allow it. */
        if (a->size_hint > CS_WIRE_CHUNK_HEADER_LEN) {
            uint64_t payload = a->size_hint - CS_WIRE_CHUNK_HEADER_LEN;
            if (payload <= a->bound && (a->cap < 0 || a->len + payload <= (uint64_t)a->cap))
                (void)reserve(a, a->len + (size_t)payload);
        }
    } else {
        a->mode = M_ZSTD;
    }
}

/* A CHUNK's payload (raw, or compressed) is past the chunk bound. */
static void pend_over_bound(rli_asm *a)
{
    pend(a, RL_ERR_PROTOCOL,
         PROTOCOL_PREFIX "ledger %" PRIu32 " chunk %" PRIu32 " carries more bytes than the chunk bound of %zu (%s)",
         a->seq, a->chunk_idx, a->bound, a->bound_name);
}

static void append_raw(rli_asm *a, const uint8_t *p, size_t n)
{
    /* The limit the first byte too many crosses is the error, however the bytes were split (the
     * cap when both fall on the same byte). */
    uint64_t bound_room = a->bound - a->chunk_len;
    uint64_t cap_room = a->cap >= 0 ? (uint64_t)a->cap - a->len : UINT64_MAX;
    if (n > cap_room && cap_room <= bound_room) {
        pend(a, RL_ERR_PROTOCOL, PROTOCOL_PREFIX "ledger %" PRIu32 " exceeds the %" PRId64 "-byte payload cap",
             a->seq, a->cap);
        return;
    }
    if (n > bound_room) {
        pend_over_bound(a);
        return;
    }
    if (!reserve(a, a->len + n)) {
        pend(a, RL_ERR_NOMEM, "remoteledger: out of memory");
        return;
    }
    if (p != a->buf + a->len) /* else received in place (rli_asm_recv_slot) */
        memcpy(a->buf + a->len, p, n);
    hash_update(a, p, n);
    a->len += n;
    a->chunk_len += n;
}

/* Compressed bytes of a zstd CHUNK: referenced when the message came whole, else gathered. */
static void append_zstd(rli_asm *a, const uint8_t *p, size_t n)
{
    if (n > a->bound - a->chunk_len) {
        pend_over_bound(a);
        return;
    }
    a->chunk_len += n;
    if (a->whole && a->scratch_len == 0 && !a->direct) {
        a->direct = p;
        a->direct_len = n;
        return;
    }
    if (a->direct) { /* not expected: a whole message fed in pieces */
        const uint8_t *d = a->direct;
        size_t dn = a->direct_len;
        a->direct = NULL;
        if (!scratch_append(a, d, dn)) {
            pend(a, RL_ERR_NOMEM, "remoteledger: out of memory");
            return;
        }
    }
    if (!scratch_append(a, p, n))
        pend(a, RL_ERR_NOMEM, "remoteledger: out of memory");
}

uint8_t *rli_asm_recv_slot(rli_asm *a, size_t want, size_t *room)
{
    *room = 0;
    if (want == 0)
        return NULL;
    if ((a->mode == M_RAW || a->mode == M_ZSTD) && want > a->bound - a->chunk_len) {
        want = a->bound - a->chunk_len; /* the next byte past the bound: append_* says so */
        if (want == 0)
            return NULL;
    }
    if (a->mode == M_RAW) {
        if (a->cap >= 0) {
            if ((uint64_t)a->len >= (uint64_t)a->cap)
                return NULL; /* the next byte is over the cap: append_raw says so */
            if ((uint64_t)want > (uint64_t)a->cap - a->len)
                want = (size_t)((uint64_t)a->cap - a->len);
        }
        if (want > SIZE_MAX - a->len || !reserve(a, a->len + want))
            return NULL;
        *room = want;
        return a->buf + a->len;
    }
    if (a->mode == M_ZSTD && !a->whole && !a->direct) {
        if (!scratch_reserve(a, want))
            return NULL;
        *room = want;
        return a->scratch + a->scratch_len;
    }
    return NULL;
}

static bool is_chunk_header(const uint8_t *h)
{
    return h[0] == CS_WIRE_VERSION && h[1] == CS_WIRE_TYPE_CHUNK &&
           (h[10] == CS_CODEC_RAW || h[10] == CS_CODEC_ZSTD);
}

void rli_asm_msg_data(rli_asm *a, const uint8_t *p, size_t n)
{
    a->msg_len += n;
    while (n) {
        switch (a->mode) {
        case M_HDR: {
            size_t want = a->hdr_len < CS_WIRE_CHUNK_HEADER_LEN ? CS_WIRE_CHUNK_HEADER_LEN - a->hdr_len
                                                                 : sizeof a->hdr - a->hdr_len;
            size_t take = want < n ? want : n;
            memcpy(a->hdr + a->hdr_len, p, take);
            a->hdr_len += take;
            p += take;
            n -= take;
            if (a->hdr_len == CS_WIRE_CHUNK_HEADER_LEN && is_chunk_header(a->hdr))
                open_chunk(a);
            else if (a->hdr_len == sizeof a->hdr)
                a->mode = M_SKIP; /* longer than any other message: the length is the error */
            break;
        }
        case M_RAW:
            append_raw(a, p, n);
            n = 0;
            break;
        case M_ZSTD:
            append_zstd(a, p, n);
            n = 0;
            break;
        default:
            n = 0;
            break;
        }
    }
}

static const char no_content_size[] = "no content size";

/* What a zstd payload decodes to: the sum of its frames' content sizes, known before any byte is
 * decoded. NULL with *total set, or why it cannot be known: a frame without a content size
 * (no_content_size), or zstd's words for one that is malformed or cut short. */
static const char *content_size(const uint8_t *p, size_t n, uint64_t *total)
{
    *total = 0;
    while (n) {
        size_t fn = ZSTD_findFrameCompressedSize(p, n);
        if (ZSTD_isError(fn))
            return ZSTD_getErrorName(fn);
        unsigned long long fcs = ZSTD_getFrameContentSize(p, fn);
        if (fcs == ZSTD_CONTENTSIZE_UNKNOWN)
            return no_content_size;
        if (fcs == ZSTD_CONTENTSIZE_ERROR)
            return "Unknown frame descriptor";
        *total = fcs > UINT64_MAX - *total ? UINT64_MAX : *total + fcs;
        p += fn;
        n -= fn;
    }
    return NULL;
}

/* Decodes src[0..n) into exactly the total bytes its frames announced, at the end of the
 * assembly (reserved by the caller). NULL, or zstd's words for what went wrong. */
static const char *inflate(rli_asm *a, const uint8_t *src, size_t n, size_t total)
{
    static uint8_t none[1];
    ZSTD_DCtx_reset(a->dctx, ZSTD_reset_session_only);
    ZSTD_outBuffer out = {total ? a->buf + a->len : none, total, 0};
    ZSTD_inBuffer in = {src, n, 0};
    for (;;) {
        size_t in0 = in.pos, out0 = out.pos;
        size_t r = ZSTD_decompressStream(a->dctx, &out, &in);
        if (ZSTD_isError(r))
            return ZSTD_getErrorName(r);
        if (in.pos == in.size && r == 0)
            break; /* every frame complete */
        if (in.pos == in0 && out.pos == out0)
            return out.pos == out.size ? "more than its content size" : "unexpected EOF";
    }
    return out.pos == total ? NULL : "less than its content size";
}

/* Whether total decoded bytes may join the assembly: within the chunk bound and the ledger cap. */
static rli_asm_status check_inflate(rli_asm *a, uint64_t total, cs_err *err)
{
    if (total > a->bound)
        return fail(err, RL_ERR_PROTOCOL,
                    PROTOCOL_PREFIX "ledger %" PRIu32 " chunk %" PRIu32 " inflates to %" PRIu64
                                    " bytes, over the chunk bound of %zu (%s)",
                    a->seq, a->chunk_idx, total, a->bound, a->bound_name);
    if (a->cap >= 0 && a->len + total > (uint64_t)a->cap)
        return fail(err, RL_ERR_PROTOCOL,
                    PROTOCOL_PREFIX "ledger %" PRIu32 " exceeds the %" PRId64 "-byte payload cap", a->seq,
                    a->cap);
    return RLI_ASM_MORE;
}

/* Expands the current zstd chunk into the assembly buffer. What it decodes to is checked against
 * the chunk bound and the ledger cap from the frames' headers, before any room is made for it. */
static rli_asm_status expand(rli_asm *a, cs_err *err)
{
    const uint8_t *src = a->direct ? a->direct : a->scratch;
    size_t n = a->direct ? a->direct_len : a->scratch_len;
    if (n == 0)
        return RLI_ASM_MORE;
    uint64_t total;
    const char *why = content_size(src, n, &total);
    if (why == no_content_size)
        return fail(err, RL_ERR_PROTOCOL,
                    PROTOCOL_PREFIX "ledger %" PRIu32 " chunk %" PRIu32 " is a zstd frame without a content size, "
                                    "which the chunk bound of %zu (%s) needs",
                    a->seq, a->chunk_idx, a->bound, a->bound_name);
    if (!why) {
        if (check_inflate(a, total, err) != RLI_ASM_MORE)
            return RLI_ASM_ERROR;
        if (!reserve(a, a->len + (size_t)total))
            return fail(err, RL_ERR_NOMEM, "remoteledger: out of memory");
        why = inflate(a, src, n, (size_t)total);
    }
    if (why)
        return fail(err, RL_ERR_PROTOCOL,
                    PROTOCOL_PREFIX "ledger %" PRIu32 " chunk %" PRIu32 ": decompress: %s", a->seq,
                    a->chunk_idx, why);
    if (total) { /* the buffer may not exist yet for an empty frame */
        hash_update(a, a->buf + a->len, (size_t)total);
        a->len += (size_t)total;
    }
    return RLI_ASM_MORE;
}

static rli_asm_status finish_chunk(rli_asm *a, cs_err *err)
{
    if (a->pending)
        return fail_pending(a, err);
    if (a->mode == M_ZSTD) {
        rli_asm_status st = expand(a, err);
        a->direct = NULL;
        a->scratch_len = 0;
        if (st != RLI_ASM_MORE)
            return st;
    }
    a->chunks++;
    return RLI_ASM_MORE;
}

/* The decode error of a BEGIN, END, SIG or unknown message longer than any but a CHUNK, worded
 * as cs_wire_decode words it (the bytes past the header were not kept). */
static rli_asm_status long_message_error(rli_asm *a, cs_err *err)
{
    const uint8_t *h = a->hdr;
    unsigned long long n = (unsigned long long)a->msg_len;
    if (h[0] != CS_WIRE_VERSION)
        return fail(err, RL_ERR_PROTOCOL,
                    PROTOCOL_PREFIX "wire: unsupported protocol version: got 0x%02x, want 0x%02x", h[0],
                    CS_WIRE_VERSION);
    switch (h[1]) {
    case CS_WIRE_TYPE_BEGIN:
        return fail(err, RL_ERR_PROTOCOL,
                    PROTOCOL_PREFIX "wire: message shorter than header: BEGIN is %llu bytes, want %d", n,
                    CS_WIRE_BEGIN_LEN);
    case CS_WIRE_TYPE_END:
        return fail(err, RL_ERR_PROTOCOL,
                    PROTOCOL_PREFIX "wire: message shorter than header: END is %llu bytes, want %d", n,
                    CS_WIRE_END_LEN);
    case CS_WIRE_TYPE_SIG:
        return fail(err, RL_ERR_PROTOCOL, PROTOCOL_PREFIX "wire: SIG is %llu bytes, want %d to %d", n,
                    CS_WIRE_SIG_FIXED_LEN + 1, CS_WIRE_SIG_MAX_LEN);
    case CS_WIRE_TYPE_CHUNK:
        return fail(err, RL_ERR_PROTOCOL, PROTOCOL_PREFIX "wire: unknown chunk codec: 0x%02x", h[10]);
    default:
        return fail(err, RL_ERR_PROTOCOL, PROTOCOL_PREFIX "wire: unknown message type: 0x%02x", h[1]);
    }
}

static rli_asm_status on_begin(rli_asm *a, const cs_wire_msg *m, cs_err *err)
{
    if (a->active) {
        if (m->seq != a->seq)
            return fail(err, RL_ERR_PROTOCOL,
                        PROTOCOL_PREFIX "BEGIN for ledger %" PRIu32 " while assembling %" PRIu32, m->seq,
                        a->seq);
        /* A ring redelivery of the ledger being assembled: the partial is worthless. The sequence
         * was accepted when the first BEGIN came. */
        a->discarded++;
    } else if (a->exhausted) {
        return fail(err, RL_ERR_GAP,
                    GAP_PREFIX "ledger %" PRIu32 " cannot follow %" PRIu32 ", the last representable sequence",
                    m->seq, (uint32_t)CS_LAST_SEQUENCE);
    } else if (a->expected != 0 && m->seq != a->expected) {
        return fail(err, RL_ERR_GAP, GAP_PREFIX "got ledger %" PRIu32 ", expected %" PRIu32, m->seq,
                    a->expected);
    }
    a->active = true;
    a->seq = m->seq;
    a->emit_start = m->stamp;
    a->len = 0;
    a->chunks = 0;
    a->sig_len = 0;
    XXH64_reset(a->hash, 0);
    if (a->sha)
        EVP_DigestInit_ex(a->sha, EVP_sha256(), NULL);
    return RLI_ASM_MORE;
}

/* A SIG: once per ledger, after its last CHUNK; kept as it came for the caller (rli_asm_sig). */
static rli_asm_status on_sig(rli_asm *a, const cs_wire_msg *m, cs_err *err)
{
    if (!a->active || m->seq != a->seq)
        return fail(err, RL_ERR_PROTOCOL, PROTOCOL_PREFIX "SIG for ledger %" PRIu32 " outside its flow", m->seq);
    if (a->sig_len)
        return fail(err, RL_ERR_PROTOCOL, PROTOCOL_PREFIX "ledger %" PRIu32 " has a second SIG", m->seq);
    memcpy(a->sig, m->payload, m->payload_len);
    a->sig_len = m->payload_len;
    return RLI_ASM_MORE;
}

static rli_asm_status on_end(rli_asm *a, const cs_wire_msg *m, cs_err *err)
{
    if (!a->active || m->seq != a->seq)
        return fail(err, RL_ERR_PROTOCOL, PROTOCOL_PREFIX "END for ledger %" PRIu32 " outside its flow",
                    m->seq);
    if (m->chunk_count != a->chunks)
        return fail(err, RL_ERR_PROTOCOL,
                    PROTOCOL_PREFIX "ledger %" PRIu32 " END declares %" PRIu32 " chunks, %" PRIu32 " arrived",
                    m->seq, m->chunk_count, a->chunks);
    if (m->total_len != (uint64_t)a->len)
        return fail(err, RL_ERR_PROTOCOL,
                    PROTOCOL_PREFIX "ledger %" PRIu32 " END declares %" PRIu64 " bytes, %zu assembled", m->seq,
                    m->total_len, a->len);
    uint64_t sum = XXH64_digest(a->hash);
    if (sum != m->checksum)
        return fail(err, RL_ERR_PROTOCOL,
                    PROTOCOL_PREFIX "ledger %" PRIu32 " checksum mismatch: got 0x%016" PRIx64 ", want 0x%016" PRIx64,
                    m->seq, sum, m->checksum);
    if (a->sha) {
        unsigned int dn = 0;
        EVP_DigestFinal_ex(a->sha, a->digest, &dn);
    }
    a->xxh64 = sum;
    a->exhausted = m->seq == CS_LAST_SEQUENCE;
    a->expected = m->seq + 1; /* wraps to 0 after the last sequence; exhausted remembers it */
    a->info = (rl_ledger_info){
        .sequence = m->seq,
        .emit_start_unix_nano = a->emit_start,
        .emit_end_unix_nano = m->stamp,
        .received_unix_nano = 0,
        .size = a->len,
        .chunks = a->chunks,
        .discarded_partials = a->discarded,
    };
    a->active = false;
    a->discarded = 0;
    return RLI_ASM_LEDGER;
}

rli_asm_status rli_asm_msg_end(rli_asm *a, cs_err *err)
{
    rli_asm_status st;
    if (a->chunk_open) {
        st = finish_chunk(a, err);
    } else if (a->pending) {
        st = fail_pending(a, err);
    } else if (a->msg_len > sizeof a->hdr) {
        st = long_message_error(a, err);
    } else {
        cs_wire_msg m;
        cs_err werr;
        if (cs_wire_decode(a->hdr, (size_t)a->msg_len, &m, &werr)) {
            st = fail(err, RL_ERR_PROTOCOL, PROTOCOL_PREFIX "%s", werr.msg);
        } else if (m.type == CS_WIRE_TYPE_BEGIN) {
            st = on_begin(a, &m, err);
        } else if (m.type == CS_WIRE_TYPE_END) {
            st = on_end(a, &m, err);
        } else if (m.type == CS_WIRE_TYPE_SIG) {
            st = on_sig(a, &m, err);
        } else {
            /* A CHUNK decodes only when it is at least 11 bytes, and then it was opened above. */
            st = fail(err, RL_ERR_PROTOCOL, PROTOCOL_PREFIX "wire: unknown message type: 0x%02x", m.type);
        }
    }
    a->mode = M_HDR;
    a->chunk_open = false;
    a->whole = false;
    a->direct = NULL;
    a->pending = false;
    return st;
}

rli_asm_status rli_asm_message(rli_asm *a, const uint8_t *msg, size_t len, cs_err *err)
{
    rli_asm_msg_begin(a, len);
    a->whole = true;
    rli_asm_msg_data(a, msg, len);
    return rli_asm_msg_end(a, err);
}
