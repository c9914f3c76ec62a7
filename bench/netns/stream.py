#!/usr/bin/python3
"""One plain TCP stream, to measure what a shaped link really carries.

    stream.py recv PORT BYTES          # prints goodput in bytes/s as JSON
    stream.py send HOST PORT BYTES

Independent of braid on purpose: the ring bound's B should not come from the
code under test. The receiver times first byte to last byte, so connection
set-up is left out; slow start is not (a few ms of a multi-second transfer).
"""
import json, socket, sys, time

CHUNK = 1 << 20


def recv(port, total):
    srv = socket.create_server(("0.0.0.0", port))
    conn, _ = srv.accept()
    buf = bytearray(CHUNK)
    got = conn.recv_into(buf)
    t0 = time.perf_counter()
    while got < total:
        n = conn.recv_into(buf)
        if n == 0:
            sys.exit(f"stream.py: sender closed after {got} of {total} bytes")
        got += n
    dt = time.perf_counter() - t0
    conn.sendall(b"k")  # lets the sender exit only after the receiver has everything
    print(json.dumps({"bytes": total, "seconds": dt, "bytes_per_s": total / dt}))


def send(host, port, total):
    for _ in range(100):  # the receiver may not listen yet
        try:
            conn = socket.create_connection((host, port))
            break
        except ConnectionRefusedError:
            time.sleep(0.05)
    else:
        sys.exit(f"stream.py: cannot connect to {host}:{port}")
    block = memoryview(bytes(CHUNK))
    sent = 0
    while sent < total:
        n = min(CHUNK, total - sent)
        conn.sendall(block[:n])
        sent += n
    conn.recv(1)


if __name__ == "__main__":
    if sys.argv[1] == "recv":
        recv(int(sys.argv[2]), int(sys.argv[3]))
    else:
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
