/* SPDX-License-Identifier: Apache-2.0 */
/* RFC 6455 framing for the server end of a subscriber (the stream I/O threads, wsio.h): what a
 * client may send, and the few frames the server writes besides messages (those get their header
 * in the message's headroom, cs_msg_ws_header).
 *
 * A subscriber only ever sends control frames (ping, pong, close); the server answers any data
 * frame with 1008, so a data frame is reported as soon as its header is
 * complete and its payload is never read. Client frames must be masked (RFC 6455 5.1): an unmasked
 * frame, RSV bits, an unknown opcode, a fragmented or over-long (> 125 bytes) control frame are
 * protocol errors (close 1002).
 *
 * Stateless and pure: the caller keeps the unparsed bytes and feeds them again with more. Any
 * thread. */
#ifndef CS_CORESTREAMD_WSSERVER_H
#define CS_CORESTREAMD_WSSERVER_H

#include <stddef.h>
#include <stdint.h>

#define CS_WSS_OP_CLOSE 0x8
#define CS_WSS_OP_PING 0x9
#define CS_WSS_OP_PONG 0xA
#define CS_WSS_MAX_CONTROL 125
#define CS_WSS_MAX_FRAME (2 + 4 + CS_WSS_MAX_CONTROL) /* the longest frame parsed whole */

typedef enum cs_wss_kind {
    CS_WSS_MORE,    /* no complete frame (or data header) yet: feed more; nothing used */
    CS_WSS_CONTROL, /* a complete close, ping or pong; payload unmasked in place */
    CS_WSS_DATA,    /* a text, binary or continuation frame's header: answer 1008 */
    CS_WSS_ERROR,   /* a protocol violation (err says which): answer 1002 */
} cs_wss_kind;

typedef struct cs_wss_frame {
    cs_wss_kind kind;
    uint8_t opcode;
    uint8_t *payload; /* CONTROL: inside buf, unmasked; len bytes (NULL when 0) */
    size_t len;
    const char *err; /* ERROR: a static sentence */
} cs_wss_frame;

/* Parses the frame at the start of buf[0..len). Returns the bytes it used: the whole frame for
 * CONTROL, the header for DATA, 0 for MORE and ERROR. Unmasks a control payload in place. */
size_t cs_wss_parse(uint8_t *buf, size_t len, cs_wss_frame *out);

/* Writes an unmasked server control frame (close, ping or pong) with payload[0..len), len at most
 * CS_WSS_MAX_CONTROL, into out (room for 2 + len bytes). Returns its length. */
size_t cs_wss_control(uint8_t *out, uint8_t opcode, const uint8_t *payload, size_t len);

/* A close frame with code and reason (cut so the payload fits 125 bytes). Returns its length;
 * out needs 2 + CS_WSS_MAX_CONTROL bytes. */
size_t cs_wss_close(uint8_t *out, int code, const char *reason);

/* The server's answer to a client's close frame with payload[0..len) (RFC 6455 5.5.1, 7.1.5,
 * 7.4), which ends the connection once it is out:
 *   - no payload (no status code): an empty close, 0 here;
 *   - one byte (a status code cut short): 1002, *reason "close payload of one byte";
 *   - a code no endpoint may send (below 1000, 1004 to 1006, 1015 to 2999, 5000 and above):
 *     1002, *reason "close code N may not be sent" (in buf, which needs 48 bytes);
 *   - a reason that is not UTF-8: 1007, *reason "close reason is not UTF-8";
 *   - otherwise the client's own code, echoed, *reason "".
 * Defined codes are 1000 to 1003 and 1007 to 1014 (IANA's registry); 3000 to 4999 are for
 * libraries and applications. Returns the code; *reason is static or in buf. */
int cs_wss_close_answer(const uint8_t *payload, size_t len, char *buf, const char **reason);

#endif
