/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/net/listener.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void cs_format_sockaddr(const struct sockaddr *sa, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof host);
        snprintf(buf, len, "[%s]:%u", host, ntohs(s6->sin6_port));
    } else if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &s4->sin_addr, host, sizeof host);
        snprintf(buf, len, "%s:%u", host, ntohs(s4->sin_port));
    } else {
        snprintf(buf, len, "?");
    }
}

void cs_format_peer(int fd, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
        cs_format_sockaddr((struct sockaddr *)&ss, buf, len);
    else
        snprintf(buf, len, "unknown");
}

/* Splits "host:port", "[v6]:port" or ":port". */
static int split_hostport(const char *addr, char *host, size_t hlen, char *port, size_t plen)
{
    const char *colon;
    if (addr[0] == '[') {
        const char *close = strchr(addr, ']');
        if (!close || close[1] != ':')
            return -1;
        if ((size_t)(close - addr - 1) >= hlen)
            return -1;
        memcpy(host, addr + 1, (size_t)(close - addr - 1));
        host[close - addr - 1] = '\0';
        colon = close + 1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon || memchr(addr, ':', (size_t)(colon - addr)))
            return -1;
        if ((size_t)(colon - addr) >= hlen)
            return -1;
        memcpy(host, addr, (size_t)(colon - addr));
        host[colon - addr] = '\0';
    }
    if (strlen(colon + 1) >= plen)
        return -1;
    strcpy(port, colon + 1);
    return 0;
}

/* The port of an address, decimal 0-65535 (0: the kernel picks one). Checked here, before the
 * resolver, which would wrap 99999 into a valid port or blame the host for "abc". */
static int parse_port(const char *addr, const char *port, uint16_t *out, cs_err *err)
{
    size_t n = strspn(port, "0123456789");
    if (*port == '\0' || port[n] != '\0')
        return cs_err_set(err, 0, "listen on %s: port \"%.64s\" is not a number", addr, port);
    unsigned long v = n > 5 ? 65536 : strtoul(port, NULL, 10);
    if (v > 65535)
        return cs_err_set(err, 0, "listen on %s: port %.64s is outside 0-65535", addr, port);
    *out = (uint16_t)v;
    return 0;
}

static int bind_one(const struct sockaddr *sa, socklen_t salen, bool dual_stack, const char **step)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    *step = "socket";
    if (fd < 0)
        return -1;
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (sa->sa_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, dual_stack ? &zero : &one, sizeof one);
    *step = "bind";
    if (bind(fd, sa, salen) == 0) {
        *step = "listen";
        if (listen(fd, SOMAXCONN) == 0)
            return fd;
    }
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

/* The host and port of addr, the port checked. */
static int split_checked(const char *addr, char *host, size_t hlen, uint16_t *port, cs_err *err)
{
    char p[64];
    if (split_hostport(addr, host, hlen, p, sizeof p) != 0)
        return cs_err_set(err, 0, "listen on %s: address %s: missing port in address", addr, addr);
    return parse_port(addr, p, port, err);
}

int cs_listen_addr_check(const char *addr, cs_err *err)
{
    char host[256];
    uint16_t p;
    return split_checked(addr, host, sizeof host, &p, err);
}

int cs_listen_tcp(const char *addr, int *fd, char *bound, size_t boundlen, cs_err *err)
{
    char host[256], port[8];
    uint16_t p;
    if (split_checked(addr, host, sizeof host, &p, err) != 0)
        return -1;
    snprintf(port, sizeof port, "%u", (unsigned)p);
    const char *step = "resolve";
    int s = -1;
    if (host[0] == '\0') {
        /* Every interface: dual-stack IPv6 when available, otherwise IPv4. */
        struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_addr = in6addr_any};
        struct sockaddr_in s4 = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
        s6.sin6_port = s4.sin_port = htons(p);
        s = bind_one((struct sockaddr *)&s6, sizeof s6, true, &step);
        if (s < 0 && (errno == EAFNOSUPPORT || errno == EADDRNOTAVAIL))
            s = bind_one((struct sockaddr *)&s4, sizeof s4, false, &step);
    } else {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
        struct addrinfo *res = NULL;
        int gai = getaddrinfo(host, port, &hints, &res);
        if (gai != 0)
            return cs_err_set(err, 0, "listen on %s: lookup %s: %s", addr, host, gai_strerror(gai));
        /* Go listens on the first address of a name (IPv4 first for localhost). */
        for (struct addrinfo *ai = res; ai && s < 0; ai = ai->ai_next)
            s = bind_one(ai->ai_addr, ai->ai_addrlen, false, &step);
        freeaddrinfo(res);
    }
    if (s < 0)
        return cs_err_set(err, 0, "listen on %s: %s: %s", addr, step, strerror(errno));
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(s, (struct sockaddr *)&ss, &sl);
    cs_format_sockaddr((struct sockaddr *)&ss, bound, boundlen);
    *fd = s;
    return 0;
}
