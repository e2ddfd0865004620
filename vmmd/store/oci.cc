#include "vmmd/store/oci.h"

#include <openssl/evp.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace airlock::vmmd::oci {
namespace {

using nlohmann::json;

absl::StatusOr<json> ParseObject(absl::string_view text, absl::string_view what) {
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is not a JSON object"));
  }
  return j;
}

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

std::vector<std::string> Strings(const json& j, const char* key) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& v : *it) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

absl::StatusOr<Descriptor> ReadDescriptor(const json& j, absl::string_view where) {
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, " is not an object"));
  Descriptor d;
  d.media_type = Str(j, "mediaType");
  d.digest = Str(j, "digest");
  if (!ValidDigest(d.digest)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " has digest \"", d.digest, "\"; want sha256:<64 hex digits>"));
  }
  auto size = j.find("size");
  if (size == j.end() || !size->is_number_integer() || size->get<int64_t>() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, " has no valid size"));
  }
  d.size = size->get<int64_t>();
  if (auto a = j.find("annotations"); a != j.end() && a->is_object()) {
    for (auto it = a->begin(); it != a->end(); ++it) {
      if (it->is_string()) d.annotations[it.key()] = it->get<std::string>();
    }
  }
  if (auto p = j.find("platform"); p != j.end() && p->is_object()) {
    d.os = Str(*p, "os");
    d.architecture = Str(*p, "architecture");
    d.variant = Str(*p, "variant");
  }
  return d;
}

json WriteDescriptor(const Descriptor& d) {
  json j = {{"mediaType", d.media_type}, {"digest", d.digest}, {"size", d.size}};
  if (!d.annotations.empty()) j["annotations"] = d.annotations;
  if (!d.os.empty()) j["platform"] = {{"os", d.os}, {"architecture", d.architecture}};
  return j;
}

}  // namespace

bool IsIndex(absl::string_view t) { return t == kIndexType || t == kDockerListType; }
bool IsManifest(absl::string_view t) { return t == kManifestType || t == kDockerManifestType; }

bool ValidDigest(absl::string_view d) {
  if (!absl::ConsumePrefix(&d, "sha256:") || d.size() != 64) return false;
  for (char c : d) {
    if (!absl::ascii_isdigit(c) && !(c >= 'a' && c <= 'f')) return false;
  }
  return true;
}

absl::StatusOr<std::string> MediaTypeOf(absl::string_view text) {
  auto j = ParseObject(text, "the document");
  if (!j.ok()) return j.status();
  return Str(*j, "mediaType");
}

absl::StatusOr<Manifest> ParseManifest(absl::string_view text) {
  auto j = ParseObject(text, "the image manifest");
  if (!j.ok()) return j.status();
  Manifest m;
  m.media_type = Str(*j, "mediaType");
  if (m.media_type.empty()) m.media_type = kManifestType;
  if (!IsManifest(m.media_type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported manifest media type \"", m.media_type, "\""));
  }
  // Compared as a JSON number: get<int>() would truncate 2^32 + 2 to 2.
  auto schema = j->find("schemaVersion");
  if (schema == j->end() || !schema->is_number_integer() || *schema != 2) {
    return absl::InvalidArgumentError("the image manifest is not schemaVersion 2");
  }
  auto config = j->find("config");
  if (config == j->end()) return absl::InvalidArgumentError("the image manifest has no config");
  auto cd = ReadDescriptor(*config, "the manifest's config");
  if (!cd.ok()) return cd.status();
  m.config = *cd;
  auto layers = j->find("layers");
  if (layers == j->end() || !layers->is_array()) {
    return absl::InvalidArgumentError("the image manifest has no layers array");
  }
  for (size_t i = 0; i < layers->size(); ++i) {
    auto d = ReadDescriptor((*layers)[i], absl::StrCat("layer ", i + 1));
    if (!d.ok()) return d.status();
    m.layers.push_back(*d);
  }
  if (auto a = j->find("annotations"); a != j->end() && a->is_object()) {
    for (auto it = a->begin(); it != a->end(); ++it) {
      if (it->is_string()) m.annotations[it.key()] = it->get<std::string>();
    }
  }
  return m;
}

absl::StatusOr<std::vector<Descriptor>> ParseIndex(absl::string_view text) {
  auto j = ParseObject(text, "the image index");
  if (!j.ok()) return j.status();
  auto list = j->find("manifests");
  if (list == j->end() || !list->is_array()) {
    return absl::InvalidArgumentError("the image index has no manifests array");
  }
  std::vector<Descriptor> out;
  for (size_t i = 0; i < list->size(); ++i) {
    auto d = ReadDescriptor((*list)[i], absl::StrCat("index entry ", i + 1));
    if (!d.ok()) return d.status();
    out.push_back(*d);
  }
  return out;
}

absl::StatusOr<ImageConfig> ParseConfig(absl::string_view text) {
  auto j = ParseObject(text, "the image config");
  if (!j.ok()) return j.status();
  ImageConfig c;
  c.os = Str(*j, "os");
  c.architecture = Str(*j, "architecture");
  c.created = Str(*j, "created");
  if (auto cfg = j->find("config"); cfg != j->end() && cfg->is_object()) {
    c.env = Strings(*cfg, "Env");
    c.working_dir = Str(*cfg, "WorkingDir");
    c.user = Str(*cfg, "User");
    c.entrypoint = Strings(*cfg, "Entrypoint");
    c.cmd = Strings(*cfg, "Cmd");
  }
  if (auto rootfs = j->find("rootfs"); rootfs != j->end() && rootfs->is_object()) {
    c.diff_ids = Strings(*rootfs, "diff_ids");
  }
  for (const auto& d : c.diff_ids) {
    if (!ValidDigest(d)) {
      return absl::InvalidArgumentError(absl::StrCat("the image config has diff_id \"", d, "\""));
    }
  }
  if (!c.os.empty() && c.os != "linux") {
    return absl::InvalidArgumentError(
        absl::StrCat("the image is for ", c.os, "; sandboxes run linux images"));
  }
  return c;
}

absl::StatusOr<Descriptor> PickPlatform(const std::vector<Descriptor>& entries) {
  std::vector<std::string> seen;
  for (const auto& d : entries) {
    if (d.os == "linux" && d.architecture == "amd64") return d;
    if (!d.os.empty()) seen.push_back(absl::StrCat(d.os, "/", d.architecture));
  }
  // An index without platforms (an OCI layout's index.json) names images.
  if (seen.empty() && entries.size() == 1) return entries[0];
  return absl::NotFoundError(absl::StrCat("the image has no linux/amd64 variant (it has: ",
                                          seen.empty() ? "none" : absl::StrJoin(seen, ", "),
                                          ")"));
}

std::string SerializeManifest(const Manifest& m) {
  json layers = json::array();
  for (const auto& l : m.layers) layers.push_back(WriteDescriptor(l));
  json j = {{"schemaVersion", 2},
            {"mediaType", kManifestType},
            {"config", WriteDescriptor(m.config)},
            {"layers", layers}};
  if (!m.annotations.empty()) j["annotations"] = m.annotations;
  return j.dump();
}

std::string SerializeConfig(const ImageConfig& c) {
  json cfg = json::object();
  if (!c.env.empty()) cfg["Env"] = c.env;
  if (!c.working_dir.empty()) cfg["WorkingDir"] = c.working_dir;
  if (!c.user.empty()) cfg["User"] = c.user;
  if (!c.entrypoint.empty()) cfg["Entrypoint"] = c.entrypoint;
  if (!c.cmd.empty()) cfg["Cmd"] = c.cmd;
  json j = {{"architecture", c.architecture.empty() ? "amd64" : c.architecture},
            {"os", "linux"},
            {"config", cfg},
            {"rootfs", {{"type", "layers"}, {"diff_ids", c.diff_ids}}}};
  if (!c.created.empty()) j["created"] = c.created;
  return j.dump();
}

std::string SerializeIndex(const std::vector<Descriptor>& entries) {
  json list = json::array();
  for (const auto& d : entries) list.push_back(WriteDescriptor(d));
  return json{{"schemaVersion", 2}, {"mediaType", kIndexType}, {"manifests", list}}.dump();
}

std::string DigestOf(const unsigned char* md, unsigned len) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "sha256:";
  for (unsigned i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

std::string Sha256Digest(absl::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return DigestOf(md, len);
}

}  // namespace airlock::vmmd::oci
