#include "guest/identity.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <linux/random.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/fd_io.h"

namespace airlock::guest {

absl::Status ValidateClaim(const airlock::agent::v1::ClaimRequest& c) {
  const std::string& h = c.hostname();
  if (h.empty() || h.size() > 63) {
    return absl::InvalidArgumentError("claim: the hostname must have 1 to 63 characters");
  }
  for (char ch : h) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '.') {
      return absl::InvalidArgumentError(
          absl::StrCat("claim: the hostname \"", h, "\" may hold only letters, digits, '-' and '.'"));
    }
  }
  const std::string& id = c.machine_id();
  bool hex = id.size() == 32;
  for (char ch : id) hex = hex && ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'));
  if (!hex) return absl::InvalidArgumentError("claim: the machine id must be 32 lowercase hex digits");
  if (c.seed().size() < 32 || c.seed().size() > 512) {
    return absl::InvalidArgumentError("claim: the seed must have 32 to 512 bytes");
  }
  if (c.unix_time_ns() <= 0) return absl::InvalidArgumentError("claim: the clock must be after 1970");
  return absl::OkStatus();
}

absl::Status WriteMachineId(const std::string& root, const std::string& id) {
  std::string etc = root + "/etc";
  mkdir(etc.c_str(), 0755);
  return ReplaceFile(etc + "/machine-id", id + "\n", 0444);
}

std::string HostsWithName(const std::string& hosts, const std::string& hostname) {
  const std::string own = absl::StrCat("127.0.1.1\t", hostname, "\n");
  std::string out;
  bool placed = false;
  for (absl::string_view line : absl::StrSplit(hosts, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (!fields.empty() && fields[0] == "127.0.1.1") continue;
    absl::StrAppend(&out, line, "\n");
    // Beside localhost, where Debian keeps it.
    if (!placed && !fields.empty() && fields[0] == "127.0.0.1") {
      out += own;
      placed = true;
    }
  }
  if (out.empty()) {
    return absl::StrCat("127.0.0.1\tlocalhost\n", own,
                        "::1\tlocalhost ip6-localhost ip6-loopback\n");
  }
  if (!placed) out += own;
  return out;
}

absl::Status WriteHostsName(const std::string& root, const std::string& hostname) {
  std::string etc = root + "/etc";
  mkdir(etc.c_str(), 0755);
  std::string path = etc + "/hosts";
  return ReplaceFile(path, HostsWithName(ReadFileToString(path), hostname), 0644);
}

absl::Status ApplyClaim(const airlock::agent::v1::ClaimRequest& c) {
  if (absl::Status s = ValidateClaim(c); !s.ok()) return s;
  // Entropy first: nothing the guest draws from now on may repeat what
  // another guest restored from the same snapshot draws.
  UniqueFd random(open("/dev/urandom", O_WRONLY | O_CLOEXEC));
  if (random.get() < 0) {
    return absl::InternalError(absl::StrCat("claim: cannot open /dev/urandom: ", strerror(errno)));
  }
  std::vector<char> buf(sizeof(rand_pool_info) + c.seed().size());
  auto* info = reinterpret_cast<rand_pool_info*>(buf.data());
  info->entropy_count = static_cast<int>(c.seed().size() * 8);
  info->buf_size = static_cast<int>(c.seed().size());
  memcpy(info->buf, c.seed().data(), c.seed().size());
  if (ioctl(random.get(), RNDADDENTROPY, info) != 0) {
    return absl::InternalError(absl::StrCat("claim: RNDADDENTROPY: ", strerror(errno)));
  }
  if (ioctl(random.get(), RNDRESEEDCRNG) != 0) {
    return absl::InternalError(absl::StrCat("claim: RNDRESEEDCRNG: ", strerror(errno)));
  }
  timespec now{static_cast<time_t>(c.unix_time_ns() / 1000000000),
               static_cast<long>(c.unix_time_ns() % 1000000000)};
  if (clock_settime(CLOCK_REALTIME, &now) != 0) {
    return absl::InternalError(absl::StrCat("claim: cannot set the clock: ", strerror(errno)));
  }
  if (sethostname(c.hostname().data(), c.hostname().size()) != 0) {
    return absl::InternalError(absl::StrCat("claim: sethostname: ", strerror(errno)));
  }
  // Not fatal: only a lookup of its own name is slower without it.
  (void)WriteHostsName("", c.hostname());
  return WriteMachineId("", c.machine_id());
}

}  // namespace airlock::guest
