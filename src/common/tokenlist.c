/* SPDX-License-Identifier: Apache-2.0 */
/* Comma-separated token lists: see tokenlist.h. */
#include "common/tokenlist.h"

#include <string.h>
#include <strings.h>

bool cs_list_has_token(const char *list, size_t n, const char *token)
{
    size_t tl = strlen(token);
    const char *p = list, *end = list + n;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma ? comma : end, *b = p;
        while (b < e && (*b == ' ' || *b == '\t'))
            b++;
        const char *t = e;
        while (t > b && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        if ((size_t)(t - b) == tl && strncasecmp(b, token, tl) == 0)
            return true;
        p = e + (comma != NULL);
    }
    return false;
}
