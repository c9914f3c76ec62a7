"""braid.data: datasets, token shards and the loader as a Python iterable."""
import struct

import numpy as np
import pytest

import braid
from conftest import FASHION, needs


def write_shard(path, ids, vocab):
    """A token shard as `braid tokenize encode` writes it (braid/text/shards.h)."""
    ids = np.asarray(ids, np.uint16)
    path.write_bytes(b"BRAIDTOK" + struct.pack("<IIQII", 1, 2, len(ids), vocab, 0) + ids.tobytes())


def test_token_shards_windows_and_loader(tmp_path):
    write_shard(tmp_path / "a-00000.tok", np.arange(100) % 50, 50)
    write_shard(tmp_path / "a-00001.tok", (np.arange(60) * 7) % 50, 50)
    ds = braid.data.TokenDataset(str(tmp_path / "a-*.tok"), context=8)
    assert ds.vocab_size == 50
    assert ds.spec["input_shape"] == (8,) and ds.spec["input_dtype"] == braid.int64
    x, y = ds[0]
    assert x.tolist() == list(range(8)) and y.tolist() == list(range(1, 9))  # next-token targets
    # Windows of 9 ids never cross a shard's end: 100 // 8 tiles... counted by the reader.
    n = len(ds)
    assert n > 0
    loader = braid.data.Loader(ds, batch_size=4, shuffle=True, seed=3, workers=1)
    seen = [(xb.shape, yb.shape) for xb, yb in loader]
    assert len(seen) == len(loader) == (n + 3) // 4
    assert seen[0] == ((4, 8), (4, 8))
    first = [xb.tolist() for xb, _ in loader]  # epoch 1: another order
    loader.set_epoch(0)
    again = [xb.tolist() for xb, _ in loader]
    assert len(first) == len(again)
    with pytest.raises(braid.IoError):
        braid.data.TokenDataset(str(tmp_path / "none-*.tok"), context=8)
    (tmp_path / "bad-00000.tok").write_bytes(b"NOTATOKENSHARD" * 4)
    with pytest.raises(braid.IoError):
        braid.data.TokenDataset(str(tmp_path / "bad-*.tok"), context=8)


@needs(FASHION)
def test_fashion_mnist_and_sharded_loader():
    test = braid.data.FashionMnist(str(FASHION), train=False)
    assert len(test) == 10000 and test.spec["input_shape"] == (1, 28, 28)
    x, y = test[-1]
    assert x.shape == (1, 28, 28) and 0 <= y.item() < 10
    # Two ranks' shards of one epoch cover the set once.
    sub = braid.data.Subset(test, 0, 100)
    got = []
    for r in range(2):
        for _, yb in braid.data.Loader(sub, batch_size=10, shuffle=True, seed=1, rank=r, world=2):
            got += yb.tolist()
    assert len(got) == 100
    assert sorted(got) == sorted(sub[i][1].item() for i in range(100))


def test_csv_and_open_dataset(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("1,2,0\n3,4,1\n5,6,1\n")
    csv = braid.data.CsvDataset(str(f))
    assert len(csv) == 3 and csv[1][0].tolist() == [3.0, 4.0] and csv[1][1].item() == 1
    d = braid.data.open_dataset("csv", str(f))
    assert len(d) >= 1
    with pytest.raises(braid.ValueError):
        braid.data.open_dataset("nope", str(f))
