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
#include <sstream>
#include <string_view>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace braid::rt;
using json = nlohmann::json;
namespace plan = braid::plan;

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

const SafetensorsFile::TensorInfo *
SafetensorsFile::find(const std::string &name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto &kv : entries_)
    out.push_back(kv.first);
  return out;
}

Expected<const SafetensorsFile::Entry *>
SafetensorsFile::entry(const std::string &name,
                       const Shape &expectedShape) const {
  auto it = entries_.find(name);
  if (it == entries_.end())
    return errorf("checkpoint '", path_, "' has no tensor '", name, "'");
  const Entry &e = it->second;
  if (e.shape != expectedShape)
    return errorf("checkpoint '", path_, "': tensor '", name, "' is ",
                  formatShape(e.shape), ", expected ",
                  formatShape(expectedShape));
  return &e;
}

Expected<const SafetensorsFile::Entry *>
SafetensorsFile::readableEntry(const std::string &name,
                               const Shape &expectedShape) const {
  auto found = entry(name, expectedShape);
  if (found && !(*found)->readable)
    return errorf("checkpoint '", path_, "': tensor '", name, "' has dtype ",
                  (*found)->dtypeName, "; only BF16, F16 and F32 can be read");
  return found;
}

Expected<std::vector<float>>
SafetensorsFile::readFloats(const std::string &name,
                            const Shape &expectedFullShape) const {
  auto found = readableEntry(name, expectedFullShape);
  if (!found)
    return found.status();
  const Entry &e = **found;
  int64_t n = numElements(e.shape);
  std::vector<float> out(static_cast<size_t>(n));
  // loadAsFloat copies element by element (memcpy): the data region need
  // not be aligned (HF pads the header, others may not).
  loadAsFloat(e.dtype, map_->data + e.begin, n, out.data());
  return out;
}

Expected<std::vector<float>>
SafetensorsFile::readSlice(const std::string &name, const Shape &fullShape,
                           const Shape &paddedShape,
                           const ShardSpec &spec) const {
  auto found = readableEntry(name, fullShape);
  if (!found)
    return found.status();
  const Entry &e = **found;
  auto indexMap = localIndexMap(fullShape, paddedShape, spec);
  if (!indexMap)
    return indexMap.status();
  const weights::LocalIndexMap &m = *indexMap;
  std::vector<float> out(size_t(m.localCount), 0.0f);
  const uint8_t *base = map_->data + e.begin;
  size_t elemSize = dtypeSize(e.dtype);
  const int last = m.rank - 1;
  // Local elements are converted in runs that are contiguous in the file:
  // along the last dim, up to the end of the local row, of a shard piece
  // (when the last dim is the cut one) and of the unpadded full row.
  for (int64_t l = 0; l < m.localCount;) {
    int64_t f = weights::fullIndexOf(m, l);
    if (f < 0) { // padding stays zero
      ++l;
      continue;
    }
    int64_t run = 1;
    if (last >= 0) {
      int64_t c = l % m.local[last];
      run = m.local[last] - c;
      if (m.dim == last)
        run = std::min(run, m.pieceLen - c % m.pieceLen);
      run = std::min(run, m.full[last] - f % m.full[last]);
    }
    loadAsFloat(e.dtype, base + size_t(f) * elemSize, run, out.data() + l);
    l += run;
  }
  return out;
}

Expected<std::vector<int64_t>>
SafetensorsFile::readInts(const std::string &name,
                          const Shape &expectedShape) const {
  auto found = entry(name, expectedShape);
  if (!found)
    return found.status();
  const Entry &e = **found;
  DType dtype;
  if (e.dtypeName == "I32")
    dtype = DType::I32;
  else if (e.dtypeName == "I64")
    dtype = DType::I64;
  else
    return errorf("checkpoint '", path_, "': tensor '", name, "' has dtype ",
                  e.dtypeName, "; expected I32 or I64");
  int64_t n = numElements(e.shape);
  std::vector<int64_t> out(static_cast<size_t>(n));
  loadAsInt(dtype, map_->data + e.begin, n, out.data());
  return out;
}

//===----------------------------------------------------------------------===//
// Checkpoint: a file, an index and its shards, or a model directory
//===----------------------------------------------------------------------===//

namespace {
constexpr const char *kSingleFileName = "model.safetensors";
constexpr const char *kIndexFileName = "model.safetensors.index.json";

bool endsWith(const std::string &s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// JSON text, never a safetensors file: an index named other than *.json.
// A safetensors file may start with '{' (a header length of 123 mod 256),
// but its length field then fits the file; a text file's 8 leading bytes
// read as a length of at least 2^59.
bool looksLikeJson(const std::string &path) {
  auto opened = openRegularFile(path, "checkpoint");
  if (!opened)
    return false; // SafetensorsFile::open reports it
  uint8_t head[8] = {};
  ssize_t got = ::pread(opened->fd, head, sizeof(head), 0);
  ::close(opened->fd);
  if (got != ssize_t(sizeof(head)) || head[0] != '{')
    return false;
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i)
    len = (len << 8) | head[i];
  return len > opened->size - 8;
}

// Why shard file name `shard` may not be used, or "": it must stay inside
// the index's directory.
std::string badShardName(const std::string &shard) {
  if (shard.empty())
    return "is empty";
  if (shard.find('\0') != std::string::npos)
    return "holds a NUL byte";
  if (shard.front() == '/')
    return "is an absolute path";
  size_t begin = 0;
  while (begin <= shard.size()) {
    size_t end = std::min(shard.find('/', begin), shard.size());
    std::string_view part(shard.data() + begin, end - begin);
    if (part.empty() || part == "." || part == "..")
      return (part.empty()
                  ? std::string("has an empty path component")
                  : "has a '" + std::string(part) + "' path component") +
             " (shards are files inside the index's directory)";
    begin = end + 1;
  }
  return "";
}

// What to say about PyTorch checkpoint files (pickles: never read): how to
// convert them.
constexpr const char *kConvertPyTorch =
    "Braid reads safetensors only, not PyTorch's pickled .bin files: "
    "convert the checkpoint with transformers, e.g. "
    "AutoModelForCausalLM.from_pretrained(DIR).save_pretrained(OUT, "
    "safe_serialization=True)";

// The PyTorch checkpoint files transformers writes (save_pretrained with
// safe_serialization=False: pytorch_model.bin, or shards
// pytorch_model-00001-of-00002.bin and pytorch_model.bin.index.json) in
// directory `dir`, sorted.
std::vector<std::string> pytorchFilesIn(const std::string &dir) {
  std::vector<std::string> found;
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return found;
  while (const struct dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind("pytorch_model", 0) == 0 &&
        (endsWith(name, ".bin") || endsWith(name, ".bin.index.json")))
      found.push_back(std::move(name));
  }
  ::closedir(d);
  std::sort(found.begin(), found.end());
  return found;
}

// Whether `path`, which did not open as safetensors, looks like a PyTorch
// checkpoint: named *.bin, or a zip archive (torch.save's format).
bool looksLikePyTorch(const std::string &path) {
  if (endsWith(path, ".bin"))
    return true;
  auto opened = openRegularFile(path, "checkpoint");
  if (!opened)
    return false;
  char head[4] = {};
  ssize_t got = ::pread(opened->fd, head, sizeof(head), 0);
  ::close(opened->fd);
  return got == 4 && std::memcmp(head, "PK\3\4", 4) == 0;
}

std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}
} // namespace

Checkpoint::Checkpoint(SafetensorsFile file) {
  path_ = file.path();
  for (const std::string &name : file.names())
    shardOf_[name] = 0;
  shards_.push_back(std::move(file));
}

Expected<Checkpoint> Checkpoint::open(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    if (endsWith(path, ".json") || looksLikeJson(path))
      return openIndex(path);
    auto file = SafetensorsFile::open(path);
    if (!file)
      return looksLikePyTorch(path)
                 ? errorf(file.status().message(), "; ", kConvertPyTorch)
                 : file.status();
    return Checkpoint(file.take());
  }
  std::string dir = endsWith(path, "/") ? path : path + "/";
  auto exists = [](const std::string &p) {
    struct stat s;
    return ::stat(p.c_str(), &s) == 0;
  };
  bool single = exists(dir + kSingleFileName);
  bool index = exists(dir + kIndexFileName);
  if (single && index)
    return errorf("checkpoint directory '", path, "' holds both ",
                  kSingleFileName, " and ", kIndexFileName,
                  "; pass the one to load with --weights");
  if (!single && !index) {
    std::vector<std::string> pytorch = pytorchFilesIn(dir);
    std::string found;
    constexpr size_t kListed = 3;
    for (size_t i = 0; i < std::min(pytorch.size(), kListed); ++i)
      found += (i ? ", '" : "'") + pytorch[i] + "'";
    if (pytorch.size() > kListed)
      found += " and " + std::to_string(pytorch.size() - kListed) + " more";
    if (!found.empty())
      return errorf("checkpoint directory '", path, "' holds neither ",
                    kSingleFileName, " nor ", kIndexFileName,
                    " but a PyTorch checkpoint (", found, "); ",
                    kConvertPyTorch);
    return errorf("checkpoint directory '", path, "' holds neither ",
                  kSingleFileName, " nor ", kIndexFileName);
  }
  // Not open() again: a directory named model.safetensors is refused as not
  // a regular file, not searched in turn.
  if (index)
    return openIndex(dir + kIndexFileName);
  auto file = SafetensorsFile::open(dir + kSingleFileName);
  if (!file)
    return file.status();
  return Checkpoint(file.take());
}

Expected<Checkpoint> Checkpoint::openIndex(const std::string &path) {
  std::string where = "checkpoint index '" + path + "'";
  auto bytes =
      readRegularFile(path, "checkpoint index", kMaxCheckpointIndexBytes);
  if (!bytes)
    return bytes.status();

  // The parser callback sees every nesting level and key: deeper levels
  // than the bound are dropped (and reported), and keys repeated in the
  // top-level object or in weight_map are caught (the parser would keep
  // the last value: a tensor mapped twice would silently use one shard).
  bool tooDeep = false;
  std::string topKey;
  std::set<std::string> topKeys, mapKeys;
  std::optional<std::string> duplicate;
  auto callback = [&](int depth, json::parse_event_t event, json &parsed) {
    if (event == json::parse_event_t::object_start ||
        event == json::parse_event_t::array_start) {
      if (depth >= kMaxCheckpointIndexNesting) {
        tooDeep = true;
        return false;
      }
    } else if (event == json::parse_event_t::key && !duplicate) {
      std::string key = parsed.get<std::string>();
      if (depth == 1) {
        topKey = key;
        if (!topKeys.insert(key).second)
          duplicate = "key '" + key + "' appears twice";
      } else if (depth == 2 && topKey == "weight_map" &&
                 !mapKeys.insert(key).second) {
        duplicate = "weight_map lists tensor '" + key + "' twice";
      }
    }
    return true;
  };
  json index;
  try {
    const char *text = reinterpret_cast<const char *>(bytes->data());
    index = json::parse(text, text + bytes->size(), callback);
  } catch (const json::exception &e) {
    return errorf(where, " is not valid JSON: ", e.what());
  }
  if (tooDeep)
    return errorf(where, " nests arrays and objects deeper than ",
                  kMaxCheckpointIndexNesting, " levels");
  if (duplicate)
    return errorf(where, ": ", *duplicate);
  if (!index.is_object() || !index.contains("weight_map") ||
      !index["weight_map"].is_object())
    return errorf(where, " is not a sharded checkpoint index: expected a "
                         "JSON object with a \"weight_map\" object");
  const json &weightMap = index["weight_map"];
  if (weightMap.empty())
    return errorf(where, ": weight_map lists no tensors");

  Checkpoint ckpt;
  ckpt.path_ = path;
  std::string dir = directoryOf(path);
  std::map<std::string, size_t> shardIndex; // shard name -> shards_ index
  std::vector<std::string> shardNames;
  std::map<std::string, std::string> mapped; // tensor -> shard name
  for (const auto &[tensor, value] : weightMap.items()) {
    if (!value.is_string())
      return errorf(where, ": weight_map entry for tensor '", tensor,
                    "' is not a shard file name: ", excerpt(value));
    std::string shard = value.get<std::string>();
    if (std::string why = badShardName(shard); !why.empty())
      return errorf(where, ": tensor '", tensor, "' is mapped to shard ",
                    excerpt(value), ", whose name ", why);
    mapped[tensor] = shard;
    if (shardIndex.emplace(shard, shardNames.size()).second)
      shardNames.push_back(shard);
  }
  // Each shard opened (mapped) once, whatever the number of its tensors.
  for (const std::string &shard : shardNames) {
    auto file = SafetensorsFile::open(dir + "/" + shard);
    if (!file)
      return errorf(where, ": shard '", shard, "': ", file.status().message(),
                    endsWith(shard, ".bin")
                        ? std::string("; ") + kConvertPyTorch
                        : std::string());
    ckpt.shards_.push_back(file.take());
  }
  for (size_t i = 0; i < shardNames.size(); ++i)
    for (const std::string &tensor : ckpt.shards_[i].names()) {
      auto it = mapped.find(tensor);
      if (it == mapped.end())
        return errorf(where, ": shard '", shardNames[i], "' holds tensor '",
                      tensor, "', which weight_map does not list");
      if (it->second != shardNames[i])
        return errorf(where, ": shard '", shardNames[i], "' holds tensor '",
                      tensor, "', which weight_map maps to shard '", it->second,
                      "'");
    }
  for (const auto &[tensor, shard] : mapped) {
    size_t i = shardIndex.at(shard);
    if (!ckpt.shards_[i].contains(tensor))
      return errorf(where, ": tensor '", tensor, "' is mapped to shard '",
                    shard, "', which does not hold it");
    ckpt.shardOf_[tensor] = i;
  }
  return ckpt;
}

bool Checkpoint::contains(const std::string &name) const {
  return shardOf_.count(name) != 0;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  for (const auto &kv : shardOf_)
    out.push_back(kv.first);
  return out;
}

const SafetensorsFile *Checkpoint::shardOf(const std::string &name) const {
  auto it = shardOf_.find(name);
  return it == shardOf_.end() ? nullptr : &shards_[it->second];
}

//===----------------------------------------------------------------------===//
// Plan parameters from a checkpoint
//===----------------------------------------------------------------------===//

bool braid::rt::isKnownUnusedBuffer(const std::string &name) {
  // Rotary inverse frequencies: a persistent buffer in older HF LLaMA
  // checkpoints; the plan computes them from rope_theta.
  if (name == "rotary_emb.inv_freq" || endsWith(name, ".rotary_emb.inv_freq"))
    return true;
  // GPT-2's causal mask ("h.N.attn.bias", a [1, 1, n_ctx, n_ctx] lower
  // triangle) and its fill value ("h.N.attn.masked_bias"): the plan's
  // attention is causal by construction. Only exactly this name shape, so
  // a real attention bias of another family is never skipped.
  // GPT-NeoX (older Pythia checkpoints) saves the same two buffers as
  // "gpt_neox.layers.N.attention.bias" and ".attention.masked_bias"
  // ("layers.N.attention.bias" in a base model's checkpoint).
  std::string_view rest = name;
  if (rest.substr(0, 12) == "transformer.")
    rest.remove_prefix(12);
  std::string_view layers = "h.", suffix = ".attn.";
  if (rest.substr(0, 16) == "gpt_neox.layers.")
    rest.remove_prefix(9);
  if (rest.substr(0, 7) == "layers.") {
    layers = "layers.";
    suffix = ".attention.";
  }
  if (rest.substr(0, layers.size()) != layers)
    return false;
  rest.remove_prefix(layers.size());
  size_t digits = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9')
    ++digits;
  if (digits == 0 || rest.substr(digits, suffix.size()) != suffix)
    return false;
  rest.remove_prefix(digits + suffix.size());
  return rest == "bias" || rest == "masked_bias";
}

namespace {
// Hugging Face's base_model_prefix of each family Braid builds: a
// *ForCausalLM checkpoint names the base model's tensors "<prefix><name>",
// a base model's own (LlamaModel, Qwen2Model, GPTNeoXModel, GPT2Model
// save_pretrained) "<name>".
constexpr std::string_view kBasePrefixes[] = {"model.", "gpt_neox.",
                                              "transformer."};
// GPT-2's: Braid names GPT-2's parameters as its base model does.
constexpr std::string_view kGpt2Prefix = "transformer.";

// The LM heads live outside the base model: never prefixed, never stripped.
bool isLmHead(const std::string &name) {
  return name == "lm_head.weight" || name == "embed_out.weight";
}

// The other spelling of plan parameter `name` in a checkpoint, if any: the
// name without its base-model prefix when it has one, else with GPT-2's.
// `kind` says which (the prefix, and whether it is added), so that the
// spellings chosen can be compared between parameters of one kind.
std::string otherSpelling(const std::string &name,
                          std::string *kind = nullptr) {
  if (isLmHead(name))
    return "";
  for (std::string_view prefix : kBasePrefixes)
    if (name.size() > prefix.size() &&
        name.compare(0, prefix.size(), prefix) == 0) {
      if (kind)
        *kind = "-" + std::string(prefix);
      return name.substr(prefix.size());
    }
  if (kind)
    *kind = "+" + std::string(kGpt2Prefix);
  return std::string(kGpt2Prefix) + name;
}

} // namespace

static bool planHasParameter(const plan::Plan &p, std::string_view name) {
  if (p.parameters())
    for (const plan::Parameter *param : *p.parameters())
      if (param->name()->string_view() == name)
        return true;
  return false;
}

Expected<CheckpointMatch> braid::rt::matchCheckpoint(const plan::Plan &p,
                                                     const Checkpoint &ckpt) {
  CheckpointMatch match;
  std::set<std::string> used;
  // Per kind of other spelling (otherSpelling), the first parameter (and
  // its tensor) read under the plan's spelling and under the other one: a
  // checkpoint that mixes the two is refused.
  using Read = std::optional<std::pair<std::string, std::string>>;
  std::map<std::string, std::pair<Read, Read>> firstReads;
  // Whether some parameter was read without its base-model prefix.
  auto readStripped = [&] {
    for (const auto &[kind, reads] : firstReads)
      if (kind[0] == '-' && reads.second)
        return true;
    return false;
  };
  if (p.parameters())
    for (const plan::Parameter *param : *p.parameters()) {
      std::string name = param->name()->str();
      std::string kind;
      std::string other = otherSpelling(name, &kind);
      bool hasPlan = ckpt.contains(name);
      bool hasOther = !other.empty() && ckpt.contains(other);
      if (hasPlan && hasOther)
        return errorf("parameter '", name, "': checkpoint '", ckpt.path(),
                      "' holds both '", name, "' and '", other,
                      "' (the name with and without the base model's "
                      "prefix): ambiguous, refusing to pick one");
      std::string source;
      if (hasPlan || hasOther) {
        source = hasPlan ? name : other;
        if (!other.empty()) {
          auto &[byPlan, byOther] = firstReads[kind];
          Read &first = hasPlan ? byPlan : byOther;
          if (!first)
            first = std::make_pair(name, source);
          if (byPlan && byOther)
            return errorf(
                "checkpoint '", ckpt.path(),
                "' mixes two naming layouts: parameter '", byPlan->first,
                "' is read from '", byPlan->second, "' but parameter '",
                byOther->first, "' from '", byOther->second,
                "' (a checkpoint names every tensor with the base model's "
                "prefix or every one without it)");
        }
      } else if (name == "embed_out.weight" &&
                 ckpt.contains("lm_head.weight")) {
        // GPT-NeoX's LM head: "embed_out.weight" on the Hub,
        // "lm_head.weight" as transformers 5 names the module.
        source = "lm_head.weight";
      } else {
        // Name every spelling tried.
        std::string tried = "'" + name + "'";
        if (!other.empty())
          tried += " (nor '" + other + "')";
        else if (name == "embed_out.weight")
          tried += " (nor 'lm_head.weight')";
        std::string why;
        if (name == "lm_head.weight")
          why = "; the plan has its own LM head (its config has "
                "tie_word_embeddings false), so the checkpoint must hold "
                "it: the embedding is not used in its place";
        // A base model's checkpoint (names without the prefix) has no head.
        if (isLmHead(name) && readStripped())
          why += std::string(why.empty() ? "; " : " (") +
                 "the checkpoint names its tensors without the base model's "
                 "prefix, as a base model without an LM head saves them" +
                 (why.empty() ? "" : ")");
        return errorf("parameter '", name, "': checkpoint '", ckpt.path(),
                      "' has no tensor ", tried, why);
      }
      used.insert(source);
      match.sources.push_back(std::move(source));
    }
  for (const std::string &name : ckpt.names()) {
    if (used.count(name))
      continue;
    (isKnownUnusedBuffer(name) ? match.skipped : match.unused).push_back(name);
  }
  return match;
}

std::string braid::rt::describeUnused(const Checkpoint &ckpt,
                                      const plan::Plan &p,
                                      const std::vector<std::string> &unused) {
  constexpr size_t kListed = 5;
  std::ostringstream os;
  os << "checkpoint '" << ckpt.path() << "' holds " << unused.size()
     << (unused.size() == 1 ? " tensor" : " tensors")
     << " the plan does not use: ";
  for (size_t i = 0; i < std::min(unused.size(), kListed); ++i)
    os << (i ? ", '" : "'") << unused[i] << "'";
  if (unused.size() > kListed)
    os << " and " << unused.size() - kListed << " more";
  // A tied plan reads the embedding as its head: a separate lm_head in the
  // checkpoint means the config and the checkpoint disagree.
  if (std::find(unused.begin(), unused.end(), "lm_head.weight") !=
          unused.end() &&
      !planHasParameter(p, "lm_head.weight"))
    os << " (the plan ties the LM head to the embedding: its config has "
          "tie_word_embeddings true)";
  return os.str();
}

Expected<CheckpointMatch>
braid::rt::checkCheckpoint(const plan::Plan &p, const Checkpoint &checkpoint,
                           const CheckpointLoadOptions &options) {
  auto match = matchCheckpoint(p, checkpoint);
  if (!match)
    return match.status();
  if (!match->unused.empty() && !options.allowUnusedWeights)
    return errorf(describeUnused(checkpoint, p, match->unused),
                  " (a checkpoint for another model or config? "
                  "--allow-unused-weights loads it anyway)");
  return match;
}

Status
braid::rt::loadCheckpointParameters(Interpreter &rank, const LoadedPlan &plan,
                                    int worldRank, const Checkpoint &checkpoint,
                                    const CheckpointLoadOptions &options) {
  int world = plan.root().world_size();
  if (worldRank >= 0 && worldRank < world && worldRank != rank.rank())
    return errorf("loading rank ", worldRank, "'s slices into rank ",
                  rank.rank(), "'s interpreter");
  return loadCheckpointParameters(
      [&](const std::string &name, HostTensor local) {
        return rank.setParameter(name, std::move(local));
      },
      plan, worldRank, checkpoint, options);
}

Status braid::rt::loadCheckpointParameters(
    const ParameterSink &sink, const LoadedPlan &plan, int worldRank,
    const Checkpoint &checkpoint, const CheckpointLoadOptions &options) {
  const plan::Plan &p = plan.root();
  if (worldRank < 0 || worldRank >= p.world_size())
    return errorf("rank ", worldRank, " is outside world_size ",
                  p.world_size());
  auto match = checkCheckpoint(p, checkpoint, options);
  if (!match)
    return match.status();
  if (!p.parameters())
    return Status::ok();
  for (unsigned i = 0; i < p.parameters()->size(); ++i) {
    const plan::Parameter *param = p.parameters()->Get(i);
    std::string name = param->name()->str();
    const std::string &source = match->sources[i];
    auto [full, local, padded] = parameterShapes(*param);
    auto slice = checkpoint.shardOf(source)->readSlice(
        source, full, padded, shardSpecFor(p, *param, worldRank));
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
