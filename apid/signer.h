// Short-lived credentials apid issues and checks without storing them:
// access tokens (from a token exchange, for the management API) and
// endpoint credentials (one sandbox, named permissions, one audience).
// Each is "alk1.<payload>.<mac>": the claims as base64url JSON and an
// HMAC-SHA256 over them with a key only apid holds (a 0600 file in its
// state dir), so they survive an apid restart and cannot be forged or
// widened by a client.
#ifndef AIRLOCK_APID_SIGNER_H_
#define AIRLOCK_APID_SIGNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace airlock::apid {

// Claims is what a credential says.
struct Claims {
  // "access" or "endpoint".
  std::string kind;
  // Name of the API token it descends from.
  std::string subject;
  // That token's id: a removed (or re-created) token invalidates it.
  std::string token_id;
  // Endpoint credentials only: the sandbox uid, the permissions and the
  // audience (the endpoint URI).
  std::string sandbox;
  std::vector<std::string> permissions;
  std::string audience;
  // Unix seconds.
  int64_t expires_at = 0;
};

class Signer {
 public:
  // Open reads the key at `path`, making a new random one (mode 0600) when
  // the file does not exist.
  static absl::StatusOr<Signer> Open(const std::string& path);
  // FromKey is for tests.
  explicit Signer(std::string key) : key_(std::move(key)) {}

  std::string Sign(const Claims& claims) const;
  // Verify checks the MAC and the expiry at `now`; UNAUTHENTICATED with the
  // reason otherwise (never echoing the token).
  absl::StatusOr<Claims> Verify(const std::string& token, int64_t now) const;

 private:
  std::string Mac(const std::string& data) const;
  std::string key_;
};

// RandomToken is `bytes` random bytes as unpadded base64url.
std::string RandomToken(int bytes);

// RandomHex is `bytes` random bytes as lower-case hex.
std::string RandomHex(int bytes);

// Sha256Hex is the hex SHA-256 of `data`.
std::string Sha256Hex(const std::string& data);

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_SIGNER_H_
