"""braid.Tensor: creation, attributes, operators and indexing against numpy,
and refusals (wrong dtype, shape, device, undefined gradient) as Python
exceptions."""
import numpy as np
import pytest

import braid


def arr(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_creation_and_attributes():
    t = braid.zeros(2, 3)
    assert t.shape == (2, 3) and t.dtype == braid.float32 and str(t.device) == "cpu"
    assert t.ndim == 2 and t.numel() == 6 and len(t) == 2 and t.is_contiguous()
    assert braid.ones((4,), dtype=braid.int64).tolist() == [1, 1, 1, 1]
    assert braid.full([2], 7.5).tolist() == [7.5, 7.5]
    assert braid.arange(5).tolist() == [0, 1, 2, 3, 4] and braid.arange(5).dtype == braid.int64
    # Python floats become float32 and ints int64 (torch's rule); arrays keep their dtype.
    assert braid.tensor([1.0, 2.0]).dtype == braid.float32
    assert braid.tensor([1, 2]).dtype == braid.int64
    assert braid.tensor(np.zeros(3, np.float64)).dtype == braid.float64
    assert braid.tensor([1, 2], dtype="float16").dtype == braid.float16
    assert braid.tensor([1.5], dtype=braid.bfloat16).to(braid.float32).item() == 1.5
    assert braid.tensor(3.0).item() == 3.0 and braid.tensor(True).item() is True
    assert braid.dtype.float64.itemsize == 8


@pytest.mark.parametrize("op", ["add", "sub", "mul", "truediv", "matmul"])
def test_binary_operators_match_numpy(op):
    a, b = arr(3, 4, seed=1), arr(3, 4, seed=2)
    if op == "matmul":
        b = arr(4, 5, seed=2)
    got = getattr(braid.tensor(a), f"__{op}__")(braid.tensor(b)).numpy()
    want = getattr(a, f"__{op}__")(b)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_scalars_broadcasting_and_reductions():
    a = arr(2, 3)
    t = braid.tensor(a)
    np.testing.assert_allclose((2.0 - t * 3 + 1 / (t.abs() + 1)).numpy(), 2.0 - a * 3 + 1 / (np.abs(a) + 1), rtol=1e-5)
    np.testing.assert_allclose((t + braid.tensor(a[0])).numpy(), a + a[0], rtol=1e-6)
    np.testing.assert_allclose(t.sum().item(), a.sum(), rtol=1e-5)
    np.testing.assert_allclose(t.mean(dim=1).numpy(), a.mean(axis=1), rtol=1e-5)
    np.testing.assert_allclose(t.sum(dim=[0, 1], keepdim=True).numpy(), a.sum(keepdims=True), rtol=1e-5)
    vals, idx = t.max(dim=1)
    np.testing.assert_allclose(vals.numpy(), a.max(axis=1))
    assert idx.tolist() == a.argmax(axis=1).tolist()
    np.testing.assert_allclose(braid.softmax(t, 1).numpy().sum(axis=1), [1, 1], rtol=1e-6)
    assert (t > 0).dtype == braid.bool_
    assert (t > 0).numpy().tolist() == (a > 0).tolist()


def test_indexing_matches_numpy():
    a = arr(4, 5, 6)
    t = braid.tensor(a)
    for key in [1, -1, (slice(1, 3), 2), (Ellipsis, 0), (None, 2, slice(None, None, 2)), (slice(None), slice(-3, None), 1),
                (0, 1, 2)]:
        np.testing.assert_array_equal(t[key].numpy(), a[key])
    idx = braid.tensor([3, 0, 3])
    np.testing.assert_array_equal(t[idx].numpy(), a[[3, 0, 3]])
    # Views share memory: basic indexing makes no copy.
    assert t[1].shares_memory(t)
    with pytest.raises(braid.IndexError):
        t[4]
    with pytest.raises(IndexError):  # braid.IndexError is Python's IndexError too
        t[0, 0, 0, 0]
    with pytest.raises(braid.ValueError, match="step"):
        t[::-1]


def test_setitem_and_inplace():
    t = braid.zeros(3, 4)
    t[1] = 5.0
    t[:, 0] = braid.tensor([1.0, 2.0, 3.0])
    want = np.zeros((3, 4), np.float32)
    want[1] = 5
    want[:, 0] = [1, 2, 3]
    np.testing.assert_array_equal(t.numpy(), want)
    ptr = t.data_ptr()
    t += 1
    t *= braid.full([4], 2.0)
    assert t.data_ptr() == ptr  # in place, as torch: a parameter updated by `p -= lr * g` stays the same tensor
    np.testing.assert_array_equal(t.numpy(), (want + 1) * 2)
    p = braid.ones(2, requires_grad=True)
    with pytest.raises(braid.ValueError, match="no_grad"):
        p -= 1
    with braid.no_grad():
        p -= 1
    assert p.tolist() == [0.0, 0.0]


def test_bad_input_raises_not_crashes():
    with pytest.raises(braid.ValueError, match="broadcast"):
        braid.zeros(2, 3) + braid.zeros(3, 2)
    with pytest.raises(braid.ValueError, match="unknown dtype"):
        braid.zeros(2, dtype="complex64")
    with pytest.raises(braid.ValueError):
        braid.matmul(braid.zeros(2, 3), braid.zeros(2, 3))
    with pytest.raises(braid.ValueError, match="i64"):
        braid.cross_entropy(braid.zeros(2, 3), braid.zeros(2))  # targets must be int64
    with pytest.raises(braid.ValueError):
        braid.Device("tpu")
    with pytest.raises(braid.ValueError, match="meta"):
        braid.zeros(2, device="meta").numpy()
    with pytest.raises(braid.ValueError):
        braid.zeros(2, device="cuda:0") if not _has_cuda() else braid.zeros(2, device="cuda:99")
    with pytest.raises(braid.ValueError, match="ambiguous"):
        bool(braid.zeros(2))
    with pytest.raises(TypeError):
        braid.zeros(2) + "x"
    t = braid.zeros(2, requires_grad=True)
    assert t.grad is None and t.grad_fn is None
    with pytest.raises(braid.ValueError, match="shape"):
        t.grad = braid.zeros(3)


def _has_cuda():
    try:
        braid.zeros(1, device="cuda")
        return True
    except braid.Error:
        return False


def test_repr_and_conversions():
    t = braid.tensor([[1.0, 2.0]])
    assert "f32 [1, 2]" in repr(t)
    assert float(braid.tensor([2.5])) == 2.5 and int(braid.tensor([3])) == 3
    assert t.T.shape == (2, 1) and t.reshape(2).shape == (2,) and t.view(-1).shape == (2,)
    assert t.to(braid.float64).dtype == braid.float64 and t.to("cpu").same(t)
    assert t.tolist() == [[1.0, 2.0]]
    assert t.permute(1, 0).shape == (2, 1) and t.unsqueeze(0).shape == (1, 1, 2) and t.squeeze().shape == (2,)
    assert braid.cat([t, t], 0).shape == (2, 2) and braid.stack([t, t]).shape == (2, 1, 2)
    assert [s.shape for s in braid.split(braid.zeros(5), 2)] == [(2,), (2,), (1,)]
