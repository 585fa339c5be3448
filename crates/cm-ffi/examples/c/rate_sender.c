/*
 * A layered ("multi-rate encoding") sender using rate callbacks,
 * following cm-implementation-linux 2.1.2 (iii) and 3.4: the application
 * sends on its own clock at the rate of one of a fixed set of encodings,
 * and the CM calls cmapp_update only when the flow's rate moves by the
 * factors given to cm_thresh(down, up):
 *
 *     flow = cm_open(src, dst)
 *     cm_register_update(cmapp_update)
 *     cm_thresh(down, up)
 *     loop: <send at the chosen layer's rate>  cm_notify(flow, nsent)
 *           <receive acks>                     cm_update(flow, ...)
 *           <cmapp_update(flow, rate, ...)>    choose a new layer
 *
 * cm_notify stands for the kernel's IP output notification (2.1.3): the CM
 * must know every transmission to keep its window accounting.
 *
 * Usage: rate_sender [seconds]   (CM_EXAMPLE_MODE=embedded|daemon optional)
 */
#include "common.h"

#define PKT 1000
#define NLAYERS 6
/* Encodings in bytes per second: 32 kB/s doubling up to 1 MB/s. */
static const double layers[NLAYERS] = {32e3, 64e3, 128e3, 256e3, 512e3, 1024e3};

static int sock;
static cm_flowid flow;
static int layer; /* the encoding in use */
static unsigned long updates, layer_changes, errors, unknown_rate;
static unsigned long long sent, acked, bytes_sent, bytes_acked;
static double last_rate = -1, last_srtt = -1;

static int layer_for(double rate) {
    int l = 0;
    for (int i = 0; i < NLAYERS; i++)
        if (layers[i] <= rate) l = i;
    return l;
}

/* cmapp_update: the flow's rate or RTT changed past the thresholds. */
static void cmapp_update(cm_flowid f, double rate, double srtt, double rttvar, double loss) {
    (void)rttvar;
    (void)loss;
    updates++;
    if (f != flow) {
        errors++;
        return;
    }
    last_rate = rate;
    last_srtt = srtt;
    if (rate < 0) { /* no estimate yet: keep the current layer */
        unknown_rate++;
        return;
    }
    int l = layer_for(rate);
    if (l != layer) {
        layer = l;
        layer_changes++;
    }
}

static void read_acks(void) {
    struct pkt_hdr h;
    while (recv(sock, &h, sizeof h, MSG_DONTWAIT) == (ssize_t)sizeof h) {
        if (h.magic != PKT_MAGIC) continue;
        acked++;
        bytes_acked += h.len;
        double rtt = (double)(now_ns() - h.sent_ns) / 1e9;
        CHECK(cm_update(flow, h.len, h.len, CM_LOSS_NONE, rtt));
    }
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    struct sockaddr_in dst, src;
    pid_t rx = start_receiver(&dst);
    sock = udp_loopback(&src);
    if (connect(sock, (struct sockaddr *)&dst, sizeof dst) < 0) die("connect", -errno);

    choose_mode();
    flow = cm_open((struct sockaddr *)&src, (struct sockaddr *)&dst);
    CHECK(flow);
    CHECK(cm_register_update(cmapp_update));
    CHECK(cm_thresh(1.5, 1.5));
    int cmfd = cm_fd();
    CHECK(cmfd);

    char buf[PKT];
    memset(buf, 'r', sizeof buf);
    uint64_t start = now_ns(), end = start + (uint64_t)(seconds * 1e9);
    uint64_t next_send = start;
    unsigned long long layer_time[NLAYERS] = {0};
    while (now_ns() < end) {
        uint64_t now = now_ns();
        if (now >= next_send) {
            struct pkt_hdr h = {.magic = PKT_MAGIC, .seq = (uint32_t)sent, .sent_ns = now, .len = PKT};
            memcpy(buf, &h, sizeof h);
            ssize_t n = send(sock, buf, sizeof buf, 0);
            if (n > 0) {
                sent++;
                bytes_sent += (unsigned long long)n;
                CHECK(cm_notify(flow, n));
            } else {
                errors++;
            }
            /* Our own clock: the next packet at the chosen layer's rate. */
            uint64_t gap = (uint64_t)(1e9 * PKT / layers[layer]);
            layer_time[layer] += gap;
            next_send += gap;
            if (next_send < now) next_send = now;
        }
        int wait_ms = next_send > now ? (int)((next_send - now + 999999u) / 1000000u) : 0;
        struct pollfd p[2] = {{.fd = cmfd, .events = POLLIN}, {.fd = sock, .events = POLLIN}};
        int r = poll(p, 2, wait_ms);
        if (r < 0 && errno != EINTR) die("poll", -errno);
        if (p[0].revents & POLLIN) CHECK(cm_dispatch());
        if (p[1].revents & POLLIN) read_acks();
    }
    /* Drain the last acks. */
    for (int i = 0; i < 20 && acked < sent; i++) {
        struct pollfd p = {.fd = sock, .events = POLLIN};
        poll(&p, 1, 10);
        read_acks();
    }
    CHECK(cm_dispatch());
    CHECK(cm_close(flow));
    int rxs = stop_receiver(sock, &dst, rx);
    int top = 0;
    for (int i = 0; i < NLAYERS; i++)
        if (layer_time[i] > layer_time[top]) top = i;
    printf("RESULT rate mode=%s sent=%llu acked=%llu bytes=%llu bytes_acked=%llu updates=%lu "
           "layer_changes=%lu final_layer=%d most_used_layer=%d unknown_rate=%lu errors=%lu "
           "last_rate=%.0f last_srtt_ms=%.3f receiver=%d\n",
           mode_name(cm_mode()), sent, acked, bytes_sent, bytes_acked, updates, layer_changes,
           layer, top, unknown_rate, errors, last_rate, last_srtt * 1e3, rxs);
    return (errors == 0 && updates > 0 && acked * 10 >= sent * 9 && rxs == 0) ? 0 : 1;
}
