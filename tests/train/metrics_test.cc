#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "braid/base/error.h"
#include "braid/train/metrics.h"
#include "braid/train/tensorboard.h"
#include "tests/testing/temp_dir.h"

namespace braid::train {
namespace {

namespace fs = std::filesystem;

using test::TempDir;

std::string only_events_file(const fs::path& dir) {
  std::string found;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) found = e.path().string();
  }
  return found;
}

TEST(TensorBoard, Crc32cKnownValue) {
  const std::string s = "123456789";
  EXPECT_EQ(crc32c({reinterpret_cast<const uint8_t*>(s.data()), s.size()}), 0xe3069283u);  // RFC 3720 check value
}

TEST(TensorBoard, WritesEventsThatReadBack) {
  TempDir dir;
  {
    TensorBoardWriter w(dir.path().string());
    w.add_scalar("train/loss", 2.5, 10, 1000.5);
    w.add_scalar("eval/top1", 0.875, 300, 1001.0);
    w.flush();
    EXPECT_EQ(fs::path(w.path()).filename().string().rfind("events.out.tfevents.", 0), 0u);
  }
  auto records = read_tfrecords(only_events_file(dir.path()));
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(decode_event(records[0]).file_version, "brain.Event:2");
  ScalarEvent a = decode_event(records[1]), b = decode_event(records[2]);
  EXPECT_EQ(a.tag, "train/loss");
  EXPECT_EQ(a.step, 10);
  EXPECT_EQ(a.value, 2.5f);
  EXPECT_EQ(a.wall_time, 1000.5);
  EXPECT_EQ(b.tag, "eval/top1");
  EXPECT_EQ(b.step, 300);
  EXPECT_EQ(b.value, 0.875f);
}

TEST(TensorBoard, CorruptRecordIsDetected) {
  TempDir dir;
  { TensorBoardWriter w(dir.path().string()); w.add_scalar("x", 1.0, 1); }
  std::string path = only_events_file(dir.path());
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(-6, std::ios::end);
  f.put('\x7f');  // inside the last record's payload
  f.close();
  try {
    read_tfrecords(path);
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("bad data CRC"), std::string::npos) << e.what();
  }
}

TEST(TensorBoard, PythonReadsTheFile) {
  // An independent reader in Python: TFRecord framing with its own CRC-32C and
  // protobuf wire decoding; TensorBoard's own loader too when it is installed.
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  TempDir dir;
  { TensorBoardWriter w(dir.path().string()); w.add_scalar("train/loss", 0.25, 7); w.add_scalar("train/lr", 0.05, 7); }
  std::string script = (dir.path() / "read.py").string();
  std::ofstream(script) << R"(import struct, sys
def crc32c(data):
    c = 0xffffffff
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82f63b78 if c & 1 else c >> 1
    return c ^ 0xffffffff
def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xa282ead8) & 0xffffffff
def varint(b, i):
    v = s = 0
    while True:
        x = b[i]; i += 1; v |= (x & 0x7f) << s; s += 7
        if x < 0x80: return v, i
def fields(b):
    i, out = 0, []
    while i < len(b):
        k, i = varint(b, i); f, w = k >> 3, k & 7
        if w == 0: v, i = varint(b, i)
        elif w == 1: v = b[i:i+8]; i += 8
        elif w == 5: v = b[i:i+4]; i += 4
        else:
            n, i = varint(b, i); v = b[i:i+n]; i += n
        out.append((f, v))
    return out
raw = open(sys.argv[1], 'rb').read()
i = 0
while i < len(raw):
    (n,) = struct.unpack('<Q', raw[i:i+8])
    assert struct.unpack('<I', raw[i+8:i+12])[0] == masked(raw[i:i+8])
    data = raw[i+12:i+12+n]
    assert struct.unpack('<I', raw[i+12+n:i+16+n])[0] == masked(data)
    i += 16 + n
    ev = dict(fields(data))
    if 3 in ev: print('version', ev[3].decode()); continue
    value = dict(fields(dict(fields(ev[5]))[1]))
    print(value[1].decode(), ev[2], struct.unpack('<f', value[2])[0])
try:
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    print('tensorboard', len(list(EventFileLoader(sys.argv[1]).Load())))
except ImportError:
    pass
)";
  std::string cmd = "/usr/bin/python3 " + script + " " + only_events_file(dir.path()) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  ASSERT_EQ(pclose(p), 0) << out;
  EXPECT_NE(out.find("version brain.Event:2\ntrain/loss 7 0.25\ntrain/lr 7 0.05000000074505806\n"), std::string::npos)
      << out;
}

TEST(Metrics, LoggerWritesJsonLinesAndScalars) {
  TempDir dir;
  {
    MetricsLogger log({.out_dir = (dir.path() / "run").string()});
    log.on_log({.step = 100, .epoch = 0, .batch = 100, .loss = 0.5, .lr = 0.05, .samples_per_s = 30000, .step_ms = 2});
    log.on_eval({.step = 938, .epoch = 0, .loss = 0.4, .top1 = 0.85, .top5 = 0.99, .examples = 10000});
    TrainSummary end;
    end.steps = 938;
    end.epochs = 1;
    end.samples_per_s = 29000;
    log.on_train_end(end);
  }
  {  // a resumed run appends
    MetricsLogger log({.out_dir = (dir.path() / "run").string(), .tensorboard = false});
    log.on_log({.step = 1000, .epoch = 1, .loss = 0.3});
  }
  std::ifstream in(dir.path() / "run" / "metrics.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["event"], "train");
  EXPECT_EQ(lines[0]["step"], 100);
  EXPECT_EQ(lines[0]["samples_per_s"], 30000.0);
  EXPECT_EQ(lines[1]["event"], "eval");
  EXPECT_EQ(lines[1]["top1"], 0.85);
  EXPECT_EQ(lines[2]["event"], "end");
  EXPECT_EQ(lines[3]["step"], 1000);
  EXPECT_GT(lines[0]["time"].get<double>(), 1.6e9);
  auto records = read_tfrecords(only_events_file(dir.path() / "run"));
  ASSERT_EQ(records.size(), 1u + 4 + 3);
  EXPECT_EQ(decode_event(records[5]).tag, "eval/loss");
  EXPECT_EQ(decode_event(records[6]).value, 0.85f);
}

}  // namespace
}  // namespace braid::train
