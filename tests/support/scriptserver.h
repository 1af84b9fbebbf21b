/* SPDX-License-Identifier: Apache-2.0 */
/* A scripted WebSocket server for the libremoteledger tests: it listens on 127.0.0.1 (a kernel-
 * chosen port), accepts one connection per script, answers the upgrade, and then does exactly
 * what the script says, including what a real corestreamd never does: malformed messages, text
 * messages, close frames with any code, a connection dropped without a close frame, a message cut
 * off mid-way, a stall.
 *
 * Steps are recorded before the client connects and run on the server's own thread. While a step
 * waits (a stall, the end of a script) the server reads and parses what the client sends, so the
 * client's close frame never blocks and the test can assert on it. Every wait is bounded (10 s);
 * nothing sleeps.
 *
 * After the last step of a connection the server waits for the client to hang up (or for the
 * bound), then closes its end.
 *
 * In TLS mode (ss_start_tls) every connection is a TLS session first, optionally requiring a
 * client certificate; the scripts are the same. */
#ifndef CS_TESTS_SCRIPTSERVER_H
#define CS_TESTS_SCRIPTSERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ss_server ss_server;

/* Starts listening. Returns NULL on failure. */
ss_server *ss_start(void);

/* TLS mode: the server's certificate and key; when client_ca_file is set, a client certificate
 * is asked for and verified against it, and with require_client_cert a client without one is
 * refused (TLS 1.3: with a "certificate required" alert). Sets SIGPIPE to SIG_IGN for the process
 * (OpenSSL's socket writes would raise it). ss_url is then "wss://127.0.0.1:<port>". */
typedef struct ss_tls {
    const char *cert_file, *key_file;
    const char *client_ca_file;
    bool require_client_cert;
} ss_tls;
ss_server *ss_start_tls(const ss_tls *tls);

/* Every connection must carry "Authorization: Bearer <token>"; others get a 401 and are closed. */
void ss_require_token(ss_server *s, const char *token);
/* Stops the server (any connection is cut) and frees it. */
void ss_stop(ss_server *s);

int ss_port(const ss_server *s);
/* "ws://127.0.0.1:<port>" */
const char *ss_url(const ss_server *s);

/* ---- script steps (for the current connection) ---- */

void ss_send_binary(ss_server *s, const void *p, size_t n);
void ss_send_text(ss_server *s, const char *text);
/* A close frame with a status code and reason, then wait for the client to hang up. */
void ss_send_close(ss_server *s, uint16_t code, const char *reason);
/* A close frame with no payload at all (no status code). */
void ss_send_close_empty(ss_server *s);
/* One binary frame whose header announces `declared` payload bytes, of which only the first n
 * (from p) are sent. Follow it with ss_stall, ss_call or ss_drop. */
void ss_send_partial(ss_server *s, const void *p, size_t n, uint64_t declared);
/* Sends the message as a fragmented WebSocket message: frames of at most `frag` bytes. */
void ss_send_fragmented(ss_server *s, const void *p, size_t n, size_t frag);
/* One unmasked frame with this first byte (FIN, RSV bits, opcode) and payload. */
void ss_send_frame(ss_server *s, uint8_t b0, const void *p, size_t n);
/* A ping with this payload (at most 125 bytes). */
void ss_send_ping(ss_server *s, const char *payload);
/* Raw bytes on the wire, whatever they are (a partial header, a masked frame...). */
void ss_send_bytes(ss_server *s, const void *p, size_t n);
/* End of stream without a close frame: a TCP FIN. */
void ss_drop(ss_server *s);
/* Wait (reading what the client sends) until the client hangs up. */
void ss_stall(ss_server *s);
/* Runs fn(arg) on the server thread at this point of the script. */
void ss_call(ss_server *s, void (*fn)(void *arg), void *arg);
/* First step only: read the upgrade request and never answer it (ss_call steps after it still
 * run, once the request has arrived). */
void ss_no_handshake(ss_server *s);
/* First step only: answer the upgrade with this HTTP status (not 101) and close. */
void ss_reject_handshake(ss_server *s, int status);
/* First step only: answer the upgrade with this response head instead of the standard 101; one
 * "%s" in it, if any, becomes the correct Sec-WebSocket-Accept. The following steps run after it. */
void ss_handshake_with(ss_server *s, const char *response_fmt);
/* First step only: the standard 101 plus an `X-Corestream-Run: <run>` header line (run as given,
 * malformed ones included), as corestreamd names its run. */
void ss_handshake_run(ss_server *s, const char *run);
/* First step only: as soon as the client sends anything, answer these bytes, before any TLS or
 * HTTP (a plain server answering a TLS client, say), then end the stream. */
void ss_answer_raw(ss_server *s, const char *bytes);
/* The following steps belong to the next accepted connection. */
void ss_next_connection(ss_server *s);

/* ---- corestream messages ---- */

void ss_begin(ss_server *s, uint32_t seq, int64_t emit_start);
void ss_chunk(ss_server *s, uint32_t seq, uint32_t idx, uint8_t codec, const void *p, size_t n);
void ss_end(ss_server *s, uint32_t seq, uint32_t count, uint64_t total, int64_t emit_end, uint64_t sum);
/* A complete, correct flow: BEGIN, one raw CHUNK per piece, END with the right count, length and
 * XXH64. */
void ss_flow(ss_server *s, uint32_t seq, int64_t emit_start, int64_t emit_end, size_t npieces,
             const void *const *pieces, const size_t *lens);
/* A single-chunk flow whose payload is `size` bytes of the sequence's low byte, stamped now. */
void ss_ledger(ss_server *s, uint32_t seq, size_t size);

/* count raw-chunked flows of the same payload (size bytes, chunks of at most chunk bytes, no
 * stamps), ledgers from, from+1, ...: built once, sent with each sequence patched in, for
 * throughput runs. */
void ss_bulk_ledgers(ss_server *s, uint32_t from, uint32_t count, const void *payload, size_t size, size_t chunk);

/* ---- results (after ss_wait) ---- */

/* Waits until every scripted connection has finished. */
bool ss_wait(ss_server *s, int timeout_ms);
/* Connections accepted so far. */
int ss_connections(const ss_server *s);
/* The request target (path and query) of connection i, "" if none. */
const char *ss_target(const ss_server *s, int i);
/* The whole upgrade request of connection i (headers), "" if none. */
const char *ss_request(const ss_server *s, int i);
/* The close code the client sent on connection i (reason copied when reason != NULL): 0 when it
 * sent no close frame, 1005 for an empty one. */
int ss_client_close(const ss_server *s, int i, char *reason, size_t len);
/* The opcodes of the frames the client sent on connection i, in order, e.g. "pong close" ("" for
 * none). */
const char *ss_client_frames(const ss_server *s, int i);
/* How many of them were not masked (RFC 6455 wants every client frame masked). */
int ss_client_unmasked(const ss_server *s, int i);
/* The payload of the last pong the client sent on connection i ("" for none). */
const char *ss_client_pong(const ss_server *s, int i);
/* TLS mode: the common name of the certificate the client presented on connection i ("" for
 * none), and why the server's handshake failed ("" when it did not). */
const char *ss_client_cert(const ss_server *s, int i);
const char *ss_tls_error(const ss_server *s, int i);

#endif
