/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger: rl_options as a stream keeps them. The caller's struct is copied as far as its
 * struct_size says (the fields of a newer caller this library does not know must be zero), every
 * zero resolved to its default, the strings copied so the caller's may go away, and the options
 * that can never work refused before anything dials. The messages are rl_stream_new's. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "corestream/remoteledger.h"
#include "remoteledger/stream_internal.h"

/* Copies *field into *copy and points the field at it; NULL stays NULL. */
static bool own_string(const char **field, char **copy)
{
    if (!*field)
        return true;
    *copy = strdup(*field);
    *field = *copy;
    return *copy != NULL;
}

bool rli_opts_own_strings(rl_options *o, rli_opt_strings *copies)
{
    return own_string(&o->tls_ca_file, &copies->tls_ca_file) && own_string(&o->tls_ca_dir, &copies->tls_ca_dir) &&
           own_string(&o->tls_server_name, &copies->tls_server_name) &&
           own_string(&o->tls_cert_file, &copies->tls_cert_file) &&
           own_string(&o->tls_key_file, &copies->tls_key_file) && own_string(&o->bearer_token, &copies->bearer_token) &&
           own_string(&o->trusted_keys_file, &copies->trusted_keys_file);
}

void rli_opts_free_strings(rli_opt_strings *copies)
{
    free(copies->tls_ca_file);
    free(copies->tls_ca_dir);
    free(copies->tls_server_name);
    free(copies->tls_cert_file);
    free(copies->tls_key_file);
    free(copies->bearer_token);
    free(copies->trusted_keys_file);
}

int rli_opts_check(const rl_options *o, cs_err *err)
{
    if (o->tls_key_file && *o->tls_key_file && !(o->tls_cert_file && *o->tls_cert_file))
        return cs_err_set(err, RL_ERR_INVALID, "remoteledger: tls_key_file is set without tls_cert_file");
    if (o->bearer_token)
        for (const unsigned char *p = (const unsigned char *)o->bearer_token; *p; p++)
            if (*p < 0x20 || *p == 0x7F)
                return cs_err_set(err, RL_ERR_INVALID, "remoteledger: bearer_token holds a control character");
    if (o->busy_poll_ns > RL_MAX_BUSY_POLL_NS)
        return cs_err_set(err, RL_ERR_INVALID,
                          "remoteledger: rl_options.busy_poll_ns %" PRId64 " is over the 1 s (%lld ns) bound",
                          o->busy_poll_ns, RL_MAX_BUSY_POLL_NS);
    return 0;
}

int rli_opts_copy(rl_options *o, const rl_options *in, cs_err *err)
{
    *o = (rl_options){.struct_size = sizeof *o};
    if (in) {
        size_t n = in->struct_size;
        if (n == 0)
            return cs_err_set(err, RL_ERR_INVALID, "remoteledger: rl_options.struct_size is 0: set it to "
                                                   "sizeof(rl_options) (rl_options_init does)");
        if (n % _Alignof(rl_options) != 0)
            return cs_err_set(err, RL_ERR_INVALID, "remoteledger: rl_options.struct_size %zu is not a multiple of %zu",
                              n, (size_t)_Alignof(rl_options));
        /* A newer caller's fields this library does not know must all be zero (their default). */
        for (size_t i = sizeof *o; i < n; i++)
            if (((const unsigned char *)in)[i] != 0)
                return cs_err_set(err, RL_ERR_INVALID,
                                  "remoteledger: rl_options.struct_size %zu sets options this library (%s, %zu "
                                  "bytes) does not know",
                                  n, RL_VERSION_STRING, sizeof *o);
        memcpy(o, in, n < sizeof *o ? n : sizeof *o);
        o->struct_size = sizeof *o;
    }
    if (o->max_message_size == 0)
        o->max_message_size = RL_DEFAULT_MAX_MESSAGE_SIZE;
    if (o->dial_timeout_ns == 0)
        o->dial_timeout_ns = RL_DEFAULT_DIAL_TIMEOUT_NS;
    if (o->handshake_timeout_ns == 0)
        o->handshake_timeout_ns = RL_DEFAULT_HANDSHAKE_TIMEOUT_NS;
    if (o->idle_timeout_ns == 0)
        o->idle_timeout_ns = RL_DEFAULT_IDLE_TIMEOUT_NS;
    if (o->resume_backoff_ns <= 0)
        o->resume_backoff_ns = RL_DEFAULT_RESUME_BACKOFF_NS;
    if (o->resume_backoff_max_ns <= 0)
        o->resume_backoff_max_ns = RL_DEFAULT_RESUME_BACKOFF_MAX_NS;
    if (o->resume_backoff_max_ns < o->resume_backoff_ns)
        o->resume_backoff_max_ns = o->resume_backoff_ns;
    /* max_chunk_size 0 is resolved by rli_read_limit and rli_expand_bound. */
    return 0;
}
