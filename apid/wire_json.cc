#include "apid/wire_json.h"

#include <google/protobuf/util/json_util.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace airlock::apid {

std::optional<ApiError> ParseBody(const std::string& body, google::protobuf::Message* msg,
                                  bool empty_ok) {
  msg->Clear();
  absl::string_view trimmed = absl::StripAsciiWhitespace(body);
  if (trimmed.empty()) {
    if (empty_ok) return std::nullopt;
    return ApiError::InvalidArgument("the request needs a JSON body");
  }
  if (trimmed.front() != '{') {
    return ApiError::InvalidArgument("the request body must be a JSON object");
  }
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(std::string(trimmed), msg, options);
  if (!status.ok()) {
    msg->Clear();
    return ApiError::InvalidArgument(
        absl::StrCat("bad JSON body: ", std::string(status.message())));
  }
  return std::nullopt;
}

std::string ToJson(const google::protobuf::Message& msg) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = false;
  (void)google::protobuf::util::MessageToJsonString(msg, &out, options);
  return out;
}

HttpResponse JsonResponse(int status, const google::protobuf::Message& msg) {
  HttpResponse r;
  r.status = status;
  r.body = ToJson(msg);
  return r;
}

}  // namespace airlock::apid
