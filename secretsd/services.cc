// The built-in service table. Adding a service is adding a row here (and a
// preset allow rule in policyd if the host should be reachable by default).
#include "secretsd/services.h"

namespace airlock::secretsd {

const std::vector<ServiceDef>& BuiltinServices() {
  static const std::vector<ServiceDef>* table = new std::vector<ServiceDef>{
      {"anthropic",
       {"ANTHROPIC_API_KEY"},
       {{"api.anthropic.com", "header:x-api-key"}},
       "header:x-api-key"},
      {"openai", {"OPENAI_API_KEY"}, {{"api.openai.com", kFormatBearer}}, kFormatBearer},
      // The REST API takes a bearer token; git over HTTPS on github.com
      // takes the token as the password of user x-access-token.
      {"github",
       {"GH_TOKEN", "GITHUB_TOKEN"},
       {{"api.github.com", kFormatBearer}, {"github.com", "basic:x-access-token"}},
       "github"},
      {"google",
       {"GEMINI_API_KEY", "GOOGLE_API_KEY"},
       {{"generativelanguage.googleapis.com", "header:x-goog-api-key"}},
       "header:x-goog-api-key"},
      {"groq", {"GROQ_API_KEY"}, {{"api.groq.com", kFormatBearer}}, kFormatBearer},
      {"mistral", {"MISTRAL_API_KEY"}, {{"api.mistral.ai", kFormatBearer}}, kFormatBearer},
      {"xai", {"XAI_API_KEY"}, {{"api.x.ai", kFormatBearer}}, kFormatBearer},
      {"openrouter", {"OPENROUTER_API_KEY"}, {{"openrouter.ai", kFormatBearer}}, kFormatBearer},
  };
  return *table;
}

std::vector<std::string> ServiceDef::HostNames() const {
  std::vector<std::string> out;
  for (const auto& h : hosts) out.push_back(h.host);
  return out;
}

const ServiceDef* FindService(const std::string& name) {
  for (const auto& s : BuiltinServices()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const ServiceDef* ServiceOwningEnv(const std::string& env) {
  for (const auto& s : BuiltinServices()) {
    for (const auto& e : s.env) {
      if (e == env) return &s;
    }
  }
  return nullptr;
}

}  // namespace airlock::secretsd
