#include "apid/data_plane_api.h"

#include <sys/stat.h>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "apid/exec_start.h"
#include "apid/multipart.h"
#include "apid/sandbox_view.h"
#include "apid/signer.h"
#include "apid/wire_json.h"
#include "protos/api/v1/wire.pb.h"

namespace airlock::apid {

namespace vmm = airlock::vmm::v1;
namespace wire = airlock::api::wire::v1;

namespace {

HttpResponse Error(const ApiError& e) { return ErrorResponse(e); }
HttpResponse Error(const absl::Status& s) { return ErrorResponse(FromStatus(s)); }

wire::FileInfo ToWire(const vmm::FileInfo& f) {
  wire::FileInfo w;
  w.set_path(f.path());
  w.set_size(static_cast<int64_t>(f.size()));
  w.set_mode(static_cast<int32_t>(f.mode() & 0777));
  w.set_is_dir(f.is_dir());
  if (f.is_dir()) {
    w.set_type("directory");
  } else if (f.is_symlink()) {
    w.set_type("symlink");
  } else if (S_ISREG(f.mode())) {
    w.set_type("regular");
  } else {
    w.set_type("other");
  }
  return w;
}

std::optional<ApiError> RequirePath(const HttpRequest& req, std::string* path) {
  *path = req.Param("path");
  if (path->empty()) return ApiError::InvalidArgument("the path query parameter is required");
  if ((*path)[0] != '/') {
    return ApiError::InvalidArgument(absl::StrCat("path \"", *path, "\" must be absolute"));
  }
  return std::nullopt;
}

bool ParseBool(const std::string& v, bool* out) {
  if (v.empty() || v == "false" || v == "0") {
    *out = false;
  } else if (v == "true" || v == "1") {
    *out = true;
  } else {
    return false;
  }
  return true;
}

}  // namespace

DataPlaneApi::DataPlaneApi(DataPlaneOptions options, Authenticator* auth, VmmClient* vmm)
    : options_(std::move(options)), auth_(auth), vmm_(vmm) {}

void DataPlaneApi::Register(Router* r) {
  using Handler = HttpResponse (DataPlaneApi::*)(const HttpRequest&, const std::string&);
  struct Route {
    const char* method;
    const char* path;
    const char* permission;
    Handler handler;
  };
  static const Route kRoutes[] = {
      {"POST", "/v1/processes/exec", "sandboxesExec", &DataPlaneApi::Exec},
      {"GET", "/v1/files/content", "sandboxesFilesRead", &DataPlaneApi::ReadFile},
      {"PUT", "/v1/files/content", "sandboxesFilesWrite", &DataPlaneApi::WriteFile},
      {"GET", "/v1/files/stat", "sandboxesFilesRead", &DataPlaneApi::Stat},
      {"GET", "/v1/files", "sandboxesFilesRead", &DataPlaneApi::List},
      {"DELETE", "/v1/files", "sandboxesFilesWrite", &DataPlaneApi::Remove},
      {"PUT", "/v1/files/directories", "sandboxesFilesWrite", &DataPlaneApi::Mkdir},
      {"POST", "/v1/files/move", "sandboxesFilesWrite", &DataPlaneApi::Move},
      {"POST", "/v1/files/upload", "sandboxesFilesWrite", &DataPlaneApi::Upload},
      {"GET", "/v1/files/download", "sandboxesFilesRead", &DataPlaneApi::Download},
  };
  for (const Route& route : kRoutes) {
    std::string permission = route.permission;
    Handler h = route.handler;
    r->Add(route.method, absl::StrCat("/endpoints/{uid}", route.path),
           [this, permission, h](const HttpRequest& req, const PathParams& p) {
             const std::string& uid = p.at("uid");
             if (auto e = auth_->Endpoint(req, uid, EndpointUri(options_.base_url, uid),
                                          permission)) {
               return Error(*e);
             }
             return (this->*h)(req, uid);
           });
  }
}

HttpResponse DataPlaneApi::Exec(const HttpRequest& req, const std::string& uid) {
  wire::ExecRequest body;
  if (auto e = ParseBody(req.body, &body)) return Error(*e);
  vmm::ExecStart start;
  if (auto e = ExecStartFor(uid, body, &start)) return Error(*e);
  auto result = vmm_->Exec(start, options_.exec_output_limit);
  if (!result.ok()) return Error(result.status());
  wire::ExecResponse out;
  out.set_exit_code(result->exit_code);
  out.set_stdout(result->out);
  out.set_stderr(result->err);
  out.set_incomplete(result->incomplete);
  return JsonResponse(200, out);
}

HttpResponse DataPlaneApi::ReadFile(const HttpRequest& req, const std::string& uid) {
  std::string path;
  if (auto e = RequirePath(req, &path)) return Error(*e);
  auto data = vmm_->ReadFile(uid, path, options_.read_limit);
  if (!data.ok()) return Error(data.status());
  HttpResponse r;
  r.status = 200;
  r.content_type = "application/octet-stream";
  r.body = std::move(*data);
  return r;
}

HttpResponse DataPlaneApi::WriteFile(const HttpRequest& req, const std::string& uid) {
  std::string path;
  if (auto e = RequirePath(req, &path)) return Error(*e);
  int mode = 0;
  if (std::string m = req.Param("mode"); !m.empty() && (!absl::SimpleAtoi(m, &mode) || mode < 0)) {
    return Error(ApiError::InvalidArgument("mode must be a non-negative integer"));
  }
  uint32_t bits = static_cast<uint32_t>(mode) & 0777;
  if (bits == 0) bits = 0644;
  if (absl::Status s = vmm_->WriteFile(uid, path, bits, req.body); !s.ok()) return Error(s);
  auto info = vmm_->Stat(uid, path);
  if (!info.ok()) return Error(info.status());
  wire::FilesWriteFileResponse out;
  *out.mutable_info() = ToWire(*info);
  return JsonResponse(200, out);
}

HttpResponse DataPlaneApi::Stat(const HttpRequest& req, const std::string& uid) {
  std::string path;
  if (auto e = RequirePath(req, &path)) return Error(*e);
  auto info = vmm_->Stat(uid, path);
  if (!info.ok()) return Error(info.status());
  wire::FilesStatResponse out;
  *out.mutable_info() = ToWire(*info);
  return JsonResponse(200, out);
}

HttpResponse DataPlaneApi::List(const HttpRequest& req, const std::string& uid) {
  std::string path;
  if (auto e = RequirePath(req, &path)) return Error(*e);
  int page_size = 1000;
  if (std::string ps = req.Param("pageSize"); !ps.empty()) {
    if (!absl::SimpleAtoi(ps, &page_size) || page_size < 0) {
      return Error(ApiError::InvalidArgument("pageSize must be a non-negative number"));
    }
    if (page_size == 0) page_size = 1000;
  }
  std::string order = req.Param("orderBy");
  if (!order.empty() && order != "path" && order != "path asc") {
    return Error(ApiError::InvalidArgument("orderBy must be path"));
  }
  size_t offset = 0;
  if (std::string tok = req.Param("pageToken"); !tok.empty()) {
    std::string raw;
    if (!absl::WebSafeBase64Unescape(tok, &raw) || raw.rfind("f1:", 0) != 0 ||
        !absl::SimpleAtoi(raw.substr(3), &offset)) {
      return Error(ApiError::InvalidArgument("pageToken is not one this list returned"));
    }
  }
  auto entries = vmm_->ListDir(uid, path);
  if (!entries.ok()) return Error(entries.status());
  wire::FilesListResponse out;
  for (size_t i = offset; i < entries->size() && out.entries_size() < page_size; ++i) {
    *out.add_entries() = ToWire((*entries)[i]);
  }
  size_t next = offset + out.entries_size();
  if (next < entries->size()) {
    out.set_next_page_token(absl::WebSafeBase64Escape(absl::StrCat("f1:", next)));
  }
  return JsonResponse(200, out);
}

HttpResponse DataPlaneApi::Remove(const HttpRequest& req, const std::string& uid) {
  std::string path;
  if (auto e = RequirePath(req, &path)) return Error(*e);
  bool recursive = false;
  if (!ParseBool(req.Param("recursive"), &recursive)) {
    return Error(ApiError::InvalidArgument("recursive must be true or false"));
  }
  absl::Status s = vmm_->RemovePath(uid, path, recursive);
  wire::FilesRemoveResponse out;
  if (s.code() == absl::StatusCode::kNotFound) {
    // Removing an absent path succeeds, unless the sandbox itself is gone.
    if (s.message().find("sandbox") != absl::string_view::npos &&
        s.message().find("no sandbox") != absl::string_view::npos) {
      return Error(s);
    }
    out.set_completed_count(0);
    return JsonResponse(200, out);
  }
  if (!s.ok()) return Error(s);
  out.add_completed_paths(path);
  out.set_completed_count(1);
  return JsonResponse(200, out);
}

HttpResponse DataPlaneApi::Mkdir(const HttpRequest& req, const std::string& uid) {
  wire::FilesMkdirRequest body;
  if (auto e = ParseBody(req.body, &body)) return Error(*e);
  if (body.path().empty() || body.path()[0] != '/') {
    return Error(ApiError::InvalidArgument("path must be an absolute guest path"));
  }
  uint32_t bits = static_cast<uint32_t>(body.mode()) & 0777;
  if (bits == 0) bits = 0755;
  absl::Status s = vmm_->MakeDir(uid, body.path(), bits, body.parents());
  if (s.code() == absl::StatusCode::kAlreadyExists) {
    // A repeated mkdir converges when the leaf is already a directory.
    auto info = vmm_->Stat(uid, body.path());
    if (info.ok() && info->is_dir()) s = absl::OkStatus();
  }
  if (!s.ok()) return Error(s);
  return JsonResponse(200, wire::EmptyResponse());
}

HttpResponse DataPlaneApi::Move(const HttpRequest& req, const std::string& uid) {
  wire::FilesMoveRequest body;
  if (auto e = ParseBody(req.body, &body)) return Error(*e);
  for (const std::string* p : {&body.from(), &body.to()}) {
    if (p->empty() || (*p)[0] != '/') {
      return Error(ApiError::InvalidArgument("from and to must be absolute guest paths"));
    }
  }
  if (auto from = vmm_->Stat(uid, body.from()); !from.ok()) return Error(from.status());
  // The guest's own mv, as root, without a shell: rename(2) or copy+remove
  // across file systems; -T moves onto the exact destination path.
  vmm::ExecStart start;
  start.set_sandbox(uid);
  for (const char* a : {"mv", "-T", "--"}) start.add_argv(a);
  start.add_argv(body.from());
  start.add_argv(body.to());
  start.set_user("root");
  start.set_workdir("/");
  auto result = vmm_->Exec(start, 64 * 1024);
  if (!result.ok()) return Error(result.status());
  if (result->exit_code != 0) {
    return Error(ApiError::FailedPrecondition(absl::StrCat(
        "cannot move ", body.from(), " to ", body.to(), ": ",
        std::string(absl::StripAsciiWhitespace(result->err)))));
  }
  return JsonResponse(200, wire::EmptyResponse());
}

}  // namespace airlock::apid

namespace airlock::apid {

HttpResponse DataPlaneApi::Upload(const HttpRequest& req, const std::string& uid) {
  auto boundary = BoundaryOf(req.Header("content-type"));
  if (!boundary.ok()) return Error(boundary.status());
  auto parts = ParseMultipart(req.body, *boundary);
  if (!parts.ok()) return Error(parts.status());
  // Every pair is checked before any file is written.
  struct Item {
    std::string path;
    uint32_t mode;
    const std::string* data;
  };
  std::vector<Item> items;
  auto bad = [&](size_t index, const std::string& path, const std::string& why) {
    ApiError e = ApiError::InvalidArgument(absl::StrCat("upload occurrence ", index, ": ", why));
    e.details.push_back({{"@type", "type.googleapis.com/google.rpc.BadRequest"},
                         {"fieldViolations",
                          {{{"field", absl::StrCat("occurrence[", index, "]")},
                            {"description", path.empty() ? why : path + ": " + why}}}}});
    return Error(e);
  };
  if (parts->size() % 2 != 0) {
    return bad(parts->size() / 2, "", "a metadata part needs its content part");
  }
  for (size_t i = 0; i < parts->size(); i += 2) {
    const MultipartPart& meta = (*parts)[i];
    const MultipartPart& content = (*parts)[i + 1];
    for (const auto* p : {&meta, &content}) {
      if (p->headers.count("content-transfer-encoding")) {
        return bad(i / 2, "", "Content-Transfer-Encoding is not accepted");
      }
    }
    if (meta.name != "metadata" || content.name != "content") {
      return bad(i / 2, "", "parts go in metadata, content pairs");
    }
    wire::FileHeader header;
    if (auto e = ParseBody(meta.body, &header)) return bad(i / 2, "", e->message);
    if (header.path().empty() || header.path()[0] != '/') {
      return bad(i / 2, header.path(), "path must be an absolute guest path");
    }
    uint32_t bits = static_cast<uint32_t>(header.mode()) & 0777;
    items.push_back({header.path(), bits == 0 ? 0644u : bits, &content.body});
  }
  for (const Item& item : items) {
    if (auto info = vmm_->Stat(uid, item.path); info.ok() && !S_ISREG(info->mode())) {
      return Error(ApiError::FailedPrecondition(absl::StrCat(
          "path_authority_nonregular_object: ", item.path, " is not a regular file")));
    }
  }
  int written = 0;
  for (const Item& item : items) {
    if (absl::Status s = vmm_->WriteFile(uid, item.path, item.mode, *item.data); !s.ok()) {
      return Error(s);
    }
    ++written;
  }
  wire::FilesUploadResponse out;
  out.set_files_written(written);
  return JsonResponse(200, out);
}

HttpResponse DataPlaneApi::Download(const HttpRequest& req, const std::string& uid) {
  std::vector<std::string> paths;
  for (const auto& [k, v] : req.query) {
    if (k == "paths") paths.push_back(v);
  }
  if (paths.empty()) return Error(ApiError::InvalidArgument("give at least one paths parameter"));
  std::vector<MultipartPart> parts;
  size_t total = 0;
  for (const auto& path : paths) {
    auto fail = [&](const ApiError& e) {
      wire::FileError fe;
      fe.set_path(path);
      fe.mutable_failure()->set_code(e.code);
      fe.mutable_failure()->set_message(e.message);
      MultipartPart p;
      p.headers["Content-Type"] = "application/json";
      p.headers["Content-Disposition"] = "attachment; name=error";
      p.body = ToJson(fe);
      parts.push_back(std::move(p));
    };
    if (path.empty() || path[0] != '/') {
      fail(ApiError::InvalidArgument("path must be an absolute guest path"));
      continue;
    }
    auto info = vmm_->Stat(uid, path);
    if (!info.ok()) {
      if (info.status().code() == absl::StatusCode::kFailedPrecondition ||
          info.status().code() == absl::StatusCode::kUnavailable) {
        return Error(info.status());  // the sandbox, not the path
      }
      fail(FromStatus(info.status()));
      continue;
    }
    if (!S_ISREG(info->mode())) {
      fail(ApiError::FailedPrecondition(absl::StrCat(
          "path_authority_nonregular_object: ", path, " is not a regular file")));
      continue;
    }
    size_t room = options_.read_limit > total ? options_.read_limit - total : 0;
    auto data = vmm_->ReadFile(uid, path, room);
    if (!data.ok()) {
      fail(FromStatus(data.status()));
      continue;
    }
    total += data->size();
    wire::FileHeader header;
    header.set_path(path);
    header.set_mode(static_cast<int32_t>(info->mode() & 0777));
    MultipartPart meta;
    meta.headers["Content-Type"] = "application/json";
    meta.headers["Content-Disposition"] = "attachment; name=metadata";
    meta.body = ToJson(header);
    MultipartPart content;
    content.headers["Content-Type"] = "application/octet-stream";
    content.headers["Content-Disposition"] = "attachment; name=content";
    content.body = std::move(*data);
    parts.push_back(std::move(meta));
    parts.push_back(std::move(content));
  }
  std::string boundary = absl::StrCat("airlock-", RandomHex(8));
  HttpResponse r;
  r.status = 200;
  r.content_type = absl::StrCat("multipart/mixed; boundary=", boundary);
  r.body = WriteMultipart(parts, boundary);
  return r;
}

}  // namespace airlock::apid
