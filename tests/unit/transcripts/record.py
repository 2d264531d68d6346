#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Record a real QMP exchange with a running QEMU into a transcript file.

usage: record.py SOCKET OUT.json STEP...

Each STEP is a JSON command object without "id" (e.g. '{"execute":
"query-status"}'), or "wait:SECONDS" to collect asynchronous events for a
while, or "eof" to read until QEMU closes the monitor.  Commands get the
ids "rec-1", "rec-2"...; the unit tests' fake QEMU replaces those ids with
the ones our client sends, and otherwise replays QEMU's bytes exactly.

The transcript is a JSON object {"qemu": ..., "exchange": [...]} whose
entries are {"recv": "<bytes from QEMU, one JSON line with its CRLF>"} or
{"send": <the command the client is expected to send, without id>}.
"""
import json
import select
import socket
import subprocess
import sys
import time


def main():
    path, out, steps = sys.argv[1], sys.argv[2], sys.argv[3:]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    buf = b""
    exchange = []
    eof = False

    def read_line(deadline):
        nonlocal buf, eof
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or eof:
                return None
            r, _, _ = select.select([sock], [], [], left)
            if not r:
                return None
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                eof = True
                return None
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        line += b"\n"
        exchange.append({"recv": line.decode()})
        return json.loads(line)

    read_line(time.monotonic() + 5)  # greeting
    n = 0
    for step in steps:
        if step.startswith("wait:"):
            deadline = time.monotonic() + float(step[5:])
            while read_line(deadline) is not None:
                pass
            continue
        if step == "eof":
            deadline = time.monotonic() + 10
            while read_line(deadline) is not None:
                pass
            if eof:
                exchange.append({"eof": True})
            continue
        n += 1
        cmd = json.loads(step)
        exchange.append({"send": dict(cmd)})
        cmd["id"] = "rec-%d" % n
        sock.sendall(json.dumps(cmd).encode() + b"\n")
        deadline = time.monotonic() + 30
        while True:
            msg = read_line(deadline)
            if msg is None or msg.get("id") == cmd["id"]:
                break
    version = subprocess.run(["qemu-system-x86_64", "--version"],
                             capture_output=True, text=True).stdout
    with open(out, "w") as f:
        json.dump({"qemu": version.splitlines()[0],
                   "exchange": exchange}, f, indent=1)
        f.write("\n")


main()
