/* SPDX-License-Identifier: Apache-2.0 */
/* A connected TCP pair on 127.0.0.1 (an ephemeral port, its listener closed once accepted), for
 * tests that drive a transport's server end against a client end. Failures are cmocka
 * assertions. */
#ifndef CS_TEST_TCPPAIR_H
#define CS_TEST_TCPPAIR_H

#include <stdbool.h>

/* *server and *client receive the two ends, both blocking; the client's reads and writes time
 * out after 20 s (SO_RCVTIMEO, SO_SNDTIMEO), so a stalled test fails instead of hanging. small:
 * the client's receive and the server's send buffers are 4 KiB, so that the server's writes
 * stall. The caller closes both. */
void cs_tcp_pair(int *server, int *client, bool small);

#endif
