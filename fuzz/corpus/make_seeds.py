#!/usr/bin/env python3
"""Writes the seed corpora of the binary-format harnesses (fuzz/corpus/<harness>/).

The seeds are checked in; this script says how they were made and remakes
them: python3 fuzz/corpus/make_seeds.py. Text formats (csv, libsvm, TOML,
sidecar JSON) have hand-written seeds beside these. Layouts follow the
decoders: comm/transport/stream_peer.h (Header), comm/store/protocol.h,
ps/protocol.h (RequestHeader), base/safetensors.h, data/idx.h, and each
harness's own input format (its header comment).
"""
import gzip
import json
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def write(harness, name, data):
    d = os.path.join(HERE, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- transport_frames: u8 receives | (u8 tag, u16 size)* | u8 piece | the peer's bytes
def frame(tag, size, remote=0, ack=0, payload=b""):
    return struct.pack("<QQQQ", tag, size, remote, ack) + payload


def transport():
    write("transport_frames", "early", bytes([0, 255]) + frame(0, 8, payload=b"abcdefgh") + frame(1, 0))
    write("transport_frames", "posted", bytes([1, 0]) + struct.pack("<H", 16) + bytes([7])
          + frame(0, 16, payload=bytes(range(16))) + frame(2, 5, payload=b"hello"))
    write("transport_frames", "mismatch", bytes([1, 1]) + struct.pack("<H", 4) + bytes([31])
          + frame(1, 100, payload=bytes(100)) + frame(1, 3, payload=b"xyz"))
    write("transport_frames", "pull_and_ack", bytes([1, 3]) + struct.pack("<H", 32) + bytes([255])
          + frame(3, 32, remote=0x1000, ack=7) + frame(0, 0, ack=5) + frame(2, 40, remote=0x2000, ack=8))
    write("transport_frames", "oversized", bytes([0, 255]) + frame(0, 8 << 30))


# ---- store_protocol: (u32 length | u8 op | (u32 length | bytes)*)*
def store_frame(op, *fields):
    body = bytes([op]) + b"".join(struct.pack("<I", len(f)) + f for f in fields)
    return struct.pack("<I", len(body)) + body


def store():
    SET, GET, ADD, WAIT, CAS, DEL, PING = 1, 2, 3, 4, 5, 6, 7
    write("store_protocol", "ops", store_frame(SET, b"braid/tcp/0", b"127.0.0.1:4000/1") + store_frame(GET, b"braid/tcp/0")
          + store_frame(ADD, b"count", b"1") + store_frame(ADD, b"count", b"-3") + store_frame(CAS, b"k", b"", b"v")
          + store_frame(CAS, b"k", b"v", b"w") + store_frame(DEL, b"k") + store_frame(PING))
    write("store_protocol", "wait", store_frame(SET, b"a", b"1") + store_frame(WAIT, b"100", b"a")
          + store_frame(WAIT, b"1099511627776", b"a", b"b"))
    write("store_protocol", "overflow", store_frame(SET, b"c", b"9223372036854775807") + store_frame(ADD, b"c", b"1"))
    write("store_protocol", "full", b"".join(store_frame(SET, b"key%d" % i, bytes(300)) for i in range(20)))


# ---- ps_protocol: (u8 worker | RequestHeader | payload)*
OPS = dict(hello=1, init_dense=2, push_dense=3, pull_dense=4, define_table=5, push_sparse=6, pull_sparse=7, done=8, await_others=9)


def request(worker, op, payload=b"", table=0, clock=0, version=0, lr=0.1, count=0, flags=0):
    h = struct.pack("<IIiiqqdQQQ", 0x31535042, OPS[op], worker, table, clock, version, lr, count, len(payload), flags)
    assert len(h) == 64
    return bytes([worker]) + h + payload


def ps_config(consistency="asp", codec="none", updater="sgd", backup=0):
    return {"consistency": consistency, "staleness": 1, "softsync_n": 1, "backup_workers": backup, "barrier": 0,
            "updater": {"name": updater, "momentum": 0.9, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                        "weight_decay": 0.0},
            "checkpoint_dir": "", "checkpoint_every": 0, "resume": False, "seed": 1, "timeout_s": 1.0,
            "codec": {"name": codec, "qsgd_levels": 127, "qsgd_chunk": 512, "onebit_chunk": 256, "topk_ratio": 0.25,
                      "powersgd_rank": 2, "powersgd_min_rate": 2, "powersgd_epsilon": 0, "warmup_steps": 0,
                      "min_elements": 0, "error_feedback": True, "seed": 0}}


def ps_session(consistency, codec="none", updater="sgd", backup=0, n=8, dim=4):
    hello = json.dumps({"config": ps_config(consistency, codec, updater, backup), "dense_total": n}).encode()
    floats = struct.pack("<%df" % n, *[0.5 * i for i in range(n)])
    keys = struct.pack("<3Q", 1, 99, 1 << 40)
    rows = struct.pack("<%df" % (3 * dim), *[0.1] * (3 * dim))
    out = request(0, "hello", hello) + request(1, "hello", hello) + request(0, "init_dense", floats, count=n)
    out += request(0, "define_table", json.dumps({"dim": dim, "init_std": 0.01}).encode(), table=3)
    for w in (0, 1):
        # With a codec the push is flagged encoded (kEncodedPush), so the codec decodes it.
        out += request(w, "push_dense", floats, count=n, clock=0, flags=0 if codec == "none" else 1)
        out += request(w, "push_sparse", keys + rows, table=3, count=3, clock=0)
        out += request(w, "pull_dense", clock=1) + request(w, "pull_sparse", keys, table=3, count=3, clock=1)
    # Worker 0 asks how many still train (its wait for the others' last updates) around worker 1's done.
    return out + request(1, "done") + request(0, "await_others") + request(0, "done")


def ps():
    write("ps_protocol", "asp", ps_session("asp"))
    write("ps_protocol", "bsp_adam", ps_session("bsp", updater="adam"))
    write("ps_protocol", "bsp_backup", ps_session("bsp", backup=1))
    write("ps_protocol", "softsync", ps_session("softsync", updater="momentum"))
    write("ps_protocol", "ssp_adagrad", ps_session("ssp", updater="adagrad"))
    # Encoded pushes carry a codec's message instead of raw floats; the seeds
    # carry raw floats of the right count, which the codecs refuse or read.
    for codec in ("fp16", "bf16", "qsgd", "onebit", "topk", "powersgd"):
        write("ps_protocol", "asp_" + codec, ps_session("asp", codec=codec))


# ---- safetensors
def safetensors_file(tensors, metadata=None, crc=True):
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    meta = dict(metadata or {})
    if crc:
        meta["braid.crc32"] = "%08x" % zlib.crc32(data)
    if meta:
        header["__metadata__"] = meta
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def safetensors():
    t = {"model.0.weight": ("F32", [2, 3], struct.pack("<6f", *range(6))),
         "model.0.bias": ("F32", [2], struct.pack("<2f", 1, 2)),
         "optim.0.steps": ("I64", [], struct.pack("<q", 5)),
         "mask": ("BOOL", [4], bytes([1, 0, 1, 1])), "h": ("BF16", [1, 2], bytes(4))}
    write("safetensors", "checkpoint", safetensors_file(t, {"format": "braid-checkpoint", "step": "3"}))
    write("safetensors", "no_crc", safetensors_file({"x": ("F64", [1], struct.pack("<d", 1.5))}, crc=False))
    write("safetensors", "empty", safetensors_file({}))
    write("safetensors", "zero_dim", safetensors_file({"z": ("U8", [0, 7], b""), "s": ("I32", [1, 1, 1], bytes(4))}))
    # Found under UBSan: JSON floats where the reader wants counts (a float
    # out of range cast to an integer is undefined; 0.5 was read as 0).
    for name, header, data in (("float_shape", '{"w": {"dtype": "F32", "shape": [1e30], "data_offsets": [0, 4]}}', 4),
                               ("fraction_shape", '{"w": {"dtype": "F32", "shape": [0.5], "data_offsets": [0, 0]}}', 0),
                               ("float_offsets", '{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4e30]}}', 4)):
        write("safetensors", name, struct.pack("<Q", len(header)) + header.encode() + bytes(data))
    shard = {"dense": ("F32", [4], bytes(16)), "dense.state": ("F32", [4], bytes(16)),
             "table.3.keys": ("I64", [1], struct.pack("<q", 9)), "table.3.rows": ("F32", [1, 2], bytes(8)),
             "table.3.state": ("F32", [2], bytes(8)), "table.3.steps": ("I64", [1], bytes(8))}
    write("safetensors", "ps_shard", safetensors_file(shard, {"braid.ps.version": "2", "braid.ps.clock": "1",
                                                              "braid.ps.updater": "momentum",
                                                              "braid.ps.tables": '{"3": {"dim": 2, "init_std": 0.1}}'}))


# ---- idx
def idx():
    write("idx", "images", bytes([0, 0, 8, 3]) + struct.pack(">3I", 2, 3, 3) + bytes(range(18)))
    write("idx", "labels", bytes([0, 0, 8, 1]) + struct.pack(">I", 5) + bytes([1, 2, 3, 4, 5]))
    write("idx", "empty", bytes([0, 0, 8, 2]) + struct.pack(">2I", 0, 100000))


# ---- gzip-compressed copies of text seeds, so the gzip path is covered too
def gzipped():
    write("csv", "gzip.csv.gz", gzip.compress(b"a,b,label\n1,2,0\n3,4.5,1\n", mtime=0))
    write("libsvm", "gzip.svm.gz", gzip.compress(b"+1 1:0.5 3:1\n-1 2:2 # c\n", mtime=0))


if __name__ == "__main__":
    transport(); store(); ps(); safetensors(); idx(); gzipped()
