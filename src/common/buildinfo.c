/* SPDX-License-Identifier: Apache-2.0 */
#include "common/buildinfo.h"

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

int cs_build_print(FILE *out, const char *prog)
{
    unsigned x = XXH_versionNumber(); /* major*10000 + minor*100 + release */
    int n = fprintf(out,
                    "%s %s\ncommit: %s\nbuild type: %s\nzstd: %s\nxxhash: %u.%u.%u\n"
                    "openssl: %s\n",
                    prog, cs_build_version(), cs_build_commit(), cs_build_type(),
                    ZSTD_versionString(), x / 10000, x / 100 % 100, x % 100,
                    OpenSSL_version(OPENSSL_VERSION_STRING));
    return n < 0 || fflush(out) != 0 ? -1 : 0;
}
