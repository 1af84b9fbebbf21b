/* SPDX-License-Identifier: Apache-2.0 */
#include "support/natsserver.h"

#include <nats/nats.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
    if (s->extra_conf)
        fprintf(f, "%s\n", s->extra_conf);
    if (s->clustered) {
        fprintf(f, "server_name: n%d\ncluster {\n  name: cs\n  listen: \"127.0.0.1:%d\"\n  routes: [\n",
                s->index, s->route_port ? s->route_port : -1);
        for (int i = 0; i < s->npeers; i++)
            fprintf(f, "    \"nats-route://127.0.0.1:%d\"\n", s->peer_routes[i]);
        /* The first node's first start: no peer has a port yet, and JetStream clustering will not
         * start without a configured route. Port 0 is one nobody can listen on (refused at once,
         * one ERR line); the nodes after it route to it. */
        if (s->npeers == 0)
            fprintf(f, "    \"nats-route://127.0.0.1:0\"\n");
        fprintf(f, "  ]\n}\n");
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* The route port a clustered node listens on, from its "Listening for route connections on
 * 127.0.0.1:<port>" line: its own pick at the first start (listen port -1), the same port after a
 * restart. nats-server may print the line before or after "Server is ready", so the whole output
 * is looked at first. 0 or -1. */
static int read_route_port(cs_nats_server *s, int timeout_ms)
{
    static const char needle[] = "Listening for route connections on ";
    cs_proc_drain(&s->proc);
    if (!strstr(s->proc.log, needle) && cs_proc_wait_line(&s->proc, needle, timeout_ms) != 0)
        return -1;
    const char *at = strstr(s->proc.log, needle);
    const char *eol = strchr(at, '\n');
    const char *colon = memrchr(at, ':', eol ? (size_t)(eol - at) : strlen(at));
    int port = colon ? atoi(colon + 1) : 0;
    if (port <= 0 || (s->route_port && port != s->route_port))
        return -1;
    s->route_port = port;
    return 0;
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
    if (cs_proc_wait_line(&s->proc, "Server is ready", timeout_ms) != 0)
        return -1;
    return s->clustered ? read_route_port(s, timeout_ms) : 0;
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

int cs_nats_start_conf(cs_nats_server *s, const char *extra_conf, int timeout_ms)
{
    init_server(s, 0);
    s->extra_conf = extra_conf;
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
    /* Every port is the server's own pick, read back from its log, so none can be taken between a
     * choice and the bind. JetStream clustering wants its routes configured at start, so the nodes
     * start one after the other, each routing to those already up (the first to port 0, see
     * write_conf); the servers' gossip tells the earlier nodes of the later ones. */
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        cs_nats_server *s = &c->node[i];
        s->clustered = true;
        s->index = i;
        for (int j = 0; j < i; j++)
            s->peer_routes[s->npeers++] = c->route_port[j];
        if (cs_tmpdir_make(&s->dir, "natsc") != 0 || launch(s, timeout_ms) != 0)
            return -1;
        c->route_port[i] = s->route_port;
        off += (size_t)snprintf(c->urls + off, sizeof c->urls - off, "%s%s", i ? "," : "", s->url);
    }
    /* A restarted node routes to every other one. */
    for (int i = 0; i < n; i++) {
        c->node[i].npeers = 0;
        for (int j = 0; j < n; j++)
            if (j != i)
                c->node[i].peer_routes[c->node[i].npeers++] = c->route_port[j];
    }
    /* The meta group has formed when the cluster can place an R3 stream: create one (retried,
     * bounded: a node that joined after the election may still be registering) and delete it. */
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    int rc = -1;
    while (rc != 0 && mono_ms() < deadline) {
        if (!nc && natsConnection_ConnectTo(&nc, c->node[0].url) != NATS_OK)
            nc = NULL;
        if (nc && !js && natsConnection_JetStream(&js, nc, NULL) != NATS_OK)
            js = NULL;
        if (js) {
            jsStreamConfig cfg;
            jsStreamConfig_Init(&cfg);
            const char *subj[] = {"clusterprobe.>"};
            cfg.Name = "CLUSTERPROBE";
            cfg.Subjects = subj;
            cfg.SubjectsLen = 1;
            cfg.Replicas = n;
            cfg.Storage = js_MemoryStorage;
            jsStreamInfo *si = NULL;
            if (js_AddStream(&si, js, &cfg, NULL, NULL) == NATS_OK) {
                jsStreamInfo_Destroy(si);
                rc = js_DeleteStream(js, "CLUSTERPROBE", NULL, NULL) == NATS_OK ? 0 : -1;
            }
        }
        if (rc != 0) {
            struct timespec ts = {0, 100 * 1000000L}; /* a retry interval, not a synchronisation */
            nanosleep(&ts, NULL);
        }
    }
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return rc;
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
