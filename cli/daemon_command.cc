#include "cli/daemon_command.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>

#include "cli/daemons.h"
#include "cli/table.h"
#include "nlohmann/json.hpp"

namespace airlock::cli {
namespace {

void PrintStatus(const std::vector<DaemonStatus>& all, bool json) {
  if (json) {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& st : all) {
      arr.push_back({{"name", st.name}, {"state", st.state}, {"pid", st.pid},
                     {"version", st.version}, {"socket", st.socket}, {"log", st.log}});
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

}  // namespace

void AddDaemonCommand(CLI::App& app, int* exit_code) {
  CLI::App* daemon = app.add_subcommand("daemon", "Manage the Airlock daemons on this machine");
  daemon->require_subcommand(1);

  CLI::App* start = daemon->add_subcommand(
      "start", "Start the five daemons in the background (or find them running) and wait until healthy");
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
  logs->add_option("daemon", *which, "vmmd, proxyd, secretsd, gitd or policyd")
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
}

}  // namespace airlock::cli
