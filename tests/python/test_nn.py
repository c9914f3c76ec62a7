"""braid.nn against torch.nn with the same weights, Python subclasses of
braid.nn.Module, state dicts and safetensors files, the model families by
name, and braid.optim's updates against torch.optim's."""
import numpy as np
import pytest

import braid
from braid import nn

torch = pytest.importorskip("torch")


def to_torch(t):
    return torch.tensor(t.detach().numpy())


def copy_into_torch(bmod, tmod):
    sd = {k: to_torch(v) for k, v in bmod.state_dict().items()}
    tmod.load_state_dict(sd)


def test_layers_match_torch():
    braid.manual_seed(3)
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    bm = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                       nn.Flatten(), nn.Linear(64, 5), nn.GELU(), nn.LayerNorm([5]), nn.Tanh())
    tm = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                             torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(64, 5), torch.nn.GELU(),
                             torch.nn.LayerNorm([5]), torch.nn.Tanh())
    copy_into_torch(bm, tm)
    assert list(bm.state_dict()) == list(tm.state_dict())[: len(bm.state_dict())] or \
        set(bm.state_dict()) <= set(tm.state_dict())
    xb, xt = braid.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    yb, yt = bm(xb), tm(xt)
    np.testing.assert_allclose(yb.numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-4)
    yb.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(xb.grad.numpy(), xt.grad.numpy(), rtol=1e-3, atol=1e-4)
    for (name, p), tp in zip(bm.named_parameters(), tm.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-3, atol=1e-4, err_msg=name)
    # Running statistics moved in place, as torch's.
    rm = dict(bm.named_buffers())
    np.testing.assert_allclose(rm["1.running_mean"].numpy(), tm[1].running_mean.numpy(), rtol=1e-5, atol=1e-6)
    bm.eval()
    tm.eval()
    np.testing.assert_allclose(bm(xb).numpy(), tm(xt).detach().numpy(), rtol=1e-4, atol=1e-4)


def test_embedding_and_attention_shapes():
    emb = nn.TokenPositionEmbedding(50, 16, 32)
    block = nn.TransformerBlock(32, 4)
    toks = braid.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    h = block(emb(toks))
    assert h.shape == (2, 4, 32)
    att = nn.MultiHeadAttention(32, 4, causal=True)
    assert att(h).shape == (2, 4, 32)
    # Causal: the first position's output does not depend on later tokens.
    other = braid.tensor([[1, 9, 9, 9], [5, 6, 7, 8]])
    a, b = block(emb(toks)), block(emb(other))
    np.testing.assert_allclose(a[0, 0].numpy(), b[0, 0].numpy(), rtol=1e-5, atol=1e-6)
    e = nn.Embedding(10, 3)
    assert e(braid.tensor([1, 2])).shape == (2, 3) and e.weight.shape == (10, 3)


class TwoLayer(nn.Module):
    def __init__(self, hidden=8):
        super().__init__()
        self.fc1 = nn.Linear(4, hidden)
        self.fc2 = nn.Linear(hidden, 3)
        self.gain = braid.ones(3, requires_grad=True)      # a parameter
        self.register_buffer("calls", braid.zeros(1))       # state, not trained
        self.note = braid.zeros(2)                          # a plain attribute

    def forward(self, x):
        with braid.no_grad():
            self.calls += 1
        return self.fc2(braid.relu(self.fc1(x))) * self.gain


def test_python_module_registers_and_trains():
    braid.manual_seed(0)
    m = TwoLayer()
    assert [n for n, _ in m.named_parameters()] == ["gain", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert [n for n, _ in m.named_buffers()] == ["calls"]
    assert isinstance(m, nn.Module) and m._is_python_module()
    x = braid.randn(16, 4)
    y = braid.tensor(np.arange(16) % 3)
    opt = braid.optim.Adam(m.parameters(), lr=0.05)
    losses = []
    for _ in range(30):
        loss = braid.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert m.calls.item() == 30
    # Re-assigning a child keeps its place; a registered tensor is updated in place, not rebound.
    m.fc2 = nn.Linear(8, 3)
    assert [n for n, _ in m.named_parameters()][-2:] == ["fc2.weight", "fc2.bias"]
    with pytest.raises(braid.ValueError, match="copy_"):
        m.gain = braid.ones(3, requires_grad=True)


def test_module_errors():
    class NoInit(nn.Module):
        def __init__(self):
            self.fc = nn.Linear(2, 2)

    with pytest.raises(braid.ValueError, match="super"):
        NoInit()

    class NoForward(nn.Module):
        pass

    with pytest.raises(Exception, match="forward"):
        NoForward()(braid.zeros(2))
    with pytest.raises(braid.ValueError, match="only modules written in Python"):
        nn.Linear(2, 2).register_parameter("x", braid.zeros(1))


def test_state_dict_and_safetensors_roundtrip(tmp_path):
    braid.manual_seed(1)
    m = TwoLayer()
    path = tmp_path / "m.safetensors"
    m.save(str(path))
    braid.manual_seed(2)
    m2 = TwoLayer()
    assert not np.allclose(m2.fc1.weight.numpy(), m.fc1.weight.numpy())
    w_handle = m2.fc1.weight
    m2.load(str(path))
    np.testing.assert_array_equal(m2.fc1.weight.numpy(), m.fc1.weight.numpy())
    assert w_handle.same(m2.fc1.weight)  # loaded in place
    safetensors = pytest.importorskip("safetensors.numpy")
    loaded = safetensors.load_file(str(path))
    np.testing.assert_array_equal(loaded["fc2.weight"], m.fc2.weight.numpy())
    with pytest.raises(braid.ValueError, match="fc1.weight"):
        m2.load_state_dict({"fc1.weight": braid.zeros(1, 1)}, strict=False)
    with pytest.raises(braid.IoError):
        braid.load(str(tmp_path / "missing.safetensors"))
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(braid.IoError):
        braid.load(str(path))


def test_build_model_by_name():
    mlp = nn.build_model("mlp", {"hidden": 16}, input_shape=(1, 28, 28), classes=10, seed=4)
    assert isinstance(mlp, nn.Sequential) and mlp(braid.zeros(2, 1, 28, 28)).shape == (2, 10)
    again = nn.build_model("mlp", {"model.hidden": 16}, input_shape=(1, 28, 28), classes=10, seed=4)
    np.testing.assert_array_equal(mlp[1].weight.numpy(), again[1].weight.numpy())
    ct = nn.build_model("char_transformer", {"d_model": 32, "n_heads": 2, "n_layers": 1, "context": 16},
                        input_shape=(16,), classes=40)
    assert ct(braid.zeros(2, 16, dtype=braid.int64)).shape == (2, 16, 40)
    with pytest.raises(braid.ConfigError):
        nn.build_model("nope", input_shape=(4,), classes=2)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSProp", "AdaGrad"])
def test_optimizers_match_torch(name):
    rng = np.random.default_rng(5)
    w0 = rng.standard_normal((4, 3)).astype(np.float32)
    grads = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(4)]
    wb, wt = braid.tensor(w0, requires_grad=True), torch.tensor(w0, requires_grad=True)
    kw = {"SGD": dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01), "Adam": dict(lr=0.01),
          "AdamW": dict(lr=0.01, weight_decay=0.1), "RMSProp": dict(lr=0.01, momentum=0.5),
          "AdaGrad": dict(lr=0.1)}[name]
    ob = getattr(braid.optim, name)([wb], **kw)
    ot = getattr(torch.optim, {"RMSProp": "RMSprop", "AdaGrad": "Adagrad"}.get(name, name))([wt], **kw)
    for g in grads:
        wb.grad = braid.tensor(g)
        wt.grad = torch.tensor(g)
        ob.step()
        ot.step()
    np.testing.assert_allclose(wb.numpy(), wt.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert ob.steps == 4
    state = ob.state_dict()
    ob2 = getattr(braid.optim, name)([braid.tensor(w0, requires_grad=True)], **kw)
    ob2.load_state_dict(state)
    assert ob2.steps == 4


def test_lbfgs_closure_and_schedules():
    x = braid.tensor([3.0, -2.0], requires_grad=True)

    def closure():
        x.grad = None
        loss = ((x - 1.0) * (x - 1.0)).sum()
        loss.backward()
        return loss.item()

    opt = braid.optim.LBFGS([x], closure)
    opt.step()
    np.testing.assert_allclose(x.numpy(), [1.0, 1.0], atol=1e-4)
    s = braid.optim.make_schedule("cosine", base_lr=1.0, total_steps=10)
    assert s(0) == 1.0 and abs(s(10)) < 1e-12
    assert braid.optim.clip_grad_norm([x], 1.0) >= 0
