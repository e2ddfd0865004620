#include "tests/proc_probe.h"

#include <dirent.h>
#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/fd_io.h"

namespace airlock::testing {
namespace {

// Entries is the number of entries of a directory, -1 when it cannot be
// read.
int Entries(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

// Pids lists the numeric entries of /proc.
std::vector<pid_t> Pids() {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    int pid = 0;
    if (absl::SimpleAtoi(e->d_name, &pid) && pid > 0) out.push_back(pid);
  }
  closedir(d);
  return out;
}

// StatusField is the value of "Name:" in /proc/PID/status, "" when absent.
std::string StatusField(pid_t pid, const std::string& name) {
  std::istringstream in(ReadFileToString(absl::StrCat("/proc/", pid, "/status")));
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, name + ":")) {
      return std::string(absl::StripAsciiWhitespace(line.substr(name.size() + 1)));
    }
  }
  return "";
}

// ListeningInodes maps the socket inode of every listening TCP socket in
// /proc/net/tcp and tcp6 to its local port.
std::map<std::string, int> ListeningInodes() {
  std::map<std::string, int> out;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::istringstream in(ReadFileToString(table));
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      if (f.size() < 10 || f[3] != "0A") continue;  // 0A: TCP_LISTEN
      size_t colon = f[1].rfind(':');
      if (colon == std::string::npos) continue;
      int port = static_cast<int>(std::strtol(f[1].c_str() + colon + 1, nullptr, 16));
      out[f[9]] = port;
    }
  }
  return out;
}

}  // namespace

std::string ProcessInfo::Program() const {
  if (argv.empty()) return "";
  return argv[0].substr(argv[0].rfind('/') + 1);
}

std::string ProcessInfo::CommandLine() const { return absl::StrJoin(argv, " "); }

std::vector<ProcessInfo> LiveProcesses() {
  std::vector<ProcessInfo> out;
  for (pid_t pid : Pids()) {
    std::string state = StatusField(pid, "State");
    if (state.empty() || state[0] == 'Z' || state[0] == 'X') continue;
    ProcessInfo p;
    p.pid = pid;
    absl::SimpleAtoi(StatusField(pid, "PPid"), &p.ppid);
    std::string cmdline = ReadFileToString(absl::StrCat("/proc/", pid, "/cmdline"));
    if (!cmdline.empty() && cmdline.back() == '\0') cmdline.pop_back();
    if (!cmdline.empty()) p.argv = absl::StrSplit(cmdline, '\0');
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<ProcessInfo> ProcessesOf(const std::string& needle) {
  std::vector<ProcessInfo> all = LiveProcesses();
  std::set<pid_t> owned;
  for (const auto& p : all) {
    if (p.CommandLine().find(needle) != std::string::npos) owned.insert(p.pid);
  }
  // Descendants, to a fixed point (a child may be listed before its parent).
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& p : all) {
      if (!owned.count(p.pid) && owned.count(p.ppid)) grew = owned.insert(p.pid).second;
    }
  }
  std::vector<ProcessInfo> out;
  for (const auto& p : all) {
    if (owned.count(p.pid)) out.push_back(p);
  }
  return out;
}

pid_t DaemonPid(const std::string& runtime_dir, const std::string& name) {
  int pid = 0;
  std::string text = ReadFileToString(absl::StrCat(runtime_dir, "/", name, ".pid"));
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &pid) || pid <= 0) return 0;
  char buf[PATH_MAX];
  ssize_t n = readlink(absl::StrCat("/proc/", pid, "/exe").c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return 0;
  std::string exe(buf, n);
  if (absl::EndsWith(exe, " (deleted)")) exe.resize(exe.size() - 10);
  if (exe.substr(exe.rfind('/') + 1) != name) return 0;
  std::string state = StatusField(pid, "State");
  if (state.empty() || state[0] == 'Z') return 0;
  std::string cmdline = ReadFileToString(absl::StrCat("/proc/", pid, "/cmdline"));
  if (cmdline.find("--runtime-dir=" + runtime_dir + '\0') == std::string::npos) return 0;
  return pid;
}

uint64_t StartTicks(pid_t pid) {
  std::string stat = ReadFileToString(absl::StrCat("/proc/", pid, "/stat"));
  // The command name (field 2) is in parentheses and may hold spaces.
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> fields = absl::StrSplit(stat.substr(close + 2), ' ');
  // Fields from the state (3) on: the start time is field 22.
  uint64_t ticks = 0;
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[19], &ticks)) return 0;
  return ticks;
}

ProcUsage SampleUsage(pid_t pid) {
  ProcUsage u;
  u.fds = Entries(absl::StrCat("/proc/", pid, "/fd"));
  u.threads = Entries(absl::StrCat("/proc/", pid, "/task"));
  std::string rss = StatusField(pid, "VmRSS");  // "12345 kB"
  int64_t kib = 0;
  if (absl::SimpleAtoi(absl::StripSuffix(rss, " kB"), &kib)) u.rss_kib = kib;
  return u;
}

std::set<int> ListeningTcpPorts(pid_t pid) {
  std::map<std::string, int> listening = ListeningInodes();
  std::set<int> out;
  std::string dir = absl::StrCat("/proc/", pid, "/fd");
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    char buf[64];
    ssize_t n = readlink((dir + "/" + e->d_name).c_str(), buf, sizeof(buf) - 1);
    if (n <= 0) continue;
    absl::string_view link(buf, n);  // socket:[12345]
    if (!absl::ConsumePrefix(&link, "socket:[") || !absl::ConsumeSuffix(&link, "]")) continue;
    auto it = listening.find(std::string(link));
    if (it != listening.end()) out.insert(it->second);
  }
  closedir(d);
  return out;
}

}  // namespace airlock::testing
