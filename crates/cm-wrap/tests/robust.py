"""Drive a wrapped Python (an unmodified, dynamically linked program) hard:
flood, sendmsg, write, close mid-queue, fork. Prints one JSON line.
Run under LD_PRELOAD=libcm_wrap.so with CM_WRAP_LOOPBACK=1."""
import json, os, socket, sys, time

def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0

sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sink.bind(("127.0.0.1", 0))
sink.setblocking(False)
dst = sink.getsockname()
payload = b"x" * 1000
n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
t0 = time.monotonic()

a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(n // 10):
    a.sendto(payload, dst)
rss_early = rss_kb()
for i in range(n):
    a.sendto(payload, dst)
    if i % 3 == 0:
        a.sendmsg([payload[:500], payload[500:]], [], 0, dst)
# Close with datagrams still queued, then keep going on new sockets.
a.close()
b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
b.connect(dst)
for i in range(n // 10):
    os.write(b.fileno(), payload)
    b.send(payload)
rss_late = rss_kb()

pid = os.fork()
if pid == 0:
    c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for i in range(20000):
        c.sendto(payload, dst)
    b.send(payload)
    os._exit(0)
_, status = os.waitpid(pid, 0)
for i in range(1000):
    b.send(payload)
# Long enough for the wrapper to give up waiting for an answer (no
# receiver CM on loopback) at least once.
for i in range(30):
    time.sleep(0.05)
    b.send(payload)

got = 0
while True:
    try:
        sink.recv(2048)
        got += 1
    except BlockingIOError:
        break
print(json.dumps({
    "seconds": time.monotonic() - t0,
    "rss_early_kb": rss_early,
    "rss_late_kb": rss_late,
    "child_status": status,
    "received": got,
    "sent_by_program": n // 10 + n + (n + 2) // 3 + 2 * (n // 10) + 1030,
}))
