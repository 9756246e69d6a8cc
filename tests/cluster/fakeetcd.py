#!/usr/bin/env python3
"""A hostile stand-in for etcd's JSON gateway on a unix socket (tests/cluster
hostile.sh): answers range, put, lease and keepalive as etcd would (an empty
store at revision 5), and /v3/watch as MODE says:
  newlines  a 200 stream of empty lines, without end, as fast as it can
  nonl      a 200 stream of one message that never ends (no newline)
usage: fakeetcd.py SOCKET MODE"""
import os, socket, sys, threading

path, mode = sys.argv[1], sys.argv[2]
ANSWERS = {
    "/v3/kv/range": b'{"header":{"revision":"5"}}',
    "/v3/kv/put": b'{"header":{"revision":"6"}}',
    "/v3/lease/grant": b'{"header":{"revision":"5"},"ID":"7","TTL":"10"}',
    "/v3/lease/keepalive": b'{"result":{"header":{"revision":"5"},"ID":"7","TTL":"10"}}',
}


def serve(c):
    f = c.makefile("rb")
    try:
        while True:
            line = f.readline()
            if not line:
                return
            target = line.split()[1].decode()
            n = 0
            while True:
                h = f.readline().strip()
                if not h:
                    break
                k, _, v = h.partition(b":")
                if k.lower() == b"content-length":
                    n = int(v)
            f.read(n)
            if target == "/v3/watch":
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
                chunk = b"\n" * 65536 if mode == "newlines" else b'{"result":' + b" " * 65536
                if mode == "nonl":
                    c.sendall(b'{"result":')
                    chunk = b" " * 65536
                while True:
                    c.sendall(chunk)
            body = ANSWERS.get(target, b'{"error":"nope","message":"nope","code":5}')
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
