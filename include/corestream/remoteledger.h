/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger: receive verified raw ledgers from a corestreamd over WebSocket.
 *
 * A stream is created once from a URL and options, then asked for ranges of ledgers. Each call
 * dials its own connection, reassembles every BEGIN, CHUNK..., END flow (expanding zstd chunks),
 * verifies the chunk count, the length and the XXH64 checksum, and hands each complete ledger to a
 * callback, or to the caller one per rl_stream_next (the pull calls). The connection is serviced
 * on the calling thread: the library starts no threads and keeps no global state, so two streams
 * (or one per thread) work independently.
 *
 * Threading and lifetimes. A stream is used by one thread at a time: no two calls on the same
 * stream may overlap, except rl_stream_cancel, which any thread may call at any time while the
 * stream exists. rl_result_name, rl_version_number and rl_version_string are safe anywhere. What
 * the library hands out is borrowed from the stream: a ledger until the callback returns (or
 * until the next call after rl_stream_next), rl_stream_error and rl_stream_endpoint strings until
 * the next call on the stream other than rl_stream_cancel, and all of it until rl_stream_free.
 * What the caller passes in is copied (the URL, the options and their strings) by rl_stream_new.
 *
 * Timeouts: dial (TCP connect), handshake (TLS and the upgrade) and idle (no complete message
 * once subscribed) each have a default and their own result code; none is unbounded by default.
 * Resume (opt-in, rl_options.resume_retries) reconnects by itself and goes on from the ledger
 * expected next, so a range is delivered once and in order across dropped connections.
 *
 * Typical use:
 *
 *     rl_stream *s;
 *     if (rl_stream_new(&s, "ws://core-box:8462", NULL) != RL_OK) ...
 *     rl_result r = rl_stream_raw_ledgers(s, rl_unbounded_range(resume_from), on_ledger, ctx);
 *     if (r == RL_ERR_TOO_FAR_BEHIND) { ... rl_stream_too_far_behind(s, &req, &oldest, &latest) ... }
 *     else if (r != RL_OK) fprintf(stderr, "%s\n", rl_stream_error(s));
 *     rl_stream_free(s);
 *
 * ws:// and wss:// share one transport: a socket the library owns, with OpenSSL (libssl) driven
 * directly on it for wss://. The library prints nothing, installs no signal handlers and never
 * raises SIGPIPE (writes use MSG_NOSIGNAL, under TLS too). TLS is TLS 1.2 or later, and the server's
 * certificate is verified by default against the system's CA paths (or the CA file or directory
 * given) for the URL's host (or tls_server_name): a DNS name is matched against the certificate's
 * names and sent as SNI, an IP literal is matched against its IP addresses. Host names are resolved
 * with a blocking getaddrinfo(), which neither the dial timeout nor rl_stream_cancel can cut short.
 *
 * ABI and versions. The library is libremoteledger.so.RL_VERSION_MAJOR (this release: .so.1). The
 * rules that keep a program built against one 1.x header working with any later 1.y library:
 *   - MAJOR (and with it the SONAME) changes only when the ABI breaks: a function removed or its
 *     signature changed, a field of a public struct moved, resized or given another meaning, a
 *     result code renumbered. 0.x had no rule; 1.0 broke it (rl_options gained struct_size, zero
 *     values became defaults), hence .so.1.
 *   - MINOR grows when something is added: functions, result codes, rl_options fields. Fields are
 *     only ever appended to rl_options, after the previous layout's last byte (never into its
 *     padding), and a zero always means "the default", so an older caller's struct, shorter and
 *     zero-filled by the library past its struct_size, asks for the defaults of what it does not
 *     know. rl_ledger_info and rl_range are filled by the library or passed by value and never
 *     grow within a major version.
 *   - PATCH: fixes only.
 * Callers may receive result codes newer than their header; treat any unknown one as an error
 * (rl_result_name says "RL_ERR_UNKNOWN", rl_stream_error still has the message).
 */
#ifndef CORESTREAM_REMOTELEDGER_H
#define CORESTREAM_REMOTELEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define RL_API __attribute__((visibility("default")))
#else
#define RL_API
#endif

/* The version of this header. rl_version_number() and rl_version_string() give the library's,
 * which may be newer (same major, see the ABI rules above). */
#define RL_VERSION_MAJOR 1
#define RL_VERSION_MINOR 5
#define RL_VERSION_PATCH 0
#define RL_VERSION_NUMBER (RL_VERSION_MAJOR * 10000 + RL_VERSION_MINOR * 100 + RL_VERSION_PATCH)
#define RL_VERSION_STR_(x) #x
#define RL_VERSION_STR(x) RL_VERSION_STR_(x)
#define RL_VERSION_STRING \
    RL_VERSION_STR(RL_VERSION_MAJOR) "." RL_VERSION_STR(RL_VERSION_MINOR) "." RL_VERSION_STR(RL_VERSION_PATCH)

/* The library's RL_VERSION_NUMBER (10000 * major + 100 * minor + patch: 10000 for 1.0.0), and its
 * "major.minor.patch" (static storage). Safe from any thread. */
RL_API unsigned rl_version_number(void);
RL_API const char *rl_version_string(void);

/* Result of a call. The message of the last failure is rl_stream_error(). RL_END and RL_AGAIN are
 * not failures: only rl_stream_next returns them. */
typedef enum rl_result {
    RL_OK = 0,
    RL_ERR_TOO_FAR_BEHIND = 1, /* the requested ledger is older than the server retains (close 4001);
                                  bounds via rl_stream_too_far_behind */
    RL_ERR_GAP = 2,            /* a ledger arrived out of sequence */
    RL_ERR_TRUNCATED = 3,      /* the stream closed before the bounded range was delivered, or
                                  mid-ledger */
    RL_ERR_PROTOCOL = 4,       /* malformed message, bad count, length or checksum, payload cap;
                                  a /healthz answer without its numbers (rl_stream_bounds); an
                                  X-Corestream-Run header that is not a run token */
    RL_ERR_DIAL = 5,           /* could not connect, or the WebSocket handshake failed: a status
                                  other than 101, e.g.
                                  "server requires a token (401)" when no bearer_token was set,
                                  "server rejected the token (401)" when one was; for
                                  rl_stream_bounds, a /healthz status other than 200 */
    RL_ERR_READ = 6,           /* transport error, or a close code other than 1000/1001/4001/4002 */
    RL_ERR_CANCELLED = 7,      /* rl_stream_cancel was called (and rl_stream_reset not since) */
    RL_ERR_INVALID = 8,        /* bad URL, range or options; nothing was dialled */
    RL_ERR_NOMEM = 9,
    RL_ERR_TLS = 10,           /* TLS could not be set up: the server's certificate failed
                                  verification, the server refused ours or sent another alert, the
                                  two ends disagree on TLS itself (a plain server on wss://, a TLS
                                  server on ws://), or a CA, certificate or key file cannot be
                                  loaded. The message names the cause in words. */
    RL_ERR_DIAL_TIMEOUT = 11,  /* no TCP connection within dial_timeout_ns */
    RL_ERR_HANDSHAKE_TIMEOUT = 12, /* connected, but the TLS handshake and the WebSocket upgrade
                                  did not finish within handshake_timeout_ns (a server that
                                  accepts and never answers: overloaded, wedged, or stopped with
                                  SIGSTOP while its kernel still accepts) */
    RL_ERR_IDLE_TIMEOUT = 13,  /* subscribed, but no complete message arrived for
                                  idle_timeout_ns (a server that went silent or was paused; a
                                  dead peer's kernel is found by TCP keepalive too) */
    RL_END = 14,               /* rl_stream_next: the stream is over without an error (a bounded
                                  range complete, or an unbounded one closed cleanly by the
                                  server); no ledger was returned */
    RL_AGAIN = 15,             /* rl_stream_next: no ledger within the call's timeout_ns; the
                                  stream is intact, call again */
    RL_ERR_RUN_CHANGED = 16,   /* since 1.3: a connection of the session reached a server of
                                  another run than its first (another X-Corestream-Run token: a
                                  new data directory, another source or source parameters), so
                                  its ledgers may not continue the ones delivered. Never retried;
                                  allow_run_change accepts it instead. rl_stream_run has the
                                  session's token */
    RL_ERR_SIGNATURE = 17,     /* since 1.4, with trusted_keys_file: a ledger came unsigned, signed
                                  by a key not trusted, with a signature that does not verify, or
                                  signed for another run or out of its chain (docs/PROTOCOL.md,
                                  "Signed ledgers"). The ledger is not handed over; never
                                  retried */
    RL_ERR_HOLE = 18,          /* since 1.5: the server's ring does not hold a ledger of the range
                                  (close 4002: it was proven bad and quarantined, or never
                                  written); every ledger before it was delivered. The message names
                                  the missing ledgers: "remoteledger: ledgers 7 to 9 are missing
                                  from the server's ring (requested 7)". Never retried: the same
                                  server answers the same until an operator (or a backfill) fills
                                  the hole; another server may hold them */
} rl_result;

/* Stable name of a result, e.g. "RL_ERR_GAP". */
RL_API const char *rl_result_name(rl_result r);

/* A range of ledger sequences: [from, to] when bounded, [from, latest) otherwise. from 0 on an
 * unbounded range means "from the tip": the next ledger the server publishes. */
typedef struct rl_range {
    uint32_t from;
    uint32_t to;
    bool bounded;
} rl_range;

RL_API rl_range rl_bounded_range(uint32_t from, uint32_t to);
RL_API rl_range rl_unbounded_range(uint32_t from);
RL_API rl_range rl_single_ledger_range(uint32_t seq);

/* What is known about one delivered ledger. Stamps are Unix nanoseconds; emit stamps come from the
 * server's clock and are 0 for ledgers replayed from its retention ring. */
typedef struct rl_ledger_info {
    uint32_t sequence;
    int64_t emit_start_unix_nano; /* server clock at the ledger's first byte from its source */
    int64_t emit_end_unix_nano;   /* server clock at its last byte */
    int64_t received_unix_nano;   /* this host's clock once assembled and verified */
    uint64_t size;                /* raw bytes */
    uint32_t chunks;              /* CHUNK messages */
    uint32_t discarded_partials;  /* partial assemblies dropped for a ring redelivery */
} rl_ledger_info;

/* Each returns false (and leaves *ns alone) when the value is absent. */
RL_API bool rl_info_delivery(const rl_ledger_info *i, int64_t *ns);    /* received - emit_end */
RL_API bool rl_info_pipeline(const rl_ledger_info *i, int64_t *ns);    /* received - emit_start */
RL_API bool rl_info_emit_window(const rl_ledger_info *i, int64_t *ns); /* emit_end - emit_start */

/* Options for rl_stream_new.
 *
 * Why a struct with a size and not an opaque handle with setters: it is one allocation-free value
 * a caller fills in place (from C with designated initialisers, from Go as a plain C.rl_options),
 * with nothing to free and no call that can fail per option; struct_size, which the library checks,
 * is what lets it grow. Start from rl_options_init() (or a zeroed struct with struct_size set to
 * sizeof(rl_options)): every other field zero, false or NULL means its documented default.
 *
 * struct_size rules (rl_stream_new returns RL_ERR_INVALID, with the message in rl_stream_error, when
 * they are not met):
 *   - 0 is refused: the library cannot know how much of the struct is there.
 *   - A size smaller than this header's (a caller built against an older 1.x header) is accepted
 *     if it is a multiple of the struct's alignment: the fields past it take their defaults, and
 *     the library never reads past struct_size.
 *   - A larger size (a caller built against a newer header, run with an older library) is
 *     accepted only when every byte this library does not know is zero, so no option is silently
 *     ignored.
 * The struct is copied by rl_stream_new, strings included: the caller's may go away after it.
 *
 * Memory. Whatever the server sends, a stream holds at most: the ledger cap (max_message_size)
 * for the assembly buffer, plus one chunk bound (max_chunk_size, at most 8388608) of scratch
 * for a zstd chunk that arrives in several reads, plus a 1 MiB receive buffer, plus fixed state
 * (the zstd decoder's, about 100 KiB; OpenSSL's on wss://; the stream's own). With the defaults
 * that is 256 MiB + 8 MiB + 1 MiB + that state; with max_chunk_size 262144, 256 MiB + 256 KiB +
 * 1 MiB (and, while the assembly buffer grows, what realloc needs to move it; glibc moves large
 * blocks without a copy). The buffers are kept, not shrunk, until rl_stream_free: a stream that
 * once assembled a ledger of n bytes keeps a buffer of n to 2n bytes, never past the cap. The
 * cap is what bounds it: zstd makes a ledger of the cap cheap to send (a 256 MiB one costs about
 * 9 KB of 8 MiB chunks, or about 40 KB of 256 KiB ones), so a program that cannot afford the cap
 * per stream should lower max_message_size, not only max_chunk_size. With a negative
 * max_message_size nothing bounds the assembly buffer. */
typedef struct rl_options {
    /* sizeof(rl_options) as the caller compiled it. rl_options_init sets it. */
    size_t struct_size;
    /* Largest assembled ledger accepted; a ledger of exactly this size is fine, a bigger one ends
     * the call with RL_ERR_PROTOCOL ("remoteledger: protocol violation: ledger 10 exceeds the
     * 268435456-byte payload cap"), refused before any room is made for the chunk that would
     * cross it. 0: the default, 268435456 (RL_DEFAULT_MAX_MESSAGE_SIZE, the protocol's ceiling).
     * Negative: no cap. It is what bounds a session's memory (see "Memory" below): the ledger
     * being assembled, or the last one handed over, lives in one buffer that grows by doubling
     * from 64 KiB up to this cap and never past it. */
    int64_t max_message_size;
    /* The chunk bound. Largest chunk payload accepted per message: the WebSocket read limit is
     * this plus the 11-byte chunk header (at least 263, a SIG), and a bigger message ends the call with
     * RL_ERR_READ and a close 1009 ("remoteledger: read: read limited at 262156 bytes").
     * 0: the default, 8388608 (RL_DEFAULT_MAX_CHUNK_SIZE), the largest chunk a server can be
     * configured with. Negative: no read limit.
     * It also bounds every CHUNK by what it decodes to, min(this, 8388608) (8388608 when 0 or
     * negative): a raw payload past it, a zstd payload past it, a zstd frame whose header
     * announces more, or one whose header announces no content size (a server always writes
     * it), end the call with RL_ERR_PROTOCOL before any room is made for the chunk, e.g.
     *   remoteledger: protocol violation: ledger 10 chunk 3 inflates to 8388608 bytes, over the chunk bound of 262144 (max_chunk_size)
     *   remoteledger: protocol violation: ledger 10 chunk 3 carries more bytes than the chunk bound of 262144 (max_chunk_size)
     *   remoteledger: protocol violation: ledger 10 chunk 3 is a zstd frame without a content size, which the chunk bound of 262144 (max_chunk_size) needs
     * Since 1.4 a connection whose server announces its largest chunk (corestreamd's 101 says
     * `X-Corestream-Chunk-Size: 262144`, docs/PROTOCOL.md) holds that connection's chunks to the
     * smaller of the two, the message then ending "(the server's X-Corestream-Chunk-Size)": with
     * the default bound, a zstd frame of a few hundred bytes announcing 8 MiB from a server that
     * sends 256 KiB chunks is refused at its first chunk. For a server that announces nothing
     * (an older one), set this to its --chunk-size when known: a larger bound lets a few KB on
     * the wire fill the ledger cap sooner. Never retried by resume. */
    int64_t max_chunk_size;
    /* Bound on connecting the TCP socket (to every address the name has, in turn), in
     * nanoseconds; the name lookup itself cannot be cut short. RL_ERR_DIAL_TIMEOUT when it passes.
     * 0: the default, 30 s (RL_DEFAULT_DIAL_TIMEOUT_NS). Negative: unbounded (rl_stream_cancel
     * still applies, as it does to every wait). */
    int64_t dial_timeout_ns;
    /* Called on the iterating thread just before each ledger is handed over. May be NULL (the
     * default). */
    void (*observer)(const rl_ledger_info *info, void *ctx);
    void *observer_ctx;

    /* TLS, for wss:// (and https://) URLs; ignored for ws://. Every string is copied by
     * rl_stream_new (the caller's may go away afterwards); NULL or "" means unset, and all default
     * to NULL. Files are read at each call, so a renewed file is picked up by the next one; one
     * that cannot be read fails that call with RL_ERR_TLS. */
    /* PEM file of CA certificates to trust instead of the system's CA paths. */
    const char *tls_ca_file;
    /* Directory of hashed CA certificates (c_rehash layout) to trust instead of the system's;
     * together with tls_ca_file, both are trusted. */
    const char *tls_ca_dir;
    /* The name to send (SNI) and to verify the server's certificate against, when it differs
     * from the URL's host (dialling an address, say). */
    const char *tls_server_name;
    /* A client certificate (PEM chain, leaf first) for servers that require one, and its private
     * key (PEM). The key defaults to tls_cert_file itself; a key without a certificate is
     * RL_ERR_INVALID at rl_stream_new. */
    const char *tls_cert_file;
    const char *tls_key_file;
    /* Skips verifying the server's certificate and name. For tests only: anyone on the path can
     * then read and alter the stream. Default false. */
    bool tls_insecure_skip_verify;

    /* Sent as "Authorization: Bearer <token>" with the upgrade request (in the clear on ws://).
     * Copied by rl_stream_new; NULL or "" sends none (the default). A token with a control
     * character is RL_ERR_INVALID at rl_stream_new. */
    const char *bearer_token;

    /* Bound on the TLS handshake (wss://) and the WebSocket upgrade together, from the moment
     * the TCP connection is up until the server's 101; RL_ERR_HANDSHAKE_TIMEOUT when it passes.
     * 0: the default, 10 s (RL_DEFAULT_HANDSHAKE_TIMEOUT_NS). Negative: unbounded. */
    int64_t handshake_timeout_ns;
    /* Once subscribed, the longest the library waits for the next complete WebSocket message
     * (a ledger's BEGIN, one of its CHUNKs or its END; pings do not count) before it gives up
     * with RL_ERR_IDLE_TIMEOUT, dropping the connection. Only time spent waiting inside the
     * library counts: the clock restarts when a ledger's callback returns (or, with
     * rl_stream_next, when the next call is made). Set it above the server's quiet periods: the
     * ledger close interval (about 5 s on Stellar's networks), and a subscriber queued for a
     * ring catch-up (corestreamd --max-replays), which is sent nothing while it waits.
     * 0: the default, 60 s (RL_DEFAULT_IDLE_TIMEOUT_NS). Negative: none. */
    int64_t idle_timeout_ns;

    /* Resume: reconnect by itself when a connection is lost, and go on from the ledger it
     * expected next, so the caller (callback or pull) sees every ledger of its range exactly
     * once and in order across dropped connections and server restarts (the server replays what
     * was missed from its ring), as long as the server is of the same run (RL_ERR_RUN_CHANGED,
     * allow_run_change). Retried: a transport error or a connection dropped mid-ledger
     * (its partial assembly is discarded), a close other than 1000, 4001 or 4002 (a restart's 1001 on
     * an unbounded range included), a truncated bounded range, a refused or timed-out dial or
     * handshake (not an HTTP 4xx answer: a bad token stays an error), the idle timeout. Never
     * retried: RL_ERR_TOO_FAR_BEHIND (4001, returned at once with its bounds), RL_ERR_HOLE (4002), RL_ERR_GAP,
     * RL_ERR_PROTOCOL, RL_ERR_TLS, RL_ERR_CANCELLED, RL_ERR_RUN_CHANGED, a message over
     * max_chunk_size, and the clean end of a stream. rl_stream_open retries its first dial the same way.
     * resume_retries is the budget: the attempts allowed in a row without a ledger arriving (a
     * ledger makes the budget whole again); when it is spent the last failure is returned, with
     * its message. 0: the default, no resume (the prototype's behaviour: the first failure is
     * returned). Negative: no limit (only rl_stream_cancel ends the retries). The count of
     * reconnections is rl_stream_reconnects(). */
    int64_t resume_retries;
    /* The wait before attempt n is min(resume_backoff_ns * 2^(n-1), resume_backoff_max_ns), of
     * which a random half is taken off (equal jitter), so clients cut off together do not come
     * back together. Each is cut short by rl_stream_cancel, and rl_stream_next returns RL_AGAIN
     * when its own timeout comes during one (the attempt stays due). 0 (or negative): the
     * defaults, 100 ms (RL_DEFAULT_RESUME_BACKOFF_NS) and 10 s (RL_DEFAULT_RESUME_BACKOFF_MAX_NS). */
    int64_t resume_backoff_ns;
    int64_t resume_backoff_max_ns;

    /* Since 1.2. Busy-poll: before the iterating thread blocks waiting for the server's next
     * bytes, it first polls the socket without sleeping for up to this long, in nanoseconds, so
     * data that arrives within that time is read with no wake-up from sleep (a shorter, steadier
     * delivery latency on a box with a core to spare, paid in CPU while it spins: up to this much
     * per wait). Spinning polls the cancellation descriptor too, so rl_stream_cancel is seen at
     * once; rl_stream_next with a timeout of 0 never spins. 0 (or negative): the default, off. Above 1 s (1000000000) is RL_ERR_INVALID at
     * rl_stream_new. */
    int64_t busy_poll_ns;

    /* Since 1.3. The run a session follows: corestreamd's 101 answer names its run in an
     * `X-Corestream-Run` header (docs/PROTOCOL.md), a token that stays the same across restarts
     * on the same data directory and changes with a new one, or another source or source
     * parameters. A session remembers the token of its first connection that carried one
     * (rl_stream_run), and a later connection (a resume) that answers another ends the session
     * with RL_ERR_RUN_CHANGED, never retried, before any of that server's ledgers is read:
     *   remoteledger: dial ws://box:8462/stream?start=62: run changed: the server is now run
     *   synthetic-0b5d2e55c1a3f9e4, the session began on run synthetic-7c31a2d9e0f4b816
     * (the client closes that connection with 1000 "run changed"). A server that sends no
     * token (an older one) is accepted, and a token that is not 1 to 64 visible ASCII
     * characters is RL_ERR_PROTOCOL. true: a change of run is accepted and the session follows
     * the new token from then on; the ledgers stay in sequence, but nothing vouches that they
     * continue the same chain. Default false. */
    bool allow_run_change;

    /* Since 1.4. Signed ledgers (docs/PROTOCOL.md, "Signed ledgers"): a PEM file of one or more
     * Ed25519 public keys (`openssl pkey -in core.key -pubout`), read and copied by
     * rl_stream_new (a file that cannot be read, holds no public key or a key of another type
     * is RL_ERR_INVALID naming it). With it, every connection asks for signatures (`sig=1` in
     * the request) and a ledger is handed over only when its SIG is signed by one of these keys
     * over exactly the bytes assembled (SHA-256), for the session's signing run (that of its
     * first signed ledger; with allow_run_change, the latest) and chaining to the ledger before
     * it when the session has that one; anything else ends the session with RL_ERR_SIGNATURE,
     * never retried:
     *   remoteledger: signature: ledger 10 is unsigned
     *   remoteledger: signature: ledger 10: signed by <64 hex>, which is not a trusted key
     *   remoteledger: signature: ledger 10: bytes differ from the signed SHA-256
     *   remoteledger: signature: ledger 10: signature does not verify
     *   remoteledger: signature: ledger 10: signed for run R2, the session's ledgers for run R1
     *   remoteledger: signature: ledger 10 does not chain to ledger 9
     * (the client closes with 1008 "ledger signature refused"). Costs per ledger: SHA-256 of its
     * bytes as they arrive and one Ed25519 verification (docs/BENCHMARKS.md, "Signing").
     * NULL or "": no check and no signatures asked for (the default). */
    const char *trusted_keys_file;
} rl_options;

/* What a zero option means. */
#define RL_DEFAULT_MAX_MESSAGE_SIZE 268435456LL
#define RL_DEFAULT_MAX_CHUNK_SIZE 8388608LL
#define RL_DEFAULT_DIAL_TIMEOUT_NS 30000000000LL
#define RL_DEFAULT_HANDSHAKE_TIMEOUT_NS 10000000000LL
#define RL_DEFAULT_IDLE_TIMEOUT_NS 60000000000LL
#define RL_DEFAULT_RESUME_BACKOFF_NS 100000000LL
#define RL_DEFAULT_RESUME_BACKOFF_MAX_NS 10000000000LL
#define RL_MAX_BUSY_POLL_NS 1000000000LL

/* Every option at its default: every byte zeroed (padding too), with struct_size set to this
 * header's sizeof(rl_options). Inline, so the size is the caller's (a library function could not
 * know it); written without compound literals so C++ can include the header. */
static inline void rl_options_init(rl_options *o)
{
    unsigned char *p = (unsigned char *)o;
    for (size_t i = 0; i < sizeof *o; i++)
        p[i] = 0;
    o->struct_size = sizeof *o;
}

typedef struct rl_stream rl_stream;

/* url: ws://, wss://, http:// (→ ws) or https:// (→ wss) with a host; an empty or "/" path means
 * /stream; other query parameters (a token, say) are kept. opts may be NULL for the defaults; they
 * are copied, strings included. Returns RL_ERR_INVALID for a URL or options that can never work
 * (the message says why: in the prototype's words for a URL, naming the field for an option, e.g.
 *   remoteledger: rl_options.struct_size is 0: set it to sizeof(rl_options) (rl_options_init does)
 *   remoteledger: rl_options.struct_size 12 is not a multiple of 8
 *   remoteledger: rl_options.struct_size 200 sets options this library (1.4.0, 168 bytes) does not know
 * ; *out is still set so rl_stream_error can be read, every later rl_stream_raw_ledgers returns the
 * same error, and the stream must be freed). Returns RL_ERR_NOMEM with *out NULL when the stream
 * cannot be allocated. */
RL_API rl_result rl_stream_new(rl_stream **out, const char *url, const rl_options *opts);
RL_API void rl_stream_free(rl_stream *s);

/* Receives one verified ledger. ledger is BORROWED: valid only until the callback returns (the
 * next ledger is assembled into the same buffer); never NULL, even when len is 0.
 * Return 0 to continue, non-zero to stop (the call then returns RL_OK). */
typedef int (*rl_ledger_fn)(const uint8_t *ledger, size_t len, const rl_ledger_info *info, void *ctx);

/* Streams range, calling fn for each ledger in order. Returns RL_OK when a bounded range is
 * complete, when an unbounded stream is closed cleanly by the server, or when fn asked to stop;
 * otherwise the error. A range reaching ledger 4294967295 is refused before any dial
 * (RL_ERR_INVALID), as is a bounded range whose end is before its start.
 *
 * Each call dials its own connection (with resume, as many as it takes) and returns with it
 * closed: after the last ledger of a
 * bounded range, or when fn asks to stop, the client sends close 1000 ("range complete",
 * "consumer done") and returns without waiting for the server's answer. Every ledger is verified
 * (chunk count, length, XXH64) before fn sees it, and its received_unix_nano is always stamped.
 * One call at a time per stream; fn may call rl_stream_cancel but must not call into the stream
 * otherwise. fn may be NULL: ledgers are then verified and dropped. RL_ERR_INVALID when a pull
 * session (rl_stream_open) is open. */
RL_API rl_result rl_stream_raw_ledgers(rl_stream *s, rl_range range, rl_ledger_fn fn, void *ctx);

/* ---- pull: the same stream, one ledger per call ----
 *
 *     if (rl_stream_open(s, rl_unbounded_range(resume_from)) != RL_OK) ... rl_stream_error(s) ...
 *     for (;;) {
 *         const uint8_t *p; size_t n; rl_ledger_info info;
 *         rl_result r = rl_stream_next(s, 5000000000LL, &p, &n, &info);  // wait at most 5 s
 *         if (r == RL_OK) { ... p[0..n) until the next call ... continue; }
 *         if (r == RL_AGAIN) { ... nothing for 5 s: check on other things ... continue; }
 *         if (r != RL_END) ... the error, as rl_stream_raw_ledgers would return it ...
 *         break;
 *     }
 *     rl_stream_close(s);
 *
 * What is delivered, verified and reported is exactly what rl_stream_raw_ledgers delivers (it is
 * built on these calls); the observer, when set, runs inside rl_stream_next. One session at a
 * time per stream, and one call at a time: none of these may run concurrently with another call
 * on the same stream (except rl_stream_cancel). */

/* Dials and subscribes to range: returns once the server has accepted the upgrade (RL_OK), or
 * with the error rl_stream_raw_ledgers would give for the dial (RL_ERR_INVALID for a bad range or
 * when a session is already open, RL_ERR_DIAL, RL_ERR_TLS, RL_ERR_DIAL_TIMEOUT,
 * RL_ERR_HANDSHAKE_TIMEOUT, RL_ERR_CANCELLED, RL_ERR_NOMEM, RL_ERR_PROTOCOL for a malformed
 * X-Corestream-Run); no session is open after an error. */
RL_API rl_result rl_stream_open(rl_stream *s, rl_range range);

/* The next verified ledger of the open session, waiting at most timeout_ns (0: only what has
 * already arrived; negative: no bound of its own; the idle timeout still applies). On RL_OK,
 * *ledger and *len are the ledger, BORROWED: valid until the next call on this stream (next,
 * close, reset, free); *info is filled (received_unix_nano stamped). Any of the three pointers may
 * be NULL when not wanted.
 * RL_AGAIN: nothing complete within timeout_ns; call again (a ledger half received is kept).
 * RL_END: the range is complete (after its last ledger, the client closes with 1000 "range
 * complete"), or the server ended an unbounded stream cleanly.
 * Otherwise the stream's error (RL_ERR_TOO_FAR_BEHIND, _GAP, _TRUNCATED, _PROTOCOL, _READ,
 * _IDLE_TIMEOUT, _CANCELLED, _NOMEM, and with resume the errors of a reconnection, _RUN_CHANGED
 * included), with its message in rl_stream_error.
 * After RL_END or an error the connection is closed and every later call returns the same result
 * until rl_stream_close. Without an open session: RL_ERR_INVALID. */
RL_API rl_result rl_stream_next(rl_stream *s, int64_t timeout_ns, const uint8_t **ledger, size_t *len,
                                rl_ledger_info *info);

/* Ends the session: when the connection is still up the client sends close 1000 ("consumer done",
 * or "range complete" when the last ledger handed over completed a bounded range) and drops it
 * without waiting for the server (at most about 1 s to get the frame out). A no-op without a
 * session; rl_stream_free calls it. The error message and the too-far-behind bounds stay readable. */
RL_API void rl_stream_close(rl_stream *s);

/* The reconnections of the current session (rl_stream_open or rl_stream_raw_ledgers), or of the
 * last one once it has ended: 0 without resume, or when the first connection lasted. Not
 * concurrently with another call on the stream. */
RL_API uint64_t rl_stream_reconnects(const rl_stream *s);

/* ---- many sessions on one thread: a descriptor to poll ----
 *
 * The descriptor that becomes readable when rl_stream_next(s, 0, ...) may have something to do:
 * the open session's socket, or, while resume waits out a backoff between connections, a timer
 * that becomes readable when the next attempt is due. -1 without an open session, after the
 * session has ended (RL_END or an error: rl_stream_next returns that again at once), and in the
 * rare case the backoff timer could not be created (then poll with a timeout of your own).
 *
 *     for (;;) {                                   // one thread, n open sessions
 *         for (i = 0; i < n; i++) { pfd[i].fd = rl_stream_fd(s[i]); pfd[i].events = POLLIN; }
 *         poll(pfd, n, 1000);                      // a timeout, so idle timeouts can fire
 *         for (i = 0; i < n; i++)                  // every session, readable or not (see below)
 *             while ((r = rl_stream_next(s[i], 0, &p, &len, &info)) == RL_OK)
 *                 ... p[0..len) until the next call on s[i] ...
 *             // r: RL_AGAIN (poll again), RL_END or the error (stop polling s[i])
 *     }
 *
 * The contract: call rl_stream_next(s, 0, ...) until it returns something other than RL_OK
 * before polling again, and once right after rl_stream_open (the first frames may have come with
 * the upgrade response, and been read with it). Readiness is only a hint that way round: a
 * ledger returned may leave the next one, whole or in part, already read into the library's
 * buffer (or, over wss://, held by OpenSSL), where no poll can see it; RL_AGAIN means the socket
 * had nothing more to give. A spurious wake-up costs one RL_AGAIN. Wait for POLLIN only: what the
 * library sends (pongs, its close frame) is small and written within the calls.
 *
 * Re-read the descriptor after every call, and rebuild the poll set from it: with resume it
 * changes across a reconnect (socket, timer, another socket), and it is closed by the library
 * when the connection goes. Never read, write, close or change the flags of it (it is
 * non-blocking and the library's). poll, with the set rebuilt each round, needs no more care.
 * With epoll: closing the old socket removed it from the epoll set, and the new one may get the
 * same number, so (re-)add the descriptor whenever rl_stream_fd or rl_stream_reconnects changed.
 *
 * What the calls may cost, since they run on the polling thread (rl_stream_open itself dials and
 * waits for the upgrade, as always: open the sessions before the loop, or from another thread):
 *   - On an established connection it never waits: it parses what is buffered, reads what the
 *     socket has (a partially received frame or ledger is kept for the next call) and returns
 *     RL_OK at the first complete ledger, RL_AGAIN when the socket is empty. The one exception is
 *     the close frame it sends after the last ledger of a bounded range (or in answer to the
 *     server's): that write may wait up to about 1 s, and only if the socket's send buffer is
 *     full.
 *   - With resume, when the backoff is over (the timer is readable) the call dials: the name
 *     lookup (blocking getaddrinfo, unbounded), the TCP connect (up to dial_timeout_ns), TLS and
 *     the upgrade (up to handshake_timeout_ns), all on the calling thread. Other sessions on that
 *     thread wait meanwhile; keep the timeouts short, or use a thread per session, when that
 *     matters. rl_stream_cancel from another thread cuts the connect and handshake short. While
 *     the backoff is still running, the call returns RL_AGAIN at once.
 *   - The idle timeout is measured from the last complete message and checked inside the calls
 *     only: time between calls that returned RL_AGAIN counts (the server was silent), time spent
 *     holding a ledger does not. A poll loop that never times out never sees it fire.
 * Not concurrently with another call on the stream (rl_stream_cancel aside). */
RL_API int rl_stream_fd(const rl_stream *s);

/* ---- the server's tip ---- */

/* The range of ledgers the server retains and can serve, from its GET /healthz ("oldest" and
 * "latest"): latest is the newest ledger in its retention ring (GetLatestLedgerSequence; the ring
 * is written just after a ledger goes out live, so latest may trail a live stream by a ledger or
 * two), oldest the first a subscriber may still ask for; both 0 while the ring is empty. One short
 * HTTP/1.1 request on a connection of its own (TLS and bearer_token as for the stream, bounded by
 * dial_timeout_ns and then handshake_timeout_ns), to the stream URL's path with its last segment
 * replaced: /stream -> /healthz, /core/stream -> /core/healthz. It may be called while a pull
 * session is open (between rl_stream_next calls, on the same thread); rl_stream_error then
 * describes this call. *oldest and *latest (either may be NULL) are set only on RL_OK.
 * Errors: those of a dial (RL_ERR_DIAL, RL_ERR_TLS, RL_ERR_DIAL_TIMEOUT, RL_ERR_HANDSHAKE_TIMEOUT
 * "...: handshake timeout: no answer within 10s"), RL_ERR_DIAL for a status other than 200
 * ("remoteledger: dial http://box:8462/healthz: status 404", "...: server requires a token
 * (401)" with corestreamd --auth-healthz), RL_ERR_PROTOCOL for an answer without the two numbers,
 * RL_ERR_CANCELLED, RL_ERR_INVALID for the stream's bad URL, RL_ERR_NOMEM. */
RL_API rl_result rl_stream_bounds(rl_stream *s, uint32_t *oldest, uint32_t *latest);

/* Makes a running call (rl_stream_raw_ledgers, rl_stream_open, rl_stream_next, rl_stream_bounds)
 * return RL_ERR_CANCELLED (message "context canceled") promptly, dropping the connection without
 * a close frame. Cancellation is sticky, like a cancelled context: every later call returns it
 * at once, until rl_stream_reset. Safe from any thread (it takes a mutex, so call it from a
 * signal-handling thread, not from inside an asynchronous signal handler). */
RL_API void rl_stream_cancel(rl_stream *s);

/* Makes the stream as good as new after a cancel or an error: closes any session (as
 * rl_stream_close), clears the cancellation, the error message, the too-far-behind bounds and the
 * run token (rl_stream_run).
 * The URL and options stay. A per-call cancel is then: cancel from another thread while a call
 * runs, and reset after it has returned and the canceller can no longer fire (e.g. after Go's
 * context.AfterFunc stop function has returned). Not concurrently with any other call on the
 * stream, rl_stream_cancel included: a cancel racing a reset may land on either side of it.
 * Errors alone need no reset: every rl_stream_raw_ledgers or rl_stream_open dials afresh. */
RL_API void rl_stream_reset(rl_stream *s);

/* The message of the last failure, in the prototype's wording, e.g.
 * "remoteledger: ledger sequence gap: got ledger 8, expected 7". "" after success. Failures of the
 * dial name the endpoint and the cause, e.g.
 *   remoteledger: dial wss://box:8462/stream?start=1: dial tcp 10.0.0.5:8462: connect: connection refused
 *   remoteledger: dial wss://...: dial timeout: not connected within 30s
 *   remoteledger: dial wss://...: handshake timeout: no TLS handshake within 10s
 *   remoteledger: dial ws://...: handshake timeout: no upgrade response within 10s
 *   remoteledger: dial wss://...: certificate verify failed: hostname mismatch for box
 *   remoteledger: dial wss://...: certificate verify failed: certificate has expired
 *   remoteledger: dial wss://...: certificate verify failed: unable to get local issuer certificate
 *   remoteledger: dial wss://...: tls handshake failed: tlsv13 alert certificate required
 *   remoteledger: dial wss://...: tls handshake failed: the server did not answer TLS (is it plain ws://?)
 *   remoteledger: dial ws://...: the server answered in TLS (is it wss://?)
 *   remoteledger: dial ws://...: server requires a token (401)
 *   remoteledger: dial ws://...: HS: ws upgrade response not 101   (any other status)
 * and once subscribed, e.g.
 *   remoteledger: read: idle timeout: no complete message for 1m0s
 *   remoteledger: read: failed to get reader: failed to read frame header: EOF   (dropped)
 * (the verifier's reason is OpenSSL's X509_verify_cert_error_string; an IP literal mismatches as
 * "IP address mismatch for 10.0.0.5"). */
RL_API const char *rl_stream_error(const rl_stream *s);

/* After RL_ERR_TOO_FAR_BEHIND: the ledger that was next expected and the retained bounds the
 * server reported (both 0 when its close reason was unreadable). Returns false otherwise. */
RL_API bool rl_stream_too_far_behind(const rl_stream *s, uint32_t *requested, uint32_t *oldest,
                                     uint32_t *latest);

/* The run token (X-Corestream-Run, see allow_run_change) of the current session, or of the last
 * one once it has ended: the first token a connection of the session answered with (with
 * allow_run_change, the latest). "" before any, when no server of the session sent one, and after
 * rl_stream_reset. Borrowed until the next rl_stream_open, rl_stream_raw_ledgers or
 * rl_stream_reset, or rl_stream_free. Since 1.3. Not concurrently with another call on the
 * stream (rl_stream_cancel aside). */
RL_API const char *rl_stream_run(const rl_stream *s);

/* The WebSocket URL the last call dialled (e.g. "ws://box:8462/stream?end=3&start=2&token=abc");
 * "" before the first call, or when no call got as far as building one. */
RL_API const char *rl_stream_endpoint(const rl_stream *s);

#ifdef __cplusplus
}
#endif

#endif
