/* An immutable, reference-counted wire message with LWS_PRE bytes of headroom in front of it, so
 * libwebsockets can build the frame header in place. Built once, written to every subscriber by
 * the I/O thread only, so the shared headroom is never raced. */
#ifndef CS_CORESTREAMD_MESSAGE_H
#define CS_CORESTREAMD_MESSAGE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* libwebsockets' LWS_PRE on this platform; checked against the real value where lws is included. */
#define CS_MSG_HEADROOM 16

typedef struct cs_msg {
    atomic_uint refs;
    size_t len; /* bytes of message at data */
    size_t cap; /* bytes available at data */
    /* Monotonic ns at which a live message was published (set before it is handed to the
     * broadcaster, read by the I/O thread for corestreamd_publish_to_write_seconds); 0 for a
     * message built from the ring. */
    int64_t published_ns;
    uint8_t *data;
    uint8_t buf[]; /* CS_MSG_HEADROOM + cap */
} cs_msg;

/* A message with room for cap bytes; len starts at 0 and refs at 1. NULL on allocation failure. */
cs_msg *cs_msg_new(size_t cap);
cs_msg *cs_msg_retain(cs_msg *m);
void cs_msg_release(cs_msg *m);

#endif
