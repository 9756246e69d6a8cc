#!/usr/bin/env python3
"""make bench-sync: how long a cluster change takes to reach every host.

For each N (default 4 16 64): a private etcd (unix socket, data in /dev/shm),
N segments and N shmcfg-sync agents (--host h1..hN) on this machine; then W
writes (default 30), each a put of opt/app.limit through etcd's JSON gateway.
Latency of a write: from the writer's CLOCK_REALTIME just before the put to
the newest of the N commits that carry its revision (each commit's time_ns
in the segment's log, CLOCK_REALTIME too: one clock). Prints median, p90 and
max per N.

Usage: bench_sync.py [--writes W] [N...]   (run by make bench-sync from the
build tree: top_builddir and top_srcdir in the environment)
"""
import base64, http.client, json, os, shutil, signal, socket, subprocess, sys, tempfile, time

top_builddir = os.environ.get("top_builddir", ".")
top_srcdir = os.environ.get("top_srcdir", ".")
sys.path.insert(0, os.path.join(top_srcdir, "python"))
import shmcfg  # noqa: E402

SHMCTL = os.path.join(top_builddir, "tools", "shmctl")
SYNC = os.path.join(top_builddir, "tools", "shmcfg-sync")
SCHEMA = os.path.join(top_srcdir, "tests", "cluster", "schema.yaml")


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=10)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def b64(s):
    return base64.b64encode(s.encode()).decode()


def post(conn, path, body):
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError("etcd %s: HTTP %d: %s" % (path, r.status, data[:200]))
    return json.loads(data)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def run(n, writes):
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    d = tempfile.mkdtemp(prefix="bench-sync.", dir=base)
    sock = os.path.join(d, "client.sock:1")
    etcd = subprocess.Popen(
        ["etcd", "--name", "b", "--data-dir", os.path.join(d, "data"),
         "--listen-client-urls", "unix://client.sock:1", "--advertise-client-urls", "unix://client.sock:1",
         "--listen-peer-urls", "unix://peer.sock:1", "--initial-advertise-peer-urls", "unix://peer.sock:1",
         "--initial-cluster", "b=unix://peer.sock:1"],
        cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    segs, agents, handles = [], [], []
    cluster = "bench%d" % os.getpid()
    prefix = "/shmcfg/v1/%s/" % cluster
    try:
        for _ in range(200):
            try:
                conn = UnixHTTP(sock)
                post(conn, "/v3/kv/range", {"key": b64("x")})
                break
            except (OSError, RuntimeError, http.client.HTTPException):
                time.sleep(0.05)
        else:
            raise RuntimeError("etcd did not start")
        for i in range(n):
            name = "bench-sync-%d-%d" % (os.getpid(), i)
            subprocess.check_call([SHMCTL, "create", "-q", "--no-env", "--force", "--schema", SCHEMA, name])
            segs.append(name)
            agents.append(subprocess.Popen(
                [SYNC, "--endpoints", "unix:" + sock, "--cluster", cluster, "--host", "h%d" % (i + 1), name],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            handles.append(shmcfg.attach(name, readonly=True))
        # every agent has loaded (its status key is there)
        deadline = time.time() + 60
        while time.time() < deadline:
            st = post(conn, "/v3/kv/range", {"key": b64(prefix + "status/"), "range_end": b64(prefix + "status0"),
                                             "count_only": True})
            if int(st.get("count", 0)) == n:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("the agents did not all start")
        lat = []
        for w in range(writes):
            time.sleep(0.2)  # let the status puts of the last write settle
            t0 = time.time_ns()
            r = post(conn, "/v3/kv/put", {"key": b64(prefix + "opt/app.limit"), "value": b64(str(w % 100))})
            rev = int(r["header"]["revision"])
            newest = 0
            deadline = time.time() + 10
            for h in handles:
                while h.cluster_revision < rev:
                    if time.time() > deadline:
                        raise RuntimeError("write %d: a host never applied revision %d" % (w, rev))
                    time.sleep(0.001)
                g = h.generation
                while g > 0:
                    c = h.commit_info(g)
                    if c is None or c["cluster_rev"] < rev:
                        raise RuntimeError("write %d: no commit of revision %d" % (w, rev))
                    if c["cluster_rev"] == rev:
                        newest = max(newest, int(round(c["time"] * 1e9)))
                        break
                    g -= 1
            lat.append((newest - t0) / 1e6)
        return lat
    finally:
        for a in agents:
            a.send_signal(signal.SIGTERM)
        for a in agents:
            try:
                a.wait(10)
            except subprocess.TimeoutExpired:
                a.kill()
        for h in handles:
            h.close()
        for s in segs:
            subprocess.call([SHMCTL, "rm", "-f", s], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        etcd.terminate()
        etcd.wait()
        shutil.rmtree(d, ignore_errors=True)


def main():
    args = sys.argv[1:]
    writes = 30
    if args[:1] == ["--writes"]:
        writes = int(args[1])
        args = args[2:]
    ns = [int(a) for a in args] or [4, 16, 64]
    if not shutil.which("etcd"):
        print("bench-sync: etcd is needed (Debian: etcd-server)", file=sys.stderr)
        return 1
    print("# cluster sync: a put to etcd -> the last of N hosts' commits (%d writes, %d cores)"
          % (writes, os.cpu_count()))
    print("%6s %10s %10s %10s %10s" % ("hosts", "median_ms", "p90_ms", "max_ms", "min_ms"))
    for n in ns:
        lat = run(n, writes)
        print("%6d %10.2f %10.2f %10.2f %10.2f" % (n, pct(lat, 0.5), pct(lat, 0.9), max(lat), min(lat)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
