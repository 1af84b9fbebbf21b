/* SPDX-License-Identifier: Apache-2.0 */
/* File-system faults on demand, for the store's and the lake's tests: the test program's own
 * openat, pread, fstatat, write and fsync (and their 64-bit names) stand in front of libc's, so a call from the store (linked
 * statically into the test) whose file name ends with a given suffix fails with a given errno.
 * Everything else goes through to libc. Link it only into a test that wants it; one test thread
 * arms and disarms it (the hooks themselves are safe to call from any thread). */
#ifndef CS_TEST_FAULTFS_H
#define CS_TEST_FAULTFS_H

typedef enum cs_fault_op { CS_FAULT_OPEN, CS_FAULT_READ, CS_FAULT_STAT, CS_FAULT_WRITE, CS_FAULT_SYNC } cs_fault_op;

/* From now on, op on a name ending with suffix fails with err, times times (-1: until disarmed).
 * A read's, write's or fsync's name is the one its descriptor was opened under (openat through
 * this shim). One fault
 * armed at a time; arming replaces it. */
void cs_fault_arm(cs_fault_op op, const char *suffix, int err, int times);
void cs_fault_disarm(void);
/* How many calls the armed fault failed since it was armed. */
int cs_fault_hits(void);

#endif
