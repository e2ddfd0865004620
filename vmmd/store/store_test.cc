// Unit tests of the store's parts without a VM or a network: references,
// OCI documents, the WWW-Authenticate parser, the blob store and names,
// garbage collection, and the tree diff a saved template is made of
// (written, then applied onto the lower tree to give the upper one back).
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "common/state_db.h"
#include "gtest/gtest.h"
#include "vmmd/store/image_store.h"
#include "vmmd/store/layer_apply.h"
#include "vmmd/store/oci.h"
#include "vmmd/store/reference.h"
#include "vmmd/store/registry_client.h"
#include "vmmd/store/tree_diff.h"

namespace airlock::vmmd {
namespace {

std::string TempDir() {
  std::string tmpl = ::testing::TempDir() + "/storeXXXXXX";
  return mkdtemp(tmpl.data());
}

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(ReferenceTest, NormalizesAsDockerDoes) {
  auto r = ParseReference("golang:1.25");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->Name(), "docker.io/library/golang:1.25");
  EXPECT_EQ(ParseReference("ubuntu")->Name(), "docker.io/library/ubuntu:latest");
  EXPECT_EQ(ParseReference("o/r")->Name(), "docker.io/o/r:latest");
  auto g = ParseReference("ghcr.io/o/r:tag");
  EXPECT_EQ(g->registry, "ghcr.io");
  EXPECT_EQ(g->repository, "o/r");
  auto h = ParseReference("host:5000/x@sha256:" + std::string(64, 'a'));
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->registry, "host:5000");
  EXPECT_EQ(h->tag, "");
  EXPECT_EQ(h->Ref(), "sha256:" + std::string(64, 'a'));
  EXPECT_EQ(ParseReference("localhost/x")->registry, "localhost");
}

TEST(ReferenceTest, RefusesBadShapesClearly) {
  for (const char* bad : {"", "Upper/x", "a//b", "x:", "x@sha256:12", "-x", "x:.tag"}) {
    auto r = ParseReference(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("invalid image reference"), std::string::npos);
    }
  }
}

TEST(ReferenceTest, LocalNamesGetLatest) {
  EXPECT_EQ(*NormalizeLocalName("go-agent"), "go-agent:latest");
  EXPECT_EQ(*NormalizeLocalName("go-agent:v1"), "go-agent:v1");
  EXPECT_EQ(*NormalizeLocalName("team.io/x:v2"), "team.io/x:v2");
  EXPECT_EQ(*NormalizeLocalName("docker.io/library/golang:1.25"), "golang:1.25");
  EXPECT_EQ(*NormalizeLocalName("docker.io/o/r"), "o/r:latest");
  EXPECT_FALSE(NormalizeLocalName("x@sha256:" + std::string(64, 'b')).ok());
}

TEST(OciTest, ParsesManifestIndexAndConfig) {
  std::string d = "sha256:" + std::string(64, 'c');
  auto m = oci::ParseManifest(
      "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.docker.distribution.manifest.v2+json\","
      "\"config\":{\"mediaType\":\"x\",\"digest\":\"" + d + "\",\"size\":3},"
      "\"layers\":[{\"mediaType\":\"y\",\"digest\":\"" + d + "\",\"size\":9}]}");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->layers.size(), 1u);
  EXPECT_FALSE(oci::ParseManifest("{\"schemaVersion\":2,\"config\":{\"digest\":\"sha256:1\","
                                  "\"size\":1},\"layers\":[]}")
                   .ok());
  EXPECT_FALSE(oci::ParseManifest("[1]").ok());
  auto idx = oci::ParseIndex("{\"manifests\":[{\"digest\":\"" + d +
                             "\",\"size\":1,\"platform\":{\"os\":\"linux\",\"architecture\":"
                             "\"arm64\"}},{\"digest\":\"" + d +
                             "\",\"size\":2,\"platform\":{\"os\":\"linux\",\"architecture\":"
                             "\"amd64\"}}]}");
  ASSERT_TRUE(idx.ok());
  EXPECT_EQ(oci::PickPlatform(*idx)->size, 2);
  idx->pop_back();
  auto none = oci::PickPlatform(*idx);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("linux/arm64"), std::string::npos);
  auto c = oci::ParseConfig(
      "{\"os\":\"linux\",\"config\":{\"Env\":[\"A=1\"],\"WorkingDir\":\"/w\",\"User\":\"u\"},"
      "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"" + d + "\"]}}");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->env[0], "A=1");
  EXPECT_EQ(c->working_dir, "/w");
  EXPECT_EQ(c->user, "u");
  EXPECT_FALSE(oci::ParseConfig("{\"os\":\"windows\"}").ok());
  // What SerializeConfig writes, ParseConfig reads back.
  auto again = oci::ParseConfig(oci::SerializeConfig(*c));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->diff_ids, c->diff_ids);
  EXPECT_EQ(again->user, "u");
}

// Found by //fuzz:oci_manifest: schemaVersion 4294967298 read as 2.
TEST(OciTest, ManifestSchemaVersionIsExactly2) {
  std::string d = "sha256:" + std::string(64, 'c');
  auto manifest = [&](const std::string& version) {
    return oci::ParseManifest("{\"schemaVersion\":" + version + ",\"config\":{\"digest\":\"" + d +
                              "\",\"size\":1},\"layers\":[]}");
  };
  EXPECT_TRUE(manifest("2").ok());
  for (const char* bad :
       {"4294967298", "18446744073709551614", "-4294967294", "2.0", "\"2\"", "1"}) {
    EXPECT_FALSE(manifest(bad).ok()) << bad;
  }
}

TEST(AuthenticateTest, ReadsBearerAndBasicChallenges) {
  auto b = ParseAuthenticate(
      "Bearer realm=\"https://auth.docker.io/token\",service=\"registry.docker.io\","
      "scope=\"repository:library/golang:pull,push\"");
  EXPECT_EQ(b.scheme, "bearer");
  EXPECT_EQ(b.realm, "https://auth.docker.io/token");
  EXPECT_EQ(b.service, "registry.docker.io");
  EXPECT_EQ(b.scope, "repository:library/golang:pull,push");
  EXPECT_EQ(ParseAuthenticate("Basic realm=\"x\"").scheme, "basic");
  EXPECT_EQ(ParseAuthenticate("").scheme, "");
}

class ImageStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir();
    db_ = std::move(*StateDb::Open(dir_ + "/db"));
    store_ = std::move(*ImageStore::Open(dir_ + "/images", db_.get()));
  }
  // Image stores a one-layer image and returns its manifest digest.
  std::string Image(const std::string& content) {
    std::string layer = *store_->PutBlob(content);
    oci::ImageConfig c;
    c.diff_ids = {layer};
    std::string config = oci::SerializeConfig(c);
    std::string cd = *store_->PutBlob(config);
    oci::Manifest m;
    m.config = {oci::kConfigType, cd, static_cast<int64_t>(config.size()), {}};
    m.layers = {{oci::kLayerTarType, layer, static_cast<int64_t>(content.size()), {}}};
    return *store_->PutBlob(oci::SerializeManifest(m));
  }
  std::string dir_;
  std::unique_ptr<StateDb> db_;
  std::unique_ptr<ImageStore> store_;
};

TEST_F(ImageStoreTest, AMismatchingBlobIsRefusedAndLeavesNothing) {
  auto w = store_->NewBlob(oci::Sha256Digest("expected"));
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Write("other").ok());
  auto c = (*w)->Commit();
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("blob digest mismatch"), std::string::npos);
  w->reset();
  EXPECT_FALSE(store_->HasBlob(oci::Sha256Digest("other")));
  EXPECT_EQ(system(("test -z \"$(ls -A " + dir_ + "/images/tmp)\"").c_str()), 0);
}

TEST_F(ImageStoreTest, NamesResolveByNameDigestAndPrefix) {
  std::string m = Image("layer one");
  ASSERT_TRUE(store_->Tag("one:v1", m, "test").ok());
  auto by_name = store_->Find("one:v1");
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_EQ(by_name->digest, m);
  EXPECT_EQ(store_->Find(m)->name, "one:v1");
  EXPECT_EQ(store_->Find(m.substr(7, 8))->digest, m);
  EXPECT_EQ(store_->Find(by_name->id.substr(7, 6))->digest, m);
  EXPECT_EQ(store_->Find("nope:v1").status().code(), absl::StatusCode::kNotFound);
  // A name needs its blobs.
  EXPECT_FALSE(store_->Tag("x:v1", "sha256:" + std::string(64, 'd'), "test").ok());
}

TEST_F(ImageStoreTest, GarbageCollectionKeepsNamedAndInUseImagesOnly) {
  std::string a = Image("layer a"), b = Image("layer b"), c = Image("layer c");
  ASSERT_TRUE(store_->Tag("a:v1", a, "t").ok());
  ASSERT_TRUE(store_->Tag("b:v1", b, "t").ok());
  ASSERT_TRUE(store_->Untag("b:v1").ok());
  auto freed = store_->CollectGarbage({c});
  ASSERT_TRUE(freed.ok());
  EXPECT_GT(*freed, 0u);
  EXPECT_TRUE(store_->HasBlob(a));
  EXPECT_TRUE(store_->HasBlob(c));
  EXPECT_TRUE(store_->HasBlob(oci::Sha256Digest("layer c")));
  EXPECT_FALSE(store_->HasBlob(b));
  EXPECT_FALSE(store_->HasBlob(oci::Sha256Digest("layer b")));
  EXPECT_EQ(store_->Untag("b:v1").code(), absl::StatusCode::kNotFound);
}

TEST_F(ImageStoreTest, OpenSweepsInterruptedWork) {
  std::ofstream(dir_ + "/images/tmp/blob-leftover") << "half";
  store_ = std::move(*ImageStore::Open(dir_ + "/images", db_.get()));
  EXPECT_EQ(system(("test -z \"$(ls -A " + dir_ + "/images/tmp)\"").c_str()), 0);
}

TEST_F(ImageStoreTest, ATreeDiffAppliedOnTheLowerTreeGivesTheUpperTree) {
  std::string lower = dir_ + "/lower", upper = dir_ + "/upper";
  ASSERT_EQ(system(("mkdir -p " + lower + "/etc " + lower + "/gone/deep " + lower +
                    "/same && echo a > " + lower + "/etc/a && echo b > " + lower +
                    "/etc/b && echo s > " + lower + "/same/s && touch -d @1700000000 " + lower +
                    "/same/s && cp -a " + lower + " " + upper + " && rm -r " + upper +
                    "/gone && echo changed > " + upper + "/etc/a && rm " + upper +
                    "/etc/b && mkdir -p " + upper + "/new/dir && echo n > " + upper +
                    "/new/dir/n && ln " + upper + "/new/dir/n " + upper + "/new/hard && ln -s " +
                    "../etc/a " + upper + "/new/link")
                       .c_str()),
            0);
  auto layer = WriteDiffLayer(lower, upper, {}, store_.get());
  ASSERT_TRUE(layer.ok()) << layer.status();
  EXPECT_EQ(layer->whiteouts, 2u);  // gone/ and etc/b
  // The unchanged file is not in the layer: only what changed is.
  EXPECT_EQ(layer->content_bytes, std::string("changed\nn\n").size());
  ASSERT_TRUE(ApplyLayer(store_->BlobPath(layer->digest), lower).ok());
  EXPECT_EQ(Read(lower + "/etc/a"), "changed\n");
  struct stat st, st2;
  EXPECT_NE(stat((lower + "/etc/b").c_str(), &st), 0);
  EXPECT_NE(stat((lower + "/gone").c_str(), &st), 0);
  ASSERT_EQ(stat((lower + "/new/dir/n").c_str(), &st), 0);
  ASSERT_EQ(stat((lower + "/new/hard").c_str(), &st2), 0);
  EXPECT_EQ(st.st_ino, st2.st_ino);
  ASSERT_EQ(lstat((lower + "/new/link").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(Read(lower + "/same/s"), "s\n");
}

}  // namespace
}  // namespace airlock::vmmd
