/* SPDX-License-Identifier: Apache-2.0 */
/* Go time.Duration text: parse (time.ParseDuration) and format (Duration.String). */
#ifndef CS_COMMON_GODUR_H
#define CS_COMMON_GODUR_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Nanoseconds, like Go's time.Duration. */
typedef int64_t cs_dur;

#define CS_NS ((cs_dur)1)
#define CS_US ((cs_dur)1000)
#define CS_MS ((cs_dur)1000000)
#define CS_SEC ((cs_dur)1000000000)

/* Parses Go duration syntax ("7500us", "1m30s", "µs", "-1.5h", bare "0"). On failure returns -1
 * with Go's wording: `time: invalid duration "x"`, `time: missing unit in duration "1"`,
 * `time: unknown unit "q" in duration "1q"`. */
int cs_dur_parse(const char *s, cs_dur *out, cs_err *err);

/* Go's Duration.String: "0s", "1.5µs", "2ms", "1m0s", "-2.5s". Returns buf. 32 bytes suffice. */
#define CS_DUR_STR_MAX 32
char *cs_dur_format(cs_dur d, char *buf, size_t len);

#endif
