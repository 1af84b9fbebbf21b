/* SPDX-License-Identifier: Apache-2.0 */
/* Command-line flags that behave like Go's `flag` package, so the prototype's runbooks work
 * unchanged: `-x` and `--x`, `-x=v` and `-x v`, booleans only as `-x` or `-x=value`, base-0
 * integers with `_` separators, Go durations, the last occurrence wins, parsing stops at the first
 * non-flag argument or after `--`, and `-h`/`-help` asks for usage. */
#ifndef CS_COMMON_FLAGS_H
#define CS_COMMON_FLAGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"
#include "common/godur.h"

typedef enum cs_flag_type {
    CS_FLAG_BOOL,     /* target: bool */
    CS_FLAG_INT,      /* target: int64_t (Go int on 64-bit) */
    CS_FLAG_UINT,     /* target: uint64_t (Go uint on 64-bit) */
    CS_FLAG_STRING,   /* target: const char * (points into argv, or the default) */
    CS_FLAG_DURATION, /* target: cs_dur */
} cs_flag_type;

typedef struct cs_flag {
    const char *name;  /* without dashes, e.g. "chunk-size" */
    cs_flag_type type;
    void *target;      /* holds the default before parsing; it is printed in usage */
    const char *usage; /* one line; Go's backquote rule names the value type in usage */
} cs_flag;

typedef struct cs_flagset {
    const char *prog;     /* "corestreamd" */
    const char *synopsis; /* optional text printed after "Usage of <prog>:"; may be NULL */
    cs_flag *flags;
    size_t nflags;
} cs_flagset;

enum { CS_FLAGS_OK = 0, CS_FLAGS_HELP = 1, CS_FLAGS_ERROR = -1 };

/* Parses argv[1..argc). On success sets *first_arg to the index of the first positional argument
 * (argc when none) and returns CS_FLAGS_OK. Returns CS_FLAGS_HELP for -h/-help/--help.
 * On error returns CS_FLAGS_ERROR with Go's wording in err->msg, for example
 * `flag provided but not defined: -turbo`, `invalid value "x" for flag -chunk-size: parse error`,
 * `flag needs an argument: -listen`, `invalid boolean value "x" for -compress: parse error`,
 * `bad flag syntax: ---x`. Printing is the caller's job (see cs_flags_usage). */
int cs_flags_parse(const cs_flagset *fs, int argc, char **argv, int *first_arg, cs_err *err);

/* Prints Go-style usage: "Usage of <prog>:" then each flag sorted by name as
 * "  -name type\n    \tusage (default v)\n". */
void cs_flags_usage(const cs_flagset *fs, FILE *out);

/* Go strconv.ParseInt/ParseUint with base 0 and 64 bits: 0x/0o/0b/leading-0 prefixes and `_`
 * between digits. Return 0 on success, -1 on syntax error, -2 when out of range. */
int cs_parse_int64(const char *s, int64_t *out);
int cs_parse_uint64(const char *s, uint64_t *out);

#endif
