// The egress tunnel's framing as proxyd or the agent receives it: whatever
// frames the other side sends (any kinds, ids, sizes and orders, even
// data past its window), the mux never crashes, never sends a data frame
// larger than kEgressMaxFrame or for a stream it did not carry, and never
// holds more than one window of a stream's bytes it could not write out.
// A first frame whose id has bit 3 set makes a mux that widens windows (a
// peer that sent EgressStart.max_window = kEgressMaxWindow); the bound is
// then the widest window. (The seed `widened` reaches the widening path;
// its 600 KiB stay under the bound, so it is coverage, not a check.)
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>

#include "common/egress_mux.h"
#include "fuzz/fuzz_check.h"

namespace {

using airlock::agent::v1::EgressFrame;
using airlock::agent::v1::EgressFrames;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  EgressFrames in;
  if (!in.ParseFromArray(data, static_cast<int>(size))) {
    // Not a message: the bytes as data of stream 1.
    EgressFrame* f = in.add_frames();
    f->set_id(1);
    f->set_data(std::string(reinterpret_cast<const char*>(data), size));
  }
  const uint32_t widen_to = in.frames_size() > 0 && (in.frames(0).id() & 8) != 0
                                ? airlock::kEgressMaxWindow
                                : airlock::kEgressWindow;
  std::mutex mu;
  std::set<uint64_t> bad_ids;
  size_t oversized = 0;
  {
    airlock::EgressMux mux([&](const EgressFrames& batch) {
      std::lock_guard<std::mutex> lock(mu);
      for (const EgressFrame& f : batch.frames()) {
        if (f.data().size() > airlock::kEgressMaxFrame) oversized++;
        if (f.id() != 1 && f.id() != 3 && !f.reset()) bad_ids.insert(f.id());
      }
      return true;
    }, widen_to);
    // Two carried streams; the app end of stream 3 never reads, so its
    // socket buffer fills.
    int one[2], three[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, one) != 0) return 0;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, three) != 0) {
      close(one[0]);
      close(one[1]);
      return 0;
    }
    int small = 4096;
    setsockopt(three[1], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    mux.Open(1, one[1]);
    mux.Open(3, three[1]);
    (void)!write(one[0], "guest bytes", 11);
    int frames = 0;
    for (EgressFrame& f : *in.mutable_frames()) {
      if (++frames > 256) break;
      f.set_id(f.id() % 5);  // mostly streams 1 and 3, some unknown
      if (f.kind_case() == EgressFrame::kOpen || f.kind_case() == EgressFrame::kDnsQuery ||
          f.kind_case() == EgressFrame::kDnsAnswer) {
        mux.Post(f);  // what an owner would pass on as is
      } else {
        mux.Deliver(f);
      }
    }
    // The app of stream 1 drains what reached it: never more than was
    // delivered within the window.
    fcntl(one[0], F_SETFL, O_NONBLOCK);
    mux.Stop();
    char buf[65536];
    size_t got = 0;
    ssize_t n;
    while ((n = read(one[0], buf, sizeof(buf))) > 0) got += n;
    FUZZ_CHECK(got <= 2 * static_cast<size_t>(widen_to));
    close(one[0]);
    close(three[0]);
  }
  FUZZ_CHECK(oversized == 0);
  // Posted frames keep their ids; only streams 1 and 3 ever carry data.
  for (uint64_t id : bad_ids) FUZZ_CHECK(id < 5);
  return 0;
}
