//===- MpiBootstrap.cpp - Bootstrap a multi-process run with MPI ----------===//
#include "runtime/mpi/MpiBootstrap.h"

#include <mpi.h>

#include <charconv>
#include <cstdlib>
#include <string_view>

using namespace braid::rt;

namespace {

std::string mpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, size_t(length));
}

#define BRAID_MPI_CHECK(call)                                                  \
  do {                                                                         \
    int braid_mpi_rc = (call);                                                 \
    if (braid_mpi_rc != MPI_SUCCESS)                                           \
      return errorf(#call, " failed: ", mpiError(braid_mpi_rc), " (",         \
                    __FILE__, ":", __LINE__, ")");                             \
  } while (false)

class MpiBootstrap final : public Bootstrap {
public:
  ~MpiBootstrap() override {
    if (node_ != MPI_COMM_NULL)
      MPI_Comm_free(&node_);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
      MPI_Finalize();
  }

  Status init(int *argc, char ***argv) {
    int provided = 0;
    // Only the main thread calls MPI (executor threads never do).
    BRAID_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    // Errors come back as codes, turned into Status, not an MPI abort.
    BRAID_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    BRAID_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    BRAID_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
    BRAID_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED,
                                        rank_, MPI_INFO_NULL, &node_));
    BRAID_MPI_CHECK(MPI_Comm_rank(node_, &localRank_));
    return Status::ok();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int localRank() const override { return localRank_; }

  Expected<std::vector<std::string>>
  allGather(const std::string &mine) override {
    if (mine.size() > size_t(1) << 30)
      return errorf("allGather: ", mine.size(), " bytes is too large");
    int length = int(mine.size());
    std::vector<int> lengths(size_t(size_), 0);
    BRAID_MPI_CHECK(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1,
                                  MPI_INT, MPI_COMM_WORLD));
    std::vector<int> offsets(size_t(size_), 0);
    int64_t total = 0;
    for (size_t r = 0; r < lengths.size(); ++r) {
      if (lengths[r] < 0 || total + lengths[r] > (int64_t(1) << 30))
        return errorf("allGather: rank ", r, " sent ", lengths[r], " bytes");
      offsets[r] = int(total);
      total += lengths[r];
    }
    std::string all(size_t(total), '\0');
    BRAID_MPI_CHECK(MPI_Allgatherv(mine.data(), length, MPI_BYTE, all.data(),
                                   lengths.data(), offsets.data(), MPI_BYTE,
                                   MPI_COMM_WORLD));
    std::vector<std::string> out;
    for (size_t r = 0; r < lengths.size(); ++r)
      out.push_back(all.substr(size_t(offsets[r]), size_t(lengths[r])));
    return out;
  }

  Status broadcast(std::string &bytes, int root) override {
    if (root < 0 || root >= size_)
      return errorf("broadcast: root ", root, " is outside the world of ",
                    size_);
    int64_t length = int64_t(bytes.size());
    BRAID_MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT64_T, root, MPI_COMM_WORLD));
    if (length < 0 || length > (int64_t(1) << 30))
      return errorf("broadcast: rank ", root, " sent ", length, " bytes");
    bytes.resize(size_t(length));
    BRAID_MPI_CHECK(MPI_Bcast(bytes.data(), int(length), MPI_BYTE, root,
                              MPI_COMM_WORLD));
    return Status::ok();
  }

  [[noreturn]] void abortAll(int exitCode) override {
    MPI_Abort(MPI_COMM_WORLD, exitCode);
    std::_Exit(exitCode); // MPI_Abort does not return; if it did, still end
  }

private:
  int rank_ = 0, size_ = 1, localRank_ = 0;
  MPI_Comm node_ = MPI_COMM_NULL;
};

} // namespace

bool braid::rt::mpi::launchedByMpiLauncher() {
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK",
                          "PMI_SIZE", "SLURM_PROCID"})
    if (std::getenv(var))
      return true;
  return false;
}

std::optional<int> braid::rt::mpi::launcherLocalRank() {
  for (const char *var :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK",
        "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const char *text = std::getenv(var);
    if (!text)
      continue;
    std::string_view s(text);
    int value = -1;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec == std::errc() && end == s.data() + s.size() && value >= 0)
      return value;
  }
  return std::nullopt;
}

Expected<std::unique_ptr<Bootstrap>>
braid::rt::mpi::initialize(int *argc, char ***argv) {
  auto b = std::make_unique<MpiBootstrap>();
  BRAID_RETURN_IF_ERROR(b->init(argc, argv));
  return std::unique_ptr<Bootstrap>(std::move(b));
}
