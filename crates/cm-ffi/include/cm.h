/*
 * cm.h -- the Congestion Manager's C API (libcm.so / libcm.a).
 *
 * The calls of the papers, with their names and argument order:
 * cm-implementation-linux (Andersen et al., 2000) section 2.1 and the
 * "The CM API" slides:
 *
 *     flow = cm_open(src, dst)          cm_mtu(flow)        cm_close(flow)
 *     cm_request(flow)                  -> cmapp_send(flow) callback
 *     cm_notify(flow, nsent)            cm_update(flow, nsent, nrecd, lossmode, rtt)
 *     cm_register_send(fn)              cm_register_update(fn)
 *     cm_thresh(down, up)               cm_query(flow, ...)
 *     cm_getmacroflow / cm_setmacroflow cm_bulk_request/notify/update/query
 *
 * so C code written from the papers compiles against this header. Modern
 * additions come on top: an explicit context (cm_ctx_*), negative
 * errno-style error codes and cm_strerror(), k-MTU requests, per-flow
 * thresholds, the event-loop calls (cm_dispatch, cm_wait, cm_fd,
 * cm_enable_sigio) that the papers' libcm hid behind its control socket.
 *
 * ---------------------------------------------------------------------------
 * CONTEXT. The papers' calls act on one implicit per-process context. It is
 * created by the first call with the host's CM daemon if its socket exists
 * ($CM_SOCKET, else $XDG_RUNTIME_DIR/cm.sock, else /run/cm.sock) and an
 * in-process ("embedded") CM otherwise; a socket file with no daemon behind
 * it (one that crashed or is restarting) gives an embedded CM standing in
 * (cm_status() == CM_STATUS_FALLBACK) that joins the daemon once it
 * listens (FAILOVER below). cm_init_embedded() and
 * cm_init_daemon(path) choose explicitly, before any other call (else
 * -EALREADY); cm_fini() drops the context and its flows. Programs that want
 * several contexts, or no hidden state, use cm_ctx_new*() and the cm_ctx_*
 * calls, which take the context first and pass it (and a user pointer) to
 * their callbacks. All calls are thread-safe.
 *
 * ERRORS. Every call returns >= 0 on success (0, a count, an id, an MTU or a
 * descriptor) and a negative errno value on failure: -EFAULT for a NULL
 * pointer that is required, -EINVAL for a bad argument (negative flow id,
 * negative byte count, nrecd > nsent, bad threshold, unknown lossmode),
 * -ENOENT for an unknown flow or macroflow, -EAFNOSUPPORT for an address
 * that is neither AF_INET nor AF_INET6, -EAGAIN when a cm_send queue is
 * full (or the daemon rate-limits the caller), -EMSGSIZE for a datagram
 * larger than the MTU, -EOPNOTSUPP for SIGIO in embedded mode,
 * -ECONNREFUSED when no daemon listens, -EPIPE when the daemon went away,
 * -ETIMEDOUT when the daemon is there but does not answer (stopped or
 * hung) within the reply timeout (cm_set_reply_timeout, default 5000 ms),
 * -EPERM when the daemon refuses, -ENOTRECOVERABLE for an internal
 * error (a Rust panic is caught and never crosses into C). cm_strerror()
 * describes any code. Both modes check arguments alike and at the call:
 * an unknown or closed flow is -ENOENT for every call in daemon mode too
 * (not only later), and so are the limits (k <= CM_MAX_REQUEST_MTUS,
 * weight 1..65535, 0 < rtt <= CM_MAX_RTT_SAMPLE seconds).
 *
 * WAITING. Calls that need the daemon's answer (cm_open, cm_mtu, cm_query,
 * the macroflow calls, cm_bulk_query, cm_set_controller, and connecting)
 * wait for it at most the reply timeout, then return -ETIMEDOUT; a reply
 * that comes later is dropped (a flow opened that late stays the daemon's
 * until this process disconnects). No other call blocks, except cm_wait
 * for as long as it is asked to.
 *
 * CALLBACKS. cm_dispatch() calls the registered functions, one event at a
 * time, with no lock held: a callback may call any cm_* function, e.g.
 * cm_notify and cm_request from cmapp_send (cm-implementation-linux 3.5),
 * and even cm_dispatch. Events that callbacks cause are delivered by the
 * next cm_dispatch. A grant that arrives while no send callback is
 * registered is declined (as cm_notify(flow, 0) would). Calls made from
 * callbacks are sent to the daemon in one batch at the end of cm_dispatch.
 *
 * DEVIATIONS FROM THE PAPERS (and from RFC 3124):
 *  1. Return values: every call returns int / int64_t codes as above (the
 *     papers give most calls no result). cm_flowid is a signed 64-bit id.
 *  2. cm_open(src, dst): src may be NULL. The papers pass a struct sockaddr
 *     without a length; cm_open reads sa_family and then a whole sockaddr_in
 *     (AF_INET) or sockaddr_in6 (AF_INET6), so the caller must pass one of
 *     those structures (or a sockaddr_storage). cm_ctx_open takes explicit
 *     lengths and checks them (-EINVAL if too short).
 *  3. cmapp_send(flow): as in the papers, the flow id only; the grant is for
 *     up to one MTU (k MTUs after cm_request_mtus(flow, k)). The cm_ctx
 *     variant also passes the bytes granted.
 *  4. cmapp_update: the papers name "rate, round-trip time, and packet loss
 *     rate" (RFC 3124: newrate, newrtt, newrttdev); ours is
 *     void (*)(cm_flowid flow, double rate, double srtt, double rttvar,
 *              double loss)
 *     with rate in bytes/second, srtt and rttvar in seconds, loss a fraction
 *     0..1, and -1 for any value not yet estimated. Registering a non-NULL
 *     update callback subscribes every flow of the context (present and
 *     future) to rate updates, and reports each flow's current estimate at
 *     once; registering NULL unsubscribes them.
 *  5. cm_thresh(down, up) is per context, as in the papers (no flow
 *     argument): an update is reported when a flow's rate falls to 1/down
 *     or rises to up times the last reported rate (both factors >= 1). The
 *     RTT factors stay at their defaults (1.5). It applies to every flow of
 *     the context, present and future. cm_thresh_flow() sets RFC 3124's
 *     four factors (rate down/up, RTT down/up) on one flow.
 *  6. cm_update(flow, nsent, nrecd, lossmode, rtt): the papers' order
 *     (nsent, nrecd), in BYTES (the papers say packets in the text, bytes in
 *     cm_notify); RFC 3124 4.2 is inconsistent ((nrecd, nlost) in one
 *     place). nsent bytes were resolved, nrecd of them arrived. rtt is a
 *     sample in seconds; rtt <= 0 means "no sample". lossmode is one of the
 *     CM_* constants below (RFC 3124 names, plus CM_LOSS_NONE).
 *  7. cm_query(flow, &rate, &srtt, &rttvar, &loss): the values are signed
 *     doubles, -1 meaning "no estimate yet" (RFC 3124's unsigned results
 *     could not say so). Units as in (4). Any output pointer may be NULL.
 *  8. cm_setmacroflow(mflow, flow): RFC 3124's argument order (the papers
 *     give none); mflow < 0 moves the flow into a new macroflow of its own.
 *     Returns the flow's macroflow id.
 *  9. Buffered send (paper: cm_open + setsockopt(fd, ..., CM_BUF)): there
 *     is no kernel CM here, so cm_open_buffered(udp_fd, dst) binds a UDP
 *     socket to a new flow. libcm sends on a duplicate of udp_fd (the
 *     application keeps its own descriptor, reads acknowledgements from it
 *     and closes it); cm_send(flow, buf, len) queues one datagram (at most
 *     one MTU) that leaves as the CM grants the flow, during cm_dispatch or
 *     any later call. The application still reports feedback with
 *     cm_update.
 * 10. The bulk calls (cm-implementation-linux section 5 names them only)
 *     take arrays and a count; they stop at the first failing element.
 * 11. Event loop (the papers' libcm select()s a control socket internally):
 *     cm_fd() is a descriptor to add to the application's select/poll/epoll
 *     set (readable when cm_dispatch has work); cm_wait(ms) blocks until an
 *     event may be ready; cm_enable_sigio() asks for SIGIO when the daemon
 *     sends something (cm-implementation-linux 2.2.1). Call cm_dispatch()
 *     after any of them. SIGIO is daemon mode only: in embedded mode
 *     cm_enable_sigio() returns -EOPNOTSUPP (nothing outside the process
 *     would raise it). A call that waits for the daemon's reply (cm_open,
 *     cm_mtu, cm_query, cm_getmacroflow, cm_setmacroflow, cm_bulk_query,
 *     cm_set_controller)
 *     may read grants on the way: cm_fd() still shows them (over the
 *     shared-memory rings, the default; with CM_TRANSPORT=socket call
 *     cm_fd() again before sleeping after such calls), SIGIO does not, so
 *     a SIGIO-driven program calls cm_dispatch() after such calls. Taken
 *     once and kept in the set, cm_fd() is quiet again once cm_dispatch()
 *     took what was waiting.
 * 12. Transport: in daemon mode, calls, grants and replies travel through
 *     two shared-memory rings mapped by the daemon and the process (a
 *     sealed memfd, eventfd doorbells rung only for a side that sleeps),
 *     not through the control socket, which keeps the peer's identity and
 *     the hang-up; cm_fd() is then an epoll set of the doorbell and the
 *     socket, and cm_enable_sigio() asks the daemon to nudge the socket.
 *     CM_TRANSPORT=socket in the environment keeps every frame on the
 *     socket, as the papers' libcm did.
 * 13. Controllers (modern addition; the papers' CM runs AIMD on every
 *     macroflow). cm_set_controller(flow, spec) runs another congestion
 *     controller on the flow's macroflow, i.e. for every flow in it, from
 *     now on; the daemon's default for new macroflows is its configuration
 *     (cmd.toml "controller", default "aimd"). spec is NAME[:KEY=VALUE,...]:
 *     "aimd", "iiad", "sqrt", "binomial:k=1,l=0" (binomial schemes,
 *     rate-based unless mode=window), "iscc:l=2" (ISCC); the grammar is in
 *     docs/api.md "Choosing the controller". A spec that does not parse,
 *     or is not UTF-8, is -EINVAL. cm_set_capacity(flow, bits_per_sec)
 *     gives the macroflow's controller the bottleneck capacity of the path
 *     (ISCC needs it; until it has one it runs AIMD), as the application or
 *     its receiver estimates it; 0 forgets it. It is rounded down to whole
 *     bytes per second. `cm stat` shows both per macroflow.
 *
 * FAILOVER. When the daemon exits, crashes or restarts, a daemon-mode
 * context notices at its next call (a sleeper in cm_wait or on cm_fd() is
 * woken by the hang-up) and moves every flow to an embedded CM in the
 * process, each macroflow resuming from the window the daemon last
 * reported (refreshed once a second), never unlimited; flows that waited
 * for a grant ask again. Flow ids stay valid; macroflow ids become the
 * embedded CM's. It tries to reconnect every 50 ms, doubling to 1 s, and
 * moves the flows back when a daemon listens. cm_status() tells which CM
 * runs; cm_fd() stays the same descriptor throughout. cm_set_failover(0)
 * keeps the error instead (-EPIPE from every call).
 *
 * PAPERS' NAMES. cm_compat.h adds the papers' spellings on top of this
 * header: the cmid_t type, CM_PERSISTENT / CM_TRANSIENT / CM_ECN loss
 * modes, and cm_query with the papers' and RFC 3124's shorter argument
 * lists. A flow id is 64 bits wide (cm_flowid): storing one in an int
 * truncates it once the daemon has reused flow slots.
 *
 * Build: cc prog.c $(pkg-config --cflags --libs cm)
 */
#ifndef CM_H
#define CM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A flow id (>= 0); calls returning one return a negative code on error. */
typedef int64_t cm_flowid;
/** A macroflow id (>= 0), or a negative code. */
typedef int64_t cm_mflowid;

/** An explicit CM context (opaque). */
typedef struct cm_ctx cm_ctx;

/** What the CM knows about a flow's path; -1 = no estimate yet. */
struct cm_estimate {
    double rate;   /**< the flow's share of the macroflow rate, bytes/s */
    double srtt;   /**< smoothed RTT, seconds */
    double rttvar; /**< RTT variation, seconds */
    double loss;   /**< recent fraction of bytes lost, 0..1 */
};

/** One report for cm_bulk_update (the arguments of cm_update). */
struct cm_feedback {
    cm_flowid flow;
    int64_t nsent;   /**< bytes whose fate is reported */
    int64_t nrecd;   /**< bytes of those received (<= nsent) */
    int lossmode;    /**< CM_LOSS_NONE, CM_LOSS_FEEDBACK, ... */
    double rtt;      /**< RTT sample in seconds; <= 0: none */
};

/* Loss modes for cm_update (RFC 3124 4.2 names). */
#define CM_LOSS_NONE 0           /**< no loss */
#define CM_LOSS_FEEDBACK 1       /**< transient congestion (e.g. dup ACKs) */
#define CM_NO_FEEDBACK 2         /**< persistent congestion (e.g. timeout) */
#define CM_EXPLICIT_CONGESTION 3 /**< an ECN mark */
#define CM_NO_CONGESTION 4       /**< losses not caused by congestion */

/* Names that are not loss modes, with the right ones in the error. */
#define CM_LOST_FEEDBACK _Pragma("GCC error \"CM_LOST_FEEDBACK is not a loss mode: a timeout (persistent congestion) is CM_NO_FEEDBACK, a lost packet (transient) is CM_LOSS_FEEDBACK (cm_compat.h: CM_PERSISTENT, CM_TRANSIENT)\"") 0

/** The most MTUs one cm_request_mtus may ask for (-EINVAL above). */
#define CM_MAX_REQUEST_MTUS 64
/** The longest RTT sample cm_update accepts, in seconds (-EINVAL above). */
#define CM_MAX_RTT_SAMPLE 60.0

/* cm_status() / cm_ctx_status() results. */
#define CM_STATUS_EMBEDDED 1 /**< an embedded CM, by choice */
#define CM_STATUS_DAEMON 2   /**< the host's daemon */
#define CM_STATUS_FALLBACK 3 /**< embedded, standing in for a daemon that went away */

/* cm_mode() / cm_ctx_mode() results. */
#define CM_MODE_EMBEDDED 1 /**< the CM runs inside this process */
#define CM_MODE_DAEMON 2   /**< the CM is the host's daemon (cmd) */

/** The papers' cmapp_send: the flow may send up to one MTU now. */
typedef void (*cm_send_fn)(cm_flowid flow);
/** The papers' cmapp_update (see deviation 4 for the arguments). */
typedef void (*cm_update_fn)(cm_flowid flow, double rate, double srtt, double rttvar, double loss);
/** cmapp_send of an explicit context: also the bytes granted and user data. */
typedef void (*cm_ctx_send_fn)(cm_ctx *ctx, cm_flowid flow, uint64_t bytes, void *arg);
/** cmapp_update of an explicit context. */
typedef void (*cm_ctx_update_fn)(cm_ctx *ctx, cm_flowid flow, const struct cm_estimate *est, void *arg);

/* ---- the implicit context ------------------------------------------------ */

/** Use an in-process CM (before any other call; else -EALREADY). */
int cm_init_embedded(void);
/** Use the daemon at path (NULL: the default path); -ECONNREFUSED if none. */
int cm_init_daemon(const char *path);
/** Drop the implicit context and its flows; the next call makes a new one. */
int cm_fini(void);
/** CM_MODE_EMBEDDED or CM_MODE_DAEMON: the CM in use now. */
int cm_mode(void);
/** CM_STATUS_DAEMON, CM_STATUS_FALLBACK or CM_STATUS_EMBEDDED (FAILOVER). */
int cm_status(void);
/** on != 0 (default): move to an embedded CM when the daemon goes away;
 *  0: every call fails with -EPIPE instead (FAILOVER). */
int cm_set_failover(int on);

/* ---- the papers' calls --------------------------------------------------- */

/** A new flow from src (may be NULL) to dst (deviation 2). */
cm_flowid cm_open(const struct sockaddr *src, const struct sockaddr *dst);
/** The flow's MTU in bytes (the most one grant allows). */
int cm_mtu(cm_flowid flow);
/** Ask to send up to one MTU; cmapp_send(flow) follows from cm_dispatch. */
int cm_request(cm_flowid flow);
/** Ask to send up to k MTUs in one grant, 1 <= k <= CM_MAX_REQUEST_MTUS
 *  (modern addition). */
int cm_request_mtus(cm_flowid flow, int k);
/** Set the send callback (NULL removes it). */
int cm_register_send(cm_send_fn cmapp_send);
/** Set the rate-update callback (NULL removes it; deviation 4). */
int cm_register_update(cm_update_fn cmapp_update);
/** Context-wide rate thresholds for update callbacks (deviation 5). */
int cm_thresh(double down, double up);
/** One flow's thresholds: rate and RTT factors, each >= 1 (modern addition). */
int cm_thresh_flow(cm_flowid flow, double rate_down, double rate_up, double rtt_down, double rtt_up);
/** nsent bytes were sent on the flow; 0 declines the grant. */
int cm_notify(cm_flowid flow, int64_t nsent);
/** Feedback: nsent bytes resolved, nrecd arrived (deviation 6). */
int cm_update(cm_flowid flow, int64_t nsent, int64_t nrecd, int lossmode, double rtt);
/** The flow's estimates; -1 = none yet; NULL outputs skipped (deviation 7). */
int cm_query(cm_flowid flow, double *rate, double *srtt, double *rttvar, double *loss);
/** The flow ends; its share goes to the other flows of its macroflow. */
int cm_close(cm_flowid flow);
/** The flow's macroflow. */
cm_mflowid cm_getmacroflow(cm_flowid flow);
/** Move the flow into mflow (< 0: a new macroflow); deviation 8. */
cm_mflowid cm_setmacroflow(cm_mflowid mflow, cm_flowid flow);
/** The flow's scheduler weight within its macroflow, 1..65535 (modern). */
int cm_set_weight(cm_flowid flow, int weight);
/** Run the controller spec, e.g. "iscc:l=2", on the flow's macroflow;
 *  -EINVAL if it does not parse (deviation 13). */
int cm_set_controller(cm_flowid flow, const char *spec);
/** The bottleneck capacity of the flow's path in bit/s for its
 *  macroflow's controller (ISCC); 0 forgets it (deviation 13). */
int cm_set_capacity(cm_flowid flow, uint64_t bits_per_sec);

/** One cm_request for each of n flows. */
int cm_bulk_request(const cm_flowid *flows, size_t n);
/** cm_notify(flows[i], nsent[i]) for i < n. */
int cm_bulk_notify(const cm_flowid *flows, const int64_t *nsent, size_t n);
/** cm_update for each of n reports. */
int cm_bulk_update(const struct cm_feedback *fb, size_t n);
/** cm_query for each of n flows into out[0..n). */
int cm_bulk_query(const cm_flowid *flows, size_t n, struct cm_estimate *out);

/** A buffered flow sending on (a duplicate of) udp_fd to dst (deviation 9). */
cm_flowid cm_open_buffered(int udp_fd, const struct sockaddr *dst);
/** Queue one datagram (<= MTU) on a buffered flow; -EAGAIN if the queue is full. */
int cm_send(cm_flowid flow, const void *buf, size_t len);

/* ---- the event loop (deviation 11) --------------------------------------- */

/** Deliver ready events to the callbacks; returns how many were delivered. */
int cm_dispatch(void);
/** Block until an event may be ready, at most timeout_ms (< 0: no limit in
 *  daemon mode; embedded: until the CM's next timer). */
int cm_wait(int timeout_ms);
/** A descriptor readable when cm_dispatch has work (valid until cm_fini). */
int cm_fd(void);
/** SIGIO when the daemon has something for this process (daemon mode; else
 *  -EOPNOTSUPP). Install a SIGIO handler (or SIG_IGN) first: with SIGIO at
 *  its default action, which ends the process, this returns -EINVAL. */
int cm_enable_sigio(void);
/** Daemon mode: the longest wait for a reply, in ms (> 0; default 5000);
 *  calls that wait longer return -ETIMEDOUT. No effect in embedded mode. */
int cm_set_reply_timeout(int ms);

/** A static description of an error code (negative or positive). */
const char *cm_strerror(int code);

/* ---- transport selection (modern addition; docs/select.md) -------------- */

/** Pick a transport for the requirements, cm-select's text form of
 *  whitespace-separated key=value tokens, e.g. "profile=datagram
 *  delay-ms=150 rate=64k behaviour=app-limited" (TAPS properties,
 *  RFC 9622 6.2, and the transport-selection paper's behaviour, 4.1).
 *  Writes the choice's summary ("transport=ccudp controller=tfrc:s=176
 *  packet=160 queue=1p") into choice and its one-line reason into reason,
 *  NUL-terminated, truncated to choice_len / reason_len (NULL skips one).
 *  Returns 0; -EINVAL for text that does not parse and -ENOPROTOOPT when no
 *  transport fits (contradictory or impossible requirements), with why in
 *  reason; -ERANGE when a result was truncated; -EFAULT for NULL
 *  requirements. Needs no context and touches none. */
int cm_select(const char *requirements, char *choice, size_t choice_len, char *reason, size_t reason_len);

/* ---- explicit contexts (modern addition) --------------------------------- */

/** A new context (daemon if running, else embedded) into *out. */
int cm_ctx_new(cm_ctx **out);
/** A new context with an in-process CM. */
int cm_ctx_new_embedded(cm_ctx **out);
/** A new context on the daemon at path (NULL: the default path). */
int cm_ctx_connect(const char *path, cm_ctx **out);
/** Free a context and its flows (NULL ignored). Safe inside its callbacks. */
void cm_ctx_free(cm_ctx *ctx);
/** CM_MODE_EMBEDDED or CM_MODE_DAEMON. */
int cm_ctx_mode(cm_ctx *ctx);
int cm_ctx_status(cm_ctx *ctx);
int cm_ctx_set_failover(cm_ctx *ctx, int on);

/** cm_open with explicit address lengths (checked). */
cm_flowid cm_ctx_open(cm_ctx *ctx, const struct sockaddr *src, socklen_t srclen, const struct sockaddr *dst, socklen_t dstlen);
int cm_ctx_mtu(cm_ctx *ctx, cm_flowid flow);
int cm_ctx_request(cm_ctx *ctx, cm_flowid flow);
int cm_ctx_request_mtus(cm_ctx *ctx, cm_flowid flow, int k);
/** Send callback with the bytes granted and arg passed back. */
int cm_ctx_register_send(cm_ctx *ctx, cm_ctx_send_fn cmapp_send, void *arg);
/** Update callback with the estimate and arg passed back. */
int cm_ctx_register_update(cm_ctx *ctx, cm_ctx_update_fn cmapp_update, void *arg);
int cm_ctx_thresh(cm_ctx *ctx, double down, double up);
int cm_ctx_thresh_flow(cm_ctx *ctx, cm_flowid flow, double rate_down, double rate_up, double rtt_down, double rtt_up);
int cm_ctx_notify(cm_ctx *ctx, cm_flowid flow, int64_t nsent);
int cm_ctx_update(cm_ctx *ctx, cm_flowid flow, int64_t nsent, int64_t nrecd, int lossmode, double rtt);
/** The flow's estimates into *out (required). */
int cm_ctx_query(cm_ctx *ctx, cm_flowid flow, struct cm_estimate *out);
int cm_ctx_close(cm_ctx *ctx, cm_flowid flow);
cm_mflowid cm_ctx_getmacroflow(cm_ctx *ctx, cm_flowid flow);
cm_mflowid cm_ctx_setmacroflow(cm_ctx *ctx, cm_mflowid mflow, cm_flowid flow);
int cm_ctx_set_weight(cm_ctx *ctx, cm_flowid flow, int weight);
int cm_ctx_set_controller(cm_ctx *ctx, cm_flowid flow, const char *spec);
int cm_ctx_set_capacity(cm_ctx *ctx, cm_flowid flow, uint64_t bits_per_sec);
int cm_ctx_bulk_request(cm_ctx *ctx, const cm_flowid *flows, size_t n);
int cm_ctx_bulk_notify(cm_ctx *ctx, const cm_flowid *flows, const int64_t *nsent, size_t n);
int cm_ctx_bulk_update(cm_ctx *ctx, const struct cm_feedback *fb, size_t n);
int cm_ctx_bulk_query(cm_ctx *ctx, const cm_flowid *flows, size_t n, struct cm_estimate *out);
/** cm_open_buffered with an explicit (checked) address length. */
cm_flowid cm_ctx_open_buffered(cm_ctx *ctx, int udp_fd, const struct sockaddr *dst, socklen_t dstlen);
int cm_ctx_send(cm_ctx *ctx, cm_flowid flow, const void *buf, size_t len);
int cm_ctx_dispatch(cm_ctx *ctx);
int cm_ctx_wait(cm_ctx *ctx, int timeout_ms);
int cm_ctx_fd(cm_ctx *ctx);
int cm_ctx_enable_sigio(cm_ctx *ctx);
int cm_ctx_set_reply_timeout(cm_ctx *ctx, int ms);

#ifdef __cplusplus
}
#endif

#endif /* CM_H */
