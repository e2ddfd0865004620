#include "apid/signer.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <unistd.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/fd_io.h"
#include "nlohmann/json.hpp"

namespace airlock::apid {

namespace {
constexpr char kPrefix[] = "alk1";
}

std::string RandomToken(int bytes) {
  std::string raw(bytes, '\0');
  RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), bytes);
  return absl::WebSafeBase64Escape(raw);
}

std::string RandomHex(int bytes) {
  std::string raw(bytes, '\0');
  RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), bytes);
  return absl::BytesToHexString(raw);
}

std::string Sha256Hex(const std::string& data) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), md);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(md), sizeof(md)));
}

absl::StatusOr<Signer> Signer::Open(const std::string& path) {
  std::string key = ReadFileToString(path);
  if (key.size() >= 32) return Signer(key);
  if (!key.empty()) {
    return absl::DataLossError(absl::StrCat(path, " holds ", key.size(),
                                            " bytes, not a 32-byte key; remove it to make a new "
                                            "one (access tokens and endpoint credentials end)"));
  }
  std::string fresh(32, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(fresh.data()), 32) != 1) {
    return absl::InternalError("no random bytes for apid's signing key");
  }
  // Written whole under a temporary name, then linked into place: a crash
  // leaves either no key or a complete one.
  std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot create ", tmp, ": ", strerror(errno)));
  bool ok = WriteAll(fd, fresh) && fsync(fd) == 0;
  close(fd);
  if (!ok) {
    unlink(tmp.c_str());
    return absl::UnavailableError(absl::StrCat("cannot write ", tmp));
  }
  int linked = link(tmp.c_str(), path.c_str());
  unlink(tmp.c_str());
  if (linked != 0 && errno != EEXIST) {
    return absl::UnavailableError(absl::StrCat("cannot create ", path, ": ", strerror(errno)));
  }
  key = ReadFileToString(path);  // ours, or the one another apid linked first
  if (key.size() < 32) return absl::DataLossError(absl::StrCat(path, " is not a key"));
  return Signer(key);
}

std::string Signer::Mac(const std::string& data) const {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), md, &len);
  return std::string(reinterpret_cast<char*>(md), len);
}

std::string Signer::Sign(const Claims& c) const {
  nlohmann::json j = {{"k", c.kind}, {"sub", c.subject}, {"tid", c.token_id},
                      {"exp", c.expires_at}};
  if (!c.sandbox.empty()) j["sbx"] = c.sandbox;
  if (!c.permissions.empty()) j["perm"] = c.permissions;
  if (!c.audience.empty()) j["aud"] = c.audience;
  std::string signed_part = absl::StrCat(kPrefix, ".", absl::WebSafeBase64Escape(j.dump()));
  return absl::StrCat(signed_part, ".", absl::WebSafeBase64Escape(Mac(signed_part)));
}

absl::StatusOr<Claims> Signer::Verify(const std::string& token, int64_t now) const {
  std::vector<std::string> parts = absl::StrSplit(token, '.');
  if (parts.size() != 3 || parts[0] != kPrefix) {
    return absl::UnauthenticatedError("the bearer token is not an Airlock credential");
  }
  std::string mac;
  if (!absl::WebSafeBase64Unescape(parts[2], &mac)) {
    return absl::UnauthenticatedError("the bearer token is malformed");
  }
  std::string want = Mac(absl::StrCat(parts[0], ".", parts[1]));
  if (mac.size() != want.size() || CRYPTO_memcmp(mac.data(), want.data(), want.size()) != 0) {
    return absl::UnauthenticatedError("the bearer token's signature does not verify");
  }
  std::string payload;
  if (!absl::WebSafeBase64Unescape(parts[1], &payload)) {
    return absl::UnauthenticatedError("the bearer token is malformed");
  }
  nlohmann::json j = nlohmann::json::parse(payload, nullptr, false);
  if (!j.is_object()) return absl::UnauthenticatedError("the bearer token is malformed");
  Claims c;
  c.kind = j.value("k", "");
  c.subject = j.value("sub", "");
  c.token_id = j.value("tid", "");
  c.sandbox = j.value("sbx", "");
  c.audience = j.value("aud", "");
  c.expires_at = j.value("exp", int64_t{0});
  if (j.contains("perm") && j["perm"].is_array()) {
    for (const auto& p : j["perm"]) {
      if (p.is_string()) c.permissions.push_back(p.get<std::string>());
    }
  }
  if (now >= c.expires_at) {
    return absl::UnauthenticatedError("the bearer token has expired; get a new one");
  }
  return c;
}

}  // namespace airlock::apid
