#include "braid/tensor/cpu/conv.h"

#include <fmt/format.h>

#include <atomic>

namespace braid::cpu {
namespace {

std::atomic<ConvBackend> g_default{ConvBackend::automatic};

template <class T>
ConvBackend resolve(const Conv2dGeometry& g, ConvBackend b) {
  if constexpr (!std::is_same_v<T, float>) {
    return ConvBackend::im2col;  // oneDNN convolutions are f32 here
  } else {
    if (b == ConvBackend::automatic) b = g_default.load();
    return b == ConvBackend::automatic ? conv_choice(g) : b;
  }
}

}  // namespace

std::string_view name(ConvBackend b) {
  switch (b) {
    case ConvBackend::automatic: return "automatic";
    case ConvBackend::im2col: return "im2col";
    case ConvBackend::onednn_plain: return "onednn_plain";
    case ConvBackend::onednn_blocked: return "onednn_blocked";
  }
  return "?";
}

std::string Conv2dGeometry::to_string() const {
  return fmt::format("x [{}, {}, {}, {}], w [{}, {}, {}, {}], stride ({}, {}), padding ({}, {}), "
                     "dilation ({}, {}), groups {}",
                     n, c, h, w, o, groups > 0 ? c / groups : c, kh, kw, stride_h, stride_w, pad_h,
                     pad_w, dil_h, dil_w, groups);
}

void set_default_conv_backend(ConvBackend b) { g_default.store(b); }

ConvBackend conv_choice(const Conv2dGeometry& g) {
  return ConvBackend::onednn_plain;
}

template <class T>
void conv2d_forward(const Conv2dGeometry& g, const T* x, const T* w, const T* b, T* y,
                    ConvBackend backend) {
  const ConvBackend r = resolve<T>(g, backend);
  if constexpr (std::is_same_v<T, float>) {
    if (r != ConvBackend::im2col) return onednn::forward(g, r == ConvBackend::onednn_blocked, x, w, b, y);
  }
  im2col::forward(g, x, w, b, y);
}

template <class T>
void conv2d_backward_data(const Conv2dGeometry& g, const T* dy, const T* w, T* dx,
                          ConvBackend backend) {
  const ConvBackend r = resolve<T>(g, backend);
  if constexpr (std::is_same_v<T, float>) {
    if (r != ConvBackend::im2col) return onednn::backward_data(g, r == ConvBackend::onednn_blocked, dy, w, dx);
  }
  im2col::backward_data(g, dy, w, dx);
}

template <class T>
void conv2d_backward_weights(const Conv2dGeometry& g, const T* dy, const T* x, T* dw, T* db,
                             ConvBackend backend) {
  const ConvBackend r = resolve<T>(g, backend);
  if constexpr (std::is_same_v<T, float>) {
    if (r != ConvBackend::im2col) {
      return onednn::backward_weights(g, r == ConvBackend::onednn_blocked, dy, x, dw, db);
    }
  }
  im2col::backward_weights(g, dy, x, dw, db);
}

template void conv2d_forward<float>(const Conv2dGeometry&, const float*, const float*, const float*, float*, ConvBackend);
template void conv2d_forward<double>(const Conv2dGeometry&, const double*, const double*, const double*, double*, ConvBackend);
template void conv2d_backward_data<float>(const Conv2dGeometry&, const float*, const float*, float*, ConvBackend);
template void conv2d_backward_data<double>(const Conv2dGeometry&, const double*, const double*, double*, ConvBackend);
template void conv2d_backward_weights<float>(const Conv2dGeometry&, const float*, const float*, float*, float*, ConvBackend);
template void conv2d_backward_weights<double>(const Conv2dGeometry&, const double*, const double*, double*, double*, ConvBackend);

}  // namespace braid::cpu
