#!/usr/bin/env python3
"""An independent reader of braid token shards (docs/text.md), for shards_test:
prints {"width", "count", "vocab", "ids"} of the shard named on the command line."""
import json
import struct
import sys

data = open(sys.argv[1], "rb").read()
if data[:8] != b"BRAIDTOK":
    sys.exit("not a shard")
version, width, count, vocab, _ = struct.unpack_from("<IIQII", data, 8)
assert version == 1 and width in (2, 4) and len(data) == 32 + width * count
ids = list(struct.unpack_from("<%d%s" % (count, "H" if width == 2 else "I"), data, 32))
print(json.dumps({"width": width, "count": count, "vocab": vocab, "ids": ids}))
