/* SPDX-License-Identifier: Apache-2.0 */
/* s3rver run for a test: see s3rver.h. */
#include "support/s3rver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/wait.h"

int cs_s3rver_start(cs_proc *p, const char *prog, const char *dir, const char *bucket, char *endpoint, size_t len)
{
    if (access(prog, X_OK) != 0) {
        fprintf(stderr, "%s is missing: run scripts/setup.sh (it installs s3rver from the npm registry)\n", prog);
        return -1;
    }
    char *const argv[] = {(char *)prog, "-d", (char *)dir, "-a", "127.0.0.1", "-p", "0", "--configure-bucket",
                          (char *)bucket, "--silent", NULL};
    char line[256];
    if (cs_proc_start(p, argv) != 0 || cs_proc_wait_line(p, "S3rver listening on 127.0.0.1:", WAIT_MS) != 0) {
        fprintf(stderr, "s3rver did not start:\n%s\n", p->log ? p->log : "");
        return -1;
    }
    cs_proc_line(p, line, sizeof line);
    const char *port = strstr(line, "127.0.0.1:") + strlen("127.0.0.1:");
    snprintf(endpoint, len, "http://127.0.0.1:%d", atoi(port));
    setenv("AWS_ENDPOINT_URL", endpoint, 1);
    setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1); /* s3rver's own account */
    setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
    setenv("AWS_REGION", "us-east-1", 1);
    unsetenv("AWS_SESSION_TOKEN");
    unsetenv("AWS_ENDPOINT_URL_S3");
    return 0;
}
