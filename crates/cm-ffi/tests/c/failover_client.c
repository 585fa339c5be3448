/*
 * A C client that keeps a transfer going while its daemon is killed and
 * started again (tests/failover.rs runs it and kills cmd under it).
 *
 * The transfer runs over a modelled bottleneck, as in tests/failover.rs:
 * a FIFO drained at LINK bytes/s that drops what would wait longer than
 * QUEUE, with PROP of propagation delay; each grant is sent at once and its
 * fate reported with cm_update when the model says it arrived or was lost.
 *
 * Usage: failover_client SECONDS   ($CM_SOCKET names the daemon)
 * It sleeps in poll() on cm_fd(), as a select loop would: the descriptor
 * must stay the same across the daemon's death and return, and must not
 * stay readable with nothing to do (a loop on a dead daemon's socket used
 * to spin).
 *
 * Prints "status T S" at each change of cm_status() (T seconds since the
 * start, S its value), "window T BYTES LOOPS" for every 100 ms window
 * (bytes granted, loop turns), and "errors N" at the end; exits non-zero
 * on any failed call.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cm.h"

#define LINK 1000000.0 /* bytes/s */
#define QUEUE 0.040    /* s */
#define PROP 0.020     /* s */
#define MAXP 4096

struct pkt {
    cm_flowid flow;
    double due, sent;
    long bytes;
    int delivered;
};

static struct pkt pipe_[MAXP];
static int npipe;
static double free_at, t0;
static long window_bytes, window_loops;
static int errors;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9 - t0;
}

static void check(int r, const char *what) {
    if (r < 0) {
        errors++;
        fprintf(stderr, "%s: %s\n", what, cm_strerror(r));
    }
}

static void on_send(cm_flowid flow) {
    double now = now_s();
    int mtu = cm_mtu(flow);
    check(mtu, "cm_mtu");
    if (mtu <= 0) return;
    check(cm_notify(flow, mtu), "cm_notify");
    window_bytes += mtu;
    double start = free_at > now ? free_at : now;
    struct pkt p = {flow, 0, now, mtu, start - now <= QUEUE};
    if (p.delivered) {
        free_at = start + (double)mtu / LINK;
        p.due = free_at + PROP;
    } else {
        p.due = start + PROP;
    }
    if (npipe < MAXP) {
        int i = npipe++;
        while (i > 0 && pipe_[i - 1].due > p.due) {
            pipe_[i] = pipe_[i - 1];
            i--;
        }
        pipe_[i] = p;
    }
    check(cm_request(flow), "cm_request");
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 5.0;
    t0 = 0;
    t0 = now_s();
    check(cm_init_daemon(NULL), "cm_init_daemon");
    check(cm_register_send(on_send), "cm_register_send");
    struct sockaddr_in dst;
    memset(&dst, 0, sizeof dst);
    dst.sin_family = AF_INET;
    dst.sin_port = htons(5001);
    inet_pton(AF_INET, "192.0.2.41", &dst.sin_addr);
    cm_flowid f[2];
    for (int i = 0; i < 2; i++) {
        f[i] = cm_open(NULL, (struct sockaddr *)&dst);
        check((int)(f[i] < 0 ? f[i] : 0), "cm_open");
        check(cm_request(f[i]), "cm_request");
    }
    int status = cm_status();
    printf("status %.3f %d\n", now_s(), status);
    int fd = cm_fd();
    check(fd, "cm_fd");
    double window_start = 0;
    while (now_s() < secs) {
        double now = now_s();
        while (npipe > 0 && pipe_[0].due <= now) {
            struct pkt p = pipe_[0];
            memmove(pipe_, pipe_ + 1, sizeof pipe_[0] * (size_t)(npipe - 1));
            npipe--;
            check(cm_update(p.flow, p.bytes, p.delivered ? p.bytes : 0,
                            p.delivered ? CM_LOSS_NONE : CM_LOSS_FEEDBACK,
                            p.delivered ? now - p.sent : -1),
                  "cm_update");
        }
        check(cm_dispatch(), "cm_dispatch");
        int s = cm_status();
        if (s != status) {
            status = s;
            printf("status %.3f %d\n", now_s(), status);
        }
        window_loops++;
        if (now - window_start >= 0.1) {
            printf("window %.3f %ld %ld\n", window_start, window_bytes, window_loops);
            window_bytes = 0;
            window_loops = 0;
            window_start = now;
        }
        if (cm_fd() != fd) {
            errors++;
            fprintf(stderr, "cm_fd changed from %d to %d\n", fd, cm_fd());
        }
        /* Sleep on the descriptor until the CM or the next feedback is due. */
        int ms = 2;
        if (npipe > 0) {
            double left = pipe_[0].due - now_s();
            ms = left <= 0 ? 0 : (int)(left * 1000) + 1;
            if (ms > 2) ms = 2;
        }
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, ms) < 0) errors++;
    }
    for (int i = 0; i < 2; i++) check(cm_close(f[i]), "cm_close");
    printf("errors %d\n", errors);
    fflush(stdout);
    return errors ? 1 : 0;
}
