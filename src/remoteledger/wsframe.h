/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger internals: RFC 6455 framing for the client side of a connection.
 *
 * The parser takes the server's byte stream in whatever pieces the socket delivers and turns it
 * into events. Payload bytes are never copied: a data event points into the caller's input, as
 * large a slice as the input holds, so a receive buffer full of one frame is one event. Headers
 * (2 to 14 bytes) and control payloads (at most 125 bytes) may straddle inputs; the parser keeps
 * them. Feeding the same stream in any split gives the same frames, the same payload bytes in the
 * same order, the same control frames and the same error; only the slicing of payloads differs.
 *
 * What a server may not send is a protocol error, worded as coder/websocket words it (the
 * prototype's client library): RSV bits, a masked frame, an unknown opcode, a control frame that
 * is fragmented or longer than 125 bytes, a continuation frame outside a message, a new data
 * message inside a fragmented one, a 64-bit length with the top bit set. After an error the
 * parser stays failed.
 *
 * The builder writes client frames, which are always masked. */
#ifndef RLI_WSFRAME_H
#define RLI_WSFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RLI_WS_OP_CONT 0x0
#define RLI_WS_OP_TEXT 0x1
#define RLI_WS_OP_BINARY 0x2
#define RLI_WS_OP_CLOSE 0x8
#define RLI_WS_OP_PING 0x9
#define RLI_WS_OP_PONG 0xA

#define RLI_WS_MAX_CONTROL 125 /* control payload bound */
#define RLI_WS_MAX_HEADER 14   /* 2 + 8 (length) + 4 (mask) */

typedef enum rli_ws_ev_kind {
    RLI_WS_EV_NONE = 0, /* the input is used up: feed more */
    RLI_WS_EV_FRAME,    /* a data frame's header is complete */
    RLI_WS_EV_DATA,     /* payload bytes of the current data frame */
    RLI_WS_EV_CONTROL,  /* a complete close, ping or pong frame */
    RLI_WS_EV_ERROR,    /* a protocol violation: see err */
} rli_ws_ev_kind;

typedef struct rli_ws_event {
    rli_ws_ev_kind kind;
    /* FRAME: the message's opcode (text or binary, also on its continuation frames).
     * CONTROL: close, ping or pong. */
    uint8_t opcode;
    bool first;         /* FRAME: the first frame of its message */
    bool fin;           /* FRAME: the final frame of its message */
    uint64_t frame_len; /* FRAME: the frame's payload length */
    /* DATA: a slice of the caller's input (NULL when len is 0). CONTROL: the whole payload, in the
     * parser (valid until the next call). */
    const uint8_t *data;
    size_t len;
    bool msg_start; /* DATA: the message's first payload bytes (an empty frame gives an empty slice) */
    bool frame_end; /* DATA: the frame's last payload bytes */
    bool msg_end;   /* DATA: ...and the message's (msg_start && msg_end: the whole message) */
    /* ERROR: where a new message would have started (coder/websocket reports it from its reader:
     * "failed to get reader: ...") rather than inside one. */
    bool at_boundary;
    const char *err; /* ERROR: the description, in the parser */
} rli_ws_event;

typedef struct rli_ws_parser {
    int state;
    uint8_t hdr[RLI_WS_MAX_HEADER];
    size_t hdr_len, hdr_need;
    uint8_t opcode; /* of the current frame */
    bool fin;
    uint64_t remaining; /* payload bytes of the current frame still to come */
    bool in_msg;        /* a data message has started and not ended */
    bool msg_fresh;     /* no payload event yet for the current message */
    uint8_t msg_opcode;
    uint8_t ctl[RLI_WS_MAX_CONTROL];
    size_t ctl_len;
    bool err_boundary;
    char err[160];
} rli_ws_parser;

void rli_ws_parser_init(rli_ws_parser *p);

/* Parses the next event from in[0..len) and returns how many bytes of it were used. Call it
 * again with the rest of the input until it reports RLI_WS_EV_NONE (all of the input used). An
 * empty data frame still gives a (zero-length) RLI_WS_EV_DATA, even with no input left. */
size_t rli_ws_parse(rli_ws_parser *p, const uint8_t *in, size_t len, rli_ws_event *ev);

/* A data message has started (its first frame header is complete) and has not ended. */
bool rli_ws_parser_in_message(const rli_ws_parser *p);

/* Payload bytes of the current data frame still to come; 0 outside a data frame's payload (a
 * header or a control frame being collected, or a failed parser). Input of at most this many bytes
 * is all payload: the caller may receive it wherever the payload belongs and parse it there (a
 * DATA event then points at it), so it needs no copy. */
uint64_t rli_ws_payload_left(const rli_ws_parser *p);

/* Writes a masked client frame (FIN set) with payload p[0..n) into out, which needs
 * RLI_WS_MAX_HEADER + n bytes; returns its length. The payload is masked with `mask`. */
size_t rli_ws_build_frame(uint8_t *out, uint8_t opcode, const uint8_t *p, size_t n, const uint8_t mask[4]);

/* n random bytes (getrandom; frame masks and the handshake key). */
void rli_random_bytes(uint8_t *out, size_t n);

#endif
