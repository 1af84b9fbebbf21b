#include "support/natsserver.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#ifndef NATS_SERVER_BIN
#define NATS_SERVER_BIN "/usr/sbin/nats-server"
#endif

static int write_conf(cs_nats_server *s)
{
    char conf[PATH_MAX], store[PATH_MAX];
    cs_tmpdir_join(&s->dir, "nats.conf", conf, sizeof conf);
    cs_tmpdir_join(&s->dir, "store", store, sizeof store);
    FILE *f = fopen(conf, "w");
    if (!f)
        return -1;
    fprintf(f, "host: 127.0.0.1\nport: %d\nhttp_port: 0\njetstream {\n  store_dir: \"%s\"\n  max_file_store: 1G\n  max_memory_store: 64M\n}\n",
            s->port ? s->port : -1, store);
    if (s->max_payload > 0)
        fprintf(f, "max_payload: %lld\n", (long long)s->max_payload);
    if (s->clustered) {
        fprintf(f, "server_name: n%d\ncluster {\n  name: cs\n  listen: \"127.0.0.1:%d\"\n", s->index,
                s->route_port ? s->route_port : -1);
        if (s->seed_route)
            fprintf(f, "  routes: [\"nats-route://127.0.0.1:%d\"]\n", s->seed_route);
        fprintf(f, "}\n");
    }
    return fclose(f) == 0 ? 0 : -1;
}

static int launch(cs_nats_server *s, int timeout_ms)
{
    char conf[PATH_MAX];
    cs_tmpdir_join(&s->dir, "nats.conf", conf, sizeof conf);
    if (write_conf(s) != 0)
        return -1;
    char *argv[] = {NATS_SERVER_BIN, "-c", conf, NULL};
    if (cs_proc_start(&s->proc, argv) != 0)
        return -1;
    s->running = true;
    if (cs_proc_wait_line(&s->proc, "Listening for client connections on", timeout_ms) != 0)
        return -1;
    char line[512];
    cs_proc_line(&s->proc, line, sizeof line);
    const char *colon = strrchr(line, ':');
    int port = colon ? atoi(colon + 1) : 0;
    if (port <= 0 || (s->port && port != s->port))
        return -1;
    s->port = port;
    snprintf(s->url, sizeof s->url, "nats://127.0.0.1:%d", port);
    if (s->clustered && !s->route_port) {
        if (cs_proc_wait_line(&s->proc, "Listening for route connections on", timeout_ms) != 0)
            return -1;
        cs_proc_line(&s->proc, line, sizeof line);
        colon = strrchr(line, ':');
        s->route_port = colon ? atoi(colon + 1) : 0;
        if (s->route_port <= 0)
            return -1;
    }
    return cs_proc_wait_line(&s->proc, "Server is ready", timeout_ms);
}

static void init_server(cs_nats_server *s, int64_t max_payload)
{
    memset(s, 0, sizeof *s);
    s->proc.pid = -1;
    s->proc.out_fd = -1;
    s->proc.pidfd = -1;
    s->max_payload = max_payload;
}

int cs_nats_start(cs_nats_server *s, int64_t max_payload, int timeout_ms)
{
    init_server(s, max_payload);
    if (cs_tmpdir_make(&s->dir, "nats") != 0)
        return -1;
    return launch(s, timeout_ms);
}

int cs_nats_cluster_start(cs_nats_cluster *c, int n, int timeout_ms)
{
    memset(c, 0, sizeof *c);
    if (n < 1 || n > CS_NATS_CLUSTER_MAX)
        return -1;
    c->n = n;
    for (int i = 0; i < n; i++)
        init_server(&c->node[i], 0);
    int64_t deadline = mono_ms() + timeout_ms;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        cs_nats_server *s = &c->node[i];
        s->clustered = true;
        s->index = i;
        s->seed_route = i ? c->node[0].route_port : 0;
        if (cs_tmpdir_make(&s->dir, "natsc") != 0 || launch(s, timeout_ms) != 0)
            return -1;
        c->route_port[i] = s->route_port;
        off += (size_t)snprintf(c->urls + off, sizeof c->urls - off, "%s%s", i ? "," : "", s->url);
    }
    /* Every node names the metadata leader once the JetStream meta group has formed. */
    for (int i = 0; i < n; i++) {
        for (;;) {
            int left = (int)(deadline - mono_ms());
            if (left <= 0)
                return -1;
            if (cs_proc_log_count(&c->node[i].proc, "metadata leader") > 0)
                break;
            cs_proc_wait_line(&c->node[i].proc, "metadata leader", left < 200 ? left : 200);
        }
    }
    return 0;
}

void cs_nats_cluster_free(cs_nats_cluster *c)
{
    for (int i = 0; i < c->n; i++)
        cs_nats_free(&c->node[i]);
    c->n = 0;
}

int cs_nats_restart(cs_nats_server *s, int timeout_ms)
{
    if (s->running)
        return -1;
    cs_proc_free(&s->proc);
    return launch(s, timeout_ms);
}

int cs_nats_stop(cs_nats_server *s, int sig, int timeout_ms)
{
    if (!s->running)
        return 0;
    int st = cs_proc_stop(&s->proc, sig, timeout_ms);
    s->running = false;
    return st < 0 ? -1 : 0;
}

void cs_nats_free(cs_nats_server *s)
{
    if (s->running)
        cs_proc_stop(&s->proc, SIGKILL, 5000);
    s->running = false;
    cs_proc_free(&s->proc);
    cs_tmpdir_remove(&s->dir);
}
