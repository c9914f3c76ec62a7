#include "braid/base/error.h"

namespace braid::detail {

void check_failed(const char* file, int line, const std::string& what) {
  std::string_view path(file);
  if (auto pos = path.rfind("braid/"); pos != std::string_view::npos) path.remove_prefix(pos);
  throw Error(fmt::format("{} [{}:{}]", what, path, line));
}

}  // namespace braid::detail
