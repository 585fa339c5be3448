/*
 * A congestion-controlled UDP sender (buffered send), following
 * cm-implementation-linux 3.3:
 *
 *     flow = cm_open(dst, port)
 *     setsockopt(flow, ..., CM_BUF)     -- here: cm_open_buffered(fd, dst)
 *     loop:
 *       <send data on flow>             -- cm_send(flow, buf, len)
 *       <receive data acknowledgements>
 *       cm_update(flow, sent, received, ...)
 *
 * The datagrams queue in libcm and leave as the CM grants the flow, so the
 * socket's output is paced by the macroflow's window and rate.
 *
 * Usage: buffered_sender [datagrams]   (CM_EXAMPLE_MODE=embedded|daemon)
 */
#include "common.h"

#define PKT 1200
/* Datagrams queued and not yet acknowledged, at most. */
#define AHEAD 32

/* RTT samples: the application cannot see the moment libcm transmits a
 * queued datagram, so only a datagram queued when nothing was queued or
 * unacknowledged gives a clean sample (it leaves at once); the others are
 * reported without one (rtt 0) so queueing time never inflates the RTT. */
static unsigned char *clean;
static unsigned total;

static unsigned long long acked, bytes_acked;
static unsigned long eagain, errors;

static void read_acks(int sock, cm_flowid flow) {
    struct pkt_hdr h;
    while (recv(sock, &h, sizeof h, MSG_DONTWAIT) == (ssize_t)sizeof h) {
        if (h.magic != PKT_MAGIC || h.seq >= total) continue;
        acked++;
        bytes_acked += h.len;
        double rtt = clean[h.seq] ? (double)(now_ns() - h.sent_ns) / 1e9 : 0;
        CHECK(cm_update(flow, h.len, h.len, CM_LOSS_NONE, rtt));
    }
}

int main(int argc, char **argv) {
    total = argc > 1 ? (unsigned)atoi(argv[1]) : 1000;
    clean = calloc(total + 1, 1);
    if (!clean) die("calloc", 0);
    struct sockaddr_in dst, src;
    pid_t rx = start_receiver(&dst);
    int sock = udp_loopback(&src);

    choose_mode();
    cm_flowid flow = cm_open_buffered(sock, (struct sockaddr *)&dst);
    CHECK(flow);
    int mtu = cm_mtu(flow);
    CHECK(mtu);
    int cmfd = cm_fd();
    CHECK(cmfd);

    char buf[PKT];
    memset(buf, 'b', sizeof buf);
    unsigned queued = 0;
    uint64_t deadline = now_ns() + 30ull * 1000000000u;
    while (acked < total && now_ns() < deadline) {
        /* Queue up to AHEAD ahead of the acks; -EAGAIN: libcm's queue is full. */
        while (queued < total && queued < acked + AHEAD) {
            struct pkt_hdr h = {.magic = PKT_MAGIC, .seq = queued, .sent_ns = now_ns(), .len = PKT};
            memcpy(buf, &h, sizeof h);
            int r = cm_send(flow, buf, PKT < mtu ? PKT : (size_t)mtu);
            if (r == -EAGAIN) {
                eagain++;
                break;
            }
            CHECK(r);
            clean[queued] = queued == acked;
            queued++;
        }
        struct pollfd p[2] = {{.fd = cmfd, .events = POLLIN}, {.fd = sock, .events = POLLIN}};
        int r = poll(p, 2, 50);
        if (r < 0 && errno != EINTR) die("poll", -errno);
        if (p[0].revents & POLLIN) CHECK(cm_dispatch());
        if (p[1].revents & POLLIN) read_acks(sock, flow);
    }
    double rate, srtt;
    CHECK(cm_query(flow, &rate, &srtt, NULL, NULL));
    CHECK(cm_close(flow));
    int rxs = stop_receiver(sock, &dst, rx);
    printf("RESULT buffered mode=%s datagrams=%u queued=%u acked=%llu bytes_acked=%llu "
           "eagain=%lu errors=%lu srtt_ms=%.3f rate=%.0f receiver=%d\n",
           mode_name(cm_mode()), total, queued, acked, bytes_acked, eagain, errors, srtt * 1e3,
           rate, rxs);
    return (acked == total && errors == 0 && rxs == 0) ? 0 : 1;
}
