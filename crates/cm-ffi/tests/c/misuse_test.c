/*
 * The C API under misuse, as a programmer coming from the papers meets it:
 * each check is a problem found by a client written from the papers' API
 * text alone, and failed before its fix.
 *
 * Usage: misuse_test embedded | daemon   (daemon: $CM_SOCKET is the daemon;
 * with $CM_TEST_DAEMON_PID, also stops that daemon to check bounded waits)
 * Prints "misuse_test MODE: N checks, F failures" and a "bulk_query" line.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cm.h"
#include "expect.h"

static int checks, failures;
static int daemon_mode;


static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static cm_flowid open_to(int port) {
    struct sockaddr_in dst;
    memset(&dst, 0, sizeof dst);
    dst.sin_family = AF_INET;
    dst.sin_port = htons((unsigned short)port);
    inet_pton(AF_INET, "192.0.2.9", &dst.sin_addr);
    return cm_open(NULL, (const struct sockaddr *)&dst);
}

static long sends_for_closed, sends_other;
static cm_flowid closed_flow = -1;

static void on_send(cm_flowid flow) {
    if (flow == closed_flow) {
        sends_for_closed++;
    } else {
        sends_other++;
        cm_notify(flow, 0);
    }
}

/* Close a flow after cm_request and before dispatch: no callback may fire
 * for it (it used to fire once per byte of the grant, 1460 times per
 * request). */
static void grant_of_a_closed_flow(void) {
    EXPECT_EQ(cm_register_send(on_send), 0);
    closed_flow = open_to(7001);
    EXPECT(closed_flow >= 0);
    for (int i = 0; i < 3; i++) EXPECT_EQ(cm_request(closed_flow), 0);
    if (daemon_mode) usleep(50000); /* let the grants reach this process */
    EXPECT_EQ(cm_close(closed_flow), 0);
    for (int i = 0; i < 10; i++) {
        EXPECT(cm_dispatch() >= 0);
        cm_wait(10);
    }
    EXPECT_EQ(sends_for_closed, 0);
    /* The context still works for other flows. */
    cm_flowid g = open_to(7002);
    EXPECT(g >= 0);
    EXPECT_EQ(cm_request(g), 0);
    for (int i = 0; i < 100 && sends_other == 0; i++) {
        cm_wait(10);
        cm_dispatch();
    }
    EXPECT(sends_other > 0);
    EXPECT_EQ(cm_close(g), 0);
    EXPECT_EQ(cm_register_send(NULL), 0);
}

/* Every argument is refused alike in both modes, at the call. */
static void same_checks_in_both_modes(void) {
    cm_flowid f = open_to(7003);
    EXPECT(f >= 0);
    EXPECT_EQ(cm_request_mtus(f, CM_MAX_REQUEST_MTUS + 1), -EINVAL);
    EXPECT_EQ(cm_request_mtus(f, 0), -EINVAL);
    EXPECT_EQ(cm_request_mtus(f, CM_MAX_REQUEST_MTUS), 0);
    EXPECT_EQ(cm_set_weight(f, 0), -EINVAL);
    EXPECT_EQ(cm_set_weight(f, 65536), -EINVAL);
    EXPECT_EQ(cm_update(f, 100, 100, CM_LOSS_NONE, 1e9), -EINVAL);
    EXPECT_EQ(cm_update(f, 100, 100, CM_LOSS_NONE, CM_MAX_RTT_SAMPLE), 0);
    EXPECT_EQ(cm_close(f), 0);
    EXPECT_EQ(cm_request(f), -ENOENT);
    EXPECT_EQ(cm_notify(f, 10), -ENOENT);
    EXPECT_EQ(cm_update(f, 10, 10, CM_LOSS_NONE, 0.01), -ENOENT);
    EXPECT_EQ(cm_set_weight(f, 2), -ENOENT);
    EXPECT_EQ(cm_close(f), -ENOENT);
    EXPECT_EQ(cm_request(4294967296LL), -ENOENT);
}

/* cm_bulk_query is linear in the count: a million ids take about as long
 * per id as ten thousand (it was quadratic through the daemon: 400k ids
 * took 23 s and a million did not finish in 120 s). */
static void bulk_query_is_linear(void) {
    enum { FLOWS = 100, SMALL = 10000, BIG = 1000000 };
    cm_flowid flows[FLOWS];
    for (int i = 0; i < FLOWS; i++) flows[i] = open_to(7100 + i);
    cm_flowid *ids = malloc(sizeof *ids * BIG);
    struct cm_estimate *out = malloc(sizeof *out * BIG);
    if (!ids || !out) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    for (int i = 0; i < BIG; i++) ids[i] = flows[i % FLOWS];
    double t0 = now_s();
    EXPECT_EQ(cm_bulk_query(ids, SMALL, out), 0);
    double small = now_s() - t0;
    t0 = now_s();
    EXPECT_EQ(cm_bulk_query(ids, BIG, out), 0);
    double big = now_s() - t0;
    EXPECT(out[BIG - 1].srtt == -1 || out[BIG - 1].srtt > 0);
    printf("bulk_query %s: %d ids %.4f s, %d ids %.3f s\n", daemon_mode ? "daemon" : "embedded",
           SMALL, small, BIG, big);
    /* Linear: 100x the ids in well under 100x * 10 the time (quadratic
     * would be 10,000x); and a million in seconds, not minutes. */
    EXPECT(big < 10.0);
    EXPECT(big < 1000 * small + 0.5);
    for (int i = 0; i < FLOWS; i++) cm_close(flows[i]);
    free(ids);
    free(out);
}

/* With SIGIO at its default action (which ends the process),
 * cm_enable_sigio refuses instead of arming a signal that would kill. */
static volatile sig_atomic_t sigios;
static void on_sigio(int sig) {
    (void)sig;
    sigios++;
}
static void sigio_without_a_handler(void) {
    signal(SIGIO, SIG_DFL);
    EXPECT_EQ(cm_enable_sigio(), daemon_mode ? -EINVAL : -EOPNOTSUPP);
    signal(SIGIO, on_sigio);
    EXPECT_EQ(cm_enable_sigio(), daemon_mode ? 0 : -EOPNOTSUPP);
}

/* A daemon that is alive but stopped: calls that wait for it return
 * -ETIMEDOUT after the reply timeout instead of blocking forever, and work
 * again once it runs. */
static void stopped_daemon(pid_t pid) {
    cm_flowid f = open_to(7004);
    EXPECT(f >= 0);
    int mtu = cm_mtu(f); /* asked once, then known without asking */
    EXPECT(mtu > 0);
    EXPECT_EQ(cm_set_reply_timeout(300), 0);
    EXPECT_EQ(kill(pid, SIGSTOP), 0);
    double rate;
    double t0 = now_s();
    EXPECT_EQ(cm_query(f, &rate, NULL, NULL, NULL), -ETIMEDOUT);
    double waited = now_s() - t0;
    printf("stopped daemon: cm_query returned after %.3f s\n", waited);
    EXPECT(waited >= 0.29 && waited < 2.0);
    t0 = now_s();
    EXPECT_EQ(open_to(7005), -ETIMEDOUT);
    EXPECT_EQ(cm_mtu(f), mtu);
    EXPECT(now_s() - t0 < 2.0);
    EXPECT_EQ(kill(pid, SIGCONT), 0);
    EXPECT_EQ(cm_query(f, &rate, NULL, NULL, NULL), 0);
    EXPECT_EQ(cm_set_reply_timeout(5000), 0);
    EXPECT_EQ(cm_close(f), 0);
}

int main(int argc, char **argv) {
    daemon_mode = argc > 1 && strcmp(argv[1], "daemon") == 0;
    if (daemon_mode) {
        EXPECT_EQ(cm_init_daemon(NULL), 0);
    } else {
        EXPECT_EQ(cm_init_embedded(), 0);
    }
    grant_of_a_closed_flow();
    same_checks_in_both_modes();
    bulk_query_is_linear();
    sigio_without_a_handler();
    const char *pid = getenv("CM_TEST_DAEMON_PID");
    if (daemon_mode && pid) stopped_daemon((pid_t)atoi(pid));
    EXPECT_EQ(cm_fini(), 0);
    printf("misuse_test %s: %d checks, %d failures\n", daemon_mode ? "daemon" : "embedded", checks,
           failures);
    return failures ? 1 : 0;
}
