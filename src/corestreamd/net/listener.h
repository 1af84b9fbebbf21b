/* SPDX-License-Identifier: Apache-2.0 */
/* The listening socket, bound the way Go's net.Listen("tcp", addr) binds it: an empty host means
 * every interface (dual-stack [::] when the machine has IPv6), a port of 0 picks a free one. */
#ifndef CS_CORESTREAMD_LISTENER_H
#define CS_CORESTREAMD_LISTENER_H

#include <stddef.h>
#include <sys/socket.h>

#include "common/err.h"

/* Checks an address's form without resolving it: host:port or :port, the port decimal 0-65535.
 * Errors: `listen on <addr>: address <addr>: missing port in address`, `listen on <addr>: port
 * "<p>" is not a number`, `listen on <addr>: port <p> is outside 0-65535`. The daemon checks its
 * addresses with it among the flags, before anything starts; cs_listen_tcp checks again. */
int cs_listen_addr_check(const char *addr, cs_err *err);

/* Binds and listens (non-blocking, close-on-exec, SO_REUSEADDR). On success *fd is the socket and
 * bound holds the address as logged ("127.0.0.1:41234", "[::]:8462"). Errors: those of
 * cs_listen_addr_check, then `listen on <addr>: lookup <host>: <reason>` and
 * `listen on <addr>: <step>: <reason>`. */
int cs_listen_tcp(const char *addr, int *fd, char *bound, size_t boundlen, cs_err *err);

/* "ip:port" or "[ip6]:port" of a socket address. */
void cs_format_sockaddr(const struct sockaddr *sa, char *buf, size_t len);
/* The peer of a connected socket as cs_format_sockaddr writes it, or "unknown". */
void cs_format_peer(int fd, char *buf, size_t len);

#endif
