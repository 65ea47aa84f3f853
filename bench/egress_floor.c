/*
 * The floor of any user-space HTTP forward proxy, for bench/egress_floor.py:
 * one thread, blocking calls, no policy, no log, no namespace. Per
 * connection: accept, read the request head, connect to the IPv4 address
 * of its absolute URL, send the request in origin form, then move the
 * response with splice(2) (socket -> pipe -> socket) until the server
 * closes. Whatever this costs over a direct fetch, no proxy design avoids.
 *
 *     cc -O2 -o egress_floor egress_floor.c && ./egress_floor PORT
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void serve(int c, int pr, int pw) {
    char head[8192], req[8192], host[64];
    int n = 0, k, one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    while (n < (int)sizeof head - 1 && (k = read(c, head + n, sizeof head - 1 - n)) > 0) {
        n += k;
        head[n] = 0;
        if (strstr(head, "\r\n\r\n"))
            break;
    }
    head[n] = 0;
    /* GET http://A.B.C.D:PORT/path HTTP/1.x */
    char *url = strstr(head, "http://");
    if (!url)
        return;
    url += 7;
    char *colon = strchr(url, ':'), *slash = strchr(url, '/');
    if (!colon || !slash || colon > slash || colon - url >= (int)sizeof host)
        return;
    memcpy(host, url, colon - url);
    host[colon - url] = 0;
    char *end = strchr(slash, ' ');
    if (!end)
        return;
    *end = 0;
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(atoi(colon + 1))};
    if (inet_pton(AF_INET, host, &to.sin_addr) != 1)
        return;
    int u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(u, (struct sockaddr *)&to, sizeof to) == 0) {
        int m = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n",
                         slash, host, ntohs(to.sin_port));
        if (write(u, req, m) == m) {
            ssize_t got;
            while ((got = splice(u, NULL, pw, NULL, 1 << 18, SPLICE_F_MOVE)) > 0) {
                while (got > 0) {
                    ssize_t put = splice(pr, NULL, c, NULL, got, SPLICE_F_MOVE);
                    if (put <= 0)
                        goto out;
                    got -= put;
                }
            }
        }
    }
out:
    close(u);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: egress_floor PORT\n");
        return 2;
    }
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, p[2];
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 128) || pipe2(p, O_CLOEXEC)) {
        perror("egress_floor");
        return 1;
    }
    fcntl(p[1], F_SETPIPE_SZ, 1 << 18);
    for (;;) {
        int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        serve(c, p[0], p[1]);
        close(c);
        /* A response cut short leaves bytes in the pipe: drain them. */
        char sink[65536];
        int fl = fcntl(p[0], F_GETFL);
        fcntl(p[0], F_SETFL, fl | O_NONBLOCK);
        while (read(p[0], sink, sizeof sink) > 0)
            ;
        fcntl(p[0], F_SETFL, fl);
    }
}
