#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""make bench-sync: how long a cluster change takes to reach every host, and
how long a host stalls under each fault of issue 22.

Convergence. For each N (default 64 128 256): a private etcd (unix socket, data in /dev/shm),
N segments and N shmcfg-sync agents (--host h1..hN) on this machine; then W
writes (default 30), each a put of opt/app.limit through etcd's JSON gateway.
Latency of a write: from the writer's CLOCK_REALTIME just before the put to
the newest of the N commits that carry its revision (each commit's time_ns
in the segment's log, CLOCK_REALTIME too: one clock). Prints median, p90 and
max per N.

Faults. A 3-member etcd (unix sockets) and 6 hosts, two on each member (the
member listed first in an agent's --endpoints is the one it watches on). A
writer puts opt/app.limit every 100 ms through a member that is up; after
each fault, the stall of a host for a write is the time from the write's
acknowledgement to that host's commit that carries it (or a later revision).
Reported per fault: the worst stall of the hosts whose member was hit, and of
the hosts of healthy members (targets: under 5 s, and under 1 s).

Usage: bench_sync.py [--writes W] [--no-faults] [N...]   (run by make
bench-sync from the build tree: top_builddir and top_srcdir in the
environment)
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
        self.sock.settimeout(self.timeout)
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


def start_etcd(d, names):
    """Members names (one: a single etcd) in d, unix sockets <name>.sock:1;
    returns their processes, once each answers."""
    cluster = ",".join("%s=unix://%s-peer.sock:1" % (m, m) for m in names)
    procs = []
    for m in names:
        procs.append(subprocess.Popen(
            ["etcd", "--name", m, "--data-dir", os.path.join(d, m + ".data"),
             "--listen-client-urls", "unix://%s.sock:1" % m, "--advertise-client-urls", "unix://%s.sock:1" % m,
             "--listen-peer-urls", "unix://%s-peer.sock:1" % m,
             "--initial-advertise-peer-urls", "unix://%s-peer.sock:1" % m,
             "--initial-cluster", cluster, "--initial-cluster-token", "bench%d" % os.getpid()],
            cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    for m in names:
        for _ in range(400):
            try:
                post(UnixHTTP(os.path.join(d, m + ".sock:1")), "/v3/kv/range", {"key": b64("x")})
                break
            except (OSError, RuntimeError, http.client.HTTPException):
                time.sleep(0.05)
        else:
            raise RuntimeError("etcd member %s did not start" % m)
    return procs


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


class Cluster3:
    """3 members, 6 hosts (two a member), and a writer."""

    NAMES = ["m1", "m2", "m3"]

    def __init__(self, d):
        self.d = d
        self.procs = start_etcd(d, self.NAMES)
        self.socks = [os.path.join(d, m + ".sock:1") for m in self.NAMES]
        self.down = set()
        self.cluster = "faults%d" % os.getpid()
        self.prefix = "/shmcfg/v1/%s/" % self.cluster
        self.segs, self.agents, self.handles, self.member_of = [], [], [], []
        for i in range(6):
            name = "bench-faults-%d-%d" % (os.getpid(), i)
            subprocess.check_call([SHMCTL, "create", "-q", "--no-env", "--force", "--size", "48K",
                                   "--schema", SCHEMA, name])
            self.segs.append(name)
            self.handles.append(shmcfg.attach(name, readonly=True))
        self.restart_agents()

    def restart_agents(self):
        """Agents anew: host i watches on member i % 3 (its first endpoint)."""
        self.stop_agents()
        self.member_of = []
        for i, name in enumerate(self.segs):
            m = i % 3
            eps = ",".join("unix:" + self.socks[(m + k) % 3] for k in range(3))
            self.agents.append(subprocess.Popen(
                [SYNC, "--endpoints", eps, "--cluster", self.cluster, "--host", "h%d" % (i + 1), name],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            self.member_of.append(m)
        self.settle(0.5, 30)

    def stop_agents(self):
        for a in self.agents:
            a.send_signal(signal.SIGTERM)
        for a in self.agents:
            try:
                a.wait(10)
            except subprocess.TimeoutExpired:
                a.kill()
        self.agents = []

    def conn(self):
        for k in range(3):
            if k not in self.down:
                c = UnixHTTP(self.socks[k])
                c.timeout = 2
                yield c

    def put(self, key, value):
        """Put through a member that is up, retried until acknowledged:
        (ack time, revision)."""
        deadline = time.time() + 30
        while time.time() < deadline:
            for c in self.conn():
                try:
                    r = post(c, "/v3/kv/put", {"key": b64(self.prefix + key), "value": b64(value)})
                    return time.time_ns(), int(r["header"]["revision"])
                except (OSError, RuntimeError, http.client.HTTPException):
                    continue
            time.sleep(0.05)
        raise RuntimeError("no member acknowledged a put")

    def leader(self):
        for k in range(3):
            if k in self.down:
                continue
            try:
                st = post(UnixHTTP(self.socks[k]), "/v3/maintenance/status", {})
                ids = {}
                for j in range(3):
                    if j not in self.down:
                        ids[post(UnixHTTP(self.socks[j]), "/v3/maintenance/status", {})["header"]["member_id"]] = j
                return ids.get(st["leader"])
            except (OSError, RuntimeError, http.client.HTTPException, KeyError):
                continue
        return None

    def applied_at(self, h, rev):
        """CLOCK_REALTIME ns of the host's first commit carrying rev or later, or None."""
        if h.cluster_revision < rev:
            return None
        g, when = h.generation, None
        while g > 0:
            c = h.commit_info(g)
            if c is None:
                raise RuntimeError("revision %d: no longer in the segment's commit log" % rev)
            if c["cluster_rev"] and c["cluster_rev"] < rev:
                break
            if c["cluster_rev"] >= rev:
                when = int(round(c["time"] * 1e9))
            g -= 1
        return when

    def settle(self, quiet, limit):
        """Every host applied the last write."""
        _, rev = self.put("opt/app.ratio", str(time.time() % 1))
        deadline = time.time() + limit
        while any(h.cluster_revision < rev for h in self.handles):
            if time.time() > deadline:
                raise RuntimeError("hosts did not converge")
            time.sleep(0.01)
        time.sleep(quiet)

    def stalls(self, seconds, t_fault):
        """Writes every 200 ms for `seconds` (fewer than the 64 commits a
        segment's log keeps); per host, the worst stall (s)."""
        writes = []
        t_end = time.time() + seconds
        k = 0
        while time.time() < t_end:
            k += 1
            writes.append(self.put("opt/app.limit", str(k % 100)))
            time.sleep(0.2)
        self.first_ack = (writes[0][0] - t_fault) / 1e9
        deadline = time.time() + 30
        worst = [0.0] * len(self.handles)
        for i, h in enumerate(self.handles):
            for ack, rev in writes:
                while (t := self.applied_at(h, rev)) is None:
                    if time.time() > deadline:
                        t = time.time_ns() + 10**12  # never: an hour
                        break
                    time.sleep(0.01)
                worst[i] = max(worst[i], (t - ack) / 1e9)
        return worst

    def close(self):
        for k in range(3):
            if self.procs[k].poll() is None:
                self.procs[k].send_signal(signal.SIGCONT)
        self.stop_agents()
        for h in self.handles:
            h.close()
        for sg in self.segs:
            subprocess.call([SHMCTL, "rm", "-f", sg], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for p in self.procs:
            p.terminate()
            p.wait()


def faults():
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    d = tempfile.mkdtemp(prefix="bench-faults.", dir=base)
    c = Cluster3(d)
    rows = []
    t_fault = 0

    def row(name, hit, window=8):
        worst = c.stalls(window, t_fault)
        if os.environ.get("BENCH_DEBUG"):
            print(name, c.member_of, ["%.3f" % w for w in worst], file=sys.stderr)
        hit_w = [w for i, w in enumerate(worst) if c.member_of[i] in hit]
        ok_w = [w for i, w in enumerate(worst) if c.member_of[i] not in hit]
        rows.append((name, c.first_ack, max(hit_w) if hit_w else None, max(ok_w) if ok_w else None))

    def stopped(k, name):
        nonlocal t_fault
        t_fault = time.time_ns()
        c.procs[k].send_signal(signal.SIGSTOP)
        c.down.add(k)
        row(name, {k})
        c.procs[k].send_signal(signal.SIGCONT)
        c.down.discard(k)
        c.settle(1, 30)

    try:
        lead = c.leader()
        follower = next(k for k in range(3) if k != lead)
        # a follower stopped: its hosts' watch hangs behind a live stream
        stopped(follower, "a member stopped (SIGSTOP)")
        # the leader stopped: an election; the other hosts must not stall
        c.restart_agents()
        stopped(c.leader(), "the leader stopped (SIGSTOP)")
        # a member killed, then restarted on its data
        c.restart_agents()
        lead = c.leader()
        victim = next(k for k in range(3) if k != lead)
        t_fault = time.time_ns()
        c.procs[victim].kill()
        c.procs[victim].wait()
        c.down.add(victim)
        row("a member killed (SIGKILL)", {victim}, 5)
        m = Cluster3.NAMES[victim]
        for f in (m + ".sock:1", m + "-peer.sock:1"):
            try:
                os.unlink(os.path.join(d, f))
            except OSError:
                pass
        cluster = ",".join("%s=unix://%s-peer.sock:1" % (n, n) for n in Cluster3.NAMES)
        c.procs[victim] = subprocess.Popen(
            ["etcd", "--name", m, "--data-dir", os.path.join(d, m + ".data"),
             "--listen-client-urls", "unix://%s.sock:1" % m, "--advertise-client-urls", "unix://%s.sock:1" % m,
             "--listen-peer-urls", "unix://%s-peer.sock:1" % m, "--initial-advertise-peer-urls",
             "unix://%s-peer.sock:1" % m, "--initial-cluster", cluster, "--initial-cluster-state", "existing"],
            cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        c.down.discard(victim)
        t_fault = time.time_ns()
        row("... and restarted", set(), 4)
        c.settle(1, 30)
        # a value no host's heap can take, then life goes on
        c.restart_agents()
        t_fault = time.time_ns()
        c.put("opt/app.note", json.dumps("x" * 60000))
        row("a value too big for the hosts' heaps", set(), 3)
        # 20,000 junk keys under opt/
        for s0 in range(0, 20000, 100):
            ops = [{"request_put": {"key": b64(c.prefix + "opt/zz.%d" % i), "value": b64("1")}}
                   for i in range(s0, s0 + 100)]
            for cn in c.conn():
                post(cn, "/v3/kv/txn", {"success": ops})
                break
        c.settle(0.5, 60)  # the junk applied (rejected): then the cost of a revision
        t_fault = time.time_ns()
        row("20,000 junk keys under opt/", set(), 3)
    finally:
        c.close()
        shutil.rmtree(d, ignore_errors=True)
    print("\n# faults: the worst stall of a host (a write acknowledged -> its commit there), 3 members, 6 hosts")
    print("# (targets: hosts of the member hit < 5 s; hosts of healthy members < 1 s)")
    print("# first_ack_s: from the fault to the first write etcd acknowledged (an election holds them back)")
    print("%-40s %12s %12s %16s" % ("fault", "first_ack_s", "hit_hosts_s", "healthy_hosts_s"))
    for name, first, hit, ok in rows:
        print("%-40s %12.3f %12s %16s" % (name, first, "-" if hit is None else "%.3f" % hit,
                                         "-" if ok is None else "%.3f" % ok))
    return 0


def main():
    args = sys.argv[1:]
    writes, with_faults = 30, True
    while args[:1] in (["--writes"], ["--no-faults"]):
        if args[0] == "--writes":
            writes = int(args[1])
            args = args[2:]
        else:
            with_faults = False
            args = args[1:]
    ns = [int(a) for a in args] or [64, 128, 256]
    if not shutil.which("etcd"):
        print("bench-sync: etcd is needed (Debian: etcd-server)", file=sys.stderr)
        return 1
    print("# cluster sync: a put to etcd -> the last of N hosts' commits (%d writes, %d cores)"
          % (writes, os.cpu_count()))
    print("%6s %10s %10s %10s %10s" % ("hosts", "median_ms", "p90_ms", "max_ms", "min_ms"))
    for n in ns if os.environ.get("BENCH_ONLY_FAULTS") is None else []:
        lat = run(n, writes)
        print("%6d %10.2f %10.2f %10.2f %10.2f" % (n, pct(lat, 0.5), pct(lat, 0.9), max(lat), min(lat)), flush=True)
    return faults() if with_faults else 0


if __name__ == "__main__":
    sys.exit(main())
