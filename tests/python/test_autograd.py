"""Gradients through the bindings against PyTorch (1.13, Debian's), and
braid.grad, braid.no_grad, backward's refusals."""
import numpy as np
import pytest

import braid

torch = pytest.importorskip("torch")


def pair(*shape, seed=0, dtype=np.float32):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return braid.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def close(b, t, tol=1e-4):
    np.testing.assert_allclose(b.numpy(), t.detach().numpy(), rtol=tol, atol=tol)


CASES = {
    "matmul_softmax": (lambda x, w, m: (m.softmax(m.matmul(x, w), 1) * m.tanh(x[:, :3])).sum(),
                       [(4, 5), (5, 3)]),
    "gelu_exp_log": (lambda x, w, m: (m.gelu(x) + (x * x + 1).log() * w.exp()).mean(), [(3, 4), (3, 4)]),
    "broadcast_div": (lambda x, w, m: (x / (w.abs() + 1) - 2.0 * x).sum(), [(2, 3, 4), (4,)]),
    "indexing": (lambda x, w, m: (x[1:, ::2] * w[0]).sum() + x[0, -1] * 3.0, [(3, 4), (2, 2)]),
}


class TorchOps:
    softmax = staticmethod(lambda x, d: torch.softmax(x, d))
    matmul = staticmethod(torch.matmul)
    tanh = staticmethod(torch.tanh)
    gelu = staticmethod(torch.nn.functional.gelu)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_match_torch(name):
    fn, shapes = CASES[name]
    (xb, xt), (wb, wt) = pair(*shapes[0], seed=1), pair(*shapes[1], seed=2)
    yb, yt = fn(xb, wb, braid), fn(xt, wt, TorchOps)
    close(yb, yt)
    yb.backward()
    yt.backward()
    close(xb.grad, xt.grad)
    close(wb.grad, wt.grad)


def test_losses_and_layers_match_torch():
    (x, xt), (w, wt) = pair(6, 5, seed=3), pair(4, 5, seed=4)
    (b, bt) = pair(4, seed=5)
    target = np.array([0, 3, 1, 2, 3, 0])
    loss = braid.cross_entropy(braid.linear(x, w, b), braid.tensor(target))
    loss_t = torch.nn.functional.cross_entropy(torch.nn.functional.linear(xt, wt, bt), torch.tensor(target))
    close(loss, loss_t)
    loss.backward()
    loss_t.backward()
    for g, gt in [(x.grad, xt.grad), (w.grad, wt.grad), (b.grad, bt.grad)]:
        close(g, gt)
    (img, imgt), (k, kt) = pair(2, 3, 6, 6, seed=6), pair(4, 3, 3, 3, seed=7)
    out = braid.max_pool2d(braid.conv2d(img, k, padding=1, stride=1), 2)
    out_t = torch.nn.functional.max_pool2d(torch.nn.functional.conv2d(imgt, kt, padding=1), 2)
    close(out, out_t)
    (out * out).sum().backward()
    (out_t * out_t).sum().backward()
    close(img.grad, imgt.grad)
    close(k.grad, kt.grad, tol=1e-3)
    (h, ht) = pair(3, 8, seed=8)
    ln = braid.layer_norm(h, [8])
    ln_t = torch.nn.functional.layer_norm(ht, [8])
    close(ln, ln_t)


def test_grad_function_leaves_dot_grad_alone():
    x = braid.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = braid.tensor([4.0, 5.0, 6.0], requires_grad=True)
    (x * y).sum().backward()
    before = x.grad.tolist()
    gx, gy = braid.grad([(x * x * y).sum()], [x, y])
    assert gx.tolist() == [8.0, 20.0, 36.0] and gy.tolist() == [1.0, 4.0, 9.0]
    assert x.grad.tolist() == before  # put back
    unused = braid.tensor([1.0], requires_grad=True)
    assert braid.grad([(x * 2).sum()], [unused]) == [None]
    with pytest.raises(braid.ValueError, match="leaf"):
        braid.grad([(x * 2).sum()], [x * 2])


def test_no_grad_and_requires_grad():
    x = braid.ones(3, requires_grad=True)
    assert braid.is_grad_enabled()
    with braid.no_grad():
        assert not braid.is_grad_enabled()
        y = x * 2
    assert braid.is_grad_enabled()
    assert not y.requires_grad and y.is_leaf
    z = (x * 2).sum()
    assert z.requires_grad and z.grad_fn is not None and not z.is_leaf
    d = z.detach()
    assert not d.requires_grad
    with pytest.raises(braid.Error):
        braid.zeros(3).sum().backward()  # nothing requires grad
    with pytest.raises(braid.Error):
        (x * 2).backward()  # not a scalar: a gradient is needed
    (x * 2).backward(braid.ones(3))
    assert x.grad.tolist() == [2.0, 2.0, 2.0]
    x.backward(braid.ones(3))
    assert x.grad.tolist() == [3.0, 3.0, 3.0]
    x.grad = None
    assert x.grad is None
    # The graph is let go of after backward (its saved tensors freed), unless retained.
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 4.0, 4.0] and y.grad_fn is None
    with pytest.raises(braid.Error):
        y.backward()
