// What the host's /proc says about the processes an end-to-end test
// started: which are alive and whose they are, a daemon's pid, the open
// descriptors, threads and resident memory of a process, and the TCP ports
// it listens on. The chaos and soak tests judge the daemons by these.
#ifndef AIRLOCK_TESTS_PROC_PROBE_H_
#define AIRLOCK_TESTS_PROC_PROBE_H_

#include <sys/types.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace airlock::testing {

// ProcessInfo is one live process.
struct ProcessInfo {
  pid_t pid = 0;
  pid_t ppid = 0;
  // The command line; empty for kernel threads.
  std::vector<std::string> argv;

  // Program is the last path component of argv[0] ("qemu-system-x86_64").
  std::string Program() const;
  // CommandLine is argv joined by spaces.
  std::string CommandLine() const;
};

// LiveProcesses lists every process that is not a zombie.
std::vector<ProcessInfo> LiveProcesses();

// ProcessesOf lists the live processes whose command line contains
// `needle` (a test's own temporary directory) and all their descendants,
// so processes of other tests never count.
std::vector<ProcessInfo> ProcessesOf(const std::string& needle);

// DaemonPid is the pid in <runtime_dir>/<name>.pid when that process is
// alive and is daemon `name` of that runtime dir (its binary is `name` and
// its command line has --runtime-dir=<runtime_dir>); 0 otherwise, so a pid
// file left by a killed daemon never names an unrelated process.
pid_t DaemonPid(const std::string& runtime_dir, const std::string& name);

// StartTicks is when `pid` started, in clock ticks after the host booted
// (field 22 of /proc/PID/stat); 0 when it cannot be read.
uint64_t StartTicks(pid_t pid);

// ProcUsage is what a process holds. A field is -1 when it cannot be read.
struct ProcUsage {
  int fds = -1;          // entries of /proc/PID/fd
  int threads = -1;      // entries of /proc/PID/task
  int64_t rss_kib = -1;  // VmRSS of /proc/PID/status
};

// SampleUsage reads the usage of `pid`.
ProcUsage SampleUsage(pid_t pid);

// ListeningTcpPorts is the set of local TCP ports (IPv4 and IPv6) on which
// `pid` holds a listening socket in the caller's network namespace.
std::set<int> ListeningTcpPorts(pid_t pid);

}  // namespace airlock::testing

#endif  // AIRLOCK_TESTS_PROC_PROBE_H_
