/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "corestreamd/sources/source.h"

cs_range cs_counted_range(uint32_t start, uint32_t count)
{
    if (count == 0)
        return (cs_range){.from = start, .to = 0, .bounded = false};
    /* Flag validation keeps start+count-1 below the ceiling; the unsigned sum cannot be
     * trusted to do so on its own, but it never invokes undefined behaviour either. */
    return (cs_range){.from = start, .to = start + count - 1, .bounded = true};
}

void cs_range_format(cs_range r, char *buf, size_t len)
{
    if (r.bounded)
        snprintf(buf, len, "[%u,%u]", r.from, r.to);
    else
        snprintf(buf, len, "[%u,latest)", r.from);
}
