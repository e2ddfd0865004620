#include "common/kit/oci.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "common/kit/internal/testdata.h"

namespace airlock::kit {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using internal::ReadTestdata;
using internal::TestdataPath;

constexpr char kManifestType[] = "application/vnd.oci.image.manifest.v1+json";
constexpr char kIndexType[] = "application/vnd.oci.image.index.v1+json";

constexpr char kMixinJson[] = R"({"capabilities":[{"config":{"runtime":{"allow":["a.example"]}},)"
                              R"("type":"com.docker.sandbox/network-policy@1"}],"kind":"mixin",)"
                              R"("provides":["thing@1.0.0"],"schemaVersion":"3"})";

void WriteFile(const fs::path& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  out << data;
}

// LayoutDir builds an OCI image layout in the test's scratch directory.
class LayoutDir {
 public:
  explicit LayoutDir(const std::string& name) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    path_ = fs::path(tmp ? tmp : "/tmp") / name;
    fs::remove_all(path_);
    fs::create_directories(path_ / "blobs" / "sha256");
    WriteFile(path_ / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  }

  // Blob stores `data` and returns a descriptor for it.
  Json Blob(const std::string& media_type, const std::string& data) {
    std::string digest = Sha256Digest(data);
    WriteFile(path_ / "blobs" / "sha256" / digest.substr(7), data);
    return Json{{"mediaType", media_type}, {"digest", digest}, {"size", data.size()}};
  }

  // Manifest stores an image manifest with `annotations`.
  Json Manifest(const Json& annotations, Json platform = nullptr) {
    Json config = Blob("application/vnd.oci.image.config.v1+json", R"({"os":"linux"})");
    Json layer = Blob("application/vnd.oci.image.layer.v1.tar", std::string(512, '\0'));
    Json m = {{"schemaVersion", 2},
              {"mediaType", kManifestType},
              {"config", config},
              {"layers", Json::array({layer})}};
    if (!annotations.is_null()) m["annotations"] = annotations;
    Json d = Blob(kManifestType, m.dump());
    if (!platform.is_null()) d["platform"] = platform;
    return d;
  }

  void Index(const Json& manifests) {
    WriteFile(
        path_ / "index.json",
        Json{{"schemaVersion", 2}, {"mediaType", kIndexType}, {"manifests", manifests}}.dump());
  }

  std::string path() const { return path_.string(); }
  fs::path root() const { return path_; }

 private:
  fs::path path_;
};

Json KitAnnotations(const std::string& descriptor = kMixinJson) {
  return Json{{std::string(kDescriptorAnnotation), descriptor},
              {std::string(kSchemaVersionAnnotation), "3"}};
}

void ExpectError(const absl::StatusOr<LoadedKit>& kit, const std::string& want) {
  ASSERT_FALSE(kit.ok()) << "loaded, but want: " << want;
  EXPECT_NE(kit.status().message().find(want), absl::string_view::npos)
      << "want: " << want << "\ngot:  " << kit.status().message();
}

TEST(LoadKitRefTest, DescriptorFiles) {
  absl::StatusOr<LoadedKit> yaml = LoadKitRef(TestdataPath("forge.yaml"));
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  EXPECT_FALSE(yaml->from_oci_layout);
  EXPECT_EQ(yaml->descriptor.form, Form::kAuthored);
  EXPECT_EQ(yaml->descriptor.display_name, "Forge CLI");

  LayoutDir scratch("files");
  fs::path json = scratch.root() / "kit.json";
  WriteFile(json, kMixinJson);
  absl::StatusOr<LoadedKit> from_json = LoadKitRef(json.string());
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  EXPECT_EQ(from_json->descriptor.kind, KitKind::kMixin);

  fs::path bad = scratch.root() / "bad.yaml";
  WriteFile(bad, "schemaVersion: 3\nkind: mixin\n");
  ExpectError(LoadKitRef(bad.string()), "bad.yaml: invalid kit descriptor: schemaVersion:");

  fs::path big = scratch.root() / "big.yaml";
  WriteFile(big, std::string(kMaxDescriptorBytes + 1, '#'));
  ExpectError(LoadKitRef(big.string()), "over the 524288 byte budget");

  absl::StatusOr<LoadedKit> missing = LoadKitRef(TestdataPath("no-such-kit.yaml"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST(LoadKitRefTest, BuiltinAgents) {
  absl::StatusOr<LoadedKit> claude = LoadKitRef("builtin:claude");
  ASSERT_TRUE(claude.ok()) << claude.status();
  EXPECT_EQ(claude->path, "builtin:claude");
  EXPECT_FALSE(claude->from_oci_layout);
  EXPECT_EQ(claude->descriptor.form, Form::kAuthored);
  EXPECT_EQ(claude->descriptor.kind, KitKind::kWorkload);
  EXPECT_EQ(claude->descriptor.display_name, "Claude Code");

  absl::StatusOr<LoadedKit> unknown = LoadKitRef("builtin:nope");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  ExpectError(unknown,
              "kit reference builtin:nope: no built-in agent \"nope\"; the built-in "
              "agents are claude, codex, copilot, gemini, opencode, qwen");
  // shell is vmmd's, not a kit.
  EXPECT_EQ(LoadKitRef("builtin:shell").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadKitRef("builtin:").status().code(), absl::StatusCode::kNotFound);
  // A bare name is a path like any other.
  EXPECT_EQ(LoadKitRef("claude").status().code(), absl::StatusCode::kNotFound);
}

TEST(LoadKitRefTest, CheckedInLayout) {
  absl::StatusOr<LoadedKit> kit = LoadKitRef(TestdataPath("forge-oci"));
  ASSERT_TRUE(kit.ok()) << kit.status();
  EXPECT_TRUE(kit->from_oci_layout);
  EXPECT_EQ(kit->descriptor.form, Form::kPublished);
  EXPECT_EQ(kit->descriptor.kind, KitKind::kMixin);
  ASSERT_EQ(kit->descriptor.provides.size(), 1u);
  EXPECT_EQ(kit->descriptor.provides[0].version, "3.2.0");
  // The annotation carries the same declarations as the authored file.
  absl::StatusOr<Descriptor> authored = ParseDescriptor(ReadTestdata("forge.yaml"));
  ASSERT_TRUE(authored.ok());
  EXPECT_EQ(ToCanonicalJson(kit->descriptor.document), ToCanonicalJson(authored->document));
  EXPECT_EQ(kit->manifest_digest.rfind("sha256:", 0), 0u);
}

TEST(LoadKitRefTest, SingleManifest) {
  LayoutDir layout("single");
  Json manifest = layout.Manifest(KitAnnotations());
  layout.Index(Json::array({manifest}));
  absl::StatusOr<LoadedKit> kit = LoadKitRef(layout.path() + "/");
  ASSERT_TRUE(kit.ok()) << kit.status();
  EXPECT_EQ(kit->manifest_digest, manifest["digest"]);
  EXPECT_EQ(kit->descriptor.provides[0].name, "com.docker.kit/thing");
}

TEST(LoadKitRefTest, ImageIndexAnnotationsComeFirst) {
  LayoutDir layout("index");
  Json amd64 = layout.Manifest(nullptr, Json{{"os", "linux"}, {"architecture", "amd64"}});
  Json index = {{"schemaVersion", 2},
                {"mediaType", kIndexType},
                {"manifests", Json::array({amd64})},
                {"annotations", KitAnnotations()}};
  Json index_desc = layout.Blob(kIndexType, index.dump());
  layout.Index(Json::array({index_desc}));
  absl::StatusOr<LoadedKit> kit = LoadKitRef(layout.path());
  ASSERT_TRUE(kit.ok()) << kit.status();
  EXPECT_EQ(kit->manifest_digest, index_desc["digest"]);
}

TEST(LoadKitRefTest, FallsBackToAPlatformManifest) {
  LayoutDir layout("fallback");
  // An attestation manifest first: it must be skipped.
  Json attestation = layout.Manifest(nullptr, Json{{"os", "unknown"}, {"architecture", "unknown"}});
  Json arm64 = layout.Manifest(KitAnnotations(), Json{{"os", "linux"}, {"architecture", "arm64"}});
  Json index = {{"schemaVersion", 2},
                {"mediaType", kIndexType},
                {"manifests", Json::array({attestation, arm64})}};
  layout.Index(Json::array({layout.Blob(kIndexType, index.dump())}));
  absl::StatusOr<LoadedKit> kit = LoadKitRef(layout.path());
  ASSERT_TRUE(kit.ok()) << kit.status();
  EXPECT_EQ(kit->manifest_digest, arm64["digest"]);
}

TEST(LoadKitRefTest, SaysWhatIsMissing) {
  {
    LayoutDir layout("no-marker");
    layout.Index(Json::array({layout.Manifest(KitAnnotations())}));
    fs::remove(layout.root() / "oci-layout");
    ExpectError(LoadKitRef(layout.path()), "not an OCI image layout: ");
    ExpectError(LoadKitRef(layout.path()), "/oci-layout is missing");
  }
  {
    LayoutDir layout("no-index");
    ExpectError(LoadKitRef(layout.path()), "/index.json is missing");
  }
  {
    LayoutDir layout("empty-index");
    layout.Index(Json::array());
    ExpectError(LoadKitRef(layout.path()), "/index.json lists no manifests");
  }
  {
    LayoutDir layout("two-images");
    layout.Index(
        Json::array({layout.Manifest(KitAnnotations()), layout.Manifest(KitAnnotations())}));
    ExpectError(LoadKitRef(layout.path()), "lists 2 manifests; a Kit layout holds one image");
  }
  {
    LayoutDir layout("missing-blob");
    Json manifest = layout.Manifest(KitAnnotations());
    layout.Index(Json::array({manifest}));
    std::string digest = manifest["digest"];
    fs::remove(layout.root() / "blobs" / "sha256" / digest.substr(7));
    ExpectError(LoadKitRef(layout.path()), "blob " + digest + " is missing");
  }
  {
    LayoutDir layout("no-annotation");
    Json manifest = layout.Manifest(Json{{"org.opencontainers.image.title", "x"}});
    layout.Index(Json::array({manifest}));
    ExpectError(LoadKitRef(layout.path()),
                "manifest " + std::string(manifest["digest"]) +
                    " carries no vnd.docker.sandbox.kit.descriptor annotation; it is not a v3 Kit");
  }
}

TEST(LoadKitRefTest, RefusesBlobsThatAreNotWhatTheyClaim) {
  {
    LayoutDir layout("tampered");
    Json manifest = layout.Manifest(KitAnnotations());
    layout.Index(Json::array({manifest}));
    std::string digest = manifest["digest"];
    fs::path blob = layout.root() / "blobs" / "sha256" / digest.substr(7);
    std::ifstream in(blob, std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    data[data.find("a.example")] = 'b';  // same size, different bytes
    WriteFile(blob, data);
    ExpectError(LoadKitRef(layout.path()), "blob " + digest + " does not match its digest");
  }
  {
    LayoutDir layout("wrong-size");
    Json manifest = layout.Manifest(KitAnnotations());
    manifest["size"] = manifest["size"].get<int>() + 1;
    layout.Index(Json::array({manifest}));
    ExpectError(LoadKitRef(layout.path()), "bytes; its descriptor says");
  }
  {
    LayoutDir layout("bad-digest");
    layout.Index(
        Json::array({Json{{"mediaType", kManifestType}, {"digest", "sha512:abcd"}, {"size", 1}}}));
    ExpectError(LoadKitRef(layout.path()), "is not sha256:<hex>");
  }
  {
    LayoutDir layout("traversal");
    layout.Index(Json::array(
        {Json{{"mediaType", kManifestType}, {"digest", "sha256:../../oci-layout"}, {"size", 1}}}));
    ExpectError(LoadKitRef(layout.path()), "is not sha256:<64 hex>");
  }
}

TEST(LoadKitRefTest, RevalidatesThePublishedDescriptor) {
  {
    LayoutDir layout("set-annotation");
    std::string set = R"({"kind":"set","kits":[{"ref":"r.io/a:1","digest":"sha256:)" +
                      std::string(64, 'a') + R"("}],"schemaVersion":"3"})";
    layout.Index(Json::array({layout.Manifest(KitAnnotations(set))}));
    ExpectError(LoadKitRef(layout.path()), "kind: set never appears in a published descriptor");
  }
  {
    LayoutDir layout("schema-2");
    Json annotations = KitAnnotations();
    annotations[std::string(kSchemaVersionAnnotation)] = "2";
    layout.Index(Json::array({layout.Manifest(annotations)}));
    ExpectError(LoadKitRef(layout.path()), "vnd.docker.sandbox.kit.schema-version is \"2\"");
  }
}

}  // namespace
}  // namespace airlock::kit
