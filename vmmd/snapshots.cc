#include "vmmd/snapshots.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/fd_io.h"
#include "common/subprocess.h"
#include "vmmd/store/oci.h"

namespace airlock::vmmd {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {

constexpr char kPartial[] = ".partial";

int MillisLeft(steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1000));
}

absl::StatusOr<sockaddr_un> UnixAddress(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path too long: ", path));
  }
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

void RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

}  // namespace

bool RestoreCondemnsSnapshot(absl::string_view vmm_log, absl::string_view console) {
  return absl::StrContains(vmm_log, "load of migration failed") ||
         absl::StrContains(console, "Kernel panic - not syncing");
}

bool Snapshottable(const VmConfig& config, size_t hotplug_shares) {
  return config.shares.size() <= hotplug_shares && config.docker_disk.empty();
}

absl::Status CopySynced(const std::string& from, const std::string& to) {
  std::string tmp = to + ".tmp";
  CommandResult r = RunCommand({"cp", "--reflink=auto", "--", from, tmp}, {}, "", 60);
  bool synced = false;
  if (r.exit_code == 0) {
    UniqueFd copy(open(tmp.c_str(), O_RDONLY | O_CLOEXEC));
    synced = copy.get() >= 0 && fsync(copy.get()) == 0;
  }
  if (!synced || rename(tmp.c_str(), to.c_str()) != 0) {
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot copy ", from, " to ", to, ": ",
                                            r.exit_code != 0 ? r.err : strerror(errno)));
  }
  return absl::OkStatus();
}

std::string FileIdentity(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "";
  // Not the change time: a use of the file (its owner or mode set for a
  // jail, a link count) changes that, not its content.
  return absl::StrCat(st.st_dev, ":", st.st_ino, ":", st.st_size, ":", st.st_mtim.tv_sec, ".",
                      st.st_mtim.tv_nsec);
}

std::string SnapshotKey(const SnapshotInputs& in) {
  std::string text = absl::StrCat(
      "airlock-snapshot-v2\n", "base ", in.base_disk, " ", FileIdentity(in.base_disk), "\n",
      "kernel ", in.kernel, " ", FileIdentity(in.kernel), "\n", "initrd ", in.initrd, " ",
      FileIdentity(in.initrd), "\n", "vm ", in.vm, "\n");
  std::string digest = oci::Sha256Digest(text);
  return std::string(absl::StripPrefix(digest, "sha256:"));
}

VmConfig SnapshotVm(const VmConfig& config, const std::string& dir,
                    const std::string& socket_dir) {
  VmConfig c = config;
  c.name = kSnapshotVmName;
  c.hostname = kSnapshotHostname;
  c.dir = dir;
  c.disk = dir + "/disk.qcow2";
  c.console_log = dir + "/console.log";
  c.vmm_log = dir + "/vmm.log";
  c.socket_dir = socket_dir;
  c.agent_socket = socket_dir + "/agent.sock";
  c.egress_socket = socket_dir + "/egress.sock";
  c.qmp_socket.clear();
  c.incoming_socket.clear();
  c.die_with_vmmd = false;
  c.shares.clear();
  return c;
}

std::optional<Snapshot> SnapshotStore::Find(const std::string& key) const {
  Snapshot s{absl::StrCat(dir_, "/", key), "", "", ""};
  s.disk = s.dir + "/disk.qcow2";
  s.memory = s.dir + "/memory";
  s.ram = s.dir + "/ram";
  struct stat st {};
  if (key.empty() || stat(s.disk.c_str(), &st) != 0 || stat(s.ram.c_str(), &st) != 0 ||
      st.st_size == 0 || stat(s.memory.c_str(), &st) != 0 || st.st_size == 0) {
    return std::nullopt;
  }
  return s;
}

absl::StatusOr<Snapshot> SnapshotStore::Begin(const std::string& key) {
  Snapshot s{absl::StrCat(dir_, "/", key, kPartial), "", "", ""};
  RemoveTree(s.dir);
  std::error_code ec;
  std::filesystem::create_directories(s.dir, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot make ", s.dir, ": ", ec.message()));
  }
  chmod(dir_.c_str(), 0700);
  s.disk = s.dir + "/disk.qcow2";
  s.memory = s.dir + "/memory";
  s.ram = s.dir + "/ram";
  return s;
}

absl::Status SnapshotStore::Commit(const std::string& key, size_t keep) {
  std::string partial = absl::StrCat(dir_, "/", key, kPartial);
  std::string final_dir = absl::StrCat(dir_, "/", key);
  for (const char* f : {"/disk.qcow2", "/memory", "/ram"}) {
    UniqueFd fd(open((partial + f).c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0 || fsync(fd.get()) != 0) {
      return absl::InternalError(absl::StrCat("cannot sync ", partial, f, ": ", strerror(errno)));
    }
  }
  RemoveTree(final_dir);
  if (rename(partial.c_str(), final_dir.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot rename ", partial, " to ", final_dir, ": ", strerror(errno)));
  }
  UniqueFd dfd(open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.get() >= 0) fsync(dfd.get());
  std::vector<std::string> keys = Keys();
  for (size_t i = 0; i + keep < keys.size(); ++i) {
    if (keys[i] != key) RemoveTree(absl::StrCat(dir_, "/", keys[i]));
  }
  return absl::OkStatus();
}

void SnapshotStore::Abandon(const std::string& key) {
  RemoveTree(absl::StrCat(dir_, "/", key, kPartial));
}

void SnapshotStore::Remove(const std::string& key) {
  if (!key.empty()) RemoveTree(absl::StrCat(dir_, "/", key));
}

void SnapshotStore::RemovePartials() {
  DIR* d = opendir(dir_.c_str());
  if (d == nullptr) return;
  std::vector<std::string> partials;
  while (dirent* e = readdir(d)) {
    if (absl::EndsWith(e->d_name, kPartial)) partials.push_back(e->d_name);
  }
  closedir(d);
  for (const std::string& p : partials) RemoveTree(absl::StrCat(dir_, "/", p));
}

std::vector<std::string> SnapshotStore::Keys() const {
  std::vector<std::pair<int64_t, std::string>> found;
  DIR* d = opendir(dir_.c_str());
  if (d == nullptr) return {};
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == ".." || absl::EndsWith(name, kPartial)) continue;
    struct stat st {};
    if (stat(absl::StrCat(dir_, "/", name).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    found.push_back({st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec, name});
  }
  closedir(d);
  std::sort(found.begin(), found.end());
  std::vector<std::string> keys;
  for (auto& [t, k] : found) keys.push_back(k);
  return keys;
}

absl::StatusOr<int> ListenUnix(const std::string& path, uint32_t uid) {
  auto addr = UnixAddress(path);
  if (!addr.ok()) return addr.status();
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  unlink(path.c_str());
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0 ||
      listen(fd.get(), 1) != 0) {
    return absl::InternalError(absl::StrCat("cannot listen on ", path, ": ", strerror(errno)));
  }
  if (chmod(path.c_str(), 0600) != 0 || (uid != 0 && chown(path.c_str(), uid, uid) != 0)) {
    return absl::InternalError(absl::StrCat("cannot give ", path, " to uid ", uid, ": ",
                                            strerror(errno)));
  }
  return fd.release();
}

absl::StatusOr<uint64_t> ReceiveStream(int listen_fd, const std::string& path,
                                       steady_clock::time_point deadline,
                                       const std::function<bool()>& stop) {
  int conn = -1;
  while (conn < 0) {
    if (stop()) return absl::CancelledError("stopped while saving the VM");
    pollfd p{listen_fd, POLLIN, 0};
    int left = MillisLeft(deadline);
    if (left == 0) return absl::DeadlineExceededError("QEMU did not connect to save the VM");
    int r = poll(&p, 1, left);
    if (r < 0 && errno != EINTR) return absl::InternalError(absl::StrCat("poll: ", strerror(errno)));
    if (r > 0) conn = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  }
  UniqueFd in(conn);
  UniqueFd out(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (out.get() < 0) return absl::InternalError(absl::StrCat("cannot write ", path, ": ", strerror(errno)));
  uint64_t total = 0;
  std::string buf(1 << 20, '\0');
  while (true) {
    if (stop()) return absl::CancelledError("stopped while saving the VM");
    pollfd p{in.get(), POLLIN, 0};
    int left = MillisLeft(deadline);
    if (left == 0) return absl::DeadlineExceededError("saving the VM's memory took too long");
    int r = poll(&p, 1, left);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    ssize_t n = read(in.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(absl::StrCat("reading the VM's state: ", strerror(errno)));
    if (n == 0) break;
    if (!WriteAll(out.get(), absl::string_view(buf.data(), static_cast<size_t>(n)))) {
      return absl::ResourceExhaustedError(absl::StrCat("cannot write ", path, ": ", strerror(errno)));
    }
    total += static_cast<uint64_t>(n);
  }
  if (fsync(out.get()) != 0) {
    return absl::InternalError(absl::StrCat("cannot sync ", path, ": ", strerror(errno)));
  }
  return total;
}

absl::Status SendStream(const std::string& socket_path, const std::string& path,
                        steady_clock::time_point deadline) {
  auto addr = UnixAddress(socket_path);
  if (!addr.ok()) return addr.status();
  UniqueFd file(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (file.get() < 0) return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", strerror(errno)));
  struct stat st {};
  fstat(file.get(), &st);
  int connected = -1;
  int err = 0;
  while (connected < 0) {
    UniqueFd s(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (s.get() < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
    if (connect(s.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) == 0) {
      connected = s.release();
      break;
    }
    err = errno;
    if (steady_clock::now() >= deadline) {
      return absl::UnavailableError(
          absl::StrCat("QEMU did not listen for the restore on ", socket_path, ": ", strerror(err)));
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
  UniqueFd fd(connected);
  // A QEMU that stops reading fails the send at the deadline, not never.
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - steady_clock::now());
  if (left.count() < 1000) left = std::chrono::microseconds(1000);
  timeval tv{static_cast<time_t>(left.count() / 1000000),
             static_cast<suseconds_t>(left.count() % 1000000)};
  setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  off_t offset = 0;
  while (offset < st.st_size) {
    ssize_t n = sendfile(fd.get(), file.get(), &offset, static_cast<size_t>(st.st_size - offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return absl::DeadlineExceededError("QEMU did not take the snapshot in time");
    }
    if (n <= 0) {
      return absl::UnavailableError(
          absl::StrCat("QEMU stopped reading the snapshot: ", n < 0 ? strerror(errno) : "closed"));
    }
  }
  return absl::OkStatus();
}

}  // namespace airlock::vmmd
