// The vmm <-> agent translation loses nothing but `sandbox`: every field
// of every message is set (each oneof member in turn), translated, and the
// result must be byte-for-byte the vmm message's encoding without its
// sandbox. The two sides' declarations must also match field for field,
// so a field added to one proto and not the other fails here first.
#include "vmmd/agent_messages.h"

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "gtest/gtest.h"

namespace airlock::vmmd {
namespace {

namespace agentpb = airlock::agent::v1;
namespace vmm = airlock::vmm::v1;
using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// kAgentOnly are the agent's fields that vmmd's API does not have, each a
// deliberate addition: vmmd's own kit file writes use them, the user's
// file calls never set them (the agent's defaults are vmm's behaviour).
const std::set<std::string> kAgentOnly = {
    "airlock.agent.v1.WriteFileRequest.owner",
    "airlock.agent.v1.WriteFileRequest.placement",
    "airlock.agent.v1.WriteFileResponse.kept_existing",
    "airlock.agent.v1.MakeDirRequest.owner",
};

// Fill sets every field of `m` to a value other than its default. Of each
// oneof only the member named `only` is set (none when it is empty).
void Fill(Message* m, const std::string& only = "") {
  const Descriptor* d = m->GetDescriptor();
  const Reflection* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->real_containing_oneof() != nullptr && f->name() != only) continue;
    const int n = f->number();
    if (f->is_repeated()) {
      for (int k = 0; k < 2; ++k) {
        switch (f->cpp_type()) {
          case FieldDescriptor::CPPTYPE_STRING:
            r->AddString(m, f, f->name() + std::to_string(k));
            break;
          case FieldDescriptor::CPPTYPE_MESSAGE:
            Fill(r->AddMessage(m, f));
            break;
          default:
            FAIL() << "repeated " << f->full_name() << " has no filler";
        }
      }
      continue;
    }
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING:
        r->SetString(m, f, f->name() + "-value");
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        r->SetBool(m, f, true);
        break;
      case FieldDescriptor::CPPTYPE_INT32:
        r->SetInt32(m, f, -100 - n);
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        r->SetUInt32(m, f, 100 + n);
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        r->SetInt64(m, f, -(int64_t{1} << 40) - n);
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        r->SetUInt64(m, f, (uint64_t{1} << 40) + n);
        break;
      case FieldDescriptor::CPPTYPE_MESSAGE:
        Fill(r->MutableMessage(m, f));
        break;
      case FieldDescriptor::CPPTYPE_ENUM:
        r->SetEnumValue(m, f, f->enum_type()->value(f->enum_type()->value_count() - 1)->number());
        break;
      default:
        FAIL() << f->full_name() << " has no filler";
    }
  }
}

// ClearSandbox clears every `sandbox` field of `m` and of the messages in it.
void ClearSandbox(Message* m) {
  const Reflection* r = m->GetReflection();
  std::vector<const FieldDescriptor*> set;
  r->ListFields(*m, &set);
  for (const FieldDescriptor* f : set) {
    if (f->name() == "sandbox") {
      r->ClearField(m, f);
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && f->is_repeated()) {
      for (int i = 0; i < r->FieldSize(*m, f); ++i)
        ClearSandbox(r->MutableRepeatedMessage(m, f, i));
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      ClearSandbox(r->MutableMessage(m, f));
    }
  }
}

// Encoded is `m` on the wire without its sandbox fields.
std::string Encoded(const Message& m) {
  std::unique_ptr<Message> copy(m.New());
  copy->CopyFrom(m);
  ClearSandbox(copy.get());
  return copy->SerializeAsString();
}

// Variants are one filled message per oneof member, or one when there is
// no oneof.
template <typename M>
std::vector<M> Variants() {
  std::vector<M> out;
  const Descriptor* d = M::descriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    if (d->field(i)->real_containing_oneof() == nullptr) continue;
    M m;
    Fill(&m, d->field(i)->name());
    out.push_back(m);
  }
  if (out.empty()) {
    M m;
    Fill(&m);
    out.push_back(m);
  }
  return out;
}

template <typename Vmm>
void ExpectToAgentKeepsAllButSandbox() {
  for (const Vmm& in : Variants<Vmm>()) {
    auto out = ToAgent(in);
    EXPECT_EQ(out.SerializeAsString(), Encoded(in)) << in.ShortDebugString();
  }
}

template <typename Agent>
void ExpectFromAgentKeepsAll() {
  for (Agent in : Variants<Agent>()) {
    auto out = FromAgent(in);
    const Descriptor* d = Agent::descriptor();
    for (int i = 0; i < d->field_count(); ++i) {
      if (kAgentOnly.count(d->field(i)->full_name()))
        in.GetReflection()->ClearField(&in, d->field(i));
    }
    EXPECT_EQ(out.SerializeAsString(), in.SerializeAsString()) << in.ShortDebugString();
  }
}

TEST(AgentMessagesTest, RequestsKeepEveryFieldButSandbox) {
  ExpectToAgentKeepsAllButSandbox<vmm::ExecStart>();
  ExpectToAgentKeepsAllButSandbox<vmm::ExecRequest>();
  ExpectToAgentKeepsAllButSandbox<vmm::ReadFileRequest>();
  ExpectToAgentKeepsAllButSandbox<vmm::WriteFileRequest>();
  ExpectToAgentKeepsAllButSandbox<vmm::StatRequest>();
  ExpectToAgentKeepsAllButSandbox<vmm::ListDirRequest>();
  ExpectToAgentKeepsAllButSandbox<vmm::MakeDirRequest>();
  ExpectToAgentKeepsAllButSandbox<vmm::RemovePathRequest>();
}

TEST(AgentMessagesTest, RepliesKeepEveryField) {
  ExpectFromAgentKeepsAll<agentpb::ExecResponse>();
  ExpectFromAgentKeepsAll<agentpb::FileChunk>();
  ExpectFromAgentKeepsAll<agentpb::WriteFileResponse>();
  ExpectFromAgentKeepsAll<agentpb::FileInfo>();
  ExpectFromAgentKeepsAll<agentpb::ListDirResponse>();
}

TEST(AgentMessagesTest, AnUnsetOneofStaysUnset) {
  EXPECT_EQ(ToAgent(vmm::ExecRequest()).msg_case(), agentpb::ExecRequest::MSG_NOT_SET);
  EXPECT_EQ(FromAgent(agentpb::ExecResponse()).msg_case(), vmm::ExecResponse::MSG_NOT_SET);
}

// Every vmm field but `sandbox` has an agent field of the same number, name
// and type (and the agent reserves sandbox's number), recursively; the
// agent has no field but those and kAgentOnly.
void ExpectSameShape(const Descriptor* v, const Descriptor* a, std::set<std::string>* seen) {
  if (!seen->insert(v->full_name()).second) return;
  for (int i = 0; i < v->field_count(); ++i) {
    const FieldDescriptor* vf = v->field(i);
    if (vf->name() == "sandbox") {
      EXPECT_EQ(a->FindFieldByName("sandbox"), nullptr) << a->full_name();
      EXPECT_TRUE(a->IsReservedNumber(vf->number())) << a->full_name();
      EXPECT_TRUE(a->IsReservedName("sandbox")) << a->full_name();
      continue;
    }
    const FieldDescriptor* af = a->FindFieldByNumber(vf->number());
    ASSERT_NE(af, nullptr) << a->full_name() << " lacks " << vf->name();
    EXPECT_EQ(af->name(), vf->name()) << a->full_name();
    EXPECT_EQ(af->type(), vf->type()) << af->full_name();
    EXPECT_EQ(af->label(), vf->label()) << af->full_name();
    EXPECT_EQ(af->real_containing_oneof() == nullptr, vf->real_containing_oneof() == nullptr)
        << af->full_name();
    if (vf->type() == FieldDescriptor::TYPE_MESSAGE) {
      ExpectSameShape(vf->message_type(), af->message_type(), seen);
    }
  }
  for (int i = 0; i < a->field_count(); ++i) {
    const FieldDescriptor* af = a->field(i);
    if (v->FindFieldByNumber(af->number()) == nullptr) {
      EXPECT_TRUE(kAgentOnly.count(af->full_name())) << af->full_name() << " is not in vmm.proto";
    }
  }
}

TEST(AgentMessagesTest, TheTwoProtosDeclareTheSameFields) {
  std::set<std::string> seen;
  const std::vector<std::pair<const Descriptor*, const Descriptor*>> pairs = {
      {vmm::ExecRequest::descriptor(), agentpb::ExecRequest::descriptor()},
      {vmm::ExecResponse::descriptor(), agentpb::ExecResponse::descriptor()},
      {vmm::ReadFileRequest::descriptor(), agentpb::ReadFileRequest::descriptor()},
      {vmm::FileChunk::descriptor(), agentpb::FileChunk::descriptor()},
      {vmm::WriteFileRequest::descriptor(), agentpb::WriteFileRequest::descriptor()},
      {vmm::WriteFileResponse::descriptor(), agentpb::WriteFileResponse::descriptor()},
      {vmm::StatRequest::descriptor(), agentpb::StatRequest::descriptor()},
      {vmm::ListDirRequest::descriptor(), agentpb::ListDirRequest::descriptor()},
      {vmm::ListDirResponse::descriptor(), agentpb::ListDirResponse::descriptor()},
      {vmm::MakeDirRequest::descriptor(), agentpb::MakeDirRequest::descriptor()},
      {vmm::RemovePathRequest::descriptor(), agentpb::RemovePathRequest::descriptor()},
      {vmm::Empty::descriptor(), agentpb::Empty::descriptor()},
  };
  for (const auto& [v, a] : pairs) ExpectSameShape(v, a, &seen);
}

}  // namespace
}  // namespace airlock::vmmd
