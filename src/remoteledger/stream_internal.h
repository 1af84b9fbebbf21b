/* libremoteledger internals: the stream object, shared by the files that implement the
 * rl_stream_* API (PORTSPEC 3).
 *
 *   stream.c      the rl_stream object, its connections and the public entry points
 *   options.c     rl_options: the caller's struct copied, defaults resolved, checked
 *
 * Threads: everything here runs on the thread that called the rl_stream_* function, one call at a
 * time per stream, except rl_stream_cancel, which may come from any thread. It only sets
 * `cancelled` and signals the wake descriptors that `mu` guards (live_wake, backoff_wake); every
 * loop checks `cancelled` before it waits and every wait polls a wake descriptor, so a cancel ends
 * any wait. Error messages are the prototype's, word for word: each function says which it sets.
 */
#ifndef RLI_STREAM_INTERNAL_H
#define RLI_STREAM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestream/remoteledger.h"
#include "remoteledger/assemble.h"
#include "remoteledger/endpoint.h"

/* Copies of the string options, which the stream's rl_options points at (options.c). Each is
 * malloc'd and owned by the stream; NULL where the caller's option was NULL. */
typedef struct rli_opt_strings {
    char *tls_ca_file, *tls_ca_dir, *tls_server_name, *tls_cert_file, *tls_key_file, *bearer_token;
} rli_opt_strings;

struct rli_conn;

/* The stream (rl_stream in the public header). Created by rl_stream_new, freed by rl_stream_free;
 * all of it is the calling thread's except cancelled, mu and what mu guards. */
struct rl_stream {
    rl_options opts; /* the caller's, defaults resolved; its strings point into strs */
    rli_url url;
    bool url_ok;
    cs_err url_err;
    char *endpoint;  /* the URL of the last connection's range (malloc'd), NULL before the first */
    cs_err err;
    bool tfb;
    uint32_t tfb_requested, tfb_oldest, tfb_latest;
    rli_asm *asm_;
    struct rli_conn *conn; /* the open session's connection (rl_stream_open), NULL when none */
    bool session;          /* a session is open: rl_stream_next may be called */
    bool session_ended;    /* ...and has ended with end_result (the message is in err) */
    rl_result end_result;
    rl_range range;        /* the session's range, as opened */
    /* Resume (opts.resume_retries != 0): between attempts conn is NULL and the next dial is due
     * at retry_at_ms; failures counts the attempts since the last ledger; reconnects the
     * connections after the first one of the session. */
    int64_t retry_at_ms;
    int64_t failures;
    uint64_t reconnects;
    int backoff_wake; /* an eventfd rl_stream_cancel signals while no connection is up; -1 */
    int retry_timer;  /* a timerfd readable once retry_at_ms has come: rl_stream_fd between
                         connections; -1 until the first retry is scheduled */
    atomic_bool cancelled;
    pthread_mutex_t mu; /* guards live_wake and backoff_wake: cancel never writes to a descriptor
                           being closed */
    int live_wake;      /* the running call's wake eventfd, -1 when none */
    rli_opt_strings strs; /* the copies the string options point at */
};

/* ---- options.c ---- */

/* The caller's options, as much of them as its struct_size says it has (in may be NULL), into *o
 * with every zero resolved to its default. 0, or -1 with the message in err (kind
 * RL_ERR_INVALID: struct_size 0, not a multiple of the alignment, or options this library does
 * not know) and *o all defaults. The strings still point at the caller's. */
int rli_opts_copy(rl_options *o, const rl_options *in, cs_err *err);

/* Points o's string options at copies of their own, made into *copies (which the caller owns and
 * frees with rli_opts_free_strings, also after a failure). false when out of memory. */
bool rli_opts_own_strings(rl_options *o, rli_opt_strings *copies);
void rli_opts_free_strings(rli_opt_strings *copies);

/* Options that can never work: 0, or -1 with the message in err (kind RL_ERR_INVALID: a key
 * without a certificate, a control character in the token, busy_poll_ns over its bound). */
int rli_opts_check(const rl_options *o, cs_err *err);

#endif
