#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The history checker of tests/cluster/history.sh: writers, samplers, and
a check of what they saw against etcd's own history of the prefix.

    history_check.py run --dir D --cluster C --writer-seg W --segments S1,S2,...
                   [--writers N] [--max-seconds T] [--all-endpoints EPS]

Runs N writer threads, each a loop of `shmctl cluster set W app.limit=L
app.ratio=X` (X unique to each attempt: writer * 100000 + attempt + 0.5;
L = (writer * 37 + attempt) % 101) through the endpoints in the file D/eps
(the shell rewrites it as members stop and return; writer 1 uses
--all-endpoints instead, if given: every member, the stopped one too, as an
operator's tool would), recording every attempt
and what it printed ("audit record S, revision R": acknowledged) in
D/writes.jsonl, and the count acknowledged in D/acked; and one sampler
thread per segment, reading (generation, cluster revision, app.limit,
app.ratio) as one consistent sample (the generation unchanged around the
reads) into D/samples.jsonl, a line each time it changes. It stops when the
file D/stop appears (or after T seconds).

    history_check.py check --dir D --cluster C --segments S1,... --sockets P1,P2,...

Reads etcd's whole event history of the watched range [P audit/, P opt0)
through the v3 JSON gateway on the unix sockets P1... (the first that
answers), waits (bound 30 s) until every segment carries the range's last
revision, and checks:

  - every acknowledged write is in the history exactly once: its audit
    record put once, at the revision it printed, with its values the state
    at that revision; and no value was put twice (a retried write applied
    twice);
  - every sample of every host (revision R, values) is a revision of the
    range (or 0) and its values are etcd's state at R; no host ever shows a
    value never written; a host's revision never goes back;
  - every host's final revision and values are etcd's final ones;
  - every host committed each revision of the range after its first
    (the load) exactly once, and no other.

It prints TAP lines without numbers ("ok - ...", "not ok - ...", "# ..."),
which history.sh numbers. The samplers use the Python binding (python/) or,
where it cannot load (a sanitizer build), shmctl.
"""

import argparse
import base64
import bisect
import collections
import http.client
import json
import os
import random
import re
import shlex
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.path.abspath(os.environ.get("top_srcdir") or os.path.join(HERE, os.pardir, os.pardir))
BUILDDIR = os.path.abspath(os.environ.get("top_builddir") or SRCDIR)

DEFAULTS = {"app.limit": 10, "app.ratio": 0.5}  # tests/cluster/schema.yaml
OPTS = ("app.limit", "app.ratio")


def shmctl_cmd():
    s = os.environ.get("SHMCTL")
    if s:
        return shlex.split(s)
    for p in (os.path.join(BUILDDIR, "tools", ".libs", "shmctl"), os.path.join(BUILDDIR, "tools", "shmctl")):
        if os.access(p, os.X_OK):
            return [p]
    return ["shmctl"]


# ---------------------------------------------------------------- sampling

def binding():
    """The shmcfg module, or None where it cannot load."""
    if os.environ.get("SHMCFG_SANITIZERS"):
        return None  # ctypes cannot load an ASan library into python
    if "SHMCFG_LIBRARY" not in os.environ:
        p = os.path.join(BUILDDIR, "lib", ".libs", "libshmcfg.so.3")
        if os.path.exists(p):
            os.environ["SHMCFG_LIBRARY"] = p
    if "SHMCFG_PYTHON_EXT" not in os.environ:
        p = os.path.join(BUILDDIR, "python", "shmcfg", ".libs", "_fast.so")
        if os.path.exists(p):
            os.environ["SHMCFG_PYTHON_EXT"] = p
    sys.path.insert(0, os.path.join(SRCDIR, "python"))
    try:
        import shmcfg
        return shmcfg
    except Exception as e:  # noqa: BLE001
        print("# the Python binding does not load (%s): sampling with shmctl" % e, file=sys.stderr)
        return None


class BindingReader:
    def __init__(self, mod, name):
        self.seg = mod.attach(name, readonly=True)

    def sample(self):
        s = self.seg
        for _ in range(100):
            g = s.generation
            r = s.cluster_revision
            vals = [s.get(o) for o in OPTS]
            if s.generation == g:
                return g, r, vals
        return None


class ShmctlReader:
    def __init__(self, name):
        self.name = name
        self.cmd = shmctl_cmd()

    def _stat(self):
        j = json.loads(subprocess.run(self.cmd + ["stat", self.name, "--json"], capture_output=True,
                                      text=True, check=True).stdout)
        return j["generation"], j["cluster_revision"]

    def sample(self):
        g, r = self._stat()
        vals = [json.loads(subprocess.run(self.cmd + ["get", self.name, o, "--json"], capture_output=True,
                                          text=True, check=True).stdout) for o in OPTS]
        g2, _ = self._stat()
        return (g, r, vals) if g2 == g else None


def reader(mod, name):
    return BindingReader(mod, name) if mod else ShmctlReader(name)


def run(a):
    d = a.dir
    stop = threading.Event()
    segs = a.segments.split(",")
    mod = binding()
    lock = threading.Lock()
    wf = open(os.path.join(d, "writes.jsonl"), "a")
    sf = open(os.path.join(d, "samples.jsonl"), "a")
    acked = [0]
    nsamples = collections.Counter()
    cmd = shmctl_cmd()

    def writer(w):
        rnd = random.Random(w * 7919 + os.getpid())
        i = 0
        while not stop.is_set():
            i += 1
            limit = (w * 37 + i) % 101
            ratio = w * 100000 + i + 0.5
            if w == 1 and a.all_endpoints:
                eps = a.all_endpoints
            else:
                with open(os.path.join(d, "eps")) as f:
                    eps = f.read().strip()
            t0 = time.time()
            try:
                p = subprocess.run(cmd + ["cluster", "set", a.writer_seg, "app.limit=%d" % limit,
                                          "app.ratio=%r" % ratio, "--endpoints", eps, "--cluster", a.cluster],
                                   capture_output=True, text=True, timeout=60)
                rc, out, err = p.returncode, p.stdout, p.stderr
            except subprocess.TimeoutExpired:
                rc, out, err = -1, "", "timed out after 60 s"
            m = re.search(r"^cluster '.*': audit record (\d+), revision (\d+)$", out, re.M)
            rec = {"w": w, "i": i, "limit": limit, "ratio": ratio, "rc": rc, "t0": t0, "t1": time.time(),
                   "seq": int(m.group(1)) if m else None, "rev": int(m.group(2)) if m else None,
                   "err": err.strip()[-300:]}
            with lock:
                wf.write(json.dumps(rec) + "\n")
                wf.flush()
                if rc == 0 and m:
                    acked[0] += 1
                    with open(os.path.join(d, "acked.tmp"), "w") as f:
                        f.write("%d\n" % acked[0])
                    os.replace(os.path.join(d, "acked.tmp"), os.path.join(d, "acked"))
            stop.wait(rnd.uniform(0.02, 0.12))

    def sampler(name):
        r = reader(mod, name)
        last = None
        while not stop.is_set():
            try:
                s = r.sample()
            except Exception as e:  # noqa: BLE001
                with lock:
                    sf.write(json.dumps({"seg": name, "error": repr(e)}) + "\n")
                stop.wait(0.1)
                continue
            if s is not None:
                nsamples[name] += 1
                if s[1:] != last:
                    last = s[1:]
                    with lock:
                        sf.write(json.dumps({"seg": name, "t": time.time(), "gen": s[0], "rev": s[1],
                                             "vals": s[2]}) + "\n")
            stop.wait(0.003)

    threads = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(1, a.writers + 1)]
    threads += [threading.Thread(target=sampler, args=(s,), daemon=True) for s in segs]
    for t in threads:
        t.start()
    open(os.path.join(d, "started"), "w").close()
    end = time.time() + a.max_seconds
    while not os.path.exists(os.path.join(d, "stop")) and os.path.isdir(d) and time.time() < end:
        time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join(90)
    wf.close()
    sf.close()
    with open(os.path.join(d, "nsamples.json"), "w") as f:
        json.dump(dict(nsamples), f)
    return 0


# ---------------------------------------------------------------- etcd

class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path, timeout=10):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def b64(s):
    return base64.b64encode(s.encode()).decode()


def unb64(s):
    return base64.b64decode(s or "").decode("utf-8", "replace")


class Etcd:
    def __init__(self, sockets):
        self.sockets = sockets

    def _post(self, path, body, sock):
        c = UnixHTTP(sock)
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        if r.status != 200:
            raise RuntimeError("etcd %s: %s: HTTP %d %s" % (sock, path, r.status, data[:200]))
        return json.loads(data)

    def post(self, path, body):
        err = None
        for s in self.sockets:
            try:
                return self._post(path, body, s)
            except Exception as e:  # noqa: BLE001
                err = e
        raise RuntimeError("no etcd member answered: %s" % err)

    def last_rev(self, lo, hi):
        """The newest mod_revision of a key in [lo, hi) (the head is put by
        every write and nothing is deleted: the range's last revision)."""
        j = self.post("/v3/kv/range", {"key": b64(lo), "range_end": b64(hi), "keys_only": True})
        return max([int(kv["mod_revision"]) for kv in j.get("kvs", [])] or [0])

    def events(self, lo, hi, until):
        """Every event of [lo, hi) from revision 1 through `until`: a list of
        (revision, type, key, value, version)."""
        err = None
        for sock in self.sockets:
            try:
                return self._events(sock, lo, hi, until)
            except Exception as e:  # noqa: BLE001
                err = e
        raise RuntimeError("no etcd member gave the history: %s" % err)

    def _events(self, sock, lo, hi, until):
        out = []
        if until == 0:
            return out
        c = UnixHTTP(sock, timeout=15)
        c.request("POST", "/v3/watch", json.dumps({"create_request": {
            "key": b64(lo), "range_end": b64(hi), "start_revision": 1}}), {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            raise RuntimeError("watch: HTTP %d" % r.status)
        try:
            while True:
                line = r.readline()
                if not line:
                    raise RuntimeError("watch: the stream ended before revision %d" % until)
                if not line.strip():
                    continue
                j = json.loads(line)
                if "error" in j:
                    raise RuntimeError("watch: %s" % j["error"])
                res = j.get("result", {})
                if res.get("canceled"):
                    raise RuntimeError("watch canceled: %s" % res)
                for ev in res.get("events", []):
                    kv = ev["kv"]
                    out.append((int(kv["mod_revision"]), ev.get("type", "PUT"), unb64(kv["key"]),
                                unb64(kv.get("value")), int(kv.get("version", 0))))
                if out and out[-1][0] >= until:
                    return out
        finally:
            c.close()


# ---------------------------------------------------------------- check

class Report:
    def __init__(self):
        self.failed = 0

    def check(self, good, desc, details=()):
        print(("ok - " if good else "not ok - ") + desc)
        if not good:
            self.failed += 1
            for d in list(details)[:15]:
                print("#   " + d)
            if len(details) > 15:
                print("#   ... and %d more" % (len(details) - 15))

    def diag(self, text):
        print("# " + text)


def host_state(seg, cmd):
    """A segment's (revision, [values]) and its commits' cluster revisions, by shmctl."""
    st = json.loads(subprocess.run(cmd + ["stat", seg, "--json"], capture_output=True, text=True,
                                   check=True).stdout)
    vals = [json.loads(subprocess.run(cmd + ["get", seg, o, "--json"], capture_output=True, text=True,
                                      check=True).stdout) for o in OPTS]
    return st["cluster_revision"], vals, st


def check(a):
    d = a.dir
    rep = Report()
    prefix = "/shmcfg/v1/%s/" % a.cluster
    lo, hi = prefix + "audit/", prefix + "opt0"
    segs = a.segments.split(",")
    cmd = shmctl_cmd()
    etcd = Etcd(a.sockets.split(","))

    writes = [json.loads(line) for line in open(os.path.join(d, "writes.jsonl"))]
    samples = [json.loads(line) for line in open(os.path.join(d, "samples.jsonl"))]
    acked = [w for w in writes if w["rc"] == 0 and w["rev"] is not None]
    try:
        nsamples = json.load(open(os.path.join(d, "nsamples.json")))
    except (OSError, ValueError):
        nsamples = {}
    rep.diag("%d write attempts, %d acknowledged, %d failed; %d samples (%d distinct)" % (
        len(writes), len(acked), len(writes) - len(acked), sum(nsamples.values()), len(samples)))
    bad = [s for s in samples if "error" in s]
    rep.check(not bad, "every sample read", ["%s: %s" % (s["seg"], s["error"]) for s in bad])
    samples = [s for s in samples if "error" not in s]

    # ---- etcd's history
    last = etcd.last_rev(lo, hi)
    events = etcd.events(lo, hi, last)
    revs = sorted({e[0] for e in events})
    rep.diag("etcd: %d events at %d revisions of the watched range, the last %d" % (len(events), len(revs), last))
    # the state (app.limit, app.ratio) after each revision of the range
    cur = dict(DEFAULTS)
    state = {0: [DEFAULTS[o] for o in OPTS]}
    by_rev = collections.defaultdict(list)
    audit_puts = collections.Counter()
    ratio_puts = collections.Counter()
    undecodable = []
    for rev, typ, key, value, version in events:
        by_rev[rev].append((typ, key, value, version))
        rel = key[len(prefix):]
        if rel.startswith("audit/") and typ == "PUT":
            audit_puts[rel] += 1
        if rel.startswith("opt/") and rel[4:] in cur:
            if typ == "DELETE":
                cur[rel[4:]] = DEFAULTS[rel[4:]]
            else:
                try:
                    cur[rel[4:]] = json.loads(value)
                except ValueError:
                    undecodable.append("revision %d: %s = %r" % (rev, key, value))
                if rel == "opt/app.ratio":
                    ratio_puts[float(cur["app.ratio"])] += 1
        state[rev] = [cur[o] for o in OPTS]
    rep.check(not undecodable, "every value in etcd is JSON", undecodable)

    def state_at(r):
        """etcd's values at revision r: those after the newest range revision <= r."""
        k = bisect.bisect_right(revs, r)
        return state[revs[k - 1]] if k else state[0]

    # ---- the writes
    wrong = []
    for w in acked:
        key = "audit/%020d" % w["seq"]
        at = [e for e in by_rev.get(w["rev"], []) if e[1] == prefix + key and e[0] == "PUT"]
        if not at:
            wrong.append("writer %d #%d: audit record %d not put at revision %d" % (w["w"], w["i"], w["seq"], w["rev"]))
        elif audit_puts[key] != 1:
            wrong.append("writer %d #%d: audit record %d put %d times" % (w["w"], w["i"], w["seq"], audit_puts[key]))
        elif state_at(w["rev"]) != [w["limit"], w["ratio"]]:
            wrong.append("writer %d #%d: revision %d holds %s, the write %s" % (
                w["w"], w["i"], w["rev"], state_at(w["rev"]), [w["limit"], w["ratio"]]))
        elif ratio_puts[w["ratio"]] != 1:
            wrong.append("writer %d #%d: its value put %d times" % (w["w"], w["i"], ratio_puts[w["ratio"]]))
    rep.check(acked and not wrong, "every acknowledged write (%d) is in etcd's history once, at its revision"
              % len(acked), wrong)
    twice = ["app.ratio=%r put %d times" % (x, n) for x, n in ratio_puts.items() if n > 1]
    rep.check(not twice, "no write applied twice", twice)
    attempted = {w["ratio"] for w in writes}
    foreign = ["app.ratio=%r" % x for x in ratio_puts if x not in attempted]
    rep.check(not foreign, "etcd holds only values the writers sent", foreign)
    maybe = [w for w in writes if w not in acked and w["ratio"] in ratio_puts]
    rep.diag("%d failed attempts were committed all the same" % len(maybe))

    # ---- convergence
    end = time.time() + 30
    final = {}
    while True:
        final = {s: host_state(s, cmd) for s in segs}
        if all(f[0] == last for f in final.values()) or time.time() > end:
            break
        time.sleep(0.2)
    wrong = ["%s: revision %d, values %s; etcd: %d, %s" % (s, f[0], f[1], last, state[last])
             for s, f in final.items() if f[0] != last or f[1] != state[last]]
    rep.check(not wrong, "every host ends at etcd's last revision (%d) with its values" % last, wrong)
    insync = ["%s: %s" % (s, f[2].get("sync")) for s, f in final.items() if not (f[2].get("sync") or {}).get("in_sync")]
    rep.check(not insync, "... in sync", insync)

    # ---- the samples
    revset = set(revs) | {0}
    wrong, never, back = [], [], []
    limits = {w["limit"] for w in writes} | {DEFAULTS["app.limit"]}
    ratios = attempted | {DEFAULTS["app.ratio"]}
    lastrev = {}
    for s in samples:
        r, vals = s["rev"], s["vals"]
        if r not in revset:
            wrong.append("%s: revision %d is no revision of the range" % (s["seg"], r))
        elif vals != state_at(r):
            wrong.append("%s: at revision %d it read %s, etcd held %s" % (s["seg"], r, vals, state_at(r)))
        if vals[0] not in limits or vals[1] not in ratios:
            never.append("%s: revision %d: %s" % (s["seg"], r, vals))
        if r < lastrev.get(s["seg"], 0):
            back.append("%s: revision %d after %d" % (s["seg"], r, lastrev[s["seg"]]))
        lastrev[s["seg"]] = max(r, lastrev.get(s["seg"], 0))
    seen = collections.Counter(s["seg"] for s in samples)
    rep.check(samples and not wrong, "every host sample (%d distinct, %s) is etcd's state at its revision" % (
        len(samples), ", ".join("%s %d" % (k.rsplit("-", 1)[-1], v) for k, v in sorted(seen.items()))), wrong)
    rep.check(not never, "no host ever shows a value never written", never)
    rep.check(not back, "no host's revision ever goes back", back)

    # ---- one commit per revision
    wrong = []
    for s in segs:
        log = json.loads(subprocess.run(cmd + ["log", s, "--json"], capture_output=True, text=True,
                                        check=True).stdout)
        crevs = [c["cluster_revision"] for c in log if c["cluster_revision"]]
        n = collections.Counter(crevs)
        wrong += ["%s: revision %d committed %d times" % (s, r, k) for r, k in n.items() if k > 1]
        wrong += ["%s: revision %d committed, no revision of the range" % (s, r) for r in n if r not in revset]
        if crevs:
            first = min(crevs)
            missing = [r for r in revs if r > first and r not in n]
            if missing:
                wrong.append("%s: %d revisions never committed (after its first, %d): %s" % (
                    s, len(missing), first, missing[:10]))
    rep.check(not wrong, "every host commits each revision of the range once", wrong)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("run", "check"))
    ap.add_argument("--dir", required=True)
    ap.add_argument("--cluster", required=True)
    ap.add_argument("--segments", required=True)
    ap.add_argument("--writer-seg")
    ap.add_argument("--writers", type=int, default=3)
    ap.add_argument("--max-seconds", type=float, default=120)
    ap.add_argument("--sockets")
    ap.add_argument("--all-endpoints", help="writer 1's endpoints (the others': the file D/eps)")
    a = ap.parse_args()
    return run(a) if a.mode == "run" else check(a)


if __name__ == "__main__":
    sys.exit(main())
