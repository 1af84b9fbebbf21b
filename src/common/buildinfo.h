/* SPDX-License-Identifier: Apache-2.0 */
/* What a binary is: its version, the commit and build type it was built from (fixed at build
 * time), and the versions of the libraries it runs with (read from the loaded libraries at run
 * time, so they name what is installed, not what the build saw). Every function may be called from
 * any thread; the strings are static and never freed. */
#ifndef CS_COMMON_BUILDINFO_H
#define CS_COMMON_BUILDINFO_H

#include <stdio.h>

/* The project version, CMake's PROJECT_VERSION: "0.1.0". */
const char *cs_build_version(void);
/* The git commit the tree was at when built: 40 hex digits, with "-dirty" appended when tracked
 * files differed from it; the CS_GIT_COMMIT CMake variable when a packager set it; "unknown"
 * when the sources were not a git checkout. */
const char *cs_build_commit(void);
/* CMAKE_BUILD_TYPE: "RelWithDebInfo", "Debug", ...; "unspecified" when none was set. */
const char *cs_build_type(void);

/* Writes the `--version` text of program prog, exactly these lines:
 *   <prog> <version>
 *   commit: <commit>
 *   build type: <build type>
 *   zstd: <ZSTD_versionString()>
 *   xxhash: <major.minor.release of XXH_versionNumber()>
 *   openssl: <OpenSSL_version(OPENSSL_VERSION_STRING)>
 * Returns 0, or -1 when out could not be written. */
int cs_build_print(FILE *out, const char *prog);

#endif
