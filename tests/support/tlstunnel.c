/* SPDX-License-Identifier: Apache-2.0 */
#include "support/tlstunnel.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CONNS 256
#define IDLE_LIMIT_MS 30000 /* a connection with no traffic for this long is closed */

typedef struct tconn {
    struct cs_tlstunnel *t;
    int cfd;
    pthread_t th;
} tconn;

struct cs_tlstunnel {
    int lfd, target;
    SSL_CTX *ctx;
    pthread_t th;
    atomic_bool stop;
    pthread_mutex_t mu;
    tconn *conns[MAX_CONNS];
    int nconns;
};

static int connect_target(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* SSL_write on the non-blocking socket, waiting (bounded) while it wants the socket. */
static int ssl_write_all(SSL *ssl, int fd, const char *buf, int len)
{
    for (int waited = 0; waited < IDLE_LIMIT_MS; waited += 10) {
        int w = SSL_write(ssl, buf, len);
        if (w > 0)
            return 0;
        int e = SSL_get_error(ssl, w);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
            return -1;
        struct pollfd p = {.fd = fd, .events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT};
        poll(&p, 1, 10);
    }
    return -1;
}

static void *conn_main(void *arg)
{
    tconn *c = arg;
    cs_tlstunnel *t = c->t;
    int sfd = connect_target(t->target);
    SSL *ssl = sfd >= 0 ? SSL_new(t->ctx) : NULL;
    if (!ssl || SSL_set_fd(ssl, sfd) != 1 || SSL_connect(ssl) != 1)
        goto out;
    /* Non-blocking from here: a TLS 1.3 session ticket makes the server readable with no data
     * for SSL_read, which must not then block while the client's bytes wait. */
    fcntl(sfd, F_SETFL, fcntl(sfd, F_GETFL) | O_NONBLOCK);
    char buf[16384];
    int idle = 0;
    while (!atomic_load(&t->stop) && idle < IDLE_LIMIT_MS) {
        struct pollfd p[2] = {{.fd = c->cfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        int n = SSL_pending(ssl) > 0 ? 0 : poll(p, 2, 100);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0 && SSL_pending(ssl) == 0) {
            idle += 100;
            continue;
        }
        idle = 0;
        /* The server's bytes first: an answer must reach the client before a close does. */
        if (SSL_pending(ssl) > 0 || (n > 0 && p[1].revents)) {
            int r = SSL_read(ssl, buf, sizeof buf);
            if (r <= 0) {
                int e = SSL_get_error(ssl, r);
                if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                    continue;
                break; /* the server closed (or reset): the client sees the close */
            }
            for (int off = 0; off < r;) {
                ssize_t w = send(c->cfd, buf + off, (size_t)(r - off), MSG_NOSIGNAL);
                if (w <= 0)
                    goto out;
                off += (int)w;
            }
            continue;
        }
        if (n > 0 && p[0].revents) {
            ssize_t r = recv(c->cfd, buf, sizeof buf, 0);
            if (r <= 0 || ssl_write_all(ssl, sfd, buf, (int)r) != 0)
                break;
        }
    }
out:
    ERR_clear_error();
    if (ssl)
        SSL_free(ssl);
    if (sfd >= 0)
        close(sfd);
    shutdown(c->cfd, SHUT_RDWR);
    return NULL;
}

static void *accept_main(void *arg)
{
    cs_tlstunnel *t = arg;
    while (!atomic_load(&t->stop)) {
        struct pollfd p = {.fd = t->lfd, .events = POLLIN};
        if (poll(&p, 1, 100) != 1)
            continue;
        int fd = accept4(t->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        tconn *c = calloc(1, sizeof *c);
        pthread_mutex_lock(&t->mu);
        bool room = c && t->nconns < MAX_CONNS;
        if (room) {
            c->t = t;
            c->cfd = fd;
            if (pthread_create(&c->th, NULL, conn_main, c) == 0)
                t->conns[t->nconns++] = c;
            else
                room = false;
        }
        pthread_mutex_unlock(&t->mu);
        if (!room) {
            close(fd);
            free(c);
        }
    }
    return NULL;
}

int cs_tlstunnel_start(cs_tlstunnel **out, int target_port, const char *ca_file, int *port)
{
    *out = NULL;
    signal(SIGPIPE, SIG_IGN); /* SSL_write to a server that closed: an error, not the end of the test */
    cs_tlstunnel *t = calloc(1, sizeof *t);
    if (!t)
        return -1;
    t->target = target_port;
    pthread_mutex_init(&t->mu, NULL);
    t->ctx = SSL_CTX_new(TLS_client_method());
    t->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    socklen_t al = sizeof a;
    if (!t->ctx || SSL_CTX_load_verify_locations(t->ctx, ca_file, NULL) != 1 || t->lfd < 0 ||
        bind(t->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(t->lfd, 64) != 0 ||
        getsockname(t->lfd, (struct sockaddr *)&a, &al) != 0) {
        if (t->lfd >= 0)
            close(t->lfd);
        SSL_CTX_free(t->ctx);
        free(t);
        return -1;
    }
    SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
    *port = ntohs(a.sin_port);
    if (pthread_create(&t->th, NULL, accept_main, t) != 0) {
        close(t->lfd);
        SSL_CTX_free(t->ctx);
        free(t);
        return -1;
    }
    *out = t;
    return 0;
}

void cs_tlstunnel_stop(cs_tlstunnel *t)
{
    if (!t)
        return;
    atomic_store(&t->stop, true);
    pthread_join(t->th, NULL);
    for (int i = 0; i < t->nconns; i++) {
        pthread_join(t->conns[i]->th, NULL);
        close(t->conns[i]->cfd);
        free(t->conns[i]);
    }
    close(t->lfd);
    SSL_CTX_free(t->ctx);
    pthread_mutex_destroy(&t->mu);
    free(t);
}
