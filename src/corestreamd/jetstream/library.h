/* SPDX-License-Identifier: Apache-2.0 */
/* Opening nats.c once per process with the settings corestreamd wants. library.c also corrects
 * nats.c 3.4.1's encoder of the nonce signature (one nkey or .creds connect in 256 went out
 * without its signature and was refused): a program that calls cs_js_library_open has it. */
#ifndef CS_CORESTREAMD_JETSTREAM_LIBRARY_H
#define CS_CORESTREAMD_JETSTREAM_LIBRARY_H

#include <nats/nats.h>

/* Opens nats.c with a lock spin count of 0: its default spins up to 2000 trylocks before it blocks
 * on a mutex, which costs CPU whenever the publishing thread holds the connection lock through a
 * socket write and nats.c's reader waits for it. Call before the first connection (the publisher
 * and the jetstream source do); later calls, from any thread, return the first call's status. */
natsStatus cs_js_library_open(void);

#endif
