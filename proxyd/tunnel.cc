#include "proxyd/attachment_state.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/agent_link.h"
#include "common/egress_transport.h"
#include "common/log.h"
#include "proxyd/fibers.h"
#include "proxyd/mux_runner.h"
#include "proxyd/wire.h"

namespace airlock::proxyd {

namespace {

// How long the agent has to answer a new tunnel's start (it installs the
// CA first: a file write and an append in the guest).
constexpr auto kTunnelAnswerTimeout = std::chrono::seconds(20);
// Messages the tunnel's reader takes in a row, with more waiting each
// time, before it lets the rest of its loop run.
constexpr int kReadsBeforeYield = 16;

}  // namespace

using std::chrono::milliseconds;
using std::chrono::seconds;

void Attachment::State::RunTunnel() {
  while (!Stopping()) {
    // The hello's wait blocks a thread for as long as the guest takes (up
    // to 5 s): on a thread of its own, never behind other sandboxes' name
    // lookups on the shared helpers.
    absl::StatusOr<int> fd = absl::UnavailableError("not connected");
    RunOnOwnThread([&] { fd = ConnectAgentPort(channel_path, seconds(5)); });
    if (!fd.ok()) {
      {
        std::lock_guard<std::mutex> lock(mu);
        last_error = std::string(fd.status().message());
      }
      Sleep(milliseconds(300));
      continue;
    }
    auto tunnel = std::make_shared<EgressTransport>(*fd);
    // Its reads (here) and the mux's sends wait as fibers of this loop.
    tunnel->UsePoll(&Poll);
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stopping) return;
      this->tunnel = tunnel;
    }
    agentpb::EgressFrames in;
    agentpb::EgressFrames start;
    start.mutable_start()->set_ca_certificate_pem(px->ca->certificate_pem());
    start.mutable_start()->set_max_window(kEgressMaxWindow);
    // The agent's first (empty) message: the CA is installed, the tunnel
    // live. An agent that gave up on this tunnel (it could not install the
    // CA, or took a second hello for the stream's start) says nothing more
    // and keeps the port open, so the wait is bounded and the tunnel made
    // again.
    if (tunnel->Write(start) &&
        tunnel->Read(&in, std::chrono::steady_clock::now() + kTunnelAnswerTimeout)) {
      {
        std::lock_guard<std::mutex> lock(mu);
        ready = true;
        cv.notify_all();
      }
      // Sends run on the mux's fiber, reads on this one: one of each at a
      // time. Windows widen only as far as the agent's answer says it
      // accepts. The mux, this reader and the sandbox's handlers are
      // fibers of one loop: the bytes between them do not cross threads.
      // This reader wakes the mux without a system call. px outlives
      // every attachment, and so every mux.
      auto mux = std::make_shared<EgressMux>(
          [tunnel](const agentpb::EgressFrames& batch) { return tunnel->Write(batch); },
          in.start().max_window(), MuxRunnerOn(px->loops.get(), loop));
      bool flooding = false;
      uint64_t waits = tunnel->read_waits();
      int unbroken = 0;  // messages read since the reader last waited
      while (!flooding && tunnel->Read(&in)) {
        for (agentpb::EgressFrame& f : *in.mutable_frames()) {
          switch (f.kind_case()) {
            case agentpb::EgressFrame::kOpen:
              Accept(mux, f.id(), f.open());
              break;
            case agentpb::EgressFrame::kDnsQuery:
              AnswerDns(mux.get(), f.id(), f.dns_query());
              break;
            default:
              // False: the guest keeps sending while not reading what
              // proxyd sends (kEgressMaxQueued): its tunnel ends here.
              flooding = !mux->Deliver(std::move(f));
          }
          if (flooding) break;
        }
        // A guest that keeps the port busy must not hold the loop (nor
        // fill the mux's queue unread): after kReadsBeforeYield messages
        // without a wait, the mux and the handlers run first. Not after
        // every message: the mux would send its answers a few at a time,
        // and each send wakes the guest's side (measured: twice the
        // harness's context switches per request).
        if (tunnel->read_waits() != waits) {
          waits = tunnel->read_waits();
          unbroken = 0;
        } else if (++unbroken >= kReadsBeforeYield) {
          unbroken = 0;
          Yield();
        }
      }
      if (flooding) {
        AIRLOCK_LOG_WARN("the guest sent more than its tunnel may queue; resetting its connections",
                         {{"sandbox", sandbox}});
      }
      // Writes fail from here, so a send in progress cannot hang; the
      // mux's stop closes every connection's pair end (their handlers see
      // the end).
      tunnel->Shutdown();
      mux->Stop();
    }
    tunnel->Shutdown();
    {
      std::lock_guard<std::mutex> lock(mu);
      this->tunnel.reset();
      last_error = tunnel->error();
    }
    Sleep(milliseconds(200));
  }
}

void Attachment::State::Accept(const std::shared_ptr<EgressMux>& mux, uint64_t id,
                               const agentpb::EgressConnection& c) {
  // A guest cannot exhaust proxyd's threads and descriptors, for itself or
  // for other sandboxes: the slot is taken before any work, and past a cap
  // the connection is reset.
  // One handler per stream id at a time: a guest that opens an id again
  // while its first connection is served (or carried by the mux) would
  // have two handlers for one stream. The second open is ignored.
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!live_ids.insert({mux.get(), id}).second) return;
  }
  if (!px->caps->Reserve(&open)) {
    EndConnection(mux.get(), id, false);
    int64_t now = NowMs();
    int64_t last = last_cap_warning.load();
    if (now - last > 10000 && last_cap_warning.compare_exchange_strong(last, now)) {
      AIRLOCK_LOG_WARN("connection cap reached; new connections are reset",
                       {{"sandbox", sandbox},
                        {"sandbox_open", std::to_string(open.load())},
                        {"proxyd_open", std::to_string(px->caps->open())}});
    }
    mux->Reset(id);
    return;
  }
  // The handler and the mux share this loop: the pipe's bytes and
  // wake-ups stay in memory.
  std::shared_ptr<EgressPipe> pipe = mux->OpenPipe(id);
  if (!handlers.Spawn([this, mux, id, c, pipe] { Serve(mux, id, c, pipe); })) {
    AIRLOCK_LOG_ERROR("cannot start a connection handler", {{"sandbox", sandbox}});
    mux->Reset(id);
    pipe->Close();
    EndConnection(mux.get(), id, true);
  }
}

void Attachment::State::Serve(const std::shared_ptr<EgressMux>& mux, uint64_t id,
                              const agentpb::EgressConnection& c,
                              std::shared_ptr<EgressPipe> pipe) {
  {
    GuestConnection g(std::move(pipe), mux, id);
    bool ok = c.via() == agentpb::EGRESS_FORWARD ? HandleForward(g) : [&] {
      Address addr{};
      if (!policy::ParseAddress(c.address(), &addr) || c.port() == 0 || c.port() > 65535) {
        return false;
      }
      return HandleTransparent(g, addr, static_cast<uint16_t>(c.port()));
    }();
    if (g.handed_over) return;  // the mux ends it and gives the slot back
    // A reset is asked for before the end closes, so the guest sees a
    // reset, never an end of stream.
    if (!ok) mux->Reset(id);
    g.client.ShutdownWrite();
  }  // closes the pipe
  EndConnection(mux.get(), id, true);
}

void Attachment::State::EndConnection(const EgressMux* mux, uint64_t id, bool release_slot) {
  // The id first: once the slot is back (and the count shows it), the id
  // may be opened again.
  {
    std::lock_guard<std::mutex> lock(mu);
    live_ids.erase({mux, id});
  }
  if (release_slot) px->caps->Release(&open);
}


void Attachment::State::AnswerDns(EgressMux* mux, uint64_t id, const std::string& packet) {
  std::string answer;
  auto question = ParseDnsQuery(packet);
  if (!question.ok()) {
    answer = DnsFormatError(packet);
  } else if (Address literal{}; !CanonicalHost(question->name).ok() ||
                                policy::ParseAddress(question->name, &literal)) {
    // An address spelled as a name ("93.184.216.34", "0x5d.0xb8...") would
    // be decided as a name and then connected to as an address.
    answer = DnsEmptyAnswer(*question, kDnsNxDomain);
  } else if (question->qtype == kDnsTypeA && question->qclass == kDnsClassIn &&
             !question->name.empty()) {
    // Every name gets an address: a denied one is refused when connected
    // to, the same way as any other denied destination.
    answer = DnsAnswerA(*question, names.AddressFor(question->name), 60);
    Verdict v = Decide(question->name, nullptr, 0, false, "", "");
    v.allow = v.allow || v.inspect;
    Record(question->name, 0, "", "", v, pb::DNS);
  } else {
    // No AAAA (the guest has no IPv6 route) or other records.
    answer = DnsEmptyAnswer(*question, kDnsNoError);
  }
  if (answer.empty()) return;
  agentpb::EgressFrame a;
  a.set_id(id);
  a.set_dns_answer(std::move(answer));
  mux->Post(std::move(a));
}

}  // namespace airlock::proxyd
