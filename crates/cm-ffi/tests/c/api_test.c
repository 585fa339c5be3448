/*
 * Exercises every function in cm.h, with its error paths (NULL pointers,
 * bad flow ids, bad address families and lengths, bad arguments).
 *
 * Usage: api_test embedded | daemon   (daemon: $CM_SOCKET is the daemon)
 * Both modes refuse the same bad arguments with the same codes, at the
 * call (daemon mode checks what libcm can know locally before sending).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cm.h"

/* Atomic: the threads section checks from several threads at once. */
static _Atomic int checks, failures;
static int daemon_mode;

#include "expect.h"

static struct sockaddr_in v4(const char *ip, int port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

/* ---- callbacks on the implicit context ---------------------------------- */

static cm_flowid cb_flow = -1;
static int sends, rounds_left, nested_dispatches, updates;
static double update_rate = -2, update_srtt = -2;

/* cmapp_send that re-enters: notify, request again, and once dispatch. */
static void on_send(cm_flowid f) {
    sends++;
    EXPECT_EQ(f, cb_flow);
    EXPECT_OK(cm_notify(f, 500));
    EXPECT_OK(cm_update(f, 500, 500, CM_LOSS_NONE, 0.002));
    if (rounds_left > 0) {
        rounds_left--;
        EXPECT_OK(cm_request(f));
    }
    if (nested_dispatches == 0) {
        nested_dispatches++;
        EXPECT_OK(cm_dispatch()); /* re-entrant dispatch is allowed */
    }
}

/* cmapp_send that ignores its grant the first time (never notifies). */
static int ignored;
static void on_send_ignore(cm_flowid f) {
    if (ignored++ > 0) EXPECT_OK(cm_notify(f, 0));
}

static void on_update(cm_flowid f, double rate, double srtt, double rttvar, double loss) {
    (void)rttvar;
    (void)loss;
    (void)f;
    updates++;
    update_rate = rate;
    update_srtt = srtt;
}

static int pump(int rounds) {
    int n = 0;
    for (int i = 0; i < rounds; i++) {
        EXPECT_OK(cm_wait(5));
        int r = cm_dispatch();
        EXPECT_OK(r);
        if (r > 0) n += r;
    }
    return n;
}

static volatile sig_atomic_t sigio_count;
static void on_sigio(int s) {
    (void)s;
    sigio_count++;
}

static void implicit_context(const char *sock) {
    /* Choosing the mode twice is refused. */
    if (daemon_mode) {
        EXPECT_EQ(cm_init_daemon("/nonexistent/dir/cm.sock"), -ECONNREFUSED);
        EXPECT_OK(cm_init_daemon(sock));
        EXPECT_EQ(cm_mode(), CM_MODE_DAEMON);
    } else {
        EXPECT_OK(cm_init_embedded());
        EXPECT_EQ(cm_mode(), CM_MODE_EMBEDDED);
    }
    EXPECT_EQ(cm_init_embedded(), -EALREADY);
    EXPECT_EQ(cm_init_daemon(sock), -EALREADY);
    EXPECT_EQ(cm_status(), daemon_mode ? CM_STATUS_DAEMON : CM_STATUS_EMBEDDED);
    EXPECT_OK(cm_set_failover(1));

    /* cm_open: addresses */
    struct sockaddr_in dst = v4("127.0.0.1", 9), src = v4("127.0.0.1", 0);
    EXPECT_EQ(cm_open(NULL, NULL), -EFAULT);
    EXPECT_EQ(cm_open((struct sockaddr *)&src, NULL), -EFAULT);
    struct sockaddr_un un;
    memset(&un, 0, sizeof un);
    un.sun_family = AF_UNIX;
    EXPECT_EQ(cm_open(NULL, (struct sockaddr *)&un), -EAFNOSUPPORT);
    EXPECT_EQ(cm_open((struct sockaddr *)&un, (struct sockaddr *)&dst), -EAFNOSUPPORT);
    cm_flowid f = cm_open((struct sockaddr *)&src, (struct sockaddr *)&dst);
    EXPECT_OK(f);
    struct sockaddr_in6 d6;
    memset(&d6, 0, sizeof d6);
    d6.sin6_family = AF_INET6;
    d6.sin6_port = htons(9);
    d6.sin6_addr = in6addr_loopback;
    cm_flowid f6 = cm_open(NULL, (struct sockaddr *)&d6);
    EXPECT_OK(f6);
    EXPECT(f6 != f);

    /* cm_mtu and bad ids */
    int mtu = cm_mtu(f);
    EXPECT(mtu > 0);
    EXPECT_EQ(cm_mtu(-5), -EINVAL);
    EXPECT_EQ(cm_mtu(987654), -ENOENT);

    /* cm_query: no estimate yet is -1, not 0; NULL outputs skipped */
    struct sockaddr_in far = v4("127.0.0.77", 7);
    cm_flowid fq = cm_open(NULL, (struct sockaddr *)&far);
    EXPECT_OK(fq);
    double rate = 0, srtt = 0, rttvar = 0, loss = 0;
    EXPECT_OK(cm_query(fq, &rate, &srtt, &rttvar, &loss));
    EXPECT_EQ(srtt, -1);
    EXPECT_EQ(rttvar, -1);
    EXPECT_OK(cm_query(fq, NULL, NULL, NULL, NULL));
    EXPECT_EQ(cm_query(987654, &rate, NULL, NULL, NULL), -ENOENT);
    EXPECT_EQ(cm_query(-1, &rate, NULL, NULL, NULL), -EINVAL);

    /* cm_update: arguments, then a real sample shows in cm_query */
    EXPECT_EQ(cm_update(fq, -1, 0, CM_LOSS_NONE, 0.01), -EINVAL);
    EXPECT_EQ(cm_update(fq, 100, 200, CM_LOSS_NONE, 0.01), -EINVAL);
    EXPECT_EQ(cm_update(fq, 100, 100, 99, 0.01), -EINVAL);
    EXPECT_EQ(cm_update(fq, 100, 100, CM_LOSS_NONE, NAN), -EINVAL);
    EXPECT_EQ(cm_update(987654, 100, 100, CM_LOSS_NONE, 0.01), -ENOENT);
    EXPECT_OK(cm_notify(fq, 1000));
    EXPECT_OK(cm_update(fq, 1000, 1000, CM_LOSS_NONE, 0.010));
    EXPECT_OK(cm_update(fq, 0, 0, CM_LOSS_FEEDBACK, 0));
    EXPECT_OK(cm_update(fq, 0, 0, CM_NO_FEEDBACK, -1));
    EXPECT_OK(cm_update(fq, 0, 0, CM_EXPLICIT_CONGESTION, 0));
    EXPECT_OK(cm_update(fq, 0, 0, CM_NO_CONGESTION, 0));
    EXPECT_OK(cm_query(fq, &rate, &srtt, &rttvar, &loss));
    EXPECT(srtt > 0.005 && srtt < 0.02);
    EXPECT(rate > 0);

    /* cm_notify errors */
    EXPECT_EQ(cm_notify(fq, -3), -EINVAL);
    EXPECT_EQ(cm_notify(-3, 10), -EINVAL);
    EXPECT_EQ(cm_notify(987654, 10), -ENOENT);

    /* request / callback, re-entrant */
    EXPECT_OK(cm_register_send(on_send));
    cb_flow = f;
    rounds_left = 5;
    EXPECT_OK(cm_request(f));
    for (int i = 0; i < 200 && (rounds_left > 0 || sends < 6); i++) pump(1);
    EXPECT_EQ(sends, 6);
    EXPECT_EQ(rounds_left, 0);
    EXPECT_EQ(nested_dispatches, 1);
    EXPECT_EQ(cm_request(-1), -EINVAL);
    EXPECT_EQ(cm_request(987654), -ENOENT);
    EXPECT_EQ(cm_request_mtus(f, 0), -EINVAL);
    EXPECT_EQ(cm_request_mtus(f, -2), -EINVAL);
    /* a k-MTU request becomes k cmapp_send calls of one MTU each */
    sends = 0;
    EXPECT_OK(cm_request_mtus(f, 2));
    for (int i = 0; i < 200 && sends < 2; i++) pump(1);
    EXPECT_EQ(sends, 2);
    /* without a send callback, grants are declined, not stuck */
    EXPECT_OK(cm_register_send(NULL));
    EXPECT_OK(cm_request(f));
    pump(5);
    EXPECT_OK(cm_register_send(on_send));
    sends = 0;
    EXPECT_OK(cm_request(f));
    for (int i = 0; i < 200 && sends < 1; i++) pump(1);
    EXPECT_EQ(sends, 1);
    EXPECT_OK(cm_register_send(NULL));

    /* a grant left unanswered expires (RFC 3124 3) and is asked for again
     * on the application's behalf: the callback comes back */
    EXPECT_OK(cm_register_send(on_send_ignore));
    EXPECT_OK(cm_request(f));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        pump(1);
        clock_gettime(CLOCK_MONOTONIC, &t1);
    } while (ignored < 2 && t1.tv_sec - t0.tv_sec < 5);
    EXPECT(ignored >= 2);
    EXPECT_OK(cm_register_send(NULL));
    pump(2);

    /* rate callbacks and thresholds */
    EXPECT_EQ(cm_thresh(0.5, 2), -EINVAL);
    EXPECT_EQ(cm_thresh(2, NAN), -EINVAL);
    EXPECT_OK(cm_thresh(1.5, 1.5));
    EXPECT_EQ(cm_thresh_flow(fq, 1, 1, 1, 0.9), -EINVAL);
    EXPECT_EQ(cm_thresh_flow(-1, 2, 2, 2, 2), -EINVAL);
    EXPECT_EQ(cm_thresh_flow(987654, 2, 2, 2, 2), -ENOENT);
    EXPECT_OK(cm_thresh_flow(fq, 2, 2, 2, 2));
    EXPECT_OK(cm_register_update(on_update));
    pump(5);
    EXPECT(updates >= 1); /* the current estimate is reported at once */
    EXPECT(update_srtt > 0);
    EXPECT(update_rate > 0);
    int before = updates;
    EXPECT_OK(cm_notify(fq, 3000));
    EXPECT_OK(cm_update(fq, 3000, 3000, CM_LOSS_NONE, 0.200)); /* 20x the RTT */
    pump(5);
    EXPECT(updates > before);
    EXPECT_OK(cm_register_update(NULL));

    /* macroflows */
    cm_mflowid m = cm_getmacroflow(f);
    EXPECT_OK(m);
    EXPECT_EQ(cm_getmacroflow(-1), -EINVAL);
    EXPECT_EQ(cm_getmacroflow(987654), -ENOENT);
    cm_mflowid mq = cm_getmacroflow(fq);
    EXPECT(mq != m); /* different destination hosts */
    cm_mflowid own = cm_setmacroflow(-1, fq);
    EXPECT_OK(own);
    EXPECT(own != mq && own != m);
    EXPECT_EQ(cm_setmacroflow(m, fq), m);
    EXPECT_EQ(cm_getmacroflow(fq), m);
    EXPECT_EQ(cm_setmacroflow(987654, fq), -ENOENT);
    EXPECT_EQ(cm_setmacroflow(m, 987654), -ENOENT);
    EXPECT_OK(cm_set_weight(fq, 3));
    EXPECT_EQ(cm_set_weight(fq, -1), -EINVAL);
    EXPECT_EQ(cm_set_weight(fq, 0), -EINVAL);

    /* controllers and capacity (deviation 13) */
    EXPECT_OK(cm_set_controller(fq, "iscc:l=2"));
    EXPECT_OK(cm_set_capacity(fq, 10000000));
    EXPECT_OK(cm_query(fq, NULL, NULL, NULL, NULL));
    EXPECT_OK(cm_set_capacity(fq, 0));
    EXPECT_OK(cm_set_controller(fq, " iiad : mode=window "));
    EXPECT_EQ(cm_set_controller(fq, "iscc:l=0.5"), -EINVAL);
    EXPECT_EQ(cm_set_controller(fq, "no-such-controller"), -EINVAL);
    EXPECT_EQ(cm_set_controller(fq, ""), -EINVAL);
    EXPECT_EQ(cm_set_controller(fq, "\xff\xfe"), -EINVAL);
    EXPECT_EQ(cm_set_controller(fq, NULL), -EFAULT);
    EXPECT_EQ(cm_set_controller(-1, "aimd"), -EINVAL);
    EXPECT_EQ(cm_set_controller(987654, "aimd"), -ENOENT);
    EXPECT_EQ(cm_set_capacity(-1, 1), -EINVAL);
    EXPECT_EQ(cm_set_capacity(987654, 8000), -ENOENT);
    EXPECT_OK(cm_set_controller(fq, "aimd"));

    /* bulk calls */
    cm_flowid fl[2] = {f, fq};
    int64_t ns[2] = {0, 0};
    struct cm_estimate est[2];
    EXPECT_OK(cm_bulk_request(fl, 2));
    EXPECT_OK(cm_bulk_request(NULL, 0));
    EXPECT_EQ(cm_bulk_request(NULL, 2), -EFAULT);
    pump(3); /* no send callback: declined */
    EXPECT_OK(cm_bulk_notify(fl, ns, 2));
    EXPECT_EQ(cm_bulk_notify(fl, NULL, 2), -EFAULT);
    int64_t bad_ns[2] = {0, -1};
    EXPECT_EQ(cm_bulk_notify(fl, bad_ns, 2), -EINVAL);
    struct cm_feedback fb[2] = {
        {.flow = f, .nsent = 0, .nrecd = 0, .lossmode = CM_LOSS_NONE, .rtt = 0.001},
        {.flow = fq, .nsent = 0, .nrecd = 0, .lossmode = CM_LOSS_NONE, .rtt = 0},
    };
    EXPECT_OK(cm_bulk_update(fb, 2));
    EXPECT_EQ(cm_bulk_update(NULL, 1), -EFAULT);
    fb[1].nrecd = 5;
    EXPECT_EQ(cm_bulk_update(fb, 2), -EINVAL);
    EXPECT_OK(cm_bulk_query(fl, 2, est));
    EXPECT(est[0].srtt > 0);
    EXPECT(est[1].srtt > 0);
    EXPECT_EQ(cm_bulk_query(fl, 2, NULL), -EFAULT);
    EXPECT_EQ(cm_bulk_query(NULL, 2, est), -EFAULT);
    cm_flowid badfl[1] = {987654};
    EXPECT_EQ(cm_bulk_query(badfl, 1, est), -ENOENT);

    /* buffered send */
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in rxa = v4("127.0.0.1", 0);
    int rx = socket(AF_INET, SOCK_DGRAM, 0);
    socklen_t rl = sizeof rxa;
    bind(rx, (struct sockaddr *)&rxa, sizeof rxa);
    getsockname(rx, (struct sockaddr *)&rxa, &rl);
    EXPECT_EQ(cm_open_buffered(-1, (struct sockaddr *)&rxa), -EBADF);
    EXPECT_EQ(cm_open_buffered(u, NULL), -EFAULT);
    int tcp = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(cm_open_buffered(tcp, (struct sockaddr *)&rxa), -ENOTSOCK);
    int pfd[2];
    EXPECT_OK(pipe(pfd));
    EXPECT_EQ(cm_open_buffered(pfd[0], (struct sockaddr *)&rxa), -ENOTSOCK);
    cm_flowid fb1 = cm_open_buffered(u, (struct sockaddr *)&rxa);
    EXPECT_OK(fb1);
    char payload[100000];
    memset(payload, 'x', sizeof payload);
    EXPECT_OK(cm_send(fb1, payload, 100));
    EXPECT_OK(cm_send(fb1, payload, 200));
    EXPECT_EQ(cm_send(fb1, payload, (size_t)cm_mtu(fb1) + 1), -EMSGSIZE);
    EXPECT_EQ(cm_send(fb1, NULL, 10), -EFAULT);
    EXPECT_EQ(cm_send(f, payload, 10), -EINVAL); /* not a buffered flow */
    EXPECT_EQ(cm_send(987654, payload, 10), -ENOENT);
    int got = 0;
    char rbuf[2048];
    for (int i = 0; i < 200 && got < 300; i++) {
        pump(1);
        ssize_t n;
        while ((n = recv(rx, rbuf, sizeof rbuf, MSG_DONTWAIT)) > 0) got += (int)n;
    }
    EXPECT_EQ(got, 300);
    EXPECT_OK(cm_close(fb1));
    close(u);
    close(rx);
    close(tcp);
    close(pfd[0]);
    close(pfd[1]);

    /* event loop */
    int fd = cm_fd();
    EXPECT(fd >= 0);
    EXPECT_EQ(cm_fd(), fd);
    EXPECT_OK(cm_wait(0));
    EXPECT_OK(cm_wait(10));
    EXPECT_EQ(cm_set_reply_timeout(0), -EINVAL);
    EXPECT_OK(cm_set_reply_timeout(5000));
    signal(SIGIO, on_sigio);
    if (daemon_mode) {
        /* the daemon's next message raises SIGIO */
        EXPECT_OK(cm_enable_sigio());
        EXPECT_OK(cm_request(f));
        for (int i = 0; i < 200 && sigio_count == 0; i++) usleep(5000);
        EXPECT(sigio_count > 0);
    } else {
        EXPECT_EQ(cm_enable_sigio(), -EOPNOTSUPP);
        EXPECT_OK(cm_request(f));
    }
    EXPECT_OK(cm_dispatch()); /* no send callback: the grant is declined */

    /* close */
    EXPECT_OK(cm_close(f));
    EXPECT_OK(cm_close(f6));
    EXPECT_OK(cm_close(fq));
    EXPECT_EQ(cm_close(f), -ENOENT);
    EXPECT_EQ(cm_close(-1), -EINVAL);

    /* fini: a new context replaces the old one */
    EXPECT_OK(cm_fini());
    EXPECT_EQ(cm_mtu(f), -ENOENT);
    EXPECT_EQ(cm_mode(), daemon_mode ? CM_MODE_DAEMON : CM_MODE_EMBEDDED);
    EXPECT_OK(cm_fini());
}

/* ---- explicit contexts -------------------------------------------------- */

struct ctx_state {
    int sends, updates;
    uint64_t bytes;
    cm_flowid flow;
    int free_in_callback;
};

static void ctx_send(cm_ctx *c, cm_flowid f, uint64_t bytes, void *arg) {
    struct ctx_state *s = arg;
    s->sends++;
    s->bytes += bytes;
    EXPECT_EQ(f, s->flow);
    EXPECT_OK(cm_ctx_notify(c, f, (int64_t)bytes));
    if (s->free_in_callback) cm_ctx_free(c); /* the dispatch keeps it alive */
}

static void ctx_update(cm_ctx *c, cm_flowid f, const struct cm_estimate *e, void *arg) {
    (void)c;
    (void)f;
    struct ctx_state *s = arg;
    s->updates++;
    EXPECT(e != NULL);
}

static void explicit_contexts(const char *sock) {
    cm_ctx *c = NULL;
    EXPECT_EQ(cm_ctx_new(NULL), -EFAULT);
    EXPECT_EQ(cm_ctx_new_embedded(NULL), -EFAULT);
    EXPECT_EQ(cm_ctx_connect(sock, NULL), -EFAULT);
    EXPECT_EQ(cm_ctx_connect("/nonexistent/dir/cm.sock", &c), -ECONNREFUSED);
    EXPECT(c == NULL);
    if (daemon_mode) {
        EXPECT_OK(cm_ctx_connect(sock, &c));
        EXPECT_EQ(cm_ctx_mode(c), CM_MODE_DAEMON);
        EXPECT_EQ(cm_ctx_status(c), CM_STATUS_DAEMON);
        EXPECT_OK(cm_ctx_set_failover(c, 1));
        EXPECT_EQ(cm_ctx_status(NULL), -EFAULT);
        cm_ctx *d = NULL;
        EXPECT_OK(cm_ctx_new(&d)); /* $CM_SOCKET names the daemon */
        EXPECT_EQ(cm_ctx_mode(d), CM_MODE_DAEMON);
        cm_ctx_free(d);
    } else {
        EXPECT_OK(cm_ctx_new_embedded(&c));
        EXPECT_EQ(cm_ctx_mode(c), CM_MODE_EMBEDDED);
        EXPECT_EQ(cm_ctx_status(c), CM_STATUS_EMBEDDED);
        EXPECT_OK(cm_ctx_set_failover(c, 0));
        cm_ctx *d = NULL;
        EXPECT_OK(cm_ctx_new(&d)); /* no daemon at $CM_SOCKET: embedded */
        EXPECT_EQ(cm_ctx_mode(d), CM_MODE_EMBEDDED);
        cm_ctx_free(d);
    }
    cm_ctx_free(NULL);

    /* every cm_ctx_* call refuses a NULL context */
    struct sockaddr_in dst = v4("127.0.0.1", 9);
    struct cm_estimate e;
    cm_flowid one = 0;
    int64_t zero = 0;
    struct cm_feedback fb0 = {0};
    EXPECT_EQ(cm_ctx_mode(NULL), -EFAULT);
    EXPECT_EQ(cm_ctx_open(NULL, NULL, 0, (struct sockaddr *)&dst, sizeof dst), -EFAULT);
    EXPECT_EQ(cm_ctx_mtu(NULL, 0), -EFAULT);
    EXPECT_EQ(cm_ctx_request(NULL, 0), -EFAULT);
    EXPECT_EQ(cm_ctx_request_mtus(NULL, 0, 1), -EFAULT);
    EXPECT_EQ(cm_ctx_register_send(NULL, ctx_send, NULL), -EFAULT);
    EXPECT_EQ(cm_ctx_register_update(NULL, ctx_update, NULL), -EFAULT);
    EXPECT_EQ(cm_ctx_thresh(NULL, 2, 2), -EFAULT);
    EXPECT_EQ(cm_ctx_thresh_flow(NULL, 0, 2, 2, 2, 2), -EFAULT);
    EXPECT_EQ(cm_ctx_notify(NULL, 0, 0), -EFAULT);
    EXPECT_EQ(cm_ctx_update(NULL, 0, 0, 0, 0, 0), -EFAULT);
    EXPECT_EQ(cm_ctx_query(NULL, 0, &e), -EFAULT);
    EXPECT_EQ(cm_ctx_close(NULL, 0), -EFAULT);
    EXPECT_EQ(cm_ctx_getmacroflow(NULL, 0), -EFAULT);
    EXPECT_EQ(cm_ctx_setmacroflow(NULL, -1, 0), -EFAULT);
    EXPECT_EQ(cm_ctx_set_weight(NULL, 0, 1), -EFAULT);
    EXPECT_EQ(cm_ctx_set_controller(NULL, 0, "aimd"), -EFAULT);
    EXPECT_EQ(cm_ctx_set_capacity(NULL, 0, 1), -EFAULT);
    EXPECT_EQ(cm_ctx_bulk_request(NULL, &one, 1), -EFAULT);
    EXPECT_EQ(cm_ctx_bulk_notify(NULL, &one, &zero, 1), -EFAULT);
    EXPECT_EQ(cm_ctx_bulk_update(NULL, &fb0, 1), -EFAULT);
    EXPECT_EQ(cm_ctx_bulk_query(NULL, &one, 1, &e), -EFAULT);
    EXPECT_EQ(cm_ctx_open_buffered(NULL, 0, (struct sockaddr *)&dst, sizeof dst), -EFAULT);
    EXPECT_EQ(cm_ctx_send(NULL, 0, "x", 1), -EFAULT);
    EXPECT_EQ(cm_ctx_dispatch(NULL), -EFAULT);
    EXPECT_EQ(cm_ctx_wait(NULL, 0), -EFAULT);
    EXPECT_EQ(cm_ctx_fd(NULL), -EFAULT);
    EXPECT_EQ(cm_ctx_enable_sigio(NULL), -EFAULT);

    /* cm_ctx_open checks lengths */
    EXPECT_EQ(cm_ctx_open(c, NULL, 0, (struct sockaddr *)&dst, sizeof dst - 1), -EINVAL);
    EXPECT_EQ(cm_ctx_open(c, (struct sockaddr *)&dst, 1, (struct sockaddr *)&dst, sizeof dst), -EINVAL);
    EXPECT_EQ(cm_ctx_open(c, NULL, 0, NULL, sizeof dst), -EFAULT);
    cm_flowid f = cm_ctx_open(c, NULL, 0, (struct sockaddr *)&dst, sizeof dst);
    EXPECT_OK(f);
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    memcpy(&ss, &dst, sizeof dst);
    cm_flowid f2 = cm_ctx_open(c, NULL, 0, (struct sockaddr *)&ss, sizeof ss);
    EXPECT_OK(f2);
    EXPECT(cm_ctx_mtu(c, f) > 0);
    EXPECT_EQ(cm_ctx_mtu(c, 987654), -ENOENT);

    /* callbacks with the context and user data; k-MTU grant in bytes */
    struct ctx_state s = {.flow = f};
    EXPECT_OK(cm_ctx_register_send(c, ctx_send, &s));
    EXPECT_OK(cm_ctx_request(c, f));
    EXPECT_OK(cm_ctx_request_mtus(c, f, 2));
    EXPECT_EQ(cm_ctx_request_mtus(c, f, 0), -EINVAL);
    for (int i = 0; i < 200 && s.bytes < 3u * (uint64_t)cm_ctx_mtu(c, f); i++) {
        EXPECT_OK(cm_ctx_wait(c, 5));
        EXPECT_OK(cm_ctx_dispatch(c));
    }
    EXPECT_EQ(s.bytes, 3u * (uint64_t)cm_ctx_mtu(c, f));
    EXPECT_OK(cm_ctx_update(c, f, (int64_t)s.bytes, (int64_t)s.bytes, CM_LOSS_NONE, 0.004));
    EXPECT_EQ(cm_ctx_update(c, f, 1, 2, CM_LOSS_NONE, 0), -EINVAL);
    EXPECT_OK(cm_ctx_query(c, f, &e));
    /* embedded: only this sample; daemon: the host's macroflow to 127.0.0.1
     * also remembers the implicit context's samples */
    EXPECT(daemon_mode ? e.srtt > 0 : (e.srtt > 0.003 && e.srtt < 0.005));
    EXPECT_EQ(cm_ctx_query(c, f, NULL), -EFAULT);

    EXPECT_OK(cm_ctx_register_update(c, ctx_update, &s));
    EXPECT_OK(cm_ctx_thresh(c, 2, 2));
    EXPECT_EQ(cm_ctx_thresh(c, 0, 2), -EINVAL);
    EXPECT_OK(cm_ctx_thresh_flow(c, f, 1.2, 1.2, 1.2, 1.2));
    for (int i = 0; i < 20 && s.updates == 0; i++) {
        EXPECT_OK(cm_ctx_wait(c, 5));
        EXPECT_OK(cm_ctx_dispatch(c));
    }
    EXPECT(s.updates >= 1);

    cm_mflowid m = cm_ctx_getmacroflow(c, f);
    EXPECT_OK(m);
    EXPECT_EQ(cm_ctx_getmacroflow(c, f2), m);
    cm_mflowid m2 = cm_ctx_setmacroflow(c, -1, f2);
    EXPECT(m2 >= 0 && m2 != m);
    EXPECT_EQ(cm_ctx_setmacroflow(c, m, f2), m);
    EXPECT_OK(cm_ctx_set_weight(c, f2, 2));
    EXPECT_OK(cm_ctx_set_controller(c, f2, "sqrt"));
    EXPECT_OK(cm_ctx_set_capacity(c, f2, 1000000));
    EXPECT_EQ(cm_ctx_set_controller(c, f2, "sqrt:beta=0"), -EINVAL);
    EXPECT_EQ(cm_ctx_set_controller(c, f2, NULL), -EFAULT);
    EXPECT_EQ(cm_ctx_set_controller(c, 987654, "aimd"), -ENOENT);
    EXPECT_OK(cm_ctx_set_capacity(c, f2, 0));
    EXPECT_OK(cm_ctx_set_controller(c, f2, "aimd"));

    cm_flowid fl[2] = {f, f2};
    int64_t ns[2] = {0, 0};
    struct cm_feedback fb[2] = {{.flow = f, .rtt = 0.004}, {.flow = f2}};
    struct cm_estimate est[2];
    EXPECT_OK(cm_ctx_register_send(c, NULL, NULL));
    EXPECT_OK(cm_ctx_bulk_request(c, fl, 2));
    EXPECT_OK(cm_ctx_dispatch(c)); /* no callback: declined */
    EXPECT_OK(cm_ctx_bulk_notify(c, fl, ns, 2));
    EXPECT_OK(cm_ctx_bulk_update(c, fb, 2));
    EXPECT_OK(cm_ctx_bulk_query(c, fl, 2, est));
    EXPECT(est[0].srtt > 0 && est[1].srtt > 0);
    EXPECT_EQ(cm_ctx_bulk_query(c, fl, 2, NULL), -EFAULT);

    /* buffered */
    int u = socket(AF_INET6, SOCK_DGRAM, 0);
    int rx = socket(AF_INET6, SOCK_DGRAM, 0);
    struct sockaddr_in6 a6;
    memset(&a6, 0, sizeof a6);
    a6.sin6_family = AF_INET6;
    a6.sin6_addr = in6addr_loopback;
    socklen_t al = sizeof a6;
    bind(rx, (struct sockaddr *)&a6, sizeof a6);
    getsockname(rx, (struct sockaddr *)&a6, &al);
    EXPECT_EQ(cm_ctx_open_buffered(c, u, (struct sockaddr *)&a6, sizeof a6 - 4), -EINVAL);
    cm_flowid fbuf = cm_ctx_open_buffered(c, u, (struct sockaddr *)&a6, sizeof a6);
    EXPECT_OK(fbuf);
    EXPECT_OK(cm_ctx_send(c, fbuf, "hello", 5));
    EXPECT_EQ(cm_ctx_send(c, fbuf, NULL, 5), -EFAULT);
    int got = 0;
    char rb[64];
    for (int i = 0; i < 200 && got < 5; i++) {
        EXPECT_OK(cm_ctx_wait(c, 5));
        EXPECT_OK(cm_ctx_dispatch(c));
        ssize_t n = recv(rx, rb, sizeof rb, MSG_DONTWAIT);
        if (n > 0) got += (int)n;
    }
    EXPECT_EQ(got, 5);
    close(u);
    close(rx);

    int fd = cm_ctx_fd(c);
    EXPECT(fd >= 0);
    EXPECT_EQ(cm_ctx_enable_sigio(c), daemon_mode ? 0 : -EOPNOTSUPP);
    EXPECT_EQ(cm_ctx_set_reply_timeout(c, 0), -EINVAL);
    EXPECT_EQ(cm_ctx_set_reply_timeout(c, -5), -EINVAL);
    EXPECT_OK(cm_ctx_set_reply_timeout(c, 2000));
    EXPECT_OK(cm_ctx_close(c, f2));
    EXPECT_EQ(cm_ctx_close(c, f2), -ENOENT);
    EXPECT_OK(cm_ctx_close(c, fbuf));

    /* freeing the context from inside its own callback is safe */
    s.free_in_callback = 1;
    s.sends = 0;
    EXPECT_OK(cm_ctx_register_send(c, ctx_send, &s));
    EXPECT_OK(cm_ctx_request(c, f));
    for (int i = 0; i < 200 && s.sends == 0; i++) {
        EXPECT_OK(cm_ctx_wait(c, 5));
        EXPECT_OK(cm_ctx_dispatch(c));
    }
    EXPECT_EQ(s.sends, 1); /* c is gone now */
}

static void strerror_checks(void) {
    EXPECT(strcmp(cm_strerror(0), "success") == 0);
    EXPECT(strstr(cm_strerror(-EFAULT), "NULL") != NULL);
    EXPECT(strstr(cm_strerror(EFAULT), "NULL") != NULL);
    EXPECT(strstr(cm_strerror(-ENOENT), "flow") != NULL);
    EXPECT(strstr(cm_strerror(-EOPNOTSUPP), "daemon") != NULL);
    EXPECT(cm_strerror(-ETIMEDOUT) != NULL && strlen(cm_strerror(-ETIMEDOUT)) > 0);
    EXPECT(cm_strerror(-ETIMEDOUT) == cm_strerror(-ETIMEDOUT)); /* static */
    EXPECT(cm_strerror(-123456789) != NULL);
    EXPECT(cm_strerror(-2147483647 - 1) != NULL);
}

/* ---- threads: the implicit context used from several threads at once,
 * while the main thread dispatches callbacks that call back in ---------- */

static atomic_int thread_sends;

static void thread_on_send(cm_flowid f) {
    atomic_fetch_add(&thread_sends, 1);
    /* the flow may have been closed by its thread meanwhile: no checks */
    cm_notify(f, 100);
    cm_update(f, 100, 100, CM_LOSS_NONE, 0.001);
}

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg;
    struct sockaddr_in d = v4("127.0.0.1", 2000 + id);
    for (int i = 0; i < 50; i++) {
        cm_flowid f = cm_open(NULL, (struct sockaddr *)&d);
        EXPECT_OK(f);
        EXPECT_OK(cm_request(f));
        double rate;
        EXPECT_OK(cm_query(f, &rate, NULL, NULL, NULL));
        EXPECT(cm_mtu(f) > 0);
        EXPECT_OK(cm_getmacroflow(f));
        EXPECT_OK(cm_close(f));
    }
    return NULL;
}

static void threads_section(void) {
    EXPECT_OK(cm_register_send(thread_on_send));
    struct sockaddr_in d = v4("127.0.0.1", 1999);
    cm_flowid f = cm_open(NULL, (struct sockaddr *)&d);
    EXPECT_OK(f);
    for (int i = 0; i < 100; i++) EXPECT_OK(cm_request(f));
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        EXPECT_OK(cm_wait(5));
        EXPECT_OK(cm_dispatch());
        clock_gettime(CLOCK_MONOTONIC, &t1);
    } while (atomic_load(&thread_sends) < 100 && t1.tv_sec - t0.tv_sec < 20);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    EXPECT(atomic_load(&thread_sends) >= 100);
    EXPECT_OK(cm_register_send(NULL));
    EXPECT_OK(cm_close(f));
    EXPECT_OK(cm_fini());
}

/* cm_select: the selection middleware's choice and reason, and its errors. */
static void select_checks(void) {
    char choice[128], reason[512];
    EXPECT_OK(cm_select("profile=datagram delay-ms=150 rate=64k behaviour=app-limited", choice,
                        sizeof choice, reason, sizeof reason));
    EXPECT(strcmp(choice, "transport=ccudp controller=tfrc:s=176 packet=160 queue=1p") == 0);
    EXPECT(strstr(reason, "CC-UDP with TFRC, 160-byte packets, queue 1") == reason);
    EXPECT_OK(cm_select("", choice, sizeof choice, NULL, 0));
    EXPECT(strcmp(choice, "transport=tcp queue=default") == 0);
    EXPECT_EQ(cm_select("reliability=prohibit preserve-order=prohibit "
                        "preserve-msg-boundaries=prohibit congestion-control=prohibit",
                        choice, sizeof choice, reason, sizeof reason),
              -ENOPROTOOPT);
    EXPECT(strstr(reason, "all Prohibited") != NULL);
    EXPECT_EQ(cm_select("reliability=maybe", choice, sizeof choice, reason, sizeof reason), -EINVAL);
    EXPECT(strstr(reason, "not a preference") != NULL);
    EXPECT_EQ(cm_select(NULL, choice, sizeof choice, reason, sizeof reason), -EFAULT);
    EXPECT_EQ(cm_select("profile=datagram", choice, 8, reason, sizeof reason), -ERANGE);
    EXPECT(strlen(choice) == 7);
}

int main(int argc, char **argv) {
    daemon_mode = argc > 1 && strcmp(argv[1], "daemon") == 0;
    const char *sock = getenv("CM_SOCKET");
    if (daemon_mode && !sock) {
        fprintf(stderr, "daemon mode needs CM_SOCKET\n");
        return 2;
    }
    strerror_checks();
    select_checks();
    implicit_context(sock);
    explicit_contexts(sock);
    threads_section();
    printf("api_test %s: %d checks, %d failures\n", daemon_mode ? "daemon" : "embedded", (int)checks,
           (int)failures);
    return failures == 0 ? 0 : 1;
}
