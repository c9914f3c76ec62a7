#include "braid/data/csv.h"

#include <charconv>
#include <cstring>

#include "braid/data/file_bytes.h"
#include "braid/data/text_parse.h"

namespace braid::data {

CsvDataset::CsvDataset(const std::string& path, const CsvOptions& o) : o_(o) {
  std::vector<std::byte> bytes = read_maybe_gzip(path);
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  int64_t columns = -1, label_col = 0, line_no = 0;
  std::vector<std::string_view> fields;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    fields.clear();
    std::vector<int64_t> starts;  // 1-based column of each field
    for (size_t at = 0;;) {
      size_t d = line.find(o.delimiter, at);
      std::string_view f = line.substr(at, d == std::string_view::npos ? std::string_view::npos : d - at);
      size_t lead = f.find_first_not_of(" \t");
      size_t trail = f.find_last_not_of(" \t");
      starts.push_back(static_cast<int64_t>(at + (lead == std::string_view::npos ? 0 : lead)) + 1);
      fields.push_back(lead == std::string_view::npos ? std::string_view{} : f.substr(lead, trail - lead + 1));
      if (d == std::string_view::npos) break;
      at = d + 1;
    }
    const auto count = static_cast<int64_t>(fields.size());
    if (columns < 0) {
      columns = count;
      label_col = o.label_column < 0 ? columns + o.label_column : o.label_column;
      if (columns < 2 || label_col < 0 || label_col >= columns) {
        fail<IoError>("{}:{}:1: need at least 2 columns including label column {}, found {}", path, line_no,
                      o.label_column, columns);
      }
      features_ = columns - 1;
      // A header: its label field is not a number.
      float probe;
      auto lf = fields[label_col];
      auto [end, ec] = std::from_chars(lf.data(), lf.data() + lf.size(), probe);
      if (ec != std::errc() || end != lf.data() + lf.size()) continue;
    }
    if (count != columns) {
      fail<IoError>("{}:{}:{}: expected {} columns (as on the first line), found {}", path, line_no,
                    starts[std::min(count, columns) - 1], columns, count);
    }
    for (int64_t c = 0; c < columns; ++c) {
      TextPos pos{&path, line_no, starts[c]};
      if (c == label_col) {
        if (o.regression) {
          labels_.push_back(parse_float(fields[c], pos, "a numeric label"));
        } else {
          int64_t v = parse_int(fields[c], pos, "an integer class label");
          if (v < 0) fail<IoError>("{}: class label must be >= 0, found {}", pos.str(), v);
          labels_.push_back(static_cast<double>(v));
        }
      } else {
        x_.push_back(parse_float(fields[c], pos, "a number"));
      }
    }
  }
  if (columns < 0) fail<IoError>("{}: no data lines", path);
  n_ = static_cast<int64_t>(labels_.size());
}

ExampleSpec CsvDataset::spec() const {
  return {{features_}, DType::f32, {}, o_.regression ? DType::f32 : DType::i64};
}

void CsvDataset::read(int64_t index, std::byte* input, std::byte* target) const {
  std::memcpy(input, x_.data() + index * features_, static_cast<size_t>(features_) * sizeof(float));
  if (o_.regression) {
    float v = static_cast<float>(labels_[index]);
    std::memcpy(target, &v, sizeof v);
  } else {
    int64_t v = static_cast<int64_t>(labels_[index]);
    std::memcpy(target, &v, sizeof v);
  }
}

}  // namespace braid::data
