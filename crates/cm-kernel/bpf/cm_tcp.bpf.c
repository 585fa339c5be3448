// SPDX-License-Identifier: GPL-2.0
/*
 * cm: a Linux TCP congestion control backed by the Congestion Manager.
 *
 * Each connection that selects "cm" is reported to the CM daemon (cmd)
 * through the ring buffer `events`: when it starts, about four times per
 * smoothed RTT while it is acknowledged, when it enters fast recovery, CWR
 * or loss (RTO), and when it ends. The daemon feeds these to the macroflow
 * of the connection's destination host and writes the connection's share
 * of the macroflow's window into `allow`, which cong_avoid applies.
 *
 * Fallback: an allowance older than CM_STALE_NS, or none at all (the
 * daemon has not seen the connection yet, is slow, or is gone), leaves the
 * connection to Reno on its own state (tcp_reno_cong_avoid), so no
 * connection is ever stuck on the daemon.
 *
 * Built without vmlinux.h: the few kernel types used are declared below
 * with preserve_access_index, and libbpf relocates their fields against
 * the running kernel's BTF (CO-RE).
 */
#include <linux/bpf.h>
#include "cm_tcp.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

#define AF_INET 2
#define AF_INET6 10

/* enum tcp_ca_state */
#define TCP_CA_CWR 2
#define TCP_CA_Recovery 3
#define TCP_CA_Loss 4

#define BPF_SK_STORAGE_GET_F_CREATE 1
#define BPF_F_NO_PREALLOC 1

struct in6_addr {
	union {
		__u8 u6_addr8[16];
		__u32 u6_addr32[4];
	} in6_u;
} __attribute__((preserve_access_index));

struct sock_common {
	unsigned short skc_family;
	__u32 skc_daddr;
	__u32 skc_rcv_saddr;
	__u16 skc_dport;
	__u16 skc_num;
	struct in6_addr skc_v6_daddr;
	struct in6_addr skc_v6_rcv_saddr;
} __attribute__((preserve_access_index));

typedef struct {
	__u32 val;
} kuid_t;

struct sock {
	struct sock_common __sk_common;
	kuid_t sk_uid;
} __attribute__((preserve_access_index));

struct tcp_sock {
	__u32 snd_cwnd;
	__u32 snd_ssthresh;
	__u32 snd_cwnd_clamp;
	__u32 max_packets_out;
	__u8 is_cwnd_limited:1;
	__u32 srtt_us;
	__u32 mss_cache;
	__u32 packets_out;
	__u32 sacked_out;
	__u32 lost_out;
	__u32 retrans_out;
	__u64 bytes_sent;
	__u64 bytes_acked;
	__u64 bytes_retrans;
} __attribute__((preserve_access_index));

struct ack_sample {
	__u32 pkts_acked;
	__s32 rtt_us;
	__u32 in_flight;
} __attribute__((preserve_access_index));

struct tcp_congestion_ops {
	__u32 (*ssthresh)(struct sock *sk);
	void (*cong_avoid)(struct sock *sk, __u32 ack, __u32 acked);
	void (*set_state)(struct sock *sk, __u8 new_state);
	void (*pkts_acked)(struct sock *sk, const struct ack_sample *sample);
	__u32 (*undo_cwnd)(struct sock *sk);
	void (*init)(struct sock *sk);
	void (*release)(struct sock *sk);
	char name[16];
} __attribute__((preserve_access_index));

/* Reno on the connection's own state: the kernel's kfuncs for BPF CCs. */
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

/* Per-connection state. */
struct cm_sk {
	__u64 id;
	__u64 last_report_ns;
	__u32 rtt_us;
	/* CM_LIMITED if an ACK since the last report found the connection
	 * held back by its window. */
	__u32 flags;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct cm_sk);
} sk_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, CM_RING_BYTES);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CM_ALLOW_SLOTS);
	__type(key, __u32);
	__type(value, struct cm_allow);
} allow SEC(".maps");

/* Connection ids: 1, 2, ... (0 is "none"). */
__u64 next_id = 0;
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CM_DEST_SLOTS);
	__type(key, struct cm_dest_key);
	__type(value, struct cm_dest);
} dest SEC(".maps");

/* counters[0]: events the ring buffer had no room for (the daemon reads it). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline struct tcp_sock *tcp_sk(struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

/*
 * The kernel's tcp_is_cwnd_limited() (include/net/tcp.h; RFC 7661's
 * "cwnd-limited"): in slow start, while the window is under twice the
 * most recently used flight; else what the last transmissions recorded.
 */
static __always_inline int cwnd_limited(struct tcp_sock *tp)
{
	if (tp->snd_cwnd < tp->snd_ssthresh)
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited) != 0;
}

static __always_inline void report(struct sock *sk, struct cm_sk *st, __u32 kind, __u64 now)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cm_event *ev;

	st->last_report_ns = now;
	ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		__u32 zero = 0;
		__u64 *dropped = bpf_map_lookup_elem(&counters, &zero);

		if (dropped)
			__sync_fetch_and_add(dropped, 1);
		return;
	}
	__builtin_memset(ev, 0, sizeof(*ev));
	ev->id = st->id;
	ev->ns = now;
	ev->kind = kind;
	ev->bytes_sent = tp->bytes_sent;
	ev->bytes_acked = tp->bytes_acked;
	ev->bytes_retrans = tp->bytes_retrans;
	ev->srtt_us = tp->srtt_us >> 3;
	ev->rtt_us = st->rtt_us;
	ev->mss = tp->mss_cache;
	ev->cwnd = tp->snd_cwnd;
	ev->in_flight = tp->packets_out - (tp->sacked_out + tp->lost_out) + tp->retrans_out;
	ev->flags = st->flags;
	st->flags = 0;
	if (kind == CM_EV_OPEN) {
		ev->family = sk->__sk_common.skc_family;
		ev->uid = sk->sk_uid.val;
		ev->sport = sk->__sk_common.skc_num;
		ev->dport = bpf_ntohs(sk->__sk_common.skc_dport);
		if (ev->family == AF_INET) {
			ev->saddr[0] = sk->__sk_common.skc_rcv_saddr;
			ev->daddr[0] = sk->__sk_common.skc_daddr;
		} else {
			for (int i = 0; i < 4; i++) {
				ev->saddr[i] = sk->__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr32[i];
				ev->daddr[i] = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[i];
			}
		}
	}
	bpf_ringbuf_submit(ev, 0);
}

/* The daemon's allowance for this connection, if it is fresh. */
static __always_inline __u32 allowance(struct cm_sk *st)
{
	__u32 slot = (__u32)(st->id % CM_ALLOW_SLOTS);
	struct cm_allow *a = bpf_map_lookup_elem(&allow, &slot);

	if (!a || a->id != st->id || a->cwnd == 0)
		return 0;
	if (bpf_ktime_get_ns() - a->stamp_ns > CM_STALE_NS)
		return 0;
	return a->cwnd;
}

/*
 * A new connection starts from its share of the destination's macroflow
 * window, as a CM flow does (sigcomm1999 §2: what earlier connections
 * learned), when the daemon has published a fresh one; else from the
 * kernel's initial window.
 */
static __always_inline void start_window(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cm_dest_key key = {};
	struct cm_dest *d;
	__u64 cwnd;

	if (sk->__sk_common.skc_family == AF_INET) {
		key.addr[0] = sk->__sk_common.skc_daddr;
	} else {
		__u32 a0 = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[0];
		__u32 a1 = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[1];
		__u32 a2 = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[2];
		__u32 a3 = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[3];

		if (a0 == 0 && a1 == 0 && a2 == bpf_htonl(0xffff)) {
			key.addr[0] = a3;
		} else {
			key.addr[0] = a0;
			key.addr[1] = a1;
			key.addr[2] = a2;
			key.addr[3] = a3;
		}
	}
	key.uid = sk->sk_uid.val;
	d = bpf_map_lookup_elem(&dest, &key);
	if (!d) {
		key.uid = CM_ALL_USERS;
		d = bpf_map_lookup_elem(&dest, &key);
	}
	if (!d || !tp->mss_cache || bpf_ktime_get_ns() - d->stamp_ns > CM_STALE_NS)
		return;
	cwnd = d->bytes / tp->mss_cache;
	if (cwnd < 2)
		cwnd = 2;
	if (cwnd > tp->snd_cwnd_clamp)
		cwnd = tp->snd_cwnd_clamp;
	tp->snd_cwnd = (__u32)cwnd;
}

SEC("struct_ops")
void BPF_PROG(cm_init, struct sock *sk)
{
	struct cm_sk *st = bpf_sk_storage_get(&sk_state, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);

	if (!st)
		return;
	st->id = __sync_fetch_and_add(&next_id, 1) + 1;
	st->rtt_us = 0;
	st->flags = 0;
	start_window(sk);
	report(sk, st, CM_EV_OPEN, bpf_ktime_get_ns());
}

SEC("struct_ops")
void BPF_PROG(cm_release, struct sock *sk)
{
	struct cm_sk *st = bpf_sk_storage_get(&sk_state, sk, 0, 0);

	if (!st)
		return;
	report(sk, st, CM_EV_CLOSE, bpf_ktime_get_ns());
	bpf_sk_storage_delete(&sk_state, sk);
}

SEC("struct_ops")
void BPF_PROG(cm_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct cm_sk *st = bpf_sk_storage_get(&sk_state, sk, 0, 0);
	__u64 now, gap;

	if (!st)
		return;
	if (sample->rtt_us > 0)
		st->rtt_us = sample->rtt_us;
	/* The daemon sees a connection's sends only at its next report, and
	 * a small window's ACK often leaves nothing in flight then: the flight
	 * the daemon counts understates the real one, so the kernel's own
	 * verdict goes with the report (the core's window_limited). */
	if (cwnd_limited(tcp_sk(sk)))
		st->flags |= CM_LIMITED;
	now = bpf_ktime_get_ns();
	/* About four reports per smoothed RTT: one batch of ACKs, one update. */
	gap = (__u64)(tcp_sk(sk)->srtt_us >> 3) * 1000 / 4;
	if (gap < CM_MIN_REPORT_NS)
		gap = CM_MIN_REPORT_NS;
	/* ... and at once when nothing is left in flight, so that the CM
	 * never ages a window for data the connection has no more of. */
	if (now - st->last_report_ns < gap && tcp_sk(sk)->packets_out)
		return;
	report(sk, st, CM_EV_ACK, now);
}

SEC("struct_ops")
void BPF_PROG(cm_set_state, struct sock *sk, __u8 new_state)
{
	struct cm_sk *st = bpf_sk_storage_get(&sk_state, sk, 0, 0);
	__u32 kind;

	if (!st)
		return;
	if (new_state == TCP_CA_Recovery)
		kind = CM_EV_LOSS;
	else if (new_state == TCP_CA_Loss)
		kind = CM_EV_RTO;
	else if (new_state == TCP_CA_CWR)
		kind = CM_EV_ECN;
	else
		return;
	report(sk, st, kind, bpf_ktime_get_ns());
}

SEC("struct_ops")
void BPF_PROG(cm_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cm_sk *st = bpf_sk_storage_get(&sk_state, sk, 0, 0);
	__u32 cwnd = st ? allowance(st) : 0;

	if (!cwnd) {
		tcp_reno_cong_avoid(sk, ack, acked);
		return;
	}
	if (cwnd < 2)
		cwnd = 2;
	if (cwnd > tp->snd_cwnd_clamp)
		cwnd = tp->snd_cwnd_clamp;
	tp->snd_cwnd = cwnd;
}

SEC("struct_ops")
__u32 BPF_PROG(cm_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(cm_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops cm = {
	.init = (void *)cm_init,
	.release = (void *)cm_release,
	.ssthresh = (void *)cm_ssthresh,
	.cong_avoid = (void *)cm_cong_avoid,
	.set_state = (void *)cm_set_state,
	.pkts_acked = (void *)cm_pkts_acked,
	.undo_cwnd = (void *)cm_undo_cwnd,
	.name = "cm",
};
