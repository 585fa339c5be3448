/*
 * Shared by the C examples: a loopback receiver (a forked child) that
 * acknowledges every datagram by echoing its header, and small helpers.
 * Everything goes to 127.0.0.1 only.
 */
#ifndef CM_EXAMPLE_COMMON_H
#define CM_EXAMPLE_COMMON_H

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cm.h"

#define PKT_MAGIC 0x434d4441u /* "CMDA" */
#define END_MAGIC 0x434d454eu /* "CMEN" */

/* The header of every datagram; the receiver echoes it as the ack. */
struct pkt_hdr {
    uint32_t magic;
    uint32_t seq;
    uint64_t sent_ns; /* sender's monotonic clock */
    uint32_t len;     /* datagram length */
    uint32_t pad;
};

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void die(const char *what, long code) {
    fprintf(stderr, "error: %s: %ld (%s)\n", what, code,
            code < 0 ? cm_strerror((int)code) : strerror(errno));
    exit(1);
}

/* Check a cm_* result: negative is an error. */
#define CHECK(call)                                    \
    do {                                               \
        long long r_ = (long long)(call);              \
        if (r_ < 0) die(#call, (long)r_);              \
    } while (0)

/* A UDP socket bound to 127.0.0.1 on an ephemeral port. */
static inline int udp_loopback(struct sockaddr_in *addr) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket", -errno);
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr->sin_port = 0;
    if (bind(fd, (struct sockaddr *)addr, sizeof *addr) < 0) die("bind", -errno);
    socklen_t len = sizeof *addr;
    if (getsockname(fd, (struct sockaddr *)addr, &len) < 0) die("getsockname", -errno);
    return fd;
}

/*
 * Fork the receiver: it acks every datagram to its sender and exits on an
 * END datagram (or after 10 s of silence), printing what it received.
 * Returns the child's pid; *dst is where to send.
 */
static inline pid_t start_receiver(struct sockaddr_in *dst) {
    int fd = udp_loopback(dst);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) die("fork", -errno);
    if (pid > 0) {
        close(fd);
        return pid;
    }
    unsigned long long n = 0, bytes = 0;
    char buf[65536];
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, 10000);
        if (r <= 0) break;
        struct sockaddr_in from;
        socklen_t flen = sizeof from;
        ssize_t got = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &flen);
        if (got < (ssize_t)sizeof(struct pkt_hdr)) continue;
        struct pkt_hdr h;
        memcpy(&h, buf, sizeof h);
        if (h.magic == END_MAGIC) break;
        if (h.magic != PKT_MAGIC) continue;
        n++;
        bytes += (unsigned long long)got;
        h.len = (uint32_t)got;
        sendto(fd, &h, sizeof h, 0, (struct sockaddr *)&from, flen);
    }
    printf("receiver: datagrams=%llu bytes=%llu\n", n, bytes);
    fflush(stdout);
    _exit(0);
}

/* Tell the receiver to stop and reap it; returns its exit status. */
static inline int stop_receiver(int fd, const struct sockaddr_in *dst, pid_t pid) {
    struct pkt_hdr end = {.magic = END_MAGIC};
    for (int i = 0; i < 3; i++)
        sendto(fd, &end, sizeof end, 0, (const struct sockaddr *)dst, sizeof *dst);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static inline const char *mode_name(int m) {
    return m == CM_MODE_DAEMON ? "daemon" : m == CM_MODE_EMBEDDED ? "embedded" : "?";
}

/* Choose the implicit context from $CM_EXAMPLE_MODE (embedded/daemon);
 * unset: the papers' default (daemon if running, else embedded). */
static inline void choose_mode(void) {
    const char *m = getenv("CM_EXAMPLE_MODE");
    if (m && strcmp(m, "embedded") == 0) CHECK(cm_init_embedded());
    if (m && strcmp(m, "daemon") == 0) CHECK(cm_init_daemon(getenv("CM_SOCKET")));
}

#endif
