#include "vmmd/qmp.h"

#include <poll.h>

#include <thread>

#include "common/agent_link.h"

namespace airlock::vmmd {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

absl::StatusOr<QmpClient> QmpClient::Connect(const std::string& socket_path,
                                             milliseconds timeout) {
  auto deadline = steady_clock::now() + timeout;
  std::string last;
  while (true) {
    auto connected = ConnectJailSocket(socket_path);
    if (connected.status().code() == absl::StatusCode::kFailedPrecondition) {
      return absl::UnavailableError(absl::StrCat("cannot reach QEMU's QMP socket ", socket_path,
                                                 ": ", connected.status().message()));
    }
    if (!connected.ok() && connected.status().code() != absl::StatusCode::kUnavailable) {
      return connected.status();
    }
    if (connected.ok()) {
      int fd = *connected;
      QmpClient client(fd);
      auto greeting = client.ReadMessage(deadline);
      if (!greeting.ok()) return greeting.status();
      if (!greeting->contains("QMP")) {
        return absl::UnavailableError(
            absl::StrCat(socket_path, " did not greet as QMP: ", greeting->dump()));
      }
      auto caps = client.Execute("qmp_capabilities", nullptr,
                                 std::chrono::duration_cast<milliseconds>(
                                     deadline - steady_clock::now()));
      if (!caps.ok()) return caps.status();
      return client;
    }
    last = std::string(connected.status().message());
    if (steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return absl::UnavailableError(
      absl::StrCat("cannot reach QEMU's QMP socket ", socket_path, ": ", last));
}

absl::StatusOr<nlohmann::json> QmpClient::ReadMessage(steady_clock::time_point deadline) {
  while (true) {
    size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      nlohmann::json message = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (message.is_discarded() || !message.is_object()) {
        return absl::UnavailableError(absl::StrCat("QEMU sent a line that is not a JSON object: ",
                                                   line.substr(0, 200)));
      }
      return message;
    }
    if (buffer_.size() > (1 << 20)) {
      return absl::UnavailableError("QEMU sent a QMP message over 1 MiB");
    }
    auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
    if (left.count() <= 0) return absl::UnavailableError("QEMU did not answer on QMP in time");
    pollfd p{fd_->get(), POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char chunk[4096];
    ssize_t n = read(fd_->get(), chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::UnavailableError("QEMU closed its QMP socket");
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

absl::StatusOr<nlohmann::json> QmpClient::Execute(const std::string& command,
                                                  const nlohmann::json& arguments,
                                                  milliseconds timeout) {
  nlohmann::json request = {{"execute", command}};
  if (!arguments.is_null()) request["arguments"] = arguments;
  if (!WriteAll(fd_->get(), request.dump() + "\n")) {
    return absl::UnavailableError(absl::StrCat("QEMU closed its QMP socket before ", command));
  }
  auto deadline = steady_clock::now() + timeout;
  while (true) {
    auto message = ReadMessage(deadline);
    if (!message.ok()) {
      return absl::Status(message.status().code(),
                          absl::StrCat(command, ": ", message.status().message()));
    }
    if (message->contains("event")) continue;
    if (message->contains("return")) return (*message)["return"];
    if (message->contains("error")) {
      const nlohmann::json& e = (*message)["error"];
      std::string desc = e.contains("desc") && e["desc"].is_string()
                             ? e["desc"].get<std::string>()
                             : e.dump();
      return absl::FailedPreconditionError(absl::StrCat("QEMU refused ", command, ": ", desc));
    }
  }
}

}  // namespace airlock::vmmd
