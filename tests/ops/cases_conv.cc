// Op-table cases for the conv and pool families (op_table.h).
#include "braid/ops/conv.h"
#include "braid/ops/pool.h"
#include "conv_geometries.h"
#include "op_table.h"

namespace braid::testing {

namespace {

// The attributes conv2d's eager function gives the op.
op::Attrs conv_attrs(const Conv2dOptions& o) {
  return {{"stride", std::vector<int64_t>{o.stride[0], o.stride[1]}},
          {"padding", std::vector<int64_t>{o.padding[0], o.padding[1]}},
          {"dilation", std::vector<int64_t>{o.dilation[0], o.dilation[1]}},
          {"groups", o.groups},
          {"backend", static_cast<int64_t>(o.backend)}};
}

// Each case pins an implementation: the autotuner would try several in turn,
// and the suite compares calls to the last bit (conv_test.cc checks
// `automatic` and the implementations' agreement).
constexpr cpu::ConvBackend kBackends[] = {cpu::ConvBackend::im2col, cpu::ConvBackend::onednn_plain,
                                          cpu::ConvBackend::onednn_blocked};

std::string conv_args(const Conv2dOptions& o) {
  return fmt::format("stride=({}, {}), padding=({}, {}), dilation=({}, {}), groups={}", o.stride[0], o.stride[1],
                     o.padding[0], o.padding[1], o.dilation[0], o.dilation[1], o.groups);
}

}  // namespace

std::vector<OpCase> conv_cases() {
  Generator gen(51);
  using Geometry = ConvGeometry;
  const std::vector<Geometry>& geometries = conv_geometries();
  std::vector<OpCase> cases;
  for (size_t i = 0; i < geometries.size(); ++i) {
    const Geometry& c = geometries[i];
    // Every other input strided (copied once to the kernels' layout).
    const Tensor x0 = random_tensor(c.x, DType::f32, gen), w = random_tensor(c.w, DType::f32, gen);
    const Tensor x = i % 2 ? strided_copy(x0) : x0;
    Conv2dOptions opt = c.opt;
    opt.backend = kBackends[i % 3];
    OpCase k{"conv2d", {}, "", conv_attrs(opt)};
    if (c.bias) {
      k.check = {"F.conv2d(x, w, b, " + conv_args(opt) + ")",
                 {{"x", x}, {"w", w}, {"b", random_tensor({c.w[0]}, DType::f32, gen)}},
                 [opt](const auto& v) { return conv2d(v[0], v[1], v[2], opt); }, {"x", "w", "b"}, 1e-4, 1e-4};
    } else {
      // Without a bias the op's third input is absent: not the case's inputs.
      k.check = {"F.conv2d(x, w, None, " + conv_args(opt) + ")", {{"x", x}, {"w", w}},
                 [opt](const auto& v) { return conv2d(v[0], v[1], Tensor(), opt); }, {"x", "w"}, 1e-4, 1e-4};
      k.sweep = false;
    }
    cases.push_back(std::move(k));
  }
  // The backward products on two geometries: plain, and grouped, strided, padded and dilated.
  for (Geometry c : {geometries[1], geometries[7]}) {
    c.opt.backend = c.x[0] == 3 ? cpu::ConvBackend::onednn_blocked : cpu::ConvBackend::im2col;
    const Tensor x = random_tensor(c.x, DType::f32, gen), w = random_tensor(c.w, DType::f32, gen);
    const Shape y = conv2d(x, w, Tensor(), c.opt).shape();
    const Tensor dy = random_tensor(y, DType::f32, gen);
    op::Attrs in_attrs = conv_attrs(c.opt);
    in_attrs.set("input_shape", c.x);
    cases.push_back({"conv2d_backward_input",
                     {fmt::format("torch.nn.grad.conv2d_input(({}), w, dy, {})", fmt::join(c.x, ", "), conv_args(c.opt)),
                      {{"dy", dy}, {"w", w}},
                      [in_attrs](const auto& v) { return op::call1(op::find("conv2d_backward_input"), {v[0], v[1]}, in_attrs); },
                      {}, 1e-4, 1e-4},
                     "", in_attrs});
    op::Attrs w_attrs = conv_attrs(c.opt);
    w_attrs.set("weight_shape", c.w);
    w_attrs.set("bias", 1);
    for (int out : {0, 1}) {
      const std::string expr =
          out == 0 ? fmt::format("torch.nn.grad.conv2d_weight(x, ({}), dy, {})", fmt::join(c.w, ", "), conv_args(c.opt))
                   : "dy.sum(dim=(0, 2, 3))";
      cases.push_back({"conv2d_backward_weight",
                       {expr, {{"dy", dy}, {"x", x}},
                        [w_attrs, out](const auto& v) {
                          return op::call(op::find("conv2d_backward_weight"), {v[0], v[1]}, w_attrs)[out];
                        },
                        {}, 1e-4, 1e-4},
                       "", w_attrs});
    }
  }
  return cases;
}

std::vector<OpCase> pool_cases() {
  Generator gen(52);
  struct Geometry {
    Shape x;
    Pool2dOptions opt;
  };
  const std::vector<Geometry> geometries = {
      {{2, 3, 8, 8}, {}},
      {{2, 3, 9, 7}, {}},  // odd sizes: the last row and column are dropped
      {{1, 2, 7, 9}, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}},
      {{2, 2, 6, 5}, {.kernel = {3, 2}, .stride = {1, 2}, .padding = {1, 0}}},
      {{3, 5, 5}, {.kernel = {2, 3}, .stride = {1, 1}}},
      {{1, 1, 4, 4}, {.kernel = {4, 4}}},
  };
  std::vector<OpCase> cases;
  for (const Geometry& c : geometries) {
    const Pool2dOptions o = c.opt;
    const int64_t sh = o.stride[0] ? o.stride[0] : o.kernel[0], sw = o.stride[1] ? o.stride[1] : o.kernel[1];
    const op::Attrs attrs{{"kernel", std::vector<int64_t>{o.kernel[0], o.kernel[1]}},
                          {"stride", std::vector<int64_t>{sh, sw}},
                          {"padding", std::vector<int64_t>{o.padding[0], o.padding[1]}}};
    const std::string args =
        fmt::format("({}, {}), stride=({}, {}), padding=({}, {})", o.kernel[0], o.kernel[1], sh, sw, o.padding[0], o.padding[1]);
    // 4-D inputs strided (copied once to the kernels' layout).
    auto input = [&] {
      const Tensor x = random_tensor(c.x, DType::f32, gen);
      return x.ndim() == 4 ? strided_copy(x) : x;
    };
    cases.push_back({"max_pool2d", {"F.max_pool2d(x, " + args + ")", {{"x", input()}},
                                    [o](const auto& v) { return max_pool2d(v[0], o); }, {"x"}},
                     "", attrs});
    for (bool include : {true, false}) {
      Pool2dOptions oi = o;
      oi.count_include_pad = include;
      op::Attrs ai = attrs;
      ai.set("count_include_pad", int64_t{include});
      cases.push_back({"avg_pool2d",
                       {"F.avg_pool2d(x, " + args + (include ? ", count_include_pad=True)" : ", count_include_pad=False)"),
                        {{"x", input()}}, [oi](const auto& v) { return avg_pool2d(v[0], oi); },
                        {"x"}},
                       "", ai});
    }
  }
  // The backward ops on overlapping windows (kernel 3, stride 2, padding 1),
  // where gradients of neighbouring windows add up.
  const Shape xs{1, 2, 7, 9};
  op::Attrs attrs{{"kernel", std::vector<int64_t>{3, 3}}, {"stride", std::vector<int64_t>{2, 2}},
                  {"padding", std::vector<int64_t>{1, 1}}};
  const Tensor x = random_tensor(xs, DType::f32, gen);
  const Tensor idx = op::call(op::find("max_pool2d"), {x}, attrs)[1];
  const Tensor dy = random_tensor(idx.shape(), DType::f32, gen);
  attrs.set("input_shape", xs);
  cases.push_back({"max_pool2d_backward",
                   {"torch.zeros(2, 63, dtype=g.dtype).scatter_add(1, i.long().reshape(2, -1), g.reshape(2, -1))"
                    ".reshape(1, 2, 7, 9)",
                    {{"g", dy}, {"i", idx}},
                    [attrs](const auto& v) { return op::call1(op::find("max_pool2d_backward"), {v[0], v[1]}, attrs); },
                    {}},
                   "", attrs});
  for (bool include : {true, false}) {
    op::Attrs ai = attrs;
    ai.set("count_include_pad", int64_t{include});
    cases.push_back({"avg_pool2d_backward",
                     {fmt::format("torch.ops.aten.avg_pool2d_backward(g, torch.zeros(1, 2, 7, 9, dtype=g.dtype), "
                                  "[3, 3], [2, 2], [1, 1], False, {}, None)",
                                  include ? "True" : "False"),
                      {{"g", dy}},
                      [ai](const auto& v) { return op::call1(op::find("avg_pool2d_backward"), {v[0]}, ai); },
                      {}},
                     "", ai});
  }
  return cases;
}

}  // namespace braid::testing
