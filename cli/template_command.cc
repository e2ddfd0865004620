#include "cli/template_command.h"

#include <limits.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/daemons.h"
#include "cli/table.h"
#include "common/client.h"
#include "nlohmann/json.hpp"

namespace airlock::cli {
namespace vmm = airlock::vmm::v1;

namespace {

std::string Human(uint64_t b) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  return u == 0 ? absl::StrCat(b, "B") : absl::StrFormat("%.3g%s", v, units[u]);
}

std::string Mib(uint64_t b) { return absl::StrFormat("%.1f MiB", b / 1048576.0); }

std::string ShortId(const std::string& digest) {
  size_t colon = digest.find(':');
  return digest.substr(colon == std::string::npos ? 0 : colon + 1, 12);
}

std::unique_ptr<vmm::Vmm::Stub> Stub(int* exit_code) {
  auto channel = ChannelTo("vmmd", exit_code);
  if (!channel) return nullptr;
  return vmm::Vmm::NewStub(channel);
}

// Follow reads an image stream: progress on a terminal's stderr, the
// images stored at the end. False (message printed) on error.
bool Follow(grpc::ClientReader<vmm::ImageProgress>* reader, const std::string& label,
            std::vector<vmm::Image>* images) {
  bool tty = isatty(STDERR_FILENO);
  vmm::ImageProgress p;
  bool shown = false;
  while (reader->Read(&p)) {
    if (p.has_image()) {
      images->push_back(p.image());
      continue;
    }
    if (!tty) continue;
    std::string line = absl::StrCat(label, ": ", p.what());
    if (p.total_bytes() > 0 && p.what() == "pulling") {
      absl::StrAppend(&line, " ", Mib(p.done_bytes()), " / ", Mib(p.total_bytes()));
    }
    std::cerr << "\r\033[K" << line << std::flush;
    shown = true;
  }
  if (shown) std::cerr << "\r\033[K" << std::flush;
  grpc::Status s = reader->Finish();
  if (!s.ok()) {
    std::cerr << "airlock: " << s.error_message() << "\n";
    return false;
  }
  return true;
}

nlohmann::ordered_json ImageJson(const vmm::Image& img) {
  nlohmann::ordered_json config = {
      {"env", std::vector<std::string>(img.config().env().begin(), img.config().env().end())},
      {"working_dir", img.config().working_dir()},
      {"user", img.config().user()},
      {"entrypoint", std::vector<std::string>(img.config().entrypoint().begin(),
                                              img.config().entrypoint().end())},
      {"cmd", std::vector<std::string>(img.config().cmd().begin(), img.config().cmd().end())}};
  nlohmann::ordered_json j = {
      {"names", std::vector<std::string>(img.names().begin(), img.names().end())},
      {"id", img.id()},
      {"digest", img.digest()},
      {"size_bytes", img.size_bytes()},
      {"created_at", img.created_at()},
      {"source", img.source()},
      {"description", img.description()},
      {"layers", std::vector<std::string>(img.layers().begin(), img.layers().end())},
      {"config", config},
      {"used_by", std::vector<std::string>(img.used_by().begin(), img.used_by().end())}};
  if (!img.manifest_json().empty()) {
    j["manifest"] = nlohmann::ordered_json::parse(img.manifest_json(), nullptr, false);
  }
  return j;
}

// AbsolutePath makes a user's path absolute (vmmd reads it).
std::string AbsolutePath(const std::string& p) {
  char real[PATH_MAX];
  if (realpath(p.c_str(), real) != nullptr) return real;
  if (!p.empty() && p[0] == '/') return p;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return p;
  return absl::StrCat(cwd, "/", p);
}

bool Pull(vmm::Vmm::Stub& stub, const std::string& ref, bool quiet, vmm::Image* out) {
  grpc::ClientContext ctx;
  vmm::PullImageRequest req;
  req.set_ref(ref);
  auto reader = stub.PullImage(&ctx, req);
  std::vector<vmm::Image> images;
  if (!Follow(reader.get(), ref, &images) || images.empty()) return false;
  if (out != nullptr) *out = images[0];
  (void)quiet;
  return true;
}

}  // namespace

bool EnsureImage(vmm::Vmm::Stub& stub, const std::string& ref, const std::string& policy) {
  if (policy != "always" && policy != "missing" && policy != "never") {
    std::cerr << "airlock: --pull must be always, missing or never (not \"" << policy << "\")\n";
    return false;
  }
  if (policy == "never") return true;
  std::string want = ref.empty() ? "base" : ref;
  if (policy == "missing") {
    grpc::ClientContext ctx;
    vmm::InspectImageRequest req;
    req.set_ref(want);
    vmm::Image img;
    grpc::Status s = stub.InspectImage(&ctx, req, &img);
    if (s.ok()) return true;
    if (s.error_code() != grpc::StatusCode::NOT_FOUND) {
      std::cerr << "airlock: " << s.error_message() << "\n";
      return false;
    }
    if (ref.empty()) {
      std::cerr << "airlock: " << s.error_message() << "\n";
      return false;
    }
  }
  if (isatty(STDERR_FILENO)) std::cerr << "pulling " << want << "\n";
  return Pull(stub, want, true, nullptr);
}

void AddTemplateCommand(CLI::App& app, int* exit_code) {
  CLI::App* t = app.add_subcommand(
      "template", "Images sandboxes are made from: pull, load, save, ls, inspect, rm");
  t->alias("image");
  t->require_subcommand(1);

  // --- pull ---
  auto* pull_ref = new std::string();
  CLI::App* pull = t->add_subcommand("pull", "Pull an image from a registry (by the host)");
  pull->add_option("ref", *pull_ref, "[HOST[:PORT]/]NAME[:TAG][@sha256:...]")->required();
  auto* pull_quiet = pull->add_flag("-q,--quiet", "Print only the image id");
  pull->callback([=] {
    auto stub = Stub(exit_code);
    if (!stub) return;
    vmm::Image img;
    if (!Pull(*stub, *pull_ref, pull_quiet->count() > 0, &img)) return void(*exit_code = 1);
    if (pull_quiet->count()) {
      std::cout << img.id() << "\n";
    } else {
      std::cout << (img.names().empty() ? *pull_ref : img.names(0)) << " " << img.digest()
                << "\n";
    }
  });

  // --- load ---
  auto* load_path = new std::string();
  auto* load_tag = new std::string();
  CLI::App* load = t->add_subcommand(
      "load", "Store the image(s) of an OCI layout directory, an OCI archive or a docker save tar");
  load->add_option("path", *load_path, "FILE or DIR")->required();
  load->add_option("--tag", *load_tag, "Name for the image (default: the names it carries)");
  auto* load_quiet = load->add_flag("-q,--quiet", "Print only the image ids");
  load->callback([=] {
    auto stub = Stub(exit_code);
    if (!stub) return;
    grpc::ClientContext ctx;
    vmm::LoadImageRequest req;
    req.set_path(AbsolutePath(*load_path));
    req.set_tag(*load_tag);
    auto reader = stub->LoadImage(&ctx, req);
    std::vector<vmm::Image> images;
    if (!Follow(reader.get(), *load_path, &images)) return void(*exit_code = 1);
    for (const auto& img : images) {
      if (load_quiet->count()) {
        std::cout << img.id() << "\n";
      } else {
        std::cout << "Loaded image: " << absl::StrJoin(img.names(), ", ") << " ("
                  << ShortId(img.id()) << ")\n";
      }
    }
  });

  // --- save ---
  auto* save_sb = new std::string();
  auto* save_tag = new std::string();
  auto* save_out = new std::string();
  auto* save_desc = new std::string();
  CLI::App* save = t->add_subcommand(
      "save", "Save a sandbox's disk as a new image (one layer over its image)");
  save->add_option("sandbox", *save_sb, "Sandbox name")->required();
  save->add_option("tag", *save_tag, "Name of the new image, e.g. go-agent:v1")->required();
  save->add_option("-o,--output", *save_out, "Also write it as an archive (docker load, skopeo)");
  save->add_option("--description", *save_desc, "Description kept with the image");
  auto* save_force = save->add_flag("-f,--force", "Stop a running sandbox and start it after");
  auto* save_quiet = save->add_flag("-q,--quiet", "Print only the image id");
  save->callback([=] {
    auto stub = Stub(exit_code);
    if (!stub) return;
    bool force = save_force->count() > 0;
    if (!force) {
      grpc::ClientContext ctx;
      vmm::GetRequest get;
      get.set_name(*save_sb);
      vmm::Sandbox sb;
      grpc::Status s = stub->Get(&ctx, get, &sb);
      if (!s.ok()) {
        std::cerr << "airlock: " << s.error_message() << "\n";
        return void(*exit_code = 1);
      }
      bool running = sb.state() == vmm::RUNNING || sb.state() == vmm::STARTING;
      if (running && isatty(STDIN_FILENO) && isatty(STDERR_FILENO)) {
        std::cerr << "sandbox " << *save_sb
                  << " is running; stop it to save and start it again after? [y/N] "
                  << std::flush;
        std::string answer;
        std::getline(std::cin, answer);
        if (answer != "y" && answer != "Y" && answer != "yes") return void(*exit_code = 1);
        force = true;
      }
    }
    grpc::ClientContext ctx;
    vmm::SaveTemplateRequest req;
    req.set_sandbox(*save_sb);
    req.set_tag(*save_tag);
    req.set_description(*save_desc);
    if (!save_out->empty()) req.set_output(AbsolutePath(*save_out));
    req.set_force(force);
    auto reader = stub->SaveTemplate(&ctx, req);
    std::vector<vmm::Image> images;
    if (!Follow(reader.get(), *save_sb, &images) || images.empty()) return void(*exit_code = 1);
    if (save_quiet->count()) {
      std::cout << images[0].id() << "\n";
    } else {
      std::cout << "Saved " << *save_tag << " (" << ShortId(images[0].id()) << ")"
                << (save_out->empty() ? "" : absl::StrCat(" and wrote ", *save_out)) << "\n";
    }
  });

  // --- ls ---
  CLI::App* ls = t->add_subcommand("ls", "List images");
  ls->alias("list");
  auto* ls_json = ls->add_flag("--json", "Print JSON");
  auto* ls_quiet = ls->add_flag("-q,--quiet", "Print image ids only");
  ls->callback([=] {
    auto stub = Stub(exit_code);
    if (!stub) return;
    grpc::ClientContext ctx;
    vmm::ListImagesResponse resp;
    grpc::Status s = stub->ListImages(&ctx, {}, &resp);
    if (!s.ok()) {
      std::cerr << "airlock: " << s.error_message() << "\n";
      return void(*exit_code = 1);
    }
    if (ls_json->count()) {
      nlohmann::ordered_json arr = nlohmann::ordered_json::array();
      for (const auto& img : resp.images()) arr.push_back(ImageJson(img));
      std::cout << arr.dump(2) << "\n";
      return;
    }
    if (ls_quiet->count()) {
      for (const auto& img : resp.images()) std::cout << ShortId(img.id()) << "\n";
      return;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& img : resp.images()) {
      for (const auto& n : img.names()) {
        rows.push_back({n, ShortId(img.id()), Human(img.size_bytes()), Age(img.created_at()),
                        img.source()});
      }
    }
    PrintTable(std::cout, {"NAME", "ID", "SIZE", "CREATED", "SOURCE"}, rows);
  });

  // --- inspect ---
  auto* inspect_ref = new std::string();
  CLI::App* inspect = t->add_subcommand("inspect", "Show an image as JSON");
  inspect->add_option("ref", *inspect_ref, "Name, id or digest (a unique prefix is enough)")
      ->required();
  inspect->callback([=] {
    auto stub = Stub(exit_code);
    if (!stub) return;
    grpc::ClientContext ctx;
    vmm::InspectImageRequest req;
    req.set_ref(*inspect_ref);
    vmm::Image img;
    grpc::Status s = stub->InspectImage(&ctx, req, &img);
    if (!s.ok()) {
      std::cerr << "airlock: " << s.error_message() << "\n";
      return void(*exit_code = 1);
    }
    std::cout << ImageJson(img).dump(2) << "\n";
  });

  // --- rm ---
  auto* rm_refs = new std::vector<std::string>();
  CLI::App* rm = t->add_subcommand("rm", "Remove image names (and unused images)");
  rm->add_option("refs", *rm_refs, "Names, ids or digests")->required();
  auto* rm_force = rm->add_flag("-f,--force", "Remove every name of an image given by id");
  rm->callback([=] {
    auto stub = Stub(exit_code);
    if (!stub) return;
    for (const auto& ref : *rm_refs) {
      grpc::ClientContext ctx;
      vmm::RemoveImageRequest req;
      req.set_ref(ref);
      req.set_force(rm_force->count() > 0);
      vmm::RemoveImageResponse resp;
      grpc::Status s = stub->RemoveImage(&ctx, req, &resp);
      if (!s.ok()) {
        std::cerr << "airlock: " << s.error_message() << "\n";
        *exit_code = 1;
        continue;
      }
      for (const auto& n : resp.untagged()) std::cout << "Untagged: " << n << "\n";
      if (resp.freed_bytes() > 0) std::cout << "Freed " << Human(resp.freed_bytes()) << "\n";
    }
  });
}

}  // namespace airlock::cli
