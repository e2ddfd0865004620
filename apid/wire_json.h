// JSON bodies of the REST API through protobuf's JSON mapping (see
// protos/api/v1/wire.proto): parsing refuses unknown fields and wrong
// types with invalidArgument; printing uses lowerCamel names.
#ifndef AIRLOCK_APID_WIRE_JSON_H_
#define AIRLOCK_APID_WIRE_JSON_H_

#include <optional>
#include <string>

#include <google/protobuf/message.h>

#include "apid/api_error.h"
#include "apid/http_types.h"

namespace airlock::apid {

// ParseBody reads `body` into `msg`. An empty body reads as {} only when
// `empty_ok`; anything but a JSON object, an unknown field or a wrong type
// is an invalidArgument naming the problem.
std::optional<ApiError> ParseBody(const std::string& body, google::protobuf::Message* msg,
                                  bool empty_ok = false);

// ToJson prints `msg` as compact JSON.
std::string ToJson(const google::protobuf::Message& msg);

// JsonResponse is `msg` as a response with `status`.
HttpResponse JsonResponse(int status, const google::protobuf::Message& msg);

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_WIRE_JSON_H_
