// The OCI / Docker v2 documents vmmd reads from registries, image layouts
// and archives (vmmd/store/oci.h): the input is tried as an image
// manifest, an index and an image config. Whatever is accepted holds
// only well-formed digests ("sha256:" and 64 lowercase hex digits) and
// sizes that are not negative; a manifest is of a manifest media type and
// schemaVersion 2 exactly; a config is for linux. Each serializes to a
// document that parses back to the same values (and the serialized form
// is a fixed point), and PickPlatform only ever picks linux/amd64 or the
// one platform-less entry of a layout's index.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "nlohmann/json.hpp"
#include "vmmd/store/oci.h"

namespace oci = airlock::vmmd::oci;

namespace {

// WellFormedDigest restates oci::ValidDigest without it.
bool WellFormedDigest(const std::string& d) {
  if (d.size() != 7 + 64 || d.compare(0, 7, "sha256:") != 0) return false;
  for (size_t i = 7; i < d.size(); ++i) {
    char c = d[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

void CheckDescriptor(const oci::Descriptor& d) {
  FUZZ_CHECK(WellFormedDigest(d.digest));
  FUZZ_CHECK(d.size >= 0);
}

// SameBlob compares what Serialize* keeps of a descriptor (the platform
// only with an os, and never the variant).
bool SameBlob(const oci::Descriptor& a, const oci::Descriptor& b) {
  if (a.media_type != b.media_type || a.digest != b.digest || a.size != b.size ||
      a.annotations != b.annotations || a.os != b.os) {
    return false;
  }
  return a.os.empty() || a.architecture == b.architecture;
}

void CheckManifest(const std::string& input) {
  auto m = oci::ParseManifest(input);
  if (!m.ok()) return;
  FUZZ_CHECK(oci::IsManifest(m->media_type));
  nlohmann::json j = nlohmann::json::parse(input, nullptr, false);
  FUZZ_CHECK(j.is_object() && j.contains("schemaVersion"));
  FUZZ_CHECK(j["schemaVersion"].is_number_integer() && j["schemaVersion"] == 2);
  CheckDescriptor(m->config);
  for (const auto& l : m->layers) CheckDescriptor(l);

  std::string wire = oci::SerializeManifest(*m);
  auto again = oci::ParseManifest(wire);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->media_type == oci::kManifestType);
  FUZZ_CHECK(SameBlob(again->config, m->config));
  FUZZ_CHECK(again->layers.size() == m->layers.size());
  for (size_t i = 0; i < m->layers.size(); ++i) {
    FUZZ_CHECK(SameBlob(again->layers[i], m->layers[i]));
  }
  FUZZ_CHECK(again->annotations == m->annotations);
  FUZZ_CHECK(oci::SerializeManifest(*again) == wire);
  auto type = oci::MediaTypeOf(wire);
  FUZZ_CHECK(type.ok() && *type == oci::kManifestType);
}

void CheckIndex(const std::string& input) {
  auto entries = oci::ParseIndex(input);
  if (!entries.ok()) return;
  for (const auto& e : *entries) CheckDescriptor(e);

  std::string wire = oci::SerializeIndex(*entries);
  auto again = oci::ParseIndex(wire);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->size() == entries->size());
  for (size_t i = 0; i < entries->size(); ++i) FUZZ_CHECK(SameBlob((*again)[i], (*entries)[i]));
  FUZZ_CHECK(oci::SerializeIndex(*again) == wire);
  auto type = oci::MediaTypeOf(wire);
  FUZZ_CHECK(type.ok() && oci::IsIndex(*type));

  auto pick = oci::PickPlatform(*entries);
  if (pick.ok()) {
    bool amd64 = pick->os == "linux" && pick->architecture == "amd64";
    bool only = entries->size() == 1 && (*entries)[0].os.empty();
    FUZZ_CHECK(amd64 || only);
    CheckDescriptor(*pick);
  } else {
    for (const auto& e : *entries) FUZZ_CHECK(!(e.os == "linux" && e.architecture == "amd64"));
  }
}

void CheckConfig(const std::string& input) {
  auto c = oci::ParseConfig(input);
  if (!c.ok()) return;
  FUZZ_CHECK(c->os.empty() || c->os == "linux");
  for (const auto& d : c->diff_ids) FUZZ_CHECK(WellFormedDigest(d));

  std::string wire = oci::SerializeConfig(*c);
  auto again = oci::ParseConfig(wire);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->os == "linux");
  FUZZ_CHECK(again->architecture == (c->architecture.empty() ? "amd64" : c->architecture));
  FUZZ_CHECK(again->created == c->created);
  FUZZ_CHECK(again->env == c->env);
  FUZZ_CHECK(again->working_dir == c->working_dir);
  FUZZ_CHECK(again->user == c->user);
  FUZZ_CHECK(again->entrypoint == c->entrypoint);
  FUZZ_CHECK(again->cmd == c->cmd);
  FUZZ_CHECK(again->diff_ids == c->diff_ids);
  FUZZ_CHECK(oci::SerializeConfig(*again) == wire);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  if (oci::ValidDigest(input)) FUZZ_CHECK(WellFormedDigest(input));
  FUZZ_CHECK(oci::ValidDigest(oci::Sha256Digest(input)));
  auto type = oci::MediaTypeOf(input);
  if (!type.ok()) {
    // Not a JSON object: nothing reads it as a document.
    FUZZ_CHECK(!oci::ParseManifest(input).ok());
    FUZZ_CHECK(!oci::ParseIndex(input).ok());
    FUZZ_CHECK(!oci::ParseConfig(input).ok());
    return 0;
  }
  CheckManifest(input);
  CheckIndex(input);
  CheckConfig(input);
  return 0;
}
