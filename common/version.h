// The Airlock release every binary reports.
#ifndef AIRLOCK_COMMON_VERSION_H_
#define AIRLOCK_COMMON_VERSION_H_

namespace airlock {

// kVersion is the release of this build, shown by `--version` and GetInfo.
inline constexpr char kVersion[] = "0.1.0";

}  // namespace airlock

#endif  // AIRLOCK_COMMON_VERSION_H_
