/*
 * Code as the papers write it, through cm_compat.h: cmid_t ids, the
 * papers' loss-mode names and the short query forms.
 * Usage: compat_test embedded | daemon
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "cm_compat.h"
#include "expect.h"

static int checks, failures;

int main(int argc, char **argv) {
    int daemon = argc > 1 && strcmp(argv[1], "daemon") == 0;
    EXPECT((daemon ? cm_init_daemon(NULL) : cm_init_embedded()) == 0);
    struct sockaddr_in dst;
    memset(&dst, 0, sizeof dst);
    dst.sin_family = AF_INET;
    dst.sin_port = htons(9);
    inet_pton(AF_INET, "192.0.2.10", &dst.sin_addr);
    cmid_t id = cm_open(NULL, (struct sockaddr *)&dst);
    EXPECT(id >= 0);
    EXPECT(sizeof(cmid_t) == 8);
    EXPECT(cm_update(id, 1460, 1460, CM_LOSS_NONE, 0.05) == 0);
    EXPECT(cm_update(id, 1460, 0, CM_TRANSIENT, 0.05) == 0);
    EXPECT(cm_update(id, 1460, 0, CM_PERSISTENT, -1) == 0);
    EXPECT(cm_update(id, 1460, 1460, CM_ECN, 0.05) == 0);
    double rate = 0, srtt = 0, rttdev = 0, loss = 0;
    EXPECT(cm_query(id, &rate, &srtt) == 0);
    EXPECT(srtt > 0.04 && srtt < 0.06);
    EXPECT(cm_query(id, &rate, &srtt, &rttdev) == 0);
    EXPECT(rttdev >= 0);
    EXPECT(cm_query(id, &rate, &srtt, &rttdev, &loss) == 0);
    EXPECT(loss > 0);
    EXPECT(cm_close(id) == 0);
    EXPECT(cm_query(id, &rate, &srtt) < 0);
    cm_fini();
    printf("compat_test %s: %d checks, %d failures\n", daemon ? "daemon" : "embedded", checks,
           failures);
    return failures ? 1 : 0;
}
