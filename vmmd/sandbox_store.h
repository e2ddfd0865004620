// vmmd's durable state: one row per sandbox (its Sandbox proto) and a few
// settings, in vmmd's SQLite file. Every change is written before it is
// acknowledged, so a restarted vmmd knows every sandbox it ever accepted.
#ifndef AIRLOCK_VMMD_SANDBOX_STORE_H_
#define AIRLOCK_VMMD_SANDBOX_STORE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/state_db.h"
#include "protos/vmm/v1/vmm.pb.h"

namespace airlock::vmmd {

class SandboxStore {
 public:
  explicit SandboxStore(StateDb* db) : db_(db) {}

  // Init creates or upgrades the schema.
  absl::Status Init();

  // Insert adds a new sandbox; ALREADY_EXISTS when the name is taken.
  absl::Status Insert(const airlock::vmm::v1::Sandbox& sandbox);
  // Put replaces the stored sandbox of the same name.
  absl::Status Put(const airlock::vmm::v1::Sandbox& sandbox);
  absl::Status Delete(const std::string& name);
  absl::StatusOr<std::vector<airlock::vmm::v1::Sandbox>> LoadAll();

  // Setting reads a value ("" when unset); SetSetting writes one.
  absl::StatusOr<std::string> Setting(const std::string& key);
  absl::Status SetSetting(const std::string& key, const std::string& value);

 private:
  StateDb* db_;
};

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_SANDBOX_STORE_H_
