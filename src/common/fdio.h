/* SPDX-License-Identifier: Apache-2.0 */
/* Whole writes to a descriptor: the one loop the ring's and the lake's file writers share. */
#ifndef CS_COMMON_FDIO_H
#define CS_COMMON_FDIO_H

#include <stddef.h>

/* write(2) until all n bytes are written, through EINTR and short writes. 0, or -1 with errno (EIO
 * for a write that wrote nothing without an error). Any thread. */
int cs_write_all(int fd, const void *p, size_t n);

#endif
