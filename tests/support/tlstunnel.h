/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: a plaintext-to-TLS tunnel on 127.0.0.1, so that a test written against raw
 * sockets (exact request bytes in, exact answer bytes out) runs unchanged against a TLS port.
 * Each connection to the tunnel's port is one TLS connection to the target (verified against the
 * CA file), its bytes passed through both ways until either side closes; the tunnel then closes
 * the other. The harness switch CS_TEST_TLS=1 uses it (test_handshake_e2e).
 *
 * Threads: an accept thread and one thread per connection, all joined by cs_tlstunnel_stop.
 * Starting one ignores SIGPIPE in the process (a write to a closed peer is then an error). */
#ifndef CS_TESTS_SUPPORT_TLSTUNNEL_H
#define CS_TESTS_SUPPORT_TLSTUNNEL_H

typedef struct cs_tlstunnel cs_tlstunnel;

/* Listens on an ephemeral port (*port) for the TLS port target_port. 0 or -1. */
int cs_tlstunnel_start(cs_tlstunnel **out, int target_port, const char *ca_file, int *port);
void cs_tlstunnel_stop(cs_tlstunnel *t);

#endif
