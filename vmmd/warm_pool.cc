#include "vmmd/warm_pool.h"

#include <algorithm>

namespace airlock::vmmd {

WarmPool::Plan WarmPool::Want(const std::string& key) {
  Plan plan;
  std::vector<WarmVm> kept;
  for (WarmVm& vm : vms_) {
    if (vm.key != key && vm.pid != 0) {
      plan.retire.push_back(std::move(vm));
      continue;
    }
    if (vm.key != key) vm.retired = true;
    kept.push_back(std::move(vm));
  }
  vms_ = std::move(kept);
  size_t have = Count(key, false);
  if (have < size_) plan.start = size_ - have;
  return plan;
}

void WarmPool::Reserve(WarmVm vm) {
  vm.pid = 0;
  vms_.push_back(std::move(vm));
}

bool WarmPool::Ready(const std::string& slot, pid_t pid, std::shared_ptr<AgentLink> link) {
  for (WarmVm& vm : vms_) {
    if (vm.slot == slot && vm.pid == 0 && !vm.retired) {
      vm.pid = pid;
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
  for (auto it = vms_.begin(); it != vms_.end(); ++it) {
    if (it->key == key && it->pid != 0 && !it->retired) {
      WarmVm vm = std::move(*it);
      vms_.erase(it);
      return vm;
    }
  }
  return std::nullopt;
}

std::vector<WarmVm> WarmPool::TakeAll() {
  std::vector<WarmVm> ready, starting;
  for (WarmVm& vm : vms_) {
    if (vm.pid != 0) {
      ready.push_back(std::move(vm));
    } else {
      vm.retired = true;
      starting.push_back(std::move(vm));
    }
  }
  vms_ = std::move(starting);
  return ready;
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
    return vm.key == key && !vm.retired && (!ready_only || vm.pid != 0);
  }));
}

bool IsWarmSlot(const std::string& name) {
  return name.rfind(kWarmSlotPrefix, 0) == 0;
}

}  // namespace airlock::vmmd
