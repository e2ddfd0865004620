#include "vmmd/images.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/subprocess.h"

namespace airlock::vmmd {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string FirstLine(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return std::string(absl::StripAsciiWhitespace(line));
}

constexpr char kBuildHint[] = "; build them with: sudo tools/build_images.sh (or tools/setup.sh)";

}  // namespace

std::string AgentFailureHint(const std::string& failure) {
  if (failure.find("no virtio-serial port named") == std::string::npos) return "";
  return "; the guest's initramfs is older than this vmmd (its agent looks for the ports "
         "before the device this vmmd puts them on is loaded): rebuild it with "
         "sudo tools/build_images.sh initramfs (or tools/setup.sh)";
}

absl::StatusOr<GuestImages> LocateGuestImages(const std::string& image_dir) {
  GuestImages g;
  std::string kdir = image_dir + "/kernel";
  g.kernel = Exists(kdir + "/vmlinux") ? kdir + "/vmlinux" : kdir + "/vmlinuz";
  g.initrd = image_dir + "/initramfs/initramfs.cpio";
  g.release = FirstLine(kdir + "/release");
  if (!Exists(g.kernel) || g.release.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no guest kernel in ", kdir, kBuildHint));
  }
  if (!Exists(g.initrd)) {
    return absl::FailedPreconditionError(
        absl::StrCat("no guest initramfs at ", g.initrd, kBuildHint));
  }
  return g;
}

absl::Status CreateOverlay(const std::string& base, const std::string& path) {
  std::string tmp = path + ".tmp";
  unlink(tmp.c_str());
  CommandResult r = RunCommand(
      {"qemu-img", "create", "-q", "-f", "qcow2", "-b", base, "-F", "raw", tmp}, {}, "", 60);
  if (r.exit_code != 0) {
    return absl::InternalError(absl::StrCat("qemu-img create ", path, ": ", r.err));
  }
  // Renamed into place only when complete: a crash never leaves a half disk
  // under the real name.
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp));
  }
  return absl::OkStatus();
}

}  // namespace airlock::vmmd
