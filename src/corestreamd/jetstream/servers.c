/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/jetstream/servers.h"

#include <stdlib.h>
#include <string.h>

natsStatus cs_js_set_servers(natsOptions *opts, const char *urls)
{
    char *copy = strdup(urls);
    if (!copy)
        return NATS_NO_MEMORY;
    const char *list[CS_JS_MAX_SERVERS];
    int n = 0;
    natsStatus s = NATS_OK;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        size_t len = strlen(tok);
        while (len && tok[len - 1] == ' ')
            tok[--len] = '\0';
        if (!len)
            continue;
        if (n == CS_JS_MAX_SERVERS) {
            s = NATS_INVALID_ARG;
            break;
        }
        list[n++] = tok;
    }
    if (s == NATS_OK)
        s = n ? natsOptions_SetServers(opts, list, n) : NATS_INVALID_ARG;
    free(copy);
    return s;
}
