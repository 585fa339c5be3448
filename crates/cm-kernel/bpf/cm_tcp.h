/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the BPF congestion control and the CM daemon share. The Rust side
 * (src/wire.rs) mirrors these layouts; a test there checks the sizes.
 */
#ifndef CM_TCP_H
#define CM_TCP_H

#include <linux/types.h>

/* Event kinds. */
#define CM_EV_OPEN 1  /* the connection chose cm (addresses filled in) */
#define CM_EV_ACK 2   /* periodic: counters after a batch of ACKs */
#define CM_EV_LOSS 3  /* entered fast recovery */
#define CM_EV_RTO 4   /* entered loss state (retransmission timeout) */
#define CM_EV_ECN 5   /* entered CWR (ECN echo or local congestion) */
#define CM_EV_CLOSE 6 /* the connection released cm */

/* Ring buffer size (bytes, a power of two pages). */
#define CM_RING_BYTES (1 << 20)
/* Allowance slots: a connection's slot is id % CM_ALLOW_SLOTS. */
#define CM_ALLOW_SLOTS 4096
/* An allowance older than this is ignored (Reno fallback): 500 ms. */
#define CM_STALE_NS 500000000ULL
/* Reports are at least this far apart per connection: 1 ms. */
#define CM_MIN_REPORT_NS 1000000ULL

struct cm_event {
	__u64 id;
	__u64 ns;            /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u64 bytes_sent;    /* tcp_sock counters, cumulative */
	__u64 bytes_acked;
	__u64 bytes_retrans;
	__u32 kind;
	__u32 family;        /* AF_INET or AF_INET6 (CM_EV_OPEN only) */
	__u32 saddr[4];      /* network order; IPv4 in saddr[0] (OPEN only) */
	__u32 daddr[4];
	__u16 sport;         /* host order (OPEN only) */
	__u16 dport;
	__u32 uid;           /* sk_uid (OPEN only) */
	__u32 srtt_us;
	__u32 rtt_us;        /* latest sample, 0 if none yet */
	__u32 mss;
	__u32 cwnd;          /* packets */
	__u32 in_flight;     /* packets, tcp_packets_in_flight() */
	__u32 flags;         /* CM_LIMITED */
};

/* cm_event.flags: since the last report, an ACK found the connection
 * cwnd-limited (tcp_is_cwnd_limited()). */
#define CM_LIMITED 1

/* A destination's window for a new connection, by (address, uid). */
#define CM_DEST_SLOTS 4096
/* The uid of a destination entry shared by all users. */
#define CM_ALL_USERS 0xffffffffU

struct cm_dest_key {
	__u32 addr[4];       /* network order; IPv4 (also v4-mapped) in addr[0] */
	__u32 uid;
};

struct cm_dest {
	__u64 stamp_ns;      /* CLOCK_MONOTONIC when written */
	__u64 bytes;         /* a new connection's share of the macroflow window */
};

struct cm_allow {
	__u64 id;            /* the connection this slot is for */
	__u64 stamp_ns;      /* CLOCK_MONOTONIC when written */
	__u32 cwnd;          /* packets; 0 = none */
	__u32 _pad;
};

#endif
