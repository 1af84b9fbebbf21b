/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: the one bound on every wait of the suite, and a bounded wait for a condition no
 * event announces (a thread's nice value, a server's tip, a file appearing). Prefer an event
 * (event.h, a log line, a socket) when there is one: cs_wait_until polls. */
#ifndef CS_TESTS_SUPPORT_WAIT_H
#define CS_TESTS_SUPPORT_WAIT_H

#include <stdbool.h>

/* How long any test waits for anything before it fails: generous, so a busy machine (TSan, two
 * cores, a stress run beside busy loops) slows a test down and never fails it. */
#define WAIT_MS 30000

/* Calls pred(arg) until it returns true (0), every 10 ms, or until timeout_ms passed (-1, after a
 * last call). */
int cs_wait_until(bool (*pred)(void *arg), void *arg, int timeout_ms);

#endif
