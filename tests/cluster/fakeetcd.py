#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A hostile stand-in for etcd's JSON gateway on a unix socket (tests/cluster
hostile.sh, retry.sh).

usage: fakeetcd.py SOCKET MODE
  answers range, put, lease and keepalive as etcd would (an empty store at
  revision 5), and /v3/watch as MODE says:
  newlines  a 200 stream of empty lines, without end, as fast as it can
  nonl      a 200 stream of one message that never ends (no newline)
  samepage  range answers one key (0xff 0xff, past any prefix) with more
            to come, every time: a client that pages on would never end
  fragments the watch confirmed, then fragments of one response (500 events
            of 2 kB each) without end, as fast as it can
  rangeforever  range pages of as many keys as asked (under the key asked),
            each with a value of $FAKE_VAL bytes (20000), more to come, every
            time: they advance, but never end
  emptyobjs range answers {"header":...,"x":[{},{},...]}: $FAKE_NOBJ
            (4000000) empty objects, 12 MB that jansson makes ~1 GB of
  nulkey    range of opt/ answers opt/app.limit (43) and opt/app.limit NUL x
            (44): a key with a NUL byte; the watch is confirmed, then quiet
  Every request is appended to $FAKE_LOG (if set) as one line: PATH BODY.

usage: fakeetcd.py SOCKET inject UPSTREAM PATH N HOW LOG
  a proxy in front of the etcd whose client socket is UPSTREAM: every
  request is forwarded, except that the first N requests to PATH
  (/v3/kv/txn, /v3/kv/range; N -1: all of them) get etcd's answer to an
  election, HTTP 503 "etcdserver: leader changed", as HOW says:
  503   instead of forwarding them (nothing happened)
  lost  after forwarding them (etcd applied it; the answer is lost)
  One line per request to PATH is appended to LOG: 503, lost or ok."""
import base64, http.client, itertools, json, os, socket, sys, threading

path, mode = sys.argv[1], sys.argv[2]
ANSWERS = {
    "/v3/kv/range": b'{"header":{"revision":"5"}}',
    "/v3/kv/put": b'{"header":{"revision":"6"}}',
    "/v3/lease/grant": b'{"header":{"revision":"5"},"ID":"7","TTL":"10"}',
    "/v3/lease/keepalive": b'{"result":{"header":{"revision":"5"},"ID":"7","TTL":"10"}}',
    # a member with a leader, and the agent's registration: the stream is all
    # that is wrong with it (else the agent's liveness probe gives up on it
    # within 5 s, before a loaded machine has sent 64 MiB)
    "/v3/maintenance/status": b'{"header":{"revision":"5","member_id":"1"},"leader":"1"}',
    "/v3/kv/txn": b'{"header":{"revision":"6"},"succeeded":true}',
}
CREATED = b'{"result":{"header":{"revision":"5"},"created":true,"compact_revision":"0"}}\n'
LEADER_CHANGED = b'{"error":"etcdserver: leader changed","code":14,"message":"etcdserver: leader changed"}'

if mode == "inject":
    upstream, inject_path, left, how, log = sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6], sys.argv[7]
    lock = threading.Lock()


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, sock_path):
        super().__init__("localhost", timeout=30)
        self.sock_path = sock_path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(30)
        self.sock.connect(self.sock_path)


def forward(target, body):
    """etcd's answer to POST target: (status, reason, body)."""
    c = UnixHTTPConnection(upstream)
    try:
        c.request("POST", target, body, {"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.reason, r.read()
    finally:
        c.close()


def answer(target, body):
    """inject: what the client gets for one request."""
    global left
    if target != inject_path:
        return forward(target, body)
    with lock:  # one request to PATH at a time: the counts are exact
        inject = left != 0
        if left > 0:
            left -= 1
        if inject and how == "503":
            result = (503, "Service Unavailable", LEADER_CHANGED)
            what = "503"
        else:
            result = forward(target, body)
            what = "ok"
            if inject:
                result = (503, "Service Unavailable", LEADER_CHANGED)
                what = "lost"
        with open(log, "a") as f:
            f.write(what + "\n")
        return result


def b64(b):
    return base64.b64encode(b).decode()


def log_request(target, body):
    if os.environ.get("FAKE_LOG"):
        with open(os.environ["FAKE_LOG"], "a") as f:
            f.write("%s %s\n" % (target, body.decode(errors="replace").replace("\n", " ")))


counter = itertools.count()


def range_forever(body):
    req = json.loads(body)
    if "limit" not in req:  # one key: none
        return ANSWERS["/v3/kv/range"]
    base = base64.b64decode(req["key"]).split(b"zz")[0]
    val = b64(b"1" * int(os.environ.get("FAKE_VAL", "20000")))
    kvs = ",".join('{"key":"%s","value":"%s","mod_revision":"5"}' % (b64(base + b"zz%012d" % next(counter)), val)
                   for _ in range(int(req["limit"])))
    return ('{"header":{"revision":"5"},"kvs":[%s],"more":true,"count":"99999999999"}' % kvs).encode()


def range_nulkey(body):
    req = json.loads(body)
    key = base64.b64decode(req["key"])
    kvs = [b"/shmcfg/v1/c/opt/app.limit", b"/shmcfg/v1/c/opt/app.limit\0x"]
    if not key.startswith(b"/shmcfg/v1/c/opt/") or "range_end" not in req:
        return ANSWERS["/v3/kv/range"]
    kvs = ",".join('{"key":"%s","value":"%s","mod_revision":"5"}' % (b64(k), b64(b"%d" % (43 + i)))
                   for i, k in enumerate(kvs) if k >= key)
    return ('{"header":{"revision":"5"},"kvs":[%s],"count":"2"}' % kvs).encode()


def watch_fragments(c):
    ev = '{"type":"PUT","kv":{"key":"%s","value":"%s","mod_revision":"6"}}' % (
        b64(b"/shmcfg/v1/c/opt/zz"), b64(b"1" * 2000))
    msg = ('{"result":{"header":{"revision":"6"},"compact_revision":"0","fragment":true,"events":[%s]}}\n'
           % ",".join([ev] * 500)).encode()
    c.sendall(CREATED)
    while True:
        c.sendall(msg)


def serve(c):
    f = c.makefile("rb")
    try:
        while True:
            line = f.readline()
            if not line:
                return
            target = line.split()[1].decode()
            n = 0
            expect = False
            while True:
                h = f.readline().strip()
                if not h:
                    break
                k, _, v = h.partition(b":")
                if k.lower() == b"content-length":
                    n = int(v)
                elif k.lower() == b"expect" and v.strip().lower() == b"100-continue":
                    expect = True
            if expect:  # curl waits for it before a large body
                c.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            body = f.read(n)
            log_request(target, body)
            if mode == "inject":
                status, reason, out = answer(target, body)
                c.sendall(b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                          % (status, reason.encode(), len(out), out))
                continue
            if target == "/v3/watch":
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
                if mode == "fragments":
                    watch_fragments(c)
                if mode == "nulkey":
                    c.sendall(CREATED)
                    threading.Event().wait()
                chunk = b"\n" * 65536 if mode == "newlines" else b'{"result":' + b" " * 65536
                if mode == "nonl":
                    c.sendall(b'{"result":')
                    chunk = b" " * 65536
                while True:
                    c.sendall(chunk)
            request, body = body, ANSWERS.get(target, b'{"error":"nope","message":"nope","code":5}')
            if mode == "rangeforever" and target == "/v3/kv/range":
                body = range_forever(request)
            if mode == "nulkey" and target == "/v3/kv/range":
                body = range_nulkey(request)
            if mode == "emptyobjs" and target == "/v3/kv/range":
                body = b'{"header":{"revision":"5"},"x":[' + b"{}," * int(os.environ.get("FAKE_NOBJ", "4000000")) + b"{}]}"
            if mode == "samepage" and target == "/v3/kv/range":
                body = (b'{"header":{"revision":"5"},"kvs":[{"key":"//8=","value":"e30=",'
                        b'"mod_revision":"5"}],"more":true,"count":"2"}')
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                      % (len(body), body))
    except OSError:
        pass
    finally:
        c.close()


s = socket.socket(socket.AF_UNIX)
s.bind(path)
s.listen(16)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
