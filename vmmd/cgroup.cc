#include "vmmd/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/fd_io.h"
#include "common/paths.h"

namespace airlock::vmmd {
namespace {

constexpr const char* kV1Controllers[] = {"memory", "cpu", "pids"};
constexpr uint64_t kCpuPeriodUs = 100000;

std::string OrMax(uint64_t v) { return v == 0 ? "max" : absl::StrCat(v); }

absl::Status WriteValue(const std::string& path, const std::string& value) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
  }
  bool ok = write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
  int e = errno;
  close(fd);
  if (!ok) {
    return absl::InternalError(
        absl::StrCat("cannot write \"", value, "\" to ", path, ": ", strerror(e)));
  }
  return absl::OkStatus();
}

uint64_t ReadNumber(const std::string& path) {
  uint64_t v = 0;
  std::string text(absl::StripAsciiWhitespace(ReadFileToString(path)));
  if (text == "max") return UINT64_MAX;
  (void)absl::SimpleAtoi(text, &v);
  return v;
}

// KeyedNumber is "key N" from a flat keyed file (memory.events, oom_control).
uint64_t KeyedNumber(const std::string& path, const std::string& key) {
  for (absl::string_view line : absl::StrSplit(ReadFileToString(path), '\n')) {
    std::vector<absl::string_view> kv = absl::StrSplit(line, ' ');
    uint64_t v = 0;
    if (kv.size() == 2 && kv[0] == key && absl::SimpleAtoi(kv[1], &v)) return v;
  }
  return 0;
}

struct MountLine {
  std::string root, point, fstype, superopts;
};

std::vector<MountLine> ParseMountinfo(const std::string& mountinfo) {
  std::vector<MountLine> out;
  for (absl::string_view line : absl::StrSplit(mountinfo, '\n')) {
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    size_t dash = 0;
    for (size_t i = 6; i < f.size(); ++i) {
      if (f[i] == "-") {
        dash = i;
        break;
      }
    }
    if (dash == 0 || dash + 1 >= f.size()) continue;
    out.push_back({f[3], f[4], f[dash + 1], dash + 3 < f.size() ? f[dash + 3] : ""});
  }
  return out;
}

// Within is `path` of /proc/self/cgroup seen from a mount whose root is
// `root` (cgroup namespaces mount a subtree).
std::string Within(const std::string& root, const std::string& path) {
  if (root == "/" || root.empty()) return path;
  if (absl::StartsWith(path, root)) return path.substr(root.size());
  return path;
}

}  // namespace

absl::StatusOr<Cgroups> Cgroups::Detect(const std::string& mountinfo,
                                        const std::string& self_cgroup,
                                        const std::string& instance) {
  std::vector<MountLine> mounts = ParseMountinfo(mountinfo);
  std::map<std::string, std::string> self;  // controller ("" for v2) -> path
  for (absl::string_view line : absl::StrSplit(self_cgroup, '\n')) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    if (f[1].empty()) {
      self[""] = f[2];
      continue;
    }
    for (absl::string_view c : absl::StrSplit(f[1], ',')) self[std::string(c)] = f[2];
  }
  std::string leaf = absl::StrCat("airlock-", instance);
  Cgroups out;
  for (const MountLine& m : mounts) {
    if (m.fstype != "cgroup2" || self.count("") == 0) continue;
    std::vector<std::string> have =
        absl::StrSplit(absl::StripAsciiWhitespace(ReadFileToString(m.point + "/cgroup.controllers")),
                       ' ', absl::SkipEmpty());
    bool memory = false, pids = false, cpu = false;
    for (const auto& c : have) {
      memory = memory || c == "memory";
      pids = pids || c == "pids";
      cpu = cpu || c == "cpu";
    }
    if (!memory || !pids || !cpu) continue;
    std::string path = Within(m.root, self[""]);
    // A vmmd that moved itself into its "vmmd" leaf before (a restart in
    // the same unit) starts from the leaf's parent.
    if (absl::EndsWith(path, "/vmmd")) path.resize(path.size() - 5);
    if (path == "/") path.clear();
    out.v2_ = true;
    out.v2_base_ = m.point + path;
    out.parents_[""] = out.v2_base_ + "/" + leaf;
    return out;
  }
  for (const char* c : kV1Controllers) {
    for (const MountLine& m : mounts) {
      if (m.fstype != "cgroup") continue;
      bool has = false;
      for (absl::string_view o : absl::StrSplit(m.superopts, ',')) has = has || o == c;
      if (!has || self.count(c) == 0) continue;
      std::string path = Within(m.root, self[c]);
      if (path == "/") path.clear();
      out.parents_[c] = m.point + path + "/" + leaf;
      break;
    }
  }
  if (out.parents_.count("memory") == 0) {
    return absl::FailedPreconditionError(
        "no cgroup memory controller is available to vmmd (neither cgroup v2 with memory, cpu "
        "and pids nor a v1 memory hierarchy); sandboxes cannot be given memory limits");
  }
  return out;
}

absl::StatusOr<Cgroups> Cgroups::ForThisProcess(const std::string& instance) {
  return Detect(ReadFileToString("/proc/self/mountinfo"), ReadFileToString("/proc/self/cgroup"),
                instance);
}

std::string Cgroups::Describe() const {
  if (v2_) return absl::StrCat("cgroup v2: ", parents_.at(""));
  std::string out = "cgroup v1:";
  for (const auto& [c, dir] : parents_) absl::StrAppend(&out, " ", dir);
  return out;
}

absl::Status Cgroups::Prepare() {
  if (!v2_) {
    for (const auto& [c, dir] : parents_) {
      if (absl::Status s = MakeDirs(dir, 0755); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  // v2 allows processes only in leaves once controllers are enabled below a
  // cgroup: vmmd moves itself into <base>/vmmd first (its delegated unit).
  const std::string& parent = parents_.at("");
  std::string self_leaf = v2_base_ + "/vmmd";
  if (absl::Status s = MakeDirs(self_leaf, 0755); !s.ok()) return s;
  if (absl::Status s = WriteValue(self_leaf + "/cgroup.procs", absl::StrCat(getpid()));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = WriteValue(v2_base_ + "/cgroup.subtree_control", "+memory +cpu +pids");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = MakeDirs(parent, 0755); !s.ok()) return s;
  return WriteValue(parent + "/cgroup.subtree_control", "+memory +cpu +pids");
}

std::vector<std::string> Cgroups::Dirs(const std::string& name) const {
  std::vector<std::string> out;
  for (const auto& [c, dir] : parents_) out.push_back(dir + "/" + name);
  return out;
}

absl::StatusOr<std::vector<std::string>> Cgroups::Create(const std::string& name,
                                                         const CgroupLimits& limits) {
  if (absl::Status s = Prepare(); !s.ok()) return s;
  std::vector<std::string> procs;
  for (const auto& [c, parent] : parents_) {
    std::string dir = parent + "/" + name;
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::InternalError(absl::StrCat("cannot create cgroup ", dir, ": ", strerror(errno)));
    }
    std::vector<std::pair<std::string, std::string>> values;
    if (v2_) {
      values = {{"memory.max", OrMax(limits.memory_bytes)}, {"pids.max", OrMax(limits.pids)}};
      if (limits.cpus > 0) {
        values.push_back({"cpu.max", absl::StrCat(limits.cpus * kCpuPeriodUs, " ", kCpuPeriodUs)});
      }
    } else if (c == "memory") {
      values = {{"memory.limit_in_bytes", limits.memory_bytes == 0 ? "-1" : absl::StrCat(limits.memory_bytes)}};
    } else if (c == "cpu" && limits.cpus > 0) {
      values = {{"cpu.cfs_period_us", absl::StrCat(kCpuPeriodUs)},
                {"cpu.cfs_quota_us", absl::StrCat(limits.cpus * kCpuPeriodUs)}};
    } else if (c == "pids") {
      values = {{"pids.max", OrMax(limits.pids)}};
    }
    for (const auto& [file, value] : values) {
      if (absl::Status s = WriteValue(dir + "/" + file, value); !s.ok()) return s;
    }
    procs.push_back(dir + "/cgroup.procs");
  }
  return procs;
}

absl::StatusOr<CgroupUsage> Cgroups::Usage(const std::string& name) const {
  CgroupUsage u;
  auto dir_of = [&](const std::string& c) { return parents_.at(v2_ ? "" : c) + "/" + name; };
  std::string mem = dir_of("memory");
  struct stat st;
  if (stat(mem.c_str(), &st) != 0) return absl::NotFoundError(absl::StrCat("no cgroup ", mem));
  if (v2_) {
    u.memory_bytes = ReadNumber(mem + "/memory.current");
    u.memory_peak_bytes = ReadNumber(mem + "/memory.peak");
    u.memory_limit_bytes = ReadNumber(mem + "/memory.max");
    u.oom_kills = KeyedNumber(mem + "/memory.events", "oom_kill");
    u.pids_limit = ReadNumber(mem + "/pids.max");
  } else {
    u.memory_bytes = ReadNumber(mem + "/memory.usage_in_bytes");
    u.memory_peak_bytes = ReadNumber(mem + "/memory.max_usage_in_bytes");
    u.memory_limit_bytes = ReadNumber(mem + "/memory.limit_in_bytes");
    u.oom_kills = KeyedNumber(mem + "/memory.oom_control", "oom_kill");
    if (parents_.count("pids")) u.pids_limit = ReadNumber(dir_of("pids") + "/pids.max");
  }
  return u;
}

absl::Status Cgroups::Remove(const std::string& name) {
  for (const std::string& dir : Dirs(name)) {
    // The kernel frees a cgroup a moment after its last process exits.
    for (int i = 0; rmdir(dir.c_str()) != 0; ++i) {
      if (errno == ENOENT) break;
      if (errno != EBUSY || i >= 100) {
        return absl::InternalError(absl::StrCat("cannot remove cgroup ", dir, ": ", strerror(errno)));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return absl::OkStatus();
}

absl::Status Cgroups::Rename(const std::string& from, const std::string& to) {
  std::vector<std::string> sources = Dirs(from), targets = Dirs(to);
  for (size_t i = 0; i < sources.size(); ++i) {
    if (rmdir(targets[i].c_str()) != 0 && errno != ENOENT) {
      return absl::InternalError(
          absl::StrCat("cannot replace cgroup ", targets[i], ": ", strerror(errno)));
    }
    if (rename(sources[i].c_str(), targets[i].c_str()) != 0) {
      return absl::InternalError(absl::StrCat("cannot rename cgroup ", sources[i], " to ",
                                              targets[i], ": ", strerror(errno)));
    }
  }
  return absl::OkStatus();
}

}  // namespace airlock::vmmd
