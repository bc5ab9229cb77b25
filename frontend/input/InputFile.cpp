//===- InputFile.cpp - Read a tool's input file with a bound --------------===//
#include "frontend/input/InputFile.h"
#include "frontend/input/MlirNesting.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Process.h"

#include <cerrno>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace braid;
using llvm::StringRef;
using llvm::Twine;

namespace {
llvm::Error fail(const Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// "1073741824 bytes (1 GiB)".
std::string limitText(uint64_t bytes) {
  std::string s = std::to_string(bytes) + " bytes";
  if (bytes >= (uint64_t(1) << 30) && bytes % (uint64_t(1) << 30) == 0)
    return s + " (" + std::to_string(bytes >> 30) + " GiB)";
  if (bytes >= (uint64_t(1) << 20) && bytes % (uint64_t(1) << 20) == 0)
    return s + " (" + std::to_string(bytes >> 20) + " MiB)";
  return s;
}

/// Reads `fd` to its end, failing as soon as it holds more than `maxBytes`.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readStream(int fd, StringRef name, uint64_t maxBytes, StringRef what,
           std::optional<llvm::Align> alignment) {
  std::string bytes;
  char chunk[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return fail("cannot read " + what + " '" + name +
                  "': " + std::strerror(errno));
    if (n == 0)
      break;
    if (uint64_t(n) > maxBytes - bytes.size())
      return fail(what + " '" + name + "' holds more than the limit of " +
                  limitText(maxBytes));
    bytes.append(chunk, size_t(n));
  }
  std::unique_ptr<llvm::WritableMemoryBuffer> buffer =
      llvm::WritableMemoryBuffer::getNewUninitMemBuffer(bytes.size(), name,
                                                        alignment);
  if (!buffer)
    return fail("cannot read " + what + " '" + name + "': out of memory");
  if (!bytes.empty())
    std::memcpy(buffer->getBufferStart(), bytes.data(), bytes.size());
  return std::unique_ptr<llvm::MemoryBuffer>(std::move(buffer));
}

const char *specialKind(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISCHR(mode) || S_ISBLK(mode))
    return "a device";
  return "a socket or other special file";
}
} // namespace

llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
braid::readInputFile(StringRef path, uint64_t maxBytes, StringRef what,
                     std::optional<llvm::Align> alignment) {
  if (path == "-") {
    if (llvm::sys::Process::FileDescriptorIsDisplayed(STDIN_FILENO))
      llvm::errs() << "(reading the " << what
                   << " from stdin now, hit ctrl-d to end it)\n";
    return readStream(STDIN_FILENO, "<stdin>", maxBytes, what, alignment);
  }
  std::string p = path.str();
  // The type first, before open(): /dev/zero never ends and a directory
  // fails only at the first read.
  struct stat st;
  if (::stat(p.c_str(), &st) != 0)
    return fail("cannot read " + what + " '" + path +
                "': " + std::strerror(errno));
  if (S_ISFIFO(st.st_mode)) {
    // A pipe is a stream, as stdin is (this blocks until a writer comes).
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return fail("cannot read " + what + " '" + path +
                  "': " + std::strerror(errno));
    auto buffer = readStream(fd, path, maxBytes, what, alignment);
    ::close(fd);
    return buffer;
  }
  if (!S_ISREG(st.st_mode))
    return fail(what + " '" + path + "' is " + specialKind(st.st_mode) +
                ", not a file");
  if (uint64_t(st.st_size) > maxBytes)
    return fail(what + " '" + path + "' is " + Twine(uint64_t(st.st_size)) +
                " bytes, more than the limit of " + limitText(maxBytes));
  // O_NONBLOCK: a path swapped for a FIFO after the stat does not block
  // open(), and the fstat refuses it.
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return fail("cannot read " + what + " '" + path +
                "': " + std::strerror(errno));
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      uint64_t(st.st_size) > maxBytes) {
    ::close(fd);
    return fail(what + " '" + path + "' changed while being opened");
  }
  // Read, not mapped (IsVolatile): a file truncated under a mapping would
  // raise SIGBUS.
  auto buffer = llvm::MemoryBuffer::getOpenFile(fd, path, uint64_t(st.st_size),
                                                /*RequiresNullTerminator=*/true,
                                                /*IsVolatile=*/true, alignment);
  ::close(fd);
  if (!buffer)
    return fail("cannot read " + what + " '" + path +
                "': " + buffer.getError().message());
  return std::move(*buffer);
}

llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
braid::readMlirInputFile(StringRef path) {
  auto buffer = readInputFile(path, kMaxIrInputBytes, "input");
  if (!buffer)
    return buffer.takeError();
  StringRef text = (*buffer)->getBuffer();
  if (!isMlirBytecode(text))
    if (llvm::Error deep =
            checkMlirNesting(text, (*buffer)->getBufferIdentifier()))
      return std::move(deep);
  return buffer;
}
