// ResNet-18/34/50 against torchvision: the same state_dict names and shapes
// (so the same parameter counts),
// and, given the same weights, the same outputs (eval and train mode), running
// statistics and parameter gradients (tests/models/resnet_ref.py).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "braid/autograd/engine.h"
#include "braid/autograd/node.h"
#include "braid/base/safetensors.h"
#include "braid/models/resnet.h"
#include "braid/nn/init.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/reduce.h"
#include "tests/ops/torch_oracle.h"
#include "tests/testing/error_message.h"
#include "tests/testing/temp_dir.h"

namespace braid::models {
namespace {

using testing::all_close;

std::string st_dtype(DType t) { return t == DType::i64 ? "I64" : "F32"; }

void write_tensors(const std::string& path, const nn::NamedTensors& tensors) {
  std::map<std::string, safetensors::TensorRef> refs;
  std::vector<Tensor> keep;
  for (const auto& [name, t] : tensors) {
    const Tensor c = t.contiguous();
    keep.push_back(c);
    refs[name] = {st_dtype(c.dtype()), c.shape(), {static_cast<const std::byte*>(c.raw_data()), c.nbytes()}};
  }
  safetensors::write(path, refs);
}

std::map<std::string, Tensor> read_tensors(const std::string& path) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, d] : safetensors::read(path).tensors) {
    Tensor t = Tensor::empty(d.shape, d.dtype == "F64" ? DType::f64 : DType::f32);
    EXPECT_EQ(t.nbytes(), d.data.size()) << name;
    std::copy(d.data.begin(), d.data.end(), static_cast<std::byte*>(t.raw_data()));
    out.emplace(name, t);
  }
  return out;
}

// Element-wise |a - b| <= rtol * (|b| + max |b|): relative to each tensor's
// scale, so values near 0 among large ones (a gradient's) pass at 1e-4.
::testing::AssertionResult close_relative(const Tensor& a, const Tensor& b, double rtol) {
  const double scale = max(abs(b)).item();
  return all_close(a, b, rtol, rtol * scale);
}

// Batch norm weights, biases and running statistics away from their initial
// 1, 0, 0, 1, so eval mode exercises them.
void perturb_norms(nn::Module& m, Generator& gen) {
  for (const auto& [name, t] : m.state_dict()) {
    if (name.find("bn") == std::string::npos && name.find("downsample.1") == std::string::npos) continue;
    if (name.ends_with("weight") || name.ends_with("running_var")) nn::init::uniform_(t, 0.5, 1.5, gen);
    else nn::init::uniform_(t, -0.2, 0.2, gen);  // bias, running_mean
  }
}

TEST(ResNet, RefusesOtherDepthsAndStems) {
  Generator gen(1);
  EXPECT_NE(test::message_of<ValueError>([&] { resnet({.depth = 101}, gen); }).find("depth 101"), std::string::npos);
  EXPECT_NE(test::message_of<ValueError>([&] { resnet({.classes = 0}, gen); }).find("classes"), std::string::npos);
  EXPECT_NE(test::message_of<ValueError>([] { parse_resnet_stem("cifar"); }).find("'cifar'"), std::string::npos);
}

TEST(ResNet, InitialisationIsTorchvisions) {
  Generator gen(3);
  auto m = resnet({.depth = 18, .classes = 10, .zero_init_residual = true}, gen);
  std::map<std::string, Tensor> s;
  for (const auto& [n, t] : m->state_dict()) s.emplace(n, t);
  // kaiming_normal_(fan_out, relu): std sqrt(2 / (512 * 3 * 3)) over 2.4M values.
  const Tensor w = s.at("layer4.0.conv2.weight");
  EXPECT_NEAR(std::sqrt(mean(mul(w, w)).item()), std::sqrt(2.0 / (512 * 9)), 0.002 * std::sqrt(2.0 / (512 * 9)));
  EXPECT_NEAR(mean(w).item(), 0.0, 1e-4);
  EXPECT_EQ(s.at("bn1.weight").to_vector<float>(), std::vector<float>(64, 1.0f));
  EXPECT_EQ(s.at("bn1.bias").to_vector<float>(), std::vector<float>(64, 0.0f));
  EXPECT_EQ(s.at("layer1.0.bn1.weight").to_vector<float>(), std::vector<float>(64, 1.0f));
  // zero_init_residual: each block's last batch norm starts at 0.
  EXPECT_EQ(s.at("layer1.0.bn2.weight").to_vector<float>(), std::vector<float>(64, 0.0f));
  EXPECT_EQ(s.at("layer3.1.bn2.weight").to_vector<float>(), std::vector<float>(256, 0.0f));
  EXPECT_EQ(s.at("layer2.0.downsample.1.weight").to_vector<float>(), std::vector<float>(128, 1.0f));
  // fc at the Linear default: U(-1/sqrt(512), 1/sqrt(512)).
  EXPECT_LE(max(abs(s.at("fc.weight"))).item(), 1.0 / std::sqrt(512.0));
  // zero_init_residual draws nothing: the same seed gives the same convolutions.
  Generator again(3);
  auto plain = resnet({.depth = 18, .classes = 10}, again);
  EXPECT_EQ(plain->state_dict()[0].second.to_vector<float>(), m->state_dict()[0].second.to_vector<float>());
}

TEST(ResNet, ShapesOfEachStem) {
  Generator gen(4);
  autograd::NoGradGuard no_grad;
  auto small = resnet({.depth = 18, .classes = 10, .in_channels = 1, .stem = ResNetStem::small}, gen);
  small->eval();
  EXPECT_EQ((*small)(Tensor::ones({2, 1, 28, 28})).shape(), (Shape{2, 10}));
  auto big = resnet({.depth = 18, .classes = 5}, gen);
  big->eval();
  EXPECT_EQ((*big)(Tensor::ones({1, 3, 64, 48})).shape(), (Shape{1, 5}));
  // The children a pipeline cuts between, under torchvision's names.
  std::vector<std::string> names;
  for (size_t i = 0; i < big->size(); ++i) names.push_back(big->name_of(i));
  EXPECT_EQ(names, (std::vector<std::string>{"conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4",
                                             "avgpool", "fc"}));
  names.clear();
  for (size_t i = 0; i < small->size(); ++i) names.push_back(small->name_of(i));
  EXPECT_EQ(names.size(), 9u);  // no maxpool
}

TEST(ResNet, TorchvisionStateDictRoundTrip) {
  Generator gen(5);
  auto a = resnet({.depth = 18, .classes = 10}, gen);
  auto b = resnet({.depth = 18, .classes = 10}, gen);
  perturb_norms(*a, gen);
  const nn::NamedTensors tv = to_torchvision(*a);
  // Every batch norm (20 in ResNet-18: 17 in blocks and stem, 3 downsamples) gains its counter.
  int counters = 0;
  for (const auto& [n, t] : tv) counters += n.ends_with(".num_batches_tracked");
  EXPECT_EQ(counters, 20);
  EXPECT_EQ(tv.size(), a->state_dict().size() + 20);
  load_torchvision(*b, tv);
  const auto sa = a->state_dict(), sb = b->state_dict();
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].second.to_vector<float>(), sb[i].second.to_vector<float>()) << sa[i].first;
  }
  nn::NamedTensors bad = tv;
  bad.emplace_back("layer9.0.conv1.weight", Tensor::zeros({1}));
  EXPECT_NE(test::message_of<ValueError>([&] { load_torchvision(*b, bad); }).find("layer9.0.conv1.weight"),
            std::string::npos);
}

TEST(ResNet, GlobalAvgPoolMatchesTorch) {
  BRAID_REQUIRE_TORCH();
  Generator gen(6);
  testing::expect_matches_torch({
      {.expr = "torch.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1)",
       .inputs = {{"x", testing::random_tensor({3, 5, 4, 7}, DType::f32, gen)}},
       .fn = [](const std::vector<Tensor>& in) { return nn::GlobalAvgPool2d()(in[0]); },
       .grad = {"x"}},
  });
}

struct RefCase {
  std::string label;
  ResNetConfig config;
  Shape input;
};

// Each case's weights and inputs to torchvision and back, in one Python run.
// Eval mode in f32: outputs and every parameter's gradient to 1e-4 of the
// tensor's largest element. Train mode (batch statistics): outputs and
// running statistics in f32 to 1e-4, gradients in f64 to 1e-9: with batch
// statistics over two examples the f32 gradients are ill-conditioned
// (resnet_ref.py: PyTorch's own f32 and f64 gradients differ by up to 20%).
TEST(ResNet, MatchesTorchvision) {
  BRAID_REQUIRE_TORCH();
  const std::vector<RefCase> cases = {
      {"resnet18 imagenet stem", {.depth = 18, .classes = 10}, {2, 3, 64, 64}},
      {"resnet50 imagenet stem", {.depth = 50, .classes = 7}, {2, 3, 64, 64}},
      {"resnet18 small stem, 1 channel", {.depth = 18, .classes = 10, .in_channels = 1, .stem = ResNetStem::small},
       {2, 1, 28, 28}},
      {"resnet34 small stem", {.depth = 34, .classes = 4, .stem = ResNetStem::small}, {2, 3, 16, 16}},
  };
  test::TempDir dir;
  std::vector<std::shared_ptr<nn::Sequential>> models;
  std::vector<nn::NamedTensors> initials;
  std::vector<Tensor> xs, rs;
  std::string dirs;
  Generator gen(7);
  for (size_t i = 0; i < cases.size(); ++i) {
    const RefCase& c = cases[i];
    const std::string d = dir.file(std::to_string(i));
    std::filesystem::create_directories(d);
    auto m = resnet(c.config, gen);
    perturb_norms(*m, gen);
    nn::NamedTensors initial;  // the f64 pass starts from these (the f32 passes move the running statistics)
    for (const auto& [n, t] : m->state_dict()) initial.emplace_back(n, t.clone());
    Tensor x = Tensor::empty(c.input), r = Tensor::empty({c.input[0], c.config.classes});
    nn::init::normal_(x, 0, 1, gen);
    nn::init::normal_(r, 0, 1, gen);
    write_tensors(d + "/weights.safetensors", to_torchvision(*m));
    write_tensors(d + "/input.safetensors", {{"x", x}, {"r", r}});
    const char* stem = c.config.stem == ResNetStem::small ? "small" : "imagenet";
    std::ofstream(d + "/case.json") << nlohmann::json{{"depth", c.config.depth}, {"stem", stem},
                                                       {"classes", c.config.classes},
                                                       {"in_channels", c.config.in_channels}}.dump();
    models.push_back(m);
    initials.push_back(initial);
    xs.push_back(x);
    rs.push_back(r);
    dirs += " " + d;
  }
  const std::string cmd = "/usr/bin/python3 " + std::string(BRAID_TESTS_DIR) + "/models/resnet_ref.py" + dirs;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].label);
    const std::string d = dir.file(std::to_string(i));
    nn::Sequential& m = *models[i];
    // The same names and shapes as torchvision's state_dict.
    std::set<std::pair<std::string, Shape>> ours, theirs;
    for (const auto& [n, t] : to_torchvision(m)) ours.emplace(n, t.shape());
    std::ifstream names(d + "/names.json");
    for (const auto& e : nlohmann::json::parse(names)) theirs.emplace(e[0].get<std::string>(), e[1].get<Shape>());
    EXPECT_EQ(ours, theirs);

    const std::map<std::string, Tensor> ref = read_tensors(d + "/out.safetensors");
    m.eval();
    const Tensor eval_y = m(xs[i]);
    EXPECT_TRUE(close_relative(eval_y, ref.at("eval_y"), 1e-4)) << "eval mode";
    autograd::backward(sum(mul(eval_y, rs[i])));
    for (const auto& [n, p] : m.named_parameters()) {
      ASSERT_TRUE(p.grad().defined()) << n;
      EXPECT_TRUE(close_relative(p.grad(), ref.at("eval_grad." + n), 1e-4)) << "eval-mode gradient of " << n;
    }
    m.train();
    {
      autograd::NoGradGuard no_grad;
      EXPECT_TRUE(close_relative(m(xs[i]), ref.at("train_y"), 1e-4)) << "train mode";
    }
    for (const auto& [n, t] : m.named_buffers()) EXPECT_TRUE(close_relative(t, ref.at("after." + n), 1e-4)) << n;

    // The same model in f64, from the same weights and statistics.
    m.to(DType::f64);
    m.load_state_dict(initials[i]);
    const Tensor y64 = m(xs[i].to(DType::f64));
    EXPECT_TRUE(close_relative(y64, ref.at("train64_y"), 1e-9)) << "train mode, f64";
    autograd::backward(sum(mul(y64, rs[i].to(DType::f64))));
    for (const auto& [n, p] : m.named_parameters()) {
      ASSERT_TRUE(p.grad().defined()) << n;
      EXPECT_TRUE(close_relative(p.grad(), ref.at("grad64." + n), 1e-9)) << "train-mode f64 gradient of " << n;
    }
  }
}

}  // namespace
}  // namespace braid::models
