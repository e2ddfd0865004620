// The translation between vmmd's user-facing exec and file messages
// (airlock.vmm.v1) and the guest agent's own (airlock.agent.v1). It is the
// only place that knows both: each function copies the fields one by one,
// so a field added to one side and not the other is a visible choice here
// (and agent_messages_test fails until it is made).
#ifndef AIRLOCK_VMMD_AGENT_MESSAGES_H_
#define AIRLOCK_VMMD_AGENT_MESSAGES_H_

#include "protos/agent/v1/agent.pb.h"
#include "protos/vmm/v1/vmm.pb.h"

namespace airlock::vmmd {

// ToAgent drops the request's `sandbox` (vmmd has used it to find the
// agent) and keeps everything else.
airlock::agent::v1::ExecStart ToAgent(const airlock::vmm::v1::ExecStart& in);
airlock::agent::v1::ExecRequest ToAgent(const airlock::vmm::v1::ExecRequest& in);
airlock::agent::v1::ReadFileRequest ToAgent(const airlock::vmm::v1::ReadFileRequest& in);
airlock::agent::v1::WriteFileRequest ToAgent(const airlock::vmm::v1::WriteFileRequest& in);
airlock::agent::v1::StatRequest ToAgent(const airlock::vmm::v1::StatRequest& in);
airlock::agent::v1::ListDirRequest ToAgent(const airlock::vmm::v1::ListDirRequest& in);
airlock::agent::v1::MakeDirRequest ToAgent(const airlock::vmm::v1::MakeDirRequest& in);
airlock::agent::v1::RemovePathRequest ToAgent(const airlock::vmm::v1::RemovePathRequest& in);

// FromAgent returns the agent's answer as vmmd's API states it.
airlock::vmm::v1::ExecResponse FromAgent(const airlock::agent::v1::ExecResponse& in);
airlock::vmm::v1::FileChunk FromAgent(const airlock::agent::v1::FileChunk& in);
airlock::vmm::v1::WriteFileResponse FromAgent(const airlock::agent::v1::WriteFileResponse& in);
airlock::vmm::v1::FileInfo FromAgent(const airlock::agent::v1::FileInfo& in);
airlock::vmm::v1::ListDirResponse FromAgent(const airlock::agent::v1::ListDirResponse& in);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_AGENT_MESSAGES_H_
