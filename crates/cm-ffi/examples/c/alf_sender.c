/*
 * An ALF (application-level framing) sender using the request/callback API,
 * following cm-implementation-linux 3.5:
 *
 *     flow = cm_open(src, dst)
 *     cm_request(flow)
 *     <receive cmapp_send() callback from libcm>
 *     cm_query(flow, ...)
 *     <send data>               (and cm_notify(flow, nsent))
 *     <receive data acks>
 *     cm_update(flow, sent, recd, ...)
 *
 * The application decides what to send only when the CM grants the flow
 * (here: the next sequence number, sized to the MTU). Its event loop polls
 * its own socket and libcm's descriptor (cm_fd) and calls cm_dispatch.
 *
 * Usage: alf_sender [packets]   (CM_EXAMPLE_MODE=embedded|daemon optional)
 */
#include "common.h"

#define PAYLOAD 1200
#define DEPTH 4 /* requests kept outstanding */

static int sock;
static cm_flowid flow;
static int mtu;
static unsigned total, next_seq, outstanding, acked, lost;
static uint64_t *sent_at;
static uint32_t *sent_len;
static unsigned char *done;
static unsigned long callbacks, declined, errors;
static unsigned long long bytes_sent;
static double last_rate = -1;

/* cmapp_send: the CM grants up to one MTU now. */
static void cmapp_send(cm_flowid f) {
    callbacks++;
    if (f != flow) {
        errors++;
        return;
    }
    if (outstanding > 0) outstanding--;
    if (next_seq >= total) {
        CHECK(cm_notify(f, 0)); /* nothing to send: decline, 2.1.3 */
        declined++;
        return;
    }
    /* Last-minute adaptation: the current estimate, just before sending. */
    double rate, srtt;
    CHECK(cm_query(f, &rate, &srtt, NULL, NULL));
    last_rate = rate;

    char buf[65536];
    size_t len = PAYLOAD < mtu ? PAYLOAD : (size_t)mtu;
    struct pkt_hdr h = {.magic = PKT_MAGIC, .seq = next_seq, .sent_ns = now_ns(), .len = (uint32_t)len};
    memset(buf, 'a' + (int)(next_seq % 26), len);
    memcpy(buf, &h, sizeof h);
    ssize_t n = send(sock, buf, len, 0);
    if (n < 0) {
        errors++;
        CHECK(cm_notify(f, 0));
        return;
    }
    sent_at[next_seq] = h.sent_ns;
    sent_len[next_seq] = (uint32_t)n;
    next_seq++;
    bytes_sent += (unsigned long long)n;
    CHECK(cm_notify(f, n));
    /* Keep DEPTH requests outstanding while data remains. */
    if (next_seq + outstanding < total) {
        CHECK(cm_request(f));
        outstanding++;
    }
}

static void read_acks(void) {
    struct pkt_hdr h;
    ssize_t n;
    while ((n = recv(sock, &h, sizeof h, MSG_DONTWAIT)) == (ssize_t)sizeof h) {
        if (h.magic != PKT_MAGIC || h.seq >= next_seq || done[h.seq]) continue;
        done[h.seq] = 1;
        acked++;
        double rtt = (double)(now_ns() - h.sent_ns) / 1e9;
        CHECK(cm_update(flow, sent_len[h.seq], h.len, CM_LOSS_NONE, rtt));
    }
}

/* A datagram unacknowledged for a second is reported lost. */
static void detect_losses(void) {
    uint64_t now = now_ns();
    for (unsigned s = 0; s < next_seq; s++) {
        if (!done[s] && now - sent_at[s] > 1000000000u) {
            done[s] = 1;
            lost++;
            CHECK(cm_update(flow, sent_len[s], 0, CM_LOSS_FEEDBACK, 0));
        }
    }
}

int main(int argc, char **argv) {
    total = argc > 1 ? (unsigned)atoi(argv[1]) : 500;
    sent_at = calloc(total + 1, sizeof *sent_at);
    sent_len = calloc(total + 1, sizeof *sent_len);
    done = calloc(total + 1, 1);
    if (!sent_at || !sent_len || !done) die("calloc", 0);

    struct sockaddr_in dst, src;
    pid_t rx = start_receiver(&dst);
    sock = udp_loopback(&src);
    if (connect(sock, (struct sockaddr *)&dst, sizeof dst) < 0) die("connect", -errno);

    choose_mode();
    flow = cm_open((struct sockaddr *)&src, (struct sockaddr *)&dst);
    CHECK(flow);
    mtu = cm_mtu(flow);
    CHECK(mtu);
    CHECK(cm_register_send(cmapp_send));
    for (unsigned i = 0; i < DEPTH && i < total; i++) {
        CHECK(cm_request(flow));
        outstanding++;
    }

    int cmfd = cm_fd();
    CHECK(cmfd);
    uint64_t deadline = now_ns() + 30ull * 1000000000u;
    uint64_t last_scan = now_ns();
    while (acked + lost < total && now_ns() < deadline) {
        struct pollfd p[2] = {{.fd = cmfd, .events = POLLIN}, {.fd = sock, .events = POLLIN}};
        int r = poll(p, 2, 50);
        if (r < 0 && errno != EINTR) die("poll", -errno);
        if (p[0].revents & POLLIN) CHECK(cm_dispatch());
        if (p[1].revents & POLLIN) read_acks();
        if (now_ns() - last_scan > 100000000u) {
            detect_losses();
            last_scan = now_ns();
        }
    }

    double rate, srtt, rttvar, loss;
    CHECK(cm_query(flow, &rate, &srtt, &rttvar, &loss));
    CHECK(cm_close(flow));
    int rxs = stop_receiver(sock, &dst, rx);
    printf("RESULT alf mode=%s packets=%u sent=%u acked=%u lost=%u bytes=%llu callbacks=%lu "
           "declined=%lu errors=%lu mtu=%d srtt_ms=%.3f rate=%.0f last_rate=%.0f receiver=%d\n",
           mode_name(cm_mode()), total, next_seq, acked, lost, bytes_sent, callbacks, declined,
           errors, mtu, srtt * 1e3, rate, last_rate, rxs);
    return (acked == total && errors == 0 && rxs == 0) ? 0 : 1;
}
