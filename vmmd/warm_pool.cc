#include "vmmd/warm_pool.h"

#include <algorithm>

namespace airlock::vmmd {

WarmPool::Plan WarmPool::Want(const std::string& key) {
  Plan plan;
  for (WarmVm& vm : vms_) {
    if (vm.key == key) continue;
    if (vm.state == WarmVm::kReady) {
      vm.state = WarmVm::kLeaving;
      plan.retire.push_back(vm);
    } else if (vm.state == WarmVm::kStarting) {
      vm.retired = true;
    }
  }
  size_t have = Count(key, false);
  if (have < size_) plan.start = size_ - have;
  return plan;
}

std::vector<WarmVm> WarmPool::Retire(const std::function<bool(const std::string& key)>& exists) {
  std::vector<WarmVm> out;
  for (WarmVm& vm : vms_) {
    if (vm.state == WarmVm::kLeaving || exists(vm.key)) continue;
    if (vm.state == WarmVm::kReady) {
      vm.state = WarmVm::kLeaving;
      out.push_back(vm);
    } else {
      vm.retired = true;
    }
  }
  return out;
}

void WarmPool::Reserve(WarmVm vm) {
  vm.pid = 0;
  vm.state = WarmVm::kStarting;
  vm.retired = false;
  vms_.push_back(std::move(vm));
}

void WarmPool::Launched(const std::string& slot, pid_t pid) {
  for (WarmVm& vm : vms_) {
    if (vm.slot == slot && vm.state == WarmVm::kStarting) vm.pid = pid;
  }
}

bool WarmPool::Ready(const std::string& slot, std::shared_ptr<AgentLink> link) {
  for (WarmVm& vm : vms_) {
    if (vm.slot == slot && vm.state == WarmVm::kStarting && !vm.retired && vm.pid != 0) {
      vm.state = WarmVm::kReady;
      vm.link = std::move(link);
      return true;
    }
  }
  return false;
}

void WarmPool::Drop(const std::string& slot) {
  vms_.erase(std::remove_if(vms_.begin(), vms_.end(),
                            [&](const WarmVm& vm) { return vm.slot == slot; }),
             vms_.end());
}

std::optional<WarmVm> WarmPool::Take(const std::string& key) {
  for (WarmVm& vm : vms_) {
    if (vm.key == key && vm.state == WarmVm::kReady) {
      vm.state = WarmVm::kLeaving;
      return vm;
    }
  }
  return std::nullopt;
}

std::vector<WarmVm> WarmPool::TakeAll() {
  std::vector<WarmVm> out;
  for (WarmVm& vm : vms_) {
    if (vm.state == WarmVm::kReady) {
      vm.state = WarmVm::kLeaving;
      out.push_back(vm);
    } else if (vm.state == WarmVm::kStarting) {
      vm.retired = true;
      if (vm.pid != 0) out.push_back(vm);
    }
  }
  return out;
}

std::vector<uint32_t> WarmPool::JailUids() const {
  std::vector<uint32_t> out;
  for (const WarmVm& vm : vms_) {
    if (vm.jail_uid != 0) out.push_back(vm.jail_uid);
  }
  return out;
}

size_t WarmPool::Count(const std::string& key, bool ready_only) const {
  return static_cast<size_t>(std::count_if(vms_.begin(), vms_.end(), [&](const WarmVm& vm) {
    if (vm.key != key) return false;
    if (ready_only) return vm.state == WarmVm::kReady;
    return vm.state == WarmVm::kReady || (vm.state == WarmVm::kStarting && !vm.retired);
  }));
}

bool IsWarmSlot(const std::string& name) {
  return name.rfind(kWarmSlotPrefix, 0) == 0;
}

}  // namespace airlock::vmmd
