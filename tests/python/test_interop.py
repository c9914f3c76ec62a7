"""Zero-copy exchange proven by aliasing: a write through one side shows in
the other and the data pointers are equal; lifetimes (a view outliving its
tensor keeps the memory alive, in both directions); DLPack with PyTorch."""
import gc

import numpy as np
import pytest

import braid

torch = pytest.importorskip("torch")


def test_numpy_view_of_tensor_aliases():
    t = braid.arange(6, dtype=braid.float32).reshape(2, 3)
    v = t.numpy()
    assert v.ctypes.data == t.data_ptr() and v.dtype == np.float32 and v.shape == (2, 3)
    v[0, 1] = 100
    assert t[0, 1].item() == 100
    t.fill_(3)
    assert (v == 3).all()
    # Strided views export their strides (no copy).
    col = t[:, 1]
    cv = np.asarray(col)
    assert cv.ctypes.data == col.data_ptr() and cv.strides == (12,)
    assert memoryview(t).format == "f" and memoryview(t).shape == (2, 3)


def test_tensor_of_numpy_aliases():
    a = np.zeros((3, 4), np.float32)
    t = braid.from_numpy(a)
    assert t.data_ptr() == a.ctypes.data
    a[2, 3] = 5
    assert t[2, 3].item() == 5
    t[0] = 7.0
    assert (a[0] == 7).all()
    # A strided array (every other column) is wrapped in place too.
    s = braid.from_numpy(a[:, ::2])
    assert s.data_ptr() == a.ctypes.data and s.strides == (4, 2)
    for dt in [np.float64, np.float16, np.int32, np.int64, np.uint8, np.bool_]:
        x = np.ones(3, dt)
        assert braid.from_numpy(x).numpy().dtype == dt


def test_numpy_view_outlives_tensor():
    t = braid.full([1000], 42.0)
    v = t.numpy()
    del t
    gc.collect()
    # Fresh tensors of the same size would reuse a freed block (the caching allocator).
    others = [braid.full([1000], -1.0) for _ in range(8)]
    assert (v == 42).all() and len(others) == 8


def test_tensor_outlives_numpy_array():
    a = np.full(1000, 9.0, np.float32)
    t = braid.from_numpy(a)
    del a
    gc.collect()
    junk = [np.full(1000, -1.0, np.float32) for _ in range(8)]
    assert t.sum().item() == 9000.0 and len(junk) == 8
    # A braid view keeps the buffer alive too.
    half = t[500:]
    del t
    gc.collect()
    assert half.sum().item() == 4500.0


def test_readonly_and_unsupported_arrays_refused():
    a = np.zeros(3, np.float32)
    a.flags.writeable = False
    with pytest.raises(braid.ValueError, match="read-only"):
        braid.from_numpy(a)
    assert braid.tensor(a).tolist() == [0.0, 0.0, 0.0]  # braid.tensor copies
    with pytest.raises(braid.ValueError, match="format"):
        braid.from_numpy(np.zeros(2, np.complex64))
    with pytest.raises(braid.ValueError, match="bfloat16"):
        braid.zeros(2, dtype=braid.bfloat16).numpy()
    with pytest.raises(braid.ValueError, match="bfloat16"):
        np.asarray(braid.zeros(2, dtype=braid.bfloat16))


def test_dlpack_to_torch_aliases():
    t = braid.arange(12, dtype=braid.float32).reshape(3, 4)
    x = torch.utils.dlpack.from_dlpack(t)
    assert x.data_ptr() == t.data_ptr() and tuple(x.shape) == (3, 4)
    x[1, 2] = -5
    assert t[1, 2].item() == -5
    col = t[:, 1]
    xc = torch.utils.dlpack.from_dlpack(col)
    assert xc.stride() == (4,) and xc.data_ptr() == col.data_ptr()
    del t, col
    gc.collect()
    assert x[1, 2].item() == -5  # torch's view keeps braid's memory


def test_dlpack_from_torch_aliases():
    x = torch.arange(10, dtype=torch.float32)
    t = braid.from_dlpack(x)
    assert t.data_ptr() == x.data_ptr()
    x[3] = 77
    assert t[3].item() == 77
    t[4] = 88.0
    assert x[4].item() == 88
    # Strided and other dtypes (bf16 too: numpy has none, DLPack does).
    y = torch.arange(12, dtype=torch.float64).reshape(3, 4).t()
    ty = braid.from_dlpack(y)
    assert ty.shape == (4, 3) and ty.strides == (1, 4) and ty.data_ptr() == y.data_ptr()
    np.testing.assert_array_equal(ty.numpy(), y.numpy())
    for dt, bt in [(torch.int64, braid.int64), (torch.int32, braid.int32), (torch.bfloat16, braid.bfloat16),
                   (torch.float16, braid.float16), (torch.uint8, braid.uint8)]:
        assert braid.from_dlpack(torch.ones(3, dtype=dt)).dtype == bt
    del x
    gc.collect()
    assert t[3].item() == 77  # braid's tensor keeps torch's memory


def test_dlpack_roundtrip_and_capsules():
    t = braid.ones(4)
    back = braid.from_dlpack(t)  # braid to braid through a capsule
    assert back.data_ptr() == t.data_ptr()
    cap = t.__dlpack__()
    braid.from_dlpack(cap)
    with pytest.raises(braid.ValueError, match="unused"):
        braid.from_dlpack(cap)  # a capsule is consumed once
    assert t.__dlpack_device__() == (1, 0)
    if hasattr(np, "from_dlpack"):
        n = np.from_dlpack(t)
        assert n.ctypes.data == t.data_ptr()


def test_values_match_torch_through_dlpack():
    x = torch.randn(4, 5)
    w = torch.randn(3, 5)
    got = braid.linear(braid.from_dlpack(x), braid.from_dlpack(w))
    torch.testing.assert_close(torch.utils.dlpack.from_dlpack(got), x @ w.T, rtol=1e-5, atol=1e-5)
