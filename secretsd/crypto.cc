#include "secretsd/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <memory>

#include "absl/strings/str_cat.h"

namespace airlock::secretsd {
namespace {

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;

const uint8_t* Bytes(absl::string_view s) { return reinterpret_cast<const uint8_t*>(s.data()); }

// EVP lengths are ints; secretsd values are at most 64 KiB, so anything
// near INT_MAX is a caller bug, refused rather than truncated.
constexpr size_t kMaxInput = 1 << 30;

// Starts an AES-256-GCM context with a 12-byte IV and feeds it the AAD.
absl::StatusOr<CipherCtx> Start(bool encrypt, const SecretKey& key, absl::string_view nonce,
                                absl::string_view aad) {
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  if (!ctx) return absl::InternalError("EVP_CIPHER_CTX_new failed");
  auto init = encrypt ? EVP_EncryptInit_ex : EVP_DecryptInit_ex;
  int outl = 0;
  if (init(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, kNonceSize, nullptr) != 1 ||
      init(ctx.get(), nullptr, nullptr, Bytes(key.bytes()), Bytes(nonce)) != 1) {
    return absl::InternalError("cannot initialise AES-256-GCM");
  }
  if (!aad.empty()) {
    auto update = encrypt ? EVP_EncryptUpdate : EVP_DecryptUpdate;
    if (update(ctx.get(), nullptr, &outl, Bytes(aad), static_cast<int>(aad.size())) != 1) {
      return absl::InternalError("cannot add AES-256-GCM associated data");
    }
  }
  return ctx;
}

}  // namespace

absl::StatusOr<SecretKey> SecretKey::FromBytes(absl::string_view bytes) {
  if (bytes.size() != kKeySize) {
    return absl::InvalidArgumentError(
        absl::StrCat("an AES-256 key is ", kKeySize, " bytes, not ", bytes.size()));
  }
  SecretKey k;
  std::copy(bytes.begin(), bytes.end(), k.key_.begin());
  return k;
}

absl::StatusOr<SecretKey> SecretKey::Generate() {
  SecretKey k;
  if (RAND_bytes(k.key_.data(), static_cast<int>(k.key_.size())) != 1) {
    return absl::InternalError("RAND_bytes failed to produce a key");
  }
  return k;
}

SecretKey::SecretKey(SecretKey&& other) noexcept : key_(other.key_) {
  OPENSSL_cleanse(other.key_.data(), other.key_.size());
}

SecretKey& SecretKey::operator=(SecretKey&& other) noexcept {
  if (this != &other) {
    key_ = other.key_;
    OPENSSL_cleanse(other.key_.data(), other.key_.size());
  }
  return *this;
}

SecretKey::~SecretKey() { OPENSSL_cleanse(key_.data(), key_.size()); }

absl::StatusOr<std::string> RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (n > 0 && RAND_bytes(reinterpret_cast<uint8_t*>(out.data()), static_cast<int>(n)) != 1) {
    return absl::InternalError("RAND_bytes failed");
  }
  return out;
}

absl::StatusOr<std::string> Seal(const SecretKey& key, absl::string_view plaintext,
                                 absl::string_view aad) {
  if (plaintext.size() > kMaxInput || aad.size() > kMaxInput) {
    return absl::InvalidArgumentError("input too large to seal");
  }
  // A fresh random nonce per call: with a 96-bit nonce the collision bound
  // stays negligible far beyond the number of values one store will hold.
  auto nonce = RandomBytes(kNonceSize);
  if (!nonce.ok()) return nonce.status();
  auto ctx = Start(/*encrypt=*/true, key, *nonce, aad);
  if (!ctx.ok()) return ctx.status();

  std::string out = *nonce;
  out.resize(kNonceSize + plaintext.size() + kTagSize);
  uint8_t* body = reinterpret_cast<uint8_t*>(out.data()) + kNonceSize;
  int len = 0;
  int fin = 0;
  if (EVP_EncryptUpdate(ctx->get(), body, &len, Bytes(plaintext),
                        static_cast<int>(plaintext.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx->get(), body + len, &fin) != 1 ||
      static_cast<size_t>(len + fin) != plaintext.size() ||
      EVP_CIPHER_CTX_ctrl(ctx->get(), EVP_CTRL_GCM_GET_TAG, kTagSize, body + plaintext.size()) !=
          1) {
    OPENSSL_cleanse(out.data(), out.size());
    return absl::InternalError("AES-256-GCM encryption failed");
  }
  return out;
}

absl::StatusOr<std::string> Open(const SecretKey& key, absl::string_view sealed,
                                 absl::string_view aad) {
  if (sealed.size() < kNonceSize + kTagSize) {
    return absl::DataLossError(
        absl::StrCat("sealed value is ", sealed.size(), " bytes, shorter than nonce and tag"));
  }
  if (sealed.size() > kMaxInput || aad.size() > kMaxInput) {
    return absl::InvalidArgumentError("input too large to open");
  }
  absl::string_view nonce = sealed.substr(0, kNonceSize);
  absl::string_view body = sealed.substr(kNonceSize, sealed.size() - kNonceSize - kTagSize);
  std::string tag(sealed.substr(sealed.size() - kTagSize));
  auto ctx = Start(/*encrypt=*/false, key, nonce, aad);
  if (!ctx.ok()) return ctx.status();

  std::string plain(body.size(), '\0');
  uint8_t* out = reinterpret_cast<uint8_t*>(plain.data());
  int len = 0;
  int fin = 0;
  bool ok =
      EVP_DecryptUpdate(ctx->get(), out, &len, Bytes(body), static_cast<int>(body.size())) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx->get(), EVP_CTRL_GCM_SET_TAG, kTagSize, tag.data()) == 1 &&
      EVP_DecryptFinal_ex(ctx->get(), out + len, &fin) == 1 &&
      static_cast<size_t>(len + fin) == body.size();
  if (!ok) {
    // Plaintext produced before the tag check must never escape.
    OPENSSL_cleanse(plain.data(), plain.size());
    return absl::DataLossError(
        "authentication failed (wrong key, altered bytes, or a value moved to another id)");
  }
  return plain;
}

}  // namespace airlock::secretsd
