#include "vmmd/sandbox_store.h"

#include "absl/strings/str_cat.h"

namespace airlock::vmmd {

absl::Status SandboxStore::Init() {
  return db_->Migrate({
      "CREATE TABLE sandboxes (name TEXT PRIMARY KEY, proto BLOB NOT NULL);"
      "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
  });
}

absl::Status SandboxStore::Insert(const airlock::vmm::v1::Sandbox& sb) {
  const std::string& name = sb.spec().name();
  auto rows = db_->Query("SELECT 1 FROM sandboxes WHERE name = ?", {name});
  if (!rows.ok()) return rows.status();
  if (!rows->empty()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "a sandbox named \"", name, "\" already exists; choose another --name or remove it "
        "with `airlock rm ", name, "`"));
  }
  return db_->Exec("INSERT INTO sandboxes (name, proto) VALUES (?, ?)",
                   {name, sb.SerializeAsString()});
}

absl::Status SandboxStore::Put(const airlock::vmm::v1::Sandbox& sb) {
  return db_->Exec("INSERT OR REPLACE INTO sandboxes (name, proto) VALUES (?, ?)",
                   {sb.spec().name(), sb.SerializeAsString()});
}

absl::Status SandboxStore::Delete(const std::string& name) {
  return db_->Exec("DELETE FROM sandboxes WHERE name = ?", {name});
}

absl::StatusOr<std::vector<airlock::vmm::v1::Sandbox>> SandboxStore::LoadAll() {
  auto rows = db_->Query("SELECT name, proto FROM sandboxes ORDER BY name");
  if (!rows.ok()) return rows.status();
  std::vector<airlock::vmm::v1::Sandbox> out;
  for (const auto& r : *rows) {
    airlock::vmm::v1::Sandbox sb;
    if (!sb.ParseFromString(r[1])) {
      return absl::DataLossError(absl::StrCat("stored sandbox ", r[0], " cannot be parsed"));
    }
    out.push_back(std::move(sb));
  }
  return out;
}

absl::StatusOr<std::string> SandboxStore::Setting(const std::string& key) {
  auto rows = db_->Query("SELECT value FROM settings WHERE key = ?", {key});
  if (!rows.ok()) return rows.status();
  return rows->empty() ? "" : (*rows)[0][0];
}

absl::Status SandboxStore::SetSetting(const std::string& key, const std::string& value) {
  return db_->Exec("INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)", {key, value});
}

}  // namespace airlock::vmmd
