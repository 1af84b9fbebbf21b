/* SPDX-License-Identifier: Apache-2.0 */
#include "support/tcppair.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

void cs_tcp_pair(int *server, int *client, bool small)
{
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(lfd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    socklen_t al = sizeof a;
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(lfd, 1), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
    int cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(cfd >= 0);
    int sz = 4096;
    if (small)
        setsockopt(cfd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    assert_int_equal(connect(cfd, (struct sockaddr *)&a, sizeof a), 0);
    int sfd = accept(lfd, NULL, NULL);
    assert_true(sfd >= 0);
    close(lfd);
    if (small)
        setsockopt(sfd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
    struct timeval tv = {.tv_sec = 20};
    setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(cfd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    *server = sfd;
    *client = cfd;
}
