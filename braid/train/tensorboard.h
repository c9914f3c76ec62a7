// TensorBoard event files, written without TensorFlow: TFRecord framing
// around hand-encoded `Event` protocol buffers carrying scalar summaries.
//
// TFRecord record: u64 length (LE), u32 masked CRC-32C of the length bytes,
// the payload, u32 masked CRC-32C of the payload; mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8.
// Event (tensorflow/core/util/event.proto): wall_time = 1 (double),
// step = 2 (int64), file_version = 3 (string), summary = 5 (Summary);
// Summary.value = 1 (repeated Value); Value.tag = 1 (string), simple_value = 2 (float).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace braid::train {

// CRC-32C (Castagnoli), as TFRecord uses it.
uint32_t crc32c(std::span<const uint8_t> data);
uint32_t masked_crc32c(std::span<const uint8_t> data);

// One serialized Event.
std::string encode_file_version_event(double wall_time, const std::string& version);
std::string encode_scalar_event(double wall_time, int64_t step, const std::string& tag, float value);

class TensorBoardWriter {
 public:
  // Creates <dir>/events.out.tfevents.<unix seconds>.<hostname> (and dir) and
  // writes the "brain.Event:2" header event. IoError when it cannot.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  void add_scalar(const std::string& tag, double value, int64_t step);
  void add_scalar(const std::string& tag, double value, int64_t step, double wall_time);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& payload);
  std::string path_;
  std::FILE* file_ = nullptr;
};

// Reading back (tests, `braid inspect events`).
struct ScalarEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string tag;       // empty for non-scalar events
  float value = 0;
  std::string file_version;  // set on the header event
};
// Every record's payload; IoError naming the file and byte offset on a bad
// length or CRC, or a truncated record.
std::vector<std::string> read_tfrecords(const std::string& path);
// Decodes an Event with at most one scalar value; IoError on malformed protobuf.
ScalarEvent decode_event(const std::string& payload);

}  // namespace braid::train
