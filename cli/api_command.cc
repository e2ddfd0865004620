#include "cli/api_command.h"

#include <unistd.h>

#include <iostream>
#include <memory>

#include "cli/daemons.h"
#include "cli/table.h"
#include "common/client.h"
#include "nlohmann/json.hpp"
#include "protos/api/v1/api.grpc.pb.h"

namespace airlock::cli {

namespace pb = airlock::api::v1;

namespace {

std::unique_ptr<pb::Api::Stub> ConnectApi(int* exit_code) {
  auto channel = ChannelTo("apid", exit_code);
  return channel ? pb::Api::NewStub(channel) : nullptr;
}

bool Failed(const grpc::Status& s, int* exit_code) {
  if (s.ok()) return false;
  std::cerr << "airlock: " << s.error_message() << "\n";
  *exit_code = s.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? 2 : 1;
  return true;
}

}  // namespace

void AddApiCommand(CLI::App& app, int* exit_code) {
  CLI::App* api = app.add_subcommand(
      "api", "The Cloud Sandboxes-compatible REST API (apid): its URLs and API tokens");
  api->require_subcommand(1);

  // --- url ---
  CLI::App* url = api->add_subcommand(
      "url", "Print the management base URL clients use (like https://connect.docker.com/sandboxes)");
  auto* token_exchange = url->add_flag("--token-exchange",
                                       "Print the token-exchange URL instead");
  auto* url_json = url->add_flag("--json", "Print both URLs as JSON");
  url->callback([=] {
    auto stub = ConnectApi(exit_code);
    if (!stub) return;
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, std::chrono::seconds(10));
    pb::GetUrlsResponse resp;
    if (Failed(stub->GetUrls(&ctx, pb::GetUrlsRequest(), &resp), exit_code)) return;
    if (url_json->count()) {
      std::cout << nlohmann::json{{"management", resp.management()},
                                  {"token_exchange", resp.token_exchange()}}
                       .dump(2)
                << "\n";
      return;
    }
    std::cout << (token_exchange->count() ? resp.token_exchange() : resp.management()) << "\n";
  });

  // --- token ---
  CLI::App* token = api->add_subcommand("token", "API tokens: create, ls, rm");
  token->require_subcommand(1);

  auto* create_name = new std::string();
  CLI::App* create = token->add_subcommand(
      "create", "Make an API token; its secret is printed once and stored only hashed");
  create->add_option("name", *create_name, "Token name: the identifier of a token exchange")
      ->required();
  auto* create_json = create->add_flag("--json", "Print JSON");
  create->callback([=] {
    auto stub = ConnectApi(exit_code);
    if (!stub) return;
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, std::chrono::seconds(10));
    pb::CreateTokenRequest req;
    req.set_name(*create_name);
    pb::CreateTokenResponse resp;
    if (Failed(stub->CreateToken(&ctx, req, &resp), exit_code)) return;
    if (create_json->count()) {
      std::cout << nlohmann::json{{"name", resp.token().name()}, {"secret", resp.secret()},
                                  {"created_at", resp.token().created_at()}}
                       .dump(2)
                << "\n";
      return;
    }
    std::cout << resp.secret() << "\n";
    if (isatty(STDERR_FILENO)) {
      std::cerr << "This is the only time the secret is shown. Exchange it with\n"
                   "  POST <airlock api url --token-exchange> {\"identifier\": \""
                << resp.token().name() << "\", \"secret\": \"<secret>\"}\n";
    }
  });

  CLI::App* ls = token->add_subcommand("ls", "List API tokens (never their secrets)");
  auto* ls_json = ls->add_flag("--json", "Print JSON");
  auto* ls_quiet = ls->add_flag("-q,--quiet", "Print names only");
  ls->callback([=] {
    auto stub = ConnectApi(exit_code);
    if (!stub) return;
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, std::chrono::seconds(10));
    pb::ListTokensResponse resp;
    if (Failed(stub->ListTokens(&ctx, pb::ListTokensRequest(), &resp), exit_code)) return;
    if (ls_json->count()) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& t : resp.tokens()) {
        out.push_back({{"name", t.name()}, {"created_at", t.created_at()},
                       {"last_used_at", t.last_used_at()}});
      }
      std::cout << out.dump(2) << "\n";
      return;
    }
    if (ls_quiet->count()) {
      for (const auto& t : resp.tokens()) std::cout << t.name() << "\n";
      return;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& t : resp.tokens()) {
      rows.push_back({t.name(), Age(t.created_at()),
                      t.last_used_at() ? Age(t.last_used_at()) : "never"});
    }
    PrintTable(std::cout, {"NAME", "CREATED", "LAST USED"}, rows);
  });

  auto* rm_names = new std::vector<std::string>();
  CLI::App* rm = token->add_subcommand(
      "rm", "Revoke API tokens; access tokens and endpoint credentials made from them stop at once");
  rm->add_option("names", *rm_names, "Token names")->required();
  rm->callback([=] {
    auto stub = ConnectApi(exit_code);
    if (!stub) return;
    for (const auto& name : *rm_names) {
      grpc::ClientContext ctx;
      DeadlineAfter(ctx, std::chrono::seconds(10));
      pb::RemoveTokenRequest req;
      req.set_name(name);
      pb::RemoveTokenResponse resp;
      if (Failed(stub->RemoveToken(&ctx, req, &resp), exit_code)) continue;
      std::cout << name << "\n";
    }
  });
}

}  // namespace airlock::cli
