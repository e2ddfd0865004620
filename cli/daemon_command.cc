#include "cli/daemon_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>

#include "cli/daemons.h"
#include "cli/table.h"
#include "nlohmann/json.hpp"
#include "protos/policy/v1/policy.grpc.pb.h"
#include "protos/proxy/v1/proxy.grpc.pb.h"

namespace airlock::cli {
namespace {

void PrintStatus(const std::vector<DaemonStatus>& all, bool json) {
  if (json) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& st : all) {
      arr.push_back({{"name", st.name}, {"state", st.state}, {"pid", st.pid},
                     {"version", st.version}, {"socket", st.socket}, {"log", st.log},
                     {"remote", st.remote}});
    }
    std::cout << arr.dump(2) << "\n";
    return;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& st : all) {
    rows.push_back({st.name, st.state, st.pid ? std::to_string(st.pid) : "-",
                    st.version.empty() ? "-" : st.version, st.socket});
  }
  PrintTable(std::cout, {"DAEMON", "STATE", "PID", "VERSION", "SOCKET"}, rows);
}

// Tail prints the last `lines` lines of `path`, then with `follow` keeps
// printing what is appended until interrupted.
void Tail(const std::string& path, int lines, bool follow, bool prefix, const std::string& name) {
  std::ifstream f(path);
  if (!f) {
    std::cerr << "no log yet at " << path << "\n";
    return;
  }
  std::vector<std::string> last;
  std::string line;
  while (std::getline(f, line)) {
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) last.erase(last.begin());
  }
  for (const auto& l : last) std::cout << (prefix ? name + " | " : "") << l << "\n";
  if (!follow) return;
  f.clear();
  while (true) {
    while (std::getline(f, line)) std::cout << (prefix ? name + " | " : "") << line << std::endl;
    f.clear();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// AllowedHosts are the exact host names the global allow rules name.
std::vector<std::string> AllowedHosts(int* exit_code) {
  std::vector<std::string> out;
  auto channel = ChannelTo("policyd", exit_code);
  if (!channel) return out;
  auto stub = airlock::policy::v1::Policy::NewStub(channel);
  grpc::ClientContext ctx;
  airlock::policy::v1::ListRulesResponse resp;
  grpc::Status s = stub->ListRules(&ctx, {}, &resp);
  if (!s.ok()) {
    std::cerr << "airlock: policyd: " << s.error_message() << "\n";
    *exit_code = 1;
    return out;
  }
  for (const auto& r : resp.rules()) {
    const std::string& res = r.resource();
    if (r.action() != airlock::policy::v1::ALLOW || !r.sandbox().empty()) continue;
    if (res.find('*') != std::string::npos || res.find('/') != std::string::npos ||
        res.find(':') != std::string::npos || res.find('.') == std::string::npos ||
        res.find_first_not_of("0123456789.") == std::string::npos) {
      continue;
    }
    if (std::find(out.begin(), out.end(), res) == out.end()) out.push_back(res);
  }
  return out;
}

int Doctor(std::vector<std::string> hosts, uint32_t port, bool json) {
  int code = 0;
  if (hosts.empty()) hosts = AllowedHosts(&code);
  if (code != 0) return code;
  auto channel = ChannelTo("proxyd", &code);
  if (!channel) return code;
  auto stub = airlock::proxy::v1::Proxy::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
  airlock::proxy::v1::DiagnoseRequest req;
  for (const auto& h : hosts) req.add_hosts(h);
  req.set_port(port);
  airlock::proxy::v1::DiagnoseResponse resp;
  grpc::Status s = stub->Diagnose(&ctx, req, &resp);
  if (!s.ok()) {
    std::cerr << "airlock: proxyd: " << s.error_message() << "\n";
    return 1;
  }
  bool all = true;
  for (const auto& h : resp.hosts()) all = all && h.reachable();
  auto list = [](const google::protobuf::RepeatedPtrField<std::string>& v) {
    return std::vector<std::string>(v.begin(), v.end());
  };
  if (json) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& h : resp.hosts()) {
      arr.push_back({{"host", h.host()},
                     {"address", h.address()},
                     {"protected_address", h.protected_address()},
                     {"trusted_range", h.trusted_range()},
                     {"tls_terminated", h.tls_terminated()},
                     {"reachable", h.reachable()},
                     {"detail", h.detail()}});
    }
    nlohmann::ordered_json j = {{"resolvers", list(resp.resolvers())},
                                {"upstream_proxy", resp.upstream_proxy()},
                                {"trust_store", resp.trust_store()},
                                {"trusted_ranges", list(resp.trusted_ranges())},
                                {"terminate_tls", list(resp.terminate_tls())},
                                {"hosts", arr}};
    std::cout << j.dump(2) << "\n";
    return all ? 0 : 1;
  }
  auto joined = [&](const google::protobuf::RepeatedPtrField<std::string>& v) {
    std::string out;
    for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
    return out.empty() ? std::string("none") : out;
  };
  std::cout << "resolver:        " << joined(resp.resolvers()) << " (/etc/resolv.conf)\n"
            << "upstream proxy:  " << resp.upstream_proxy() << "\n"
            << "upstream TLS:    verified against " << resp.trust_store() << "\n"
            << "trusted ranges:  " << joined(resp.trusted_ranges()) << "\n"
            << "terminate TLS:   " << joined(resp.terminate_tls()) << "\n\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& h : resp.hosts()) {
    rows.push_back({h.host(), h.address().empty() ? "-" : h.address(),
                    h.reachable() ? "yes" : "NO", h.detail()});
  }
  PrintTable(std::cout, {"HOST", "ADDRESS", "REACHABLE", "DETAIL"}, rows);
  return all ? 0 : 1;
}

}  // namespace

void AddDaemonCommand(CLI::App& app, int* exit_code) {
  CLI::App* daemon = app.add_subcommand("daemon", "Manage the Airlock daemons on this machine");
  daemon->require_subcommand(1);

  CLI::App* start = daemon->add_subcommand(
      "start", "Start the six daemons in the background (or find them running) and wait until healthy");
  auto* start_json = start->add_flag("--json", "Print the status as JSON");
  start->callback([=] {
    Daemons d;
    absl::Status s = d.Start(isatty(STDERR_FILENO));
    if (!s.ok()) {
      std::cerr << "airlock: " << s.message() << "\n";
      *exit_code = 1;
      return;
    }
    PrintStatus(d.Status(), start_json->count() > 0);
  });

  CLI::App* stop = daemon->add_subcommand("stop", "Stop every running daemon cleanly");
  auto* grace = new int(30);
  stop->add_option("-t,--time", *grace, "Seconds to wait before killing a daemon")
      ->capture_default_str();
  stop->callback([=] {
    Daemons d;
    absl::Status s = d.Stop(*grace, isatty(STDERR_FILENO));
    if (!s.ok()) {
      std::cerr << "airlock: " << s.message() << "\n";
      *exit_code = 1;
    }
  });

  CLI::App* status = daemon->add_subcommand("status", "Show each daemon's state, pid, version and socket");
  auto* status_json = status->add_flag("--json", "Print JSON");
  status->callback([=] {
    Daemons d;
    auto all = d.Status();
    PrintStatus(all, status_json->count() > 0);
    for (const auto& st : all) {
      if (st.state != "running") *exit_code = 1;
    }
  });

  CLI::App* logs = daemon->add_subcommand("logs", "Show daemon logs (all daemons, or one)");
  auto* which = new std::string();
  auto* lines = new int(50);
  logs->add_option("daemon", *which, "vmmd, proxyd, secretsd, gitd, policyd or apid")
      ->check(CLI::IsMember(DaemonNames()));
  logs->add_option("-n,--tail", *lines, "Lines to show from the end")->capture_default_str();
  auto* follow = logs->add_flag("-f,--follow", "Keep printing new lines");
  logs->callback([=] {
    Daemons d;
    if (which->empty() && follow->count()) {
      std::cerr << "airlock: --follow needs one daemon name\n";
      *exit_code = 2;
      return;
    }
    if (!which->empty()) {
      Tail(d.LogOf(*which), *lines, follow->count() > 0, false, *which);
      return;
    }
    for (const auto& name : DaemonNames()) Tail(d.LogOf(name), *lines, false, true, name);
  });

  CLI::App* doctor = daemon->add_subcommand(
      "doctor", "Check how proxyd meets this host's network: resolver, upstream proxy, trust "
                "store, and whether sandboxes can reach each host the global rules allow");
  doctor->alias("diagnose");
  auto* doctor_hosts = new std::vector<std::string>();
  doctor->add_option("--host", *doctor_hosts, "Check this host instead (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  auto* doctor_port = new uint32_t(443);
  doctor->add_option("--port", *doctor_port, "TLS port to try")->capture_default_str();
  auto* doctor_json = doctor->add_flag("--json", "Print JSON");
  doctor->callback(
      [=] { *exit_code = Doctor(*doctor_hosts, *doctor_port, doctor_json->count() > 0); });
}

}  // namespace airlock::cli
