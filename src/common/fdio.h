/* SPDX-License-Identifier: Apache-2.0 */
/* Whole reads and writes on a descriptor: the loops the ring's and the lake's files share. */
#ifndef CS_COMMON_FDIO_H
#define CS_COMMON_FDIO_H

#include <stddef.h>
#include <stdint.h>

/* write(2) until all n bytes are written, through EINTR and short writes. 0, or -1 with errno (EIO
 * for a write that wrote nothing without an error). Any thread. */
int cs_write_all(int fd, const void *p, size_t n);

/* pread(2) from off until n bytes or the end of the file, through EINTR and short reads; *got
 * receives the bytes read (fewer than n: the file ended). 0, or -1 with errno. Any thread. */
int cs_pread_upto(int fd, void *p, size_t n, uint64_t off, size_t *got);

#endif
