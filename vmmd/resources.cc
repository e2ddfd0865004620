#include "vmmd/resources.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace airlock::vmmd {

absl::Status ValidateName(absl::string_view name) {
  if (name.size() < 2 || name.size() > 63) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid sandbox name \"", name, "\": use 2 to 63 characters"));
  }
  if (!absl::ascii_isalnum(name[0])) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid sandbox name \"", name, "\": it must start with a letter or digit"));
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '.') {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid sandbox name \"", name, "\": only letters, digits, '-' and '.' are allowed"));
    }
  }
  if (name == "default" || name == "global") {
    return absl::InvalidArgumentError(absl::StrCat(
        "the sandbox name \"", name, "\" is reserved (\"global\" names the global scope of "
        "rules and secrets)"));
  }
  return absl::OkStatus();
}

HostFacts HostFacts::Read() {
  HostFacts h;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  h.cpus = cpus > 0 ? static_cast<uint32_t>(cpus) : 1;
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGE_SIZE);
  h.memory_mib = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * page / (1 << 20) : 1024;
  return h;
}

absl::StatusOr<Resolved> ResolveResources(uint32_t cpus, uint64_t memory_mib,
                                          absl::string_view size, const HostFacts& host) {
  if (!size.empty()) {
    auto named = LookupSize(size);
    if (!named.ok()) return named.status();
    if (cpus == 0) cpus = named->cpus;
    if (memory_mib == 0) memory_mib = named->memory_mib;
  }
  if (cpus == 0) cpus = std::min<uint32_t>(host.cpus, 4);
  if (memory_mib == 0) {
    memory_mib = std::clamp<uint64_t>(host.memory_mib / 2, kMinMemoryMib, 32768);
  }
  if (cpus > 64) {
    return absl::InvalidArgumentError(absl::StrCat("--cpus ", cpus, " is more than 64"));
  }
  if (memory_mib < kMinMemoryMib) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--memory ", memory_mib, " MiB is too small: a sandbox needs at least 512 MiB"));
  }
  if (memory_mib > 2 * host.memory_mib) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--memory ", memory_mib, " MiB is more than twice this host's ", host.memory_mib,
        " MiB"));
  }
  return Resolved{cpus, memory_mib};
}

}  // namespace airlock::vmmd
