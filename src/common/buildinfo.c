#include "common/buildinfo.h"

#include <libwebsockets.h>
#include <openssl/crypto.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

#include "cs_gitcommit.h" /* CS_GIT_COMMIT, written at build time by cmake/gitcommit.cmake */

const char *cs_build_version(void)
{
    return CS_VERSION;
}

const char *cs_build_commit(void)
{
    return CS_GIT_COMMIT;
}

const char *cs_build_type(void)
{
    return *CS_BUILD_TYPE ? CS_BUILD_TYPE : "unspecified";
}

/* lws reports "<version>-<build hash>"; Debian's build has no hash, which leaves "4.1.6-". */
static int lws_version_len(const char *v)
{
    size_t n = strlen(v);
    while (n > 0 && (v[n - 1] == '-' || v[n - 1] == ' '))
        n--;
    return n > 64 ? 64 : (int)n;
}

int cs_build_print(FILE *out, const char *prog)
{
    const char *lws = lws_get_library_version();
    unsigned x = XXH_versionNumber(); /* major*10000 + minor*100 + release */
    int n = fprintf(out,
                    "%s %s\ncommit: %s\nbuild type: %s\nlibwebsockets: %.*s\nzstd: %s\nxxhash: %u.%u.%u\n"
                    "openssl: %s\n",
                    prog, cs_build_version(), cs_build_commit(), cs_build_type(), lws_version_len(lws), lws,
                    ZSTD_versionString(), x / 10000, x / 100 % 100, x % 100,
                    OpenSSL_version(OPENSSL_VERSION_STRING));
    return n < 0 || fflush(out) != 0 ? -1 : 0;
}
