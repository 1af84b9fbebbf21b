/* SPDX-License-Identifier: Apache-2.0 */
/* The two clocks the tree reads: monotonic for deadlines and intervals, wall for the stamps the
 * wire and the logs carry. Kept apart from cancellation so a room that only needs the time does
 * not pull in the cancel flag. */
#ifndef CS_COMMON_CLOCK_H
#define CS_COMMON_CLOCK_H

#include <stdint.h>

/* Monotonic clock in nanoseconds. */
int64_t cs_mono_ns(void);
/* Wall clock in Unix nanoseconds (what the wire stamps carry). */
int64_t cs_wall_ns(void);

#endif
