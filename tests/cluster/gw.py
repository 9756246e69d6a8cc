#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes many keys to etcd quickly, through its JSON gateway on a unix
socket (etcdctl costs a process start a call): the cluster tests' bulk
writer.

    gw.py SOCKET put-each PREFIX N VALUE     N keys PREFIX0..PREFIX{N-1}, one revision each
    gw.py SOCKET put-batch PREFIX N VALUE    the same keys, 100 to a transaction
    gw.py SOCKET put-file KEY FILE           one key, the bytes of FILE

Prints the revision of the last write.
"""
import base64
import http.client
import json
import socket
import sys


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=30)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(self.path)


def b64(b):
    return base64.b64encode(b if isinstance(b, bytes) else b.encode()).decode()


def post(conn, path, body):
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        sys.exit("gw.py: %s: HTTP %d: %s" % (path, r.status, data[:200]))
    return json.loads(data)


def main():
    sock, cmd = sys.argv[1], sys.argv[2]
    conn = UnixConnection(sock)
    rev = 0
    if cmd == "put-file":
        key, path = sys.argv[3:5]
        with open(path, "rb") as f:
            rev = post(conn, "/v3/kv/put", {"key": b64(key), "value": b64(f.read())})["header"]["revision"]
    else:
        prefix, n, value = sys.argv[3], int(sys.argv[4]), sys.argv[5]
        if cmd == "put-each":
            for i in range(n):
                rev = post(conn, "/v3/kv/put", {"key": b64("%s%d" % (prefix, i)), "value": b64(value)})["header"]["revision"]
        elif cmd == "put-batch":
            for s in range(0, n, 100):
                ops = [{"request_put": {"key": b64("%s%d" % (prefix, i)), "value": b64(value)}}
                       for i in range(s, min(n, s + 100))]
                rev = post(conn, "/v3/kv/txn", {"success": ops})["header"]["revision"]
        else:
            sys.exit("gw.py: unknown command " + cmd)
    print(rev)


if __name__ == "__main__":
    main()
