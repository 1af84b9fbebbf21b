/* SPDX-License-Identifier: Apache-2.0 */
/* Whole reads and writes: see fdio.h. */
#include "common/fdio.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

int cs_write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t k = write(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = EIO;
            return -1;
        }
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

int cs_pread_upto(int fd, void *p, size_t n, uint64_t off, size_t *got)
{
    uint8_t *b = p;
    for (*got = 0; *got < n;) {
        ssize_t k = pread(fd, b + *got, n - *got, (off_t)(off + *got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0)
            break;
        *got += (size_t)k;
    }
    return 0;
}
