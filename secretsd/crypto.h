// The cryptography secretsd relies on: AES-256-GCM sealing of secret values
// and the CSPRNG that keys, nonces and placeholders come from. Only OpenSSL
// EVP calls that BoringSSL also provides are used (no EVP_AEAD, no
// OpenSSL-3-only API), so either library can back it.
#ifndef AIRLOCK_SECRETSD_CRYPTO_H_
#define AIRLOCK_SECRETSD_CRYPTO_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock::secretsd {

inline constexpr size_t kKeySize = 32;    // AES-256
inline constexpr size_t kNonceSize = 12;  // GCM's standard IV length
inline constexpr size_t kTagSize = 16;    // full-length GCM tag

// SecretKey is a 256-bit AES key. Movable, not copyable; its bytes are
// wiped when it is destroyed or moved from.
class SecretKey {
 public:
  // FromBytes takes exactly kKeySize bytes.
  static absl::StatusOr<SecretKey> FromBytes(absl::string_view bytes);
  // Generate draws a fresh key from the CSPRNG.
  static absl::StatusOr<SecretKey> Generate();

  SecretKey(SecretKey&& other) noexcept;
  SecretKey& operator=(SecretKey&& other) noexcept;
  SecretKey(const SecretKey&) = delete;
  SecretKey& operator=(const SecretKey&) = delete;
  ~SecretKey();

  // bytes is the raw key, for writing the key file.
  absl::string_view bytes() const {
    return absl::string_view(reinterpret_cast<const char*>(key_.data()), key_.size());
  }

 private:
  SecretKey() = default;
  std::array<uint8_t, kKeySize> key_{};
};

// RandomBytes returns `n` bytes from the CSPRNG (RAND_bytes).
absl::StatusOr<std::string> RandomBytes(size_t n);

// Seal encrypts `plaintext` with AES-256-GCM under a fresh random nonce,
// binding `aad` (secretsd passes the secret's id, so a sealed value copied
// to another row fails to open). The result is nonce || ciphertext || tag.
absl::StatusOr<std::string> Seal(const SecretKey& key, absl::string_view plaintext,
                                 absl::string_view aad);

// Open reverses Seal. It fails with DATA_LOSS, and returns no partial
// plaintext, when the key or `aad` differ or any byte of `sealed` changed.
absl::StatusOr<std::string> Open(const SecretKey& key, absl::string_view sealed,
                                 absl::string_view aad);

}  // namespace airlock::secretsd

#endif  // AIRLOCK_SECRETSD_CRYPTO_H_
