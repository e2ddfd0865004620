// The REST API's JSON request bodies (apid/wire_json.h over
// protos/api/v1/wire.proto): the input is read as the body of every
// request apid parses. A body accepted prints (ToJson) to JSON that
// parses to an equal message and prints the same JSON again (up to the
// order of map entries, which protobuf does not fix); the message
// holds no unknown fields, and the printed body with one field the
// message does not have is refused. A refused body leaves the message
// empty.
#include <google/protobuf/util/field_comparator.h>
#include <google/protobuf/util/message_differencer.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "apid/wire_json.h"
#include "fuzz/fuzz_check.h"
#include "nlohmann/json.hpp"
#include "protos/api/v1/wire.pb.h"

namespace {

namespace wire = airlock::api::wire::v1;
using google::protobuf::Message;

// Bodies is one message of each type a handler passes to ParseBody.
std::vector<std::unique_ptr<Message>> Bodies() {
  std::vector<std::unique_ptr<Message>> out;
  out.push_back(std::make_unique<wire::TokenExchangeRequest>());
  out.push_back(std::make_unique<wire::CreateSandboxRequest>());
  out.push_back(std::make_unique<wire::UpdateSandboxRequest>());
  out.push_back(std::make_unique<wire::EmptyRequest>());
  out.push_back(std::make_unique<wire::RenewSandboxTimeoutRequest>());
  out.push_back(std::make_unique<wire::CreateEndpointCredentialRequest>());
  out.push_back(std::make_unique<wire::CreatePortRequest>());
  out.push_back(std::make_unique<wire::ExecRequest>());
  out.push_back(std::make_unique<wire::FilesMkdirRequest>());
  out.push_back(std::make_unique<wire::FilesMoveRequest>());
  out.push_back(std::make_unique<wire::FileHeader>());
  out.push_back(std::make_unique<wire::CreateProcessRequest>());
  out.push_back(std::make_unique<wire::SignalRequest>());
  out.push_back(std::make_unique<wire::InteractRequest>());
  out.push_back(std::make_unique<wire::CreateSecretRequest>());
  out.push_back(std::make_unique<wire::UpdateSecretBody>());
  return out;
}

bool Equal(const Message& a, const Message& b) {
  google::protobuf::util::DefaultFieldComparator comparator;
  comparator.set_treat_nan_as_equal(true);
  google::protobuf::util::MessageDifferencer differ;
  differ.set_field_comparator(&comparator);
  return differ.Compare(a, b);
}

void Check(const std::string& body, Message* msg, Message* again) {
  for (bool empty_ok : {false, true}) {
    if (airlock::apid::ParseBody(body, msg, empty_ok)) {
      FUZZ_CHECK(msg->ByteSizeLong() == 0);
      continue;
    }
    FUZZ_CHECK(msg->GetReflection()->GetUnknownFields(*msg).empty());
    std::string json = airlock::apid::ToJson(*msg);
    FUZZ_CHECK(!airlock::apid::ParseBody(json, again));
    FUZZ_CHECK(Equal(*msg, *again));
    FUZZ_CHECK(nlohmann::json::parse(airlock::apid::ToJson(*again)) == nlohmann::json::parse(json));

    FUZZ_CHECK(json.size() >= 2 && json.front() == '{');
    std::string unknown = json == "{}" ? std::string("{\"fuzzUnknownField\":1}")
                                       : "{\"fuzzUnknownField\":1," + json.substr(1);
    FUZZ_CHECK(airlock::apid::ParseBody(unknown, again).has_value());
    FUZZ_CHECK(again->ByteSizeLong() == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto* bodies = new std::vector<std::unique_ptr<Message>>(Bodies());
  static const auto* copies = new std::vector<std::unique_ptr<Message>>(Bodies());
  std::string body(reinterpret_cast<const char*>(data), size);
  for (size_t i = 0; i < bodies->size(); ++i) Check(body, (*bodies)[i].get(), (*copies)[i].get());
  return 0;
}
