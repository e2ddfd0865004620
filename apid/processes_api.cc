#include "apid/processes_api.h"

#include <atomic>
#include <condition_variable>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "apid/exec_start.h"
#include "apid/sandbox_view.h"
#include "apid/wire_json.h"
#include "protos/api/v1/wire.pb.h"

namespace airlock::apid {

namespace vmm = airlock::vmm::v1;
namespace wire = airlock::api::wire::v1;

namespace {

constexpr char kSubprotocol[] = "sandboxes.v1";
constexpr char kBearerPrefix[] = "sandboxes.bearer.v1.";
constexpr auto kHeartbeat = std::chrono::seconds(15);

HttpResponse Error(const ApiError& e) { return ErrorResponse(e); }
HttpResponse Error(const absl::Status& s) { return ErrorResponse(FromStatus(s)); }

wire::Process View(const Process& p, Process::Snapshot st, const char* receipt) {
  wire::Process out;
  out.set_uid(p.id());
  out.set_pid(static_cast<int32_t>(st.pid));
  out.set_session(p.session());
  out.set_state(st.exited ? "exited" : "running");
  out.set_last_stream_sequence(st.last_sequence);
  out.set_receipt_kind(receipt);
  if (st.exited) out.set_exit_code(st.exit_code);
  out.set_label(p.label());
  out.set_name(absl::StrCat("processes/", p.id()));
  return out;
}

wire::ProcessChunk ChunkView(const OutputChunk& c) {
  wire::ProcessChunk w;
  w.set_stream(c.stream);
  w.set_data(c.data);
  w.set_stream_sequence(c.sequence);
  return w;
}

wire::ProcessExited ExitedView(const Process::Snapshot& st) {
  wire::ProcessExited e;
  e.set_exit_code(st.exit_code);
  e.set_reason(st.reason);
  return e;
}

std::string ErrorFrame(const ApiError& e) { return ErrorResponse(e).body; }

// InteractSession serves one interact WebSocket: the first frame must be
// attach for the process in the path; output is pumped from a thread of
// its own, input applied as it arrives.
class InteractSession : public WebSocketSession {
 public:
  // `still_valid` says whether the credential the session was opened with
  // is still good (not expired, its API token not removed).
  InteractSession(std::shared_ptr<Process> process, std::function<bool()> still_valid)
      : process_(std::move(process)), still_valid_(std::move(still_valid)) {}
  ~InteractSession() override { StopPump(); }

  void OnOpen(WebSocket& ws) override { ws_ = &ws; }

  void OnMessage(WebSocket& ws, const std::string& data, bool binary) override {
    if (binary) return Refuse(1003, ApiError::InvalidArgument("frames must be text JSON"));
    wire::InteractRequest req;
    if (auto e = ParseBody(data, &req)) return Refuse(1007, *e);
    int set = req.has_attach() + req.has_stdin() + req.has_close_stdin() + req.has_resize();
    if (set != 1) {
      return Refuse(1007, ApiError::InvalidArgument(
                              "a frame carries exactly one of attach, stdin, closeStdin, resize"));
    }
    if (!attached_) {
      if (!req.has_attach()) {
        return Refuse(1008, ApiError::InvalidArgument("the first frame must be attach"));
      }
      if (req.attach().name() != absl::StrCat("processes/", process_->id())) {
        return Refuse(1008, ApiError::InvalidArgument(absl::StrCat(
                                "attach names ", req.attach().name(), ", not the path's processes/",
                                process_->id())));
      }
      int64_t from = req.attach().resume_from();
      auto first = process_->Output(from, 1);
      if (!first.ok()) return Refuse(1008, FromStatus(first.status()));
      attached_ = true;
      pump_ = std::thread([this, from] { Pump(from); });
      return;
    }
    absl::Status s;
    if (req.has_attach()) {
      s = absl::InvalidArgumentError("attach is sent once, first");
    } else if (req.has_stdin()) {
      s = process_->Stdin(req.stdin());
    } else if (req.has_close_stdin()) {
      if (req.close_stdin()) s = process_->CloseStdin();
    } else {
      s = process_->Resize(req.resize().rows(), req.resize().cols());
    }
    if (!s.ok() && s.code() != absl::StatusCode::kFailedPrecondition) {
      return Refuse(1008, FromStatus(s));
    }
    if (!s.ok() && req.has_resize()) return Refuse(1008, FromStatus(s));
  }

  void OnClosed() override { StopPump(); }

 private:
  void Refuse(int code, const ApiError& e) {
    // The error body goes in the last text frame (a close reason holds
    // only 123 bytes).
    ws_->Send(ErrorFrame(e));
    ws_->Close(code, e.code);
  }

  void Pump(int64_t cursor) {
    auto last_sent = std::chrono::steady_clock::now();
    auto last_check = last_sent;
    while (!stop_) {
      process_->WaitFor(cursor, std::chrono::milliseconds(250));
      if (stop_) return;
      // The session lasts as long as its credential.
      if (std::chrono::steady_clock::now() - last_check >= std::chrono::seconds(2)) {
        last_check = std::chrono::steady_clock::now();
        if (!still_valid_()) {
          ws_->Send(ErrorFrame(ApiError::Unauthenticated(
              "the endpoint credential expired or its API token was removed")));
          ws_->Close(1008, "unauthenticated");
          return;
        }
      }
      // A slow reader holds the output back, not apid's memory.
      if (ws_->Queued() > (1u << 20)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      auto chunks = process_->Output(cursor, 256 * 1024);
      if (!chunks.ok()) {
        ws_->Send(ErrorFrame(FromStatus(chunks.status())));
        ws_->Close(1008, "failedPrecondition");
        return;
      }
      for (const auto& c : *chunks) {
        wire::ProcessOutput out;
        *out.mutable_chunk() = ChunkView(c);
        ws_->Send(ToJson(out));
        cursor = c.sequence;
        last_sent = std::chrono::steady_clock::now();
      }
      Process::Snapshot st = process_->State();
      if (st.exited && cursor >= st.last_sequence) {
        wire::ProcessOutput out;
        *out.mutable_exited() = ExitedView(st);
        ws_->Send(ToJson(out));
        ws_->Close(1000, "exited");
        return;
      }
      if (chunks->empty() && std::chrono::steady_clock::now() - last_sent >= kHeartbeat) {
        wire::ProcessOutput out;
        out.mutable_heartbeat();
        ws_->Send(ToJson(out));
        last_sent = std::chrono::steady_clock::now();
      }
    }
  }

  void StopPump() {
    stop_ = true;
    if (pump_.joinable() && pump_.get_id() != std::this_thread::get_id()) pump_.join();
  }

  std::shared_ptr<Process> process_;
  std::function<bool()> still_valid_;
  WebSocket* ws_ = nullptr;
  bool attached_ = false;
  std::atomic<bool> stop_{false};
  std::thread pump_;
};

}  // namespace

void ProcessesApi::Register(Router* r) {
  auto guarded = [this](std::function<HttpResponse(const HttpRequest&, const PathParams&)> fn) {
    return [this, fn](const HttpRequest& req, const PathParams& p) {
      const std::string& uid = p.at("uid");
      if (auto e = auth_->Endpoint(req, uid, EndpointUri(base_url_, uid), "sandboxesExec")) {
        return Error(*e);
      }
      return fn(req, p);
    };
  };
  r->Add("POST", "/endpoints/{uid}/v1/processes", guarded([this](auto& req, auto& p) {
           return Create(req, p.at("uid"));
         }));
  r->Add("GET", "/endpoints/{uid}/v1/processes", guarded([this](auto& req, auto& p) {
           return List(req, p.at("uid"));
         }));
  r->Add("GET", "/endpoints/{uid}/v1/processes/{process}", guarded([this](auto&, auto& p) {
           return Get(p.at("uid"), p.at("process"));
         }));
  r->Add("GET", "/endpoints/{uid}/v1/processes/{process}/output",
         guarded([this](auto& req, auto& p) { return Output(req, p.at("uid"), p.at("process")); }));
  r->Add("POST", "/endpoints/{uid}/v1/processes/{process}/signal",
         guarded([this](auto& req, auto& p) { return Signal(req, p.at("uid"), p.at("process")); }));
  r->Add("GET", "/endpoints/{uid}/v1/processes/{process}/interact",
         [](const HttpRequest&, const PathParams&) {
           ApiError e = ApiError::InvalidArgument(
               "interact is a WebSocket: send an upgrade request with subprotocol sandboxes.v1");
           e.status = 426;
           HttpResponse r = ErrorResponse(e);
           r.headers["Upgrade"] = "websocket";
           return r;
         });
}

HttpResponse ProcessesApi::Create(const HttpRequest& req, const std::string& uid) {
  wire::CreateProcessRequest body;
  if (auto e = ParseBody(req.body, &body)) return Error(*e);
  vmm::ExecStart start;
  if (auto e = ExecStartFor(uid, body, &start)) return Error(*e);
  if (body.has_label() && body.label().empty()) {
    return Error(ApiError::InvalidArgument("label must not be empty when given"));
  }
  start.set_stdin(true);
  if (body.has_pty()) {
    start.set_tty(true);
    const auto& size = body.pty().initial_size();
    if (size.rows() < 0 || size.cols() < 0 || size.rows() > 65535 || size.cols() > 65535) {
      return Error(ApiError::InvalidArgument("pty.initialSize rows and cols must be 1 to 65535"));
    }
    start.mutable_size()->set_rows(static_cast<uint32_t>(size.rows()));
    start.mutable_size()->set_cols(static_cast<uint32_t>(size.cols()));
  }
  auto p = table_->Start(start, body.has_label() ? body.label() : "", body.session());
  if (!p.ok()) return Error(p.status());
  return JsonResponse(201, View(**p, (*p)->State(), "fresh"));
}

HttpResponse ProcessesApi::List(const HttpRequest& req, const std::string& uid) {
  int page_size = 100;
  if (std::string ps = req.Param("pageSize"); !ps.empty()) {
    if (!absl::SimpleAtoi(ps, &page_size) || page_size < 0) {
      return Error(ApiError::InvalidArgument("pageSize must be a non-negative number"));
    }
    if (page_size == 0) page_size = 100;
  }
  size_t offset = 0;
  if (std::string tok = req.Param("pageToken"); !tok.empty()) {
    std::string raw;
    if (!absl::WebSafeBase64Unescape(tok, &raw) || raw.rfind("p1:", 0) != 0 ||
        !absl::SimpleAtoi(raw.substr(3), &offset)) {
      return Error(ApiError::InvalidArgument("pageToken is not one this list returned"));
    }
  }
  auto all = table_->List(uid);
  wire::ListProcessesResponse out;
  for (size_t i = offset; i < all.size() && out.processes_size() < page_size; ++i) {
    *out.add_processes() = View(*all[i], all[i]->State(), "unspecified");
  }
  size_t next = offset + out.processes_size();
  if (next < all.size()) {
    out.set_next_page_token(absl::WebSafeBase64Escape(absl::StrCat("p1:", next)));
  }
  return JsonResponse(200, out);
}

HttpResponse ProcessesApi::Get(const std::string& uid, const std::string& id) {
  auto p = table_->Find(uid, id);
  if (p == nullptr) return Error(ApiError::NotFound(absl::StrCat("processes/", id, " does not exist")));
  return JsonResponse(200, View(*p, p->State(), "unspecified"));
}

HttpResponse ProcessesApi::Output(const HttpRequest& req, const std::string& uid,
                                  const std::string& id) {
  auto p = table_->Find(uid, id);
  if (p == nullptr) return Error(ApiError::NotFound(absl::StrCat("processes/", id, " does not exist")));
  int64_t from = 0;
  if (std::string f = req.Param("resumeFrom"); !f.empty() && !absl::SimpleAtoi(f, &from)) {
    return Error(ApiError::InvalidArgument("resumeFrom must be a stream sequence number"));
  }
  int64_t max_bytes = 0;
  if (std::string m = req.Param("maxBytes"); !m.empty() &&
                                             (!absl::SimpleAtoi(m, &max_bytes) || max_bytes < 0)) {
    return Error(ApiError::InvalidArgument("maxBytes must be a non-negative number"));
  }
  Process::Snapshot st = p->State();  // before reading: exited then means no more follows
  auto chunks = p->Output(from, max_bytes == 0 ? 1u << 20 : static_cast<size_t>(max_bytes));
  if (!chunks.ok()) return Error(chunks.status());
  wire::ReadOutputResponse out;
  int64_t next = from;
  for (const auto& c : *chunks) {
    *out.add_chunks() = ChunkView(c);
    next = c.sequence;
  }
  out.set_next_resume_from(next);
  if (st.exited && next >= st.last_sequence) *out.mutable_exited() = ExitedView(st);
  return JsonResponse(200, out);
}

HttpResponse ProcessesApi::Signal(const HttpRequest& req, const std::string& uid,
                                  const std::string& id) {
  wire::SignalRequest body;
  if (auto e = ParseBody(req.body, &body)) return Error(*e);
  int signo = SignalNumber(body.signal());
  if (signo == 0) {
    return Error(ApiError::InvalidArgument(
        "signal must be one of term, kill, int, hup, quit, usr1, usr2"));
  }
  auto p = table_->Find(uid, id);
  if (p == nullptr) return Error(ApiError::NotFound(absl::StrCat("processes/", id, " does not exist")));
  if (absl::Status s = p->Signal(signo); !s.ok()) return Error(s);
  return JsonResponse(200, wire::EmptyResponse());
}

WebSocketAccept ProcessesApi::Upgrade(const HttpRequest& req) {
  WebSocketAccept out;
  auto refuse = [&](const ApiError& e) {
    out.refusal = std::make_unique<HttpResponse>(ErrorResponse(e));
    return std::move(out);
  };
  std::vector<std::string> seg = absl::StrSplit(req.path, '/', absl::SkipEmpty());
  // endpoints/{uid}/v1/processes/{process}/interact
  if (seg.size() != 6 || seg[0] != "endpoints" || seg[2] != "v1" || seg[3] != "processes" ||
      seg[5] != "interact") {
    return refuse(ApiError::NotFound(absl::StrCat("no WebSocket at ", req.path)));
  }
  const std::string& uid = seg[1];
  const std::string& id = seg[4];
  if (!req.query.empty()) {
    return refuse(ApiError::InvalidArgument("interact takes no query parameters (no query credentials)"));
  }
  bool offered = false;
  std::vector<std::string> bearers;
  for (absl::string_view p : absl::StrSplit(req.Header("sec-websocket-protocol"), ',')) {
    p = absl::StripAsciiWhitespace(p);
    if (p == kSubprotocol) offered = true;
    if (absl::StartsWith(p, kBearerPrefix)) bearers.emplace_back(p.substr(strlen(kBearerPrefix)));
  }
  if (!offered) {
    return refuse(ApiError::InvalidArgument("offer the WebSocket subprotocol sandboxes.v1"));
  }
  HttpRequest authed = req;
  if (!bearers.empty()) {
    std::string token;
    if (bearers.size() > 1 || !req.Header("authorization").empty()) {
      return refuse(ApiError::InvalidArgument(
          "give exactly one credential: Authorization or one sandboxes.bearer.v1 offer"));
    }
    if (!absl::WebSafeBase64Unescape(bearers[0], &token) || token.empty() ||
        token.size() > 4096) {
      return refuse(ApiError::InvalidArgument("the sandboxes.bearer.v1 offer is not base64url of a credential"));
    }
    authed.headers["authorization"] = "Bearer " + token;
  }
  if (auto e = auth_->Endpoint(authed, uid, EndpointUri(base_url_, uid), "sandboxesExec")) {
    return refuse(*e);
  }
  auto p = table_->Find(uid, id);
  if (p == nullptr) return refuse(ApiError::NotFound(absl::StrCat("processes/", id, " does not exist")));
  out.subprotocol = kSubprotocol;
  Authenticator* auth = auth_;
  std::string audience = EndpointUri(base_url_, uid);
  out.session = std::make_unique<InteractSession>(std::move(p), [auth, authed, uid, audience] {
    return !auth->Endpoint(authed, uid, audience, "sandboxesExec").has_value();
  });
  return out;
}

}  // namespace airlock::apid
