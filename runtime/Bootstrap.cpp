//===- Bootstrap.cpp - Agreement checks across the processes of a run -----===//
#include "runtime/Bootstrap.h"
#include "runtime/WeightFormula.h"

#include <charconv>
#include <iomanip>
#include <sstream>

using namespace braid::rt;

uint64_t braid::rt::planFingerprint(const std::vector<uint8_t> &bytes) {
  return weights::fnv1a(bytes.data(), bytes.size());
}

namespace {

// One line per field; the path goes last because only it may hold anything.
std::string encode(const RunIdentity &id) {
  std::ostringstream os;
  os << (id.loadError.empty() ? "ok" : "error") << '\n'
     << id.planFingerprint << '\n'
     << id.weights << '\n'
     << id.loadError << '\n'
     << id.setupError << '\n'
     << id.planPath;
  return os.str();
}

Expected<RunIdentity> decode(const std::string &blob, int rank) {
  std::istringstream is(blob);
  std::string status, fingerprint;
  RunIdentity id;
  if (!std::getline(is, status) || !std::getline(is, fingerprint) ||
      !std::getline(is, id.weights) || !std::getline(is, id.loadError) ||
      !std::getline(is, id.setupError))
    return errorf("rank ", rank, " sent a malformed run identity");
  std::getline(is, id.planPath, '\0');
  auto [end, ec] = std::from_chars(fingerprint.data(),
                                   fingerprint.data() + fingerprint.size(),
                                   id.planFingerprint);
  if (ec != std::errc() || end != fingerprint.data() + fingerprint.size())
    return errorf("rank ", rank, " sent a malformed plan fingerprint");
  if (status == "error" && id.loadError.empty())
    id.loadError = "unknown error";
  return id;
}

std::string hex(uint64_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << std::setw(16) << std::setfill('0') << v;
  return os.str();
}

} // namespace

Status braid::rt::checkSameRun(Bootstrap &processes, const RunIdentity &mine) {
  RunIdentity sent = mine;
  // Newlines would break the line framing; error messages have none, but a
  // path or checkpoint name might.
  for (std::string *s : {&sent.weights, &sent.loadError, &sent.setupError})
    for (char &c : *s)
      if (c == '\n')
        c = ' ';
  auto blobs = processes.allGather(encode(sent));
  if (!blobs)
    return errorf("exchanging run identities: ", blobs.status().message());
  std::vector<RunIdentity> ids;
  for (size_t r = 0; r < blobs->size(); ++r) {
    auto id = decode((*blobs)[r], int(r));
    if (!id)
      return id.status();
    ids.push_back(*id);
  }
  for (size_t r = 0; r < ids.size(); ++r)
    if (!ids[r].loadError.empty())
      return errorf("rank ", r, " of ", ids.size(),
                    " could not start: ", ids[r].loadError);
  const RunIdentity &root = ids.front();
  for (size_t r = 1; r < ids.size(); ++r) {
    if (ids[r].planFingerprint != root.planFingerprint)
      return errorf("ranks hold different plans: rank ", r, " loaded '",
                    ids[r].planPath, "' (fingerprint ",
                    hex(ids[r].planFingerprint), "), rank 0 loaded '",
                    root.planPath, "' (fingerprint ",
                    hex(root.planFingerprint),
                    "); every rank must run the same plan");
    if (ids[r].weights != root.weights)
      return errorf("ranks use different weights: rank ", r, " has ",
                    ids[r].weights, ", rank 0 has ", root.weights,
                    "; every rank must use the same");
  }
  for (size_t r = 0; r < ids.size(); ++r)
    if (!ids[r].setupError.empty())
      return errorf("rank ", r, " of ", ids.size(),
                    " could not start: ", ids[r].setupError);
  return Status::ok();
}
