/*
 * cm_compat.h -- the papers' spellings of the CM API, on top of cm.h.
 *
 * C code written from the papers (sigcomm1999 section 3, Fig. "Control";
 * cm-implementation-linux section 2.1) or from RFC 3124 section 4 compiles
 * against this header as written:
 *
 *   cmid_t                     the papers' flow id type (64 bits here, as
 *                              cm_flowid: an int would truncate it)
 *   CM_PERSISTENT              persistent congestion, e.g. a TCP timeout
 *                              (RFC 3124: CM_NO_FEEDBACK)
 *   CM_TRANSIENT               transient congestion, one loss in a window
 *                              (RFC 3124: CM_LOSS_FEEDBACK)
 *   CM_ECN                     an ECN mark (RFC 3124: CM_EXPLICIT_CONGESTION)
 *   cm_query(id, &rate, &srtt)              the papers' query
 *   cm_query(id, &rate, &srtt, &rttdev)     RFC 3124's query
 *   cm_query(id, &rate, &srtt, &rttvar, &loss)  cm.h's query
 *
 * The query forms are chosen by argument count (a macro over cm.h's
 * cm_query); each returns cm.h's codes. Without this header, cm.h alone
 * has cm.h's names; CM_LOST_FEEDBACK, a near miss of both, stops the
 * compilation with the right names in the message.
 */
#ifndef CM_COMPAT_H
#define CM_COMPAT_H

#include "cm.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The papers' flow id. */
typedef cm_flowid cmid_t;

#define CM_PERSISTENT CM_NO_FEEDBACK
#define CM_TRANSIENT CM_LOSS_FEEDBACK
#define CM_ECN CM_EXPLICIT_CONGESTION

/** The papers' query: the flow's rate (bytes/s) and smoothed RTT (s). */
static inline int cm_query_rate_srtt(cmid_t id, double *rate, double *srtt) {
    return cm_query(id, rate, srtt, NULL, NULL);
}

/** RFC 3124's query: rate, smoothed RTT and its deviation. */
static inline int cm_query_rfc3124(cmid_t id, double *rate, double *srtt, double *rttdev) {
    return cm_query(id, rate, srtt, rttdev, NULL);
}

/* cm_query with 3, 4 or 5 arguments. The name inside the expansion is not
 * expanded again, so the 5-argument form is cm.h's function itself. */
#define CM_COMPAT_PICK_(a1, a2, a3, a4, a5, name, ...) name
#define cm_query(...)                                                               \
    CM_COMPAT_PICK_(__VA_ARGS__, cm_query, cm_query_rfc3124, cm_query_rate_srtt, \
                    cm_query_needs_a_flow_and_two_outputs, )                        \
    (__VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif /* CM_COMPAT_H */
