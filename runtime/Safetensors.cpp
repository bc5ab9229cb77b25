//===- Safetensors.cpp - Hugging Face safetensors checkpoints -------------===//
#include "runtime/Safetensors.h"
#include "runtime/Interpreter.h"
#include "runtime/PlanLoader.h"
#include "runtime/Weights.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <set>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

using namespace braid::rt;
using json = nlohmann::json;

namespace {
struct DTypeInfo {
  const char *name;
  uint64_t size;
  std::optional<DType> readable; // set for the dtypes readFloats converts
};

// Every whole-byte dtype HF writes, so a checkpoint with a few integer
// buffers still opens; sub-byte ones (F4, ...) are rejected as unknown.
constexpr DTypeInfo kDTypes[] = {
    {"BF16", 2, DType::BF16},     {"F16", 2, DType::F16},
    {"F32", 4, DType::F32},       {"F64", 8, std::nullopt},
    {"I64", 8, std::nullopt},     {"I32", 4, std::nullopt},
    {"I16", 2, std::nullopt},     {"I8", 1, std::nullopt},
    {"U64", 8, std::nullopt},     {"U32", 4, std::nullopt},
    {"U16", 2, std::nullopt},     {"U8", 1, std::nullopt},
    {"BOOL", 1, std::nullopt},    {"F8_E4M3", 1, std::nullopt},
    {"F8_E5M2", 1, std::nullopt},
};

const DTypeInfo *findDType(const std::string &name) {
  for (const DTypeInfo &d : kDTypes)
    if (name == d.name)
      return &d;
  return nullptr;
}

const char *safetensorsName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "F32";
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  case DType::I32:
    return "I32";
  case DType::I64:
    return "I64";
  }
  return nullptr;
}

// `j` for an error message, cut short: a hostile header may put megabytes
// where a number belongs.
std::string excerpt(const json &j) {
  std::string s = j.dump();
  return s.size() <= 40 ? s : s.substr(0, 37) + "...";
}

// A JSON integer >= 0 that fits int64 (so shapes and offsets stay signed-
// safe everywhere downstream).
std::optional<uint64_t> nonNegative(const json &j) {
  if (!j.is_number_integer())
    return std::nullopt;
  if (j.is_number_unsigned()) {
    uint64_t v = j.get<uint64_t>();
    if (v > uint64_t(std::numeric_limits<int64_t>::max()))
      return std::nullopt;
    return v;
  }
  int64_t v = j.get<int64_t>();
  if (v < 0)
    return std::nullopt;
  return uint64_t(v);
}
} // namespace

struct SafetensorsFile::Mapping {
  const uint8_t *data = nullptr;
  size_t size = 0;
  Mapping() = default;
  Mapping(const Mapping &) = delete;
  Mapping &operator=(const Mapping &) = delete;
  ~Mapping() {
    if (data)
      ::munmap(const_cast<uint8_t *>(data), size);
  }
};

namespace {
// One header entry; `dataSize` bounds data_offsets. Messages omit the
// file and tensor (the caller adds them).
struct ParsedEntry {
  std::string dtypeName;
  const DTypeInfo *info = nullptr;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

braid::rt::Status parseEntry(const json &j, uint64_t dataSize,
                             ParsedEntry &out) {
  if (!j.is_object())
    return errorf("entry is not a JSON object");
  for (const char *key : {"dtype", "shape", "data_offsets"})
    if (!j.contains(key))
      return errorf("missing '", key, "'");

  const json &dtype = j["dtype"];
  if (!dtype.is_string())
    return errorf("'dtype' is not a string");
  out.dtypeName = dtype.get<std::string>();
  out.info = findDType(out.dtypeName);
  if (!out.info)
    return errorf("unsupported dtype '", out.dtypeName,
                  "' (supported: BF16, F16, F32)");

  const json &shape = j["shape"];
  if (!shape.is_array())
    return errorf("'shape' is not an array");
  uint64_t elements = 1;
  bool overflow = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    const json &d = shape[i];
    if (!d.is_number_integer())
      return errorf("shape dim ", i, " is not an integer: ", excerpt(d));
    if (!d.is_number_unsigned() && d.get<int64_t>() < 0)
      return errorf("shape dim ", i, " is negative: ", d.get<int64_t>());
    auto v = nonNegative(d);
    if (!v)
      return errorf("shape dim ", i, " is too large: ", excerpt(d));
    out.shape.push_back(int64_t(*v));
    // Keep checking the remaining dims for type errors after an overflow.
    overflow = overflow || __builtin_mul_overflow(elements, *v, &elements);
  }
  uint64_t bytes = 0;
  if (overflow || elements > uint64_t(std::numeric_limits<int64_t>::max()) ||
      __builtin_mul_overflow(elements, out.info->size, &bytes))
    return errorf("shape ", formatShape(out.shape), " has too many elements");

  const json &offsets = j["data_offsets"];
  std::optional<uint64_t> begin, end;
  if (offsets.is_array() && offsets.size() == 2) {
    begin = nonNegative(offsets[0]);
    end = nonNegative(offsets[1]);
  }
  if (!begin || !end)
    return errorf("'data_offsets' is not [begin, end] of non-negative "
                  "integers: ",
                  excerpt(offsets));
  if (*end < *begin)
    return errorf("data_offsets [", *begin, ", ", *end,
                  "] end before they begin");
  if (*end > dataSize)
    return errorf("data_offsets [", *begin, ", ", *end,
                  "] run past the data region of ", dataSize, " bytes");
  if (*end - *begin != bytes)
    return errorf("data_offsets [", *begin, ", ", *end, "] hold ",
                  *end - *begin, " bytes, shape ", formatShape(out.shape),
                  " x ", out.dtypeName, " needs ", bytes);
  out.begin = *begin;
  out.end = *end;
  return Status::ok();
}
} // namespace

Expected<SafetensorsFile> SafetensorsFile::open(const std::string &path) {
  std::string where = "checkpoint '" + path + "'";
  auto opened = openRegularFile(path, "checkpoint");
  if (!opened)
    return opened.status();
  int fd = opened->fd;
  uint64_t size = opened->size;
  if (size < 8) {
    ::close(fd);
    return errorf(where, " is ", size,
                  " bytes, shorter than the 8-byte header length");
  }
  void *addr = ::mmap(nullptr, size_t(size), PROT_READ, MAP_PRIVATE, fd, 0);
  int mapErrno = errno;
  ::close(fd);
  if (addr == MAP_FAILED)
    return errorf("cannot map ", where, ": ", std::strerror(mapErrno));
  auto map = std::make_shared<Mapping>();
  map->data = static_cast<const uint8_t *>(addr);
  map->size = size_t(size);

  uint64_t headerLen = 0;
  for (int i = 7; i >= 0; --i)
    headerLen = (headerLen << 8) | map->data[i];
  if (headerLen > size - 8)
    return errorf(where, ": header length ", headerLen, " exceeds the ",
                  size - 8, " bytes after the length field");
  const char *text = reinterpret_cast<const char *>(map->data + 8);
  json header;
  // A JSON object may repeat a key and the parser keeps the last value:
  // a second tensor of the same name would silently replace the first.
  // The callback sees every key of the top-level object (depth 1).
  std::set<std::string> seen;
  std::optional<std::string> duplicate;
  auto noDuplicates = [&](int depth, json::parse_event_t event, json &parsed) {
    if (event == json::parse_event_t::key && depth == 1 && !duplicate &&
        !seen.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  try {
    header = json::parse(text, text + headerLen, noDuplicates);
  } catch (const json::exception &e) {
    return errorf(where, ": header is not valid JSON: ", e.what());
  }
  if (!header.is_object())
    return errorf(where, ": header is not a JSON object");
  if (duplicate)
    return errorf(where, ": tensor '", *duplicate,
                  "' is named twice in the header");

  SafetensorsFile file;
  file.path_ = path;
  uint64_t dataStart = 8 + headerLen, dataSize = size - dataStart;
  for (const auto &[name, value] : header.items()) {
    if (name == "__metadata__")
      continue;
    ParsedEntry parsed;
    Status st = parseEntry(value, dataSize, parsed);
    if (!st)
      return errorf(where, ": tensor '", name, "': ", st.message());
    Entry &e = file.entries_[name];
    e.dtypeName = parsed.dtypeName;
    e.readable = parsed.info->readable.has_value();
    if (e.readable)
      e.dtype = *parsed.info->readable;
    e.shape = std::move(parsed.shape);
    e.begin = dataStart + parsed.begin;
    e.end = dataStart + parsed.end;
  }
  // No two tensors may share bytes: writing one would change the other,
  // and a checkpoint that aliases them is corrupt (HF's loader refuses it
  // too). Empty tensors occupy nothing.
  std::vector<std::pair<const std::string *, const Entry *>> byOffset;
  for (const auto &[name, e] : file.entries_)
    if (e.end > e.begin)
      byOffset.push_back({&name, &e});
  std::sort(byOffset.begin(), byOffset.end(), [](const auto &a, const auto &b) {
    return a.second->begin < b.second->begin;
  });
  for (size_t i = 1; i < byOffset.size(); ++i) {
    const Entry &prev = *byOffset[i - 1].second, &next = *byOffset[i].second;
    if (next.begin < prev.end)
      return errorf(where, ": tensors '", *byOffset[i - 1].first, "' ([",
                    prev.begin - dataStart, ", ", prev.end - dataStart,
                    ")) and '", *byOffset[i].first, "' ([",
                    next.begin - dataStart, ", ", next.end - dataStart,
                    ")) overlap in the data region");
  }
  file.map_ = std::move(map);
  return file;
}

bool SafetensorsFile::contains(const std::string &name) const {
  return entries_.count(name) != 0;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto &kv : entries_)
    out.push_back(kv.first);
  return out;
}

Expected<std::vector<float>>
SafetensorsFile::readFloats(const std::string &name,
                            const Shape &expectedFullShape) const {
  auto it = entries_.find(name);
  if (it == entries_.end())
    return errorf("checkpoint '", path_, "' has no tensor '", name, "'");
  const Entry &e = it->second;
  if (!e.readable)
    return errorf("checkpoint '", path_, "': tensor '", name, "' has dtype ",
                  e.dtypeName, "; only BF16, F16 and F32 can be read");
  if (e.shape != expectedFullShape)
    return errorf("checkpoint '", path_, "': tensor '", name, "' is ",
                  formatShape(e.shape), ", expected ",
                  formatShape(expectedFullShape));
  int64_t n = numElements(e.shape);
  std::vector<float> out(static_cast<size_t>(n));
  const uint8_t *src = map_->data + e.begin;
  // The data region need not be aligned (HF pads the header, others may
  // not); the converters read whole elements.
  std::vector<uint8_t> aligned;
  if (reinterpret_cast<uintptr_t>(src) % dtypeSize(e.dtype)) {
    aligned.assign(src, map_->data + e.end);
    src = aligned.data();
  }
  loadAsFloat(e.dtype, src, n, out.data());
  return out;
}

// The checkpoint tensor that holds plan parameter `name`, or "".
static std::string checkpointName(const SafetensorsFile &file,
                                  const std::string &name) {
  for (std::string candidate : {name, "transformer." + name})
    if (file.contains(candidate))
      return candidate;
  if (name == "lm_head.weight" && file.contains("model.embed_tokens.weight"))
    return "model.embed_tokens.weight";
  return "";
}

Status braid::rt::loadCheckpointParameters(Interpreter &rank,
                                           const LoadedPlan &plan,
                                           int worldRank,
                                           const SafetensorsFile &file) {
  int world = plan.root().world_size();
  if (worldRank >= 0 && worldRank < world && worldRank != rank.rank())
    return errorf("loading rank ", worldRank, "'s slices into rank ",
                  rank.rank(), "'s interpreter");
  return loadCheckpointParameters(
      [&](const std::string &name, HostTensor local) {
        return rank.setParameter(name, std::move(local));
      },
      plan, worldRank, file);
}

Status braid::rt::loadCheckpointParameters(const ParameterSink &sink,
                                           const LoadedPlan &plan,
                                           int worldRank,
                                           const SafetensorsFile &file) {
  const plan::Plan &p = plan.root();
  if (worldRank < 0 || worldRank >= p.world_size())
    return errorf("rank ", worldRank, " is outside world_size ",
                  p.world_size());
  if (!p.parameters())
    return Status::ok();
  for (const plan::Parameter *param : *p.parameters()) {
    std::string name = param->name()->str();
    std::string source = checkpointName(file, name);
    if (source.empty())
      return errorf("parameter '", name, "': checkpoint '", file.path(),
                    "' has no tensor '", name, "' (nor 'transformer.", name,
                    "'",
                    name == "lm_head.weight"
                        ? ", nor the tied 'model.embed_tokens.weight'"
                        : "",
                    ")");
    auto [full, local, padded] = parameterShapes(*param);
    auto values = file.readFloats(source, full);
    if (!values)
      return errorf("parameter '", name, "': ", values.status().message());
    auto slice =
        sliceForRank(*values, full, padded, shardSpecFor(p, *param, worldRank));
    if (!slice)
      return errorf("parameter '", name, "': ", slice.status().message());
    if (int64_t(slice->size()) != numElements(local))
      return errorf("parameter '", name, "': the shard rule gives ",
                    slice->size(), " elements, local shape ",
                    formatShape(local), " holds ", numElements(local));
    // An integer parameter cannot hold NaN, an infinity or a value out of
    // its range (converting one is undefined behaviour in C++).
    if (int64_t bad = firstNonIntegral(param->dtype(), slice->data(),
                                       int64_t(slice->size()));
        bad >= 0)
      return errorf("parameter '", name, "': checkpoint tensor '", source,
                    "' holds ", (*slice)[size_t(bad)], " (local element ", bad,
                    "), which its ", dtypeName(param->dtype()),
                    " type cannot represent");
    // setParameter's errors already name the parameter.
    BRAID_RETURN_IF_ERROR(
        sink(name, HostTensor::fromFloats(param->dtype(), local, *slice)));
  }
  return Status::ok();
}

Status braid::rt::writeSafetensors(
    const std::string &path,
    const std::vector<std::pair<std::string, HostTensor>> &tensors) {
  // ordered_json keeps the header in data order, like HF's files.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  uint64_t offset = 0;
  for (const auto &[name, t] : tensors) {
    if (name == "__metadata__" || header.contains(name))
      return errorf("cannot write '", path, "': tensor name '", name,
                    "' is reserved or repeated");
    const char *dtype = safetensorsName(t.dtype);
    bool validShape = true;
    for (int64_t d : t.shape)
      validShape = validShape && d >= 0;
    if (!dtype || !validShape ||
        uint64_t(numElements(t.shape)) * dtypeSize(t.dtype) != t.bytes.size())
      return errorf("cannot write '", path, "': tensor '", name, "' is ",
                    formatShape(t.shape), " x ", dtypeName(t.dtype), " with ",
                    t.bytes.size(), " bytes");
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = dtype;
    entry["shape"] = t.shape;
    entry["data_offsets"] = {offset, offset + t.bytes.size()};
    header[name] = std::move(entry);
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  uint8_t len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(len), 8);
  out.write(text.data(), std::streamsize(text.size()));
  for (const auto &kv : tensors)
    out.write(reinterpret_cast<const char *>(kv.second.bytes.data()),
              std::streamsize(kv.second.bytes.size()));
  out.close();
  if (!out)
    return errorf("cannot write '", path, "'");
  return Status::ok();
}
