#!/usr/bin/env python3
"""Classify ns-3's retransmissions by TCP state and by whether they were needed.

Usage: python3 ns3/spurious.py RATE_BPS [SEEDS...]   (default seeds 1..10)
       SACK=1 python3 ns3/spurious.py ...              (runs dumbbell --sack=1)

Runs target/ns3/dumbbell --traceCwnd=1 (which prints every data segment sent,
every bottleneck drop with its sequence number and every congestion-state
change) and counts, per state (OPEN = CA_OPEN/CA_DISORDER, RECOVERY, LOSS),
retransmissions whose previous copy was dropped ("needed") and the others
("spurious": the previous copy reached the receiver or was still in flight).
See ns3/FINDINGS.md.
"""
import collections
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
rate = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
seeds = [int(s) for s in sys.argv[2:]] or list(range(1, 11))
rows = []
for s in seeds:
    p = subprocess.run([f"{ROOT}/target/ns3/dumbbell", f"--seed={s}", f"--rate={rate}",
                        "--duration=20", "--traceCwnd=1",
                        f"--sack={1 if os.environ.get('SACK') == '1' else 0}"],
                       capture_output=True, text=True,
                       check=True)
    doc = json.loads(p.stdout)
    hi = collections.defaultdict(int)
    state = collections.defaultdict(lambda: "CA_OPEN")
    lost = {}
    c = collections.Counter()
    for line in p.stderr.splitlines():
        f = line.split()
        if len(f) < 4:
            continue
        flow, kind = f[1], f[2]
        if kind == "state":
            state[flow] = f[5]
        elif kind == "drop":
            lost[(flow, int(f[3]))] = True
        elif kind == "tx":
            seq = int(f[3])
            if seq < hi[flow]:
                st = "OPEN" if state[flow] in ("CA_OPEN", "CA_DISORDER") else state[flow][3:]
                c[(st, lost.get((flow, seq), False))] += 1
            lost[(flow, seq)] = False
            hi[flow] = max(hi[flow], seq + int(f[4]))
    rows.append((doc["aggregate_goodput_bps"], doc["bottleneck_drops"], c))
m = statistics.mean
print(f"rate {rate} bit/s, SACK {os.environ.get('SACK') == '1'}, seeds {seeds}: goodput {m(r[0] for r in rows) / 1e3:.1f} kbit/s, "
      f"drops {m(r[1] for r in rows):.1f}")
for st in ("OPEN", "RECOVERY", "LOSS"):
    sp = m(r[2][(st, False)] for r in rows)
    nd = m(r[2][(st, True)] for r in rows)
    print(f"  retransmissions in {st:8s}: needed {nd:7.1f}  spurious {sp:7.1f}  "
          f"(spurious = {sp * 1500 * 8 / 20 / 1e3:7.1f} kbit/s of the bottleneck)")
