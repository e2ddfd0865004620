// EgressTransport on socket pairs: messages cross whole and in order (also
// when the bytes arrive one at a time, or partly with the hello), a peer's
// oversized length or garbage ends the transport with the reason and
// allocates nothing for it, Shutdown wakes a blocked Read and Write, and a
// writer whose peer does not read waits instead of failing.
#include "common/egress_transport.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "common/fd_io.h"
#include "gtest/gtest.h"

namespace airlock {
namespace {

using agent::v1::EgressFrames;

EgressFrames Data(uint64_t id, const std::string& bytes) {
  EgressFrames m;
  auto* f = m.add_frames();
  f->set_id(id);
  f->set_data(bytes);
  return m;
}

std::string Wire(const EgressFrames& m) {
  std::string out;
  EXPECT_TRUE(EncodeEgressMessage(m, &out));
  return out;
}

class EgressTransportTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp_), 0); }
  void TearDown() override {
    if (sp_[1] >= 0) close(sp_[1]);
  }
  int sp_[2] = {-1, -1};
};

TEST_F(EgressTransportTest, MessagesCrossWholeAndInOrder) {
  EgressTransport a(sp_[0]);
  EgressTransport b(sp_[1]);
  sp_[1] = -1;
  std::string big(1 << 20, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  // The writer runs beside the reader: 3 MiB does not fit a socket buffer.
  auto writer = std::async(std::launch::async, [&] {
    return a.Write(Data(1, "first")) && a.Write(Data(3, big)) && a.Write(EgressFrames()) &&
           a.Write(Data(5, big));
  });
  EgressFrames m;
  ASSERT_TRUE(b.Read(&m));
  EXPECT_EQ(m.frames(0).data(), "first");
  ASSERT_TRUE(b.Read(&m));
  EXPECT_EQ(m.frames(0).id(), 3u);
  EXPECT_TRUE(m.frames(0).data() == big);
  ASSERT_TRUE(b.Read(&m));
  EXPECT_EQ(m.frames_size(), 0) << "the empty message is a message";
  ASSERT_TRUE(b.Read(&m));
  EXPECT_EQ(m.frames(0).id(), 5u);
  EXPECT_TRUE(writer.get());
  a.Shutdown();
  EXPECT_FALSE(a.Write(Data(1, "after")));
}

TEST_F(EgressTransportTest, ReadWaitsCountsOnlyTheReadsThatHadToWait) {
  EgressTransport a(sp_[0]);
  EgressTransport b(sp_[1]);
  sp_[1] = -1;
  // Three messages already there: read without a wait.
  ASSERT_TRUE(a.Write(Data(1, "one")) && a.Write(Data(2, "two")) && a.Write(Data(3, "three")));
  EgressFrames m;
  ASSERT_TRUE(b.Read(&m));
  uint64_t after_first = b.read_waits();
  ASSERT_TRUE(b.Read(&m));
  ASSERT_TRUE(b.Read(&m));
  EXPECT_EQ(m.frames(0).data(), "three");
  EXPECT_EQ(b.read_waits(), after_first);
  // The next one comes later: that read waits.
  auto writer = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return a.Write(Data(4, "four"));
  });
  ASSERT_TRUE(b.Read(&m));
  EXPECT_EQ(m.frames(0).data(), "four");
  EXPECT_GT(b.read_waits(), after_first);
  EXPECT_TRUE(writer.get());
}

TEST_F(EgressTransportTest, BytesThatCameWithTheHelloAndOneByteAtATime) {
  std::string wire = Wire(Data(7, "hello bytes")) + Wire(Data(9, "more"));
  // The first 6 bytes were read with the hello; the rest trickles in.
  EgressTransport t(sp_[0], wire.substr(0, 6));
  std::thread trickle([&] {
    for (size_t i = 6; i < wire.size(); ++i) {
      ASSERT_EQ(write(sp_[1], &wire[i], 1), 1);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  EgressFrames m;
  ASSERT_TRUE(t.Read(&m));
  EXPECT_EQ(m.frames(0).id(), 7u);
  EXPECT_EQ(m.frames(0).data(), "hello bytes");
  ASSERT_TRUE(t.Read(&m));
  EXPECT_EQ(m.frames(0).data(), "more");
  trickle.join();
  close(sp_[1]);
  sp_[1] = -1;
  EXPECT_FALSE(t.Read(&m));
  EXPECT_EQ(t.error(), "the peer closed the tunnel");
}

TEST_F(EgressTransportTest, AnOversizedLengthEndsTheTransportUnread) {
  EgressTransport t(sp_[0]);
  // 4 GiB - 1 declared, then bytes that would follow: nothing is allocated
  // for it, and nothing after it is taken.
  ASSERT_TRUE(WriteAll(sp_[1], std::string("\xff\xff\xff\xff", 4) + std::string(1000, 'z')));
  EgressFrames m;
  EXPECT_FALSE(t.Read(&m));
  EXPECT_EQ(t.error(), "the peer sent a message of 4294967295 bytes, over the limit of 4194304");
  // Just over the limit is refused the same way.
  int sp2[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp2), 0);
  EgressTransport u(sp2[0]);
  size_t n = kEgressMaxMessage + 1;
  std::string head = {static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                      static_cast<char>(n >> 8), static_cast<char>(n)};
  ASSERT_TRUE(WriteAll(sp2[1], head));
  EXPECT_FALSE(u.Read(&m));
  EXPECT_NE(u.error().find("4194305 bytes"), std::string::npos) << u.error();
  close(sp2[1]);
}

TEST_F(EgressTransportTest, BytesThatDoNotParseEndTheTransport) {
  EgressTransport t(sp_[0]);
  ASSERT_TRUE(WriteAll(sp_[1], std::string("\0\0\0\3\xff\xff\xff", 7)));
  EgressFrames m;
  EXPECT_FALSE(t.Read(&m));
  EXPECT_EQ(t.error(), "the peer sent a message that does not parse");
  EXPECT_FALSE(t.Read(&m)) << "ended stays ended";
}

TEST_F(EgressTransportTest, ShutdownWakesABlockedReadAndABlockedWrite) {
  EgressTransport t(sp_[0]);
  auto reader = std::async(std::launch::async, [&] {
    EgressFrames m;
    return t.Read(&m);
  });
  // The peer never reads: the writer fills the socket buffer and waits.
  auto writer = std::async(std::launch::async, [&] {
    std::string big(1 << 20, 'w');
    while (t.Write(Data(1, big))) {
    }
    return true;
  });
  EXPECT_EQ(reader.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  EXPECT_EQ(writer.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout)
      << "a writer whose peer does not read waits, it does not fail";
  t.Shutdown();
  ASSERT_EQ(reader.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_FALSE(reader.get());
  ASSERT_EQ(writer.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(t.error(), "shut down");
}

TEST_F(EgressTransportTest, AMessageOverTheLimitIsNotSent) {
  EgressTransport t(sp_[0]);
  EXPECT_FALSE(t.Write(Data(1, std::string(kEgressMaxMessage, 'o'))));
  EXPECT_NE(t.error().find("over the limit"), std::string::npos) << t.error();
  char c;
  EXPECT_EQ(recv(sp_[1], &c, 1, MSG_DONTWAIT), -1) << "nothing of it was written";
}

TEST_F(EgressTransportTest, TooManyFramesEndTheTransportBeforeTheyAreParsed) {
  EgressTransport t(sp_[0]);
  // 20,000 empty frames in 40 KB: a few MB of objects had they been parsed.
  std::string body;
  for (int i = 0; i < kEgressMaxFramesPerMessage + 1; ++i) body += std::string("\x12\x00", 2);
  size_t n = body.size();
  std::string head = {static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                      static_cast<char>(n >> 8), static_cast<char>(n)};
  std::thread w([&] { WriteAll(sp_[1], head + body); });
  EgressFrames m;
  EXPECT_FALSE(t.Read(&m));
  w.join();
  EXPECT_EQ(t.error(), "the peer sent a message of 16385 frames, over the limit of 16384");
  EXPECT_EQ(m.frames_size(), 0);
  EXPECT_EQ(CountEgressFrames(body.data(), body.size()), kEgressMaxFramesPerMessage + 1);
  EXPECT_EQ(CountEgressFrames("\x12\x05" "ab", 4), -1) << "a field longer than the message";
  EXPECT_EQ(CountEgressFrames("\x0b", 1), -1) << "a group";
}

TEST_F(EgressTransportTest, AReadWithADeadlineEndsTheTransportWhenNothingCame) {
  EgressTransport t(sp_[0]);
  // Half a message, then silence.
  ASSERT_TRUE(WriteAll(sp_[1], Wire(Data(1, "never finished")).substr(0, 9)));
  auto start = std::chrono::steady_clock::now();
  EgressFrames m;
  EXPECT_FALSE(t.Read(&m, start + std::chrono::milliseconds(300)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(300));
  EXPECT_EQ(t.error(), "the peer did not answer in time");
}

// Pieces laid end to end: the large data frames' bytes spliced in at their
// offsets, which only grow.
std::string Joined(const std::string& own, const std::vector<EgressDataRef>& refs) {
  std::string out;
  size_t from = 0;
  for (const EgressDataRef& r : refs) {
    EXPECT_GE(r.at, from);
    out.append(own, from, r.at - from);
    out += *r.data;
    from = r.at;
  }
  out.append(own, from, std::string::npos);
  return out;
}

TEST(EgressPiecesTest, LaidEndToEndTheyAreTheSerializersBytes) {
  std::string big(kEgressReferencedData, 'b'), huge(300000, 'h'), small(kEgressReferencedData - 1, 's');
  EgressFrames empty;
  EgressFrames start;
  start.mutable_start()->set_max_window(1 << 20);
  start.mutable_start()->set_ca_certificate_pem("pem");
  EgressFrames mixed = start;
  mixed.add_frames()->set_data(big);  // id 0: no id field on the wire
  auto* f = mixed.add_frames();
  f->set_id(1);
  f->set_window(7);
  f = mixed.add_frames();
  f->set_id(uint64_t{1} << 62);  // a ten-byte varint
  f->set_data(huge);
  f = mixed.add_frames();
  f->set_id(3);
  f->set_data(small);
  f = mixed.add_frames();
  f->set_id(5);
  f->set_data(big);
  mixed.add_frames()->set_id(9);  // no kind at all
  // A frame with a field this build does not know takes the serializer's
  // way; so does a message with one.
  EgressFrames unknown_in_frame;
  f = unknown_in_frame.add_frames();
  f->set_id(11);
  f->set_data(big);
  std::string extra = f->SerializeAsString() + std::string("\xa0\x06\x01", 3);  // field 100 = 1
  ASSERT_TRUE(f->ParseFromString(extra));
  EgressFrames unknown_at_top;
  ASSERT_TRUE(unknown_at_top.ParseFromString(mixed.SerializeAsString() +
                                             std::string("\xa0\x06\x01", 3)));

  for (const EgressFrames* m : {&empty, &start, &mixed, &unknown_in_frame, &unknown_at_top}) {
    std::string own = "prefix";
    std::vector<EgressDataRef> refs;
    ASSERT_TRUE(EncodeEgressPieces(*m, &own, &refs));
    for (const EgressDataRef& r : refs) EXPECT_GE(r.data->size(), kEgressReferencedData);
    EXPECT_TRUE(Joined(own, refs) == "prefix" + Wire(*m)) << m->ShortDebugString().substr(0, 200);
    if (m == &mixed) {
      EXPECT_EQ(refs.size(), 3u) << "big, huge and big again; not the small one";
      EXPECT_LT(own.size(), 2 * kEgressReferencedData) << "the large bytes were not copied";
    }
  }
  EgressFrames over;
  over.add_frames()->set_data(std::string(kEgressMaxMessage, 'o'));
  std::string own;
  std::vector<EgressDataRef> refs;
  EXPECT_FALSE(EncodeEgressPieces(over, &own, &refs));
}

TEST_F(EgressTransportTest, GatheredWritesCrossWholeWhenTheSocketTakesThemInPieces) {
  // A small send buffer: every message goes out in many partial writes,
  // some ending inside a referenced frame, some inside the own bytes.
  int small = 4096;
  ASSERT_EQ(setsockopt(sp_[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
  EgressTransport a(sp_[0]);
  EgressTransport b(sp_[1]);
  sp_[1] = -1;
  EgressFrames m;
  for (int i = 0; i < 40; ++i) {
    auto* f = m.add_frames();
    f->set_id(static_cast<uint64_t>(i) * 2 + 1);
    std::string bytes(i % 3 == 0 ? 10 : 5000 + i * 997, 'a');
    for (size_t k = 0; k < bytes.size(); ++k) bytes[k] = static_cast<char>(i + k * 13);
    f->set_data(bytes);
    if (i % 7 == 0) m.add_frames()->set_window(static_cast<uint32_t>(i));
  }
  // And one of more pieces than a single sendmsg takes (IOV_MAX): a
  // thousand referenced frames with their own bytes between them.
  EgressFrames many;
  for (int i = 0; i < 1000; ++i) {
    auto* f = many.add_frames();
    f->set_id(static_cast<uint64_t>(i) + 1);
    f->set_data(std::string(kEgressReferencedData, static_cast<char>(i)));
  }
  auto writer = std::async(std::launch::async,
                           [&] { return a.Write(m) && a.Write(many) && a.Write(m); });
  EgressFrames first, got_many;
  ASSERT_TRUE(b.Read(&first)) << b.error();
  EXPECT_TRUE(first.SerializeAsString() == m.SerializeAsString());
  ASSERT_TRUE(b.Read(&got_many)) << b.error();
  EXPECT_TRUE(got_many.SerializeAsString() == many.SerializeAsString());
  EgressFrames got;
  ASSERT_TRUE(b.Read(&got)) << b.error();
  EXPECT_TRUE(got.SerializeAsString() == m.SerializeAsString());
  EXPECT_TRUE(writer.get());
}

TEST_F(EgressTransportTest, TryReadTakesWholeMessagesWithoutWaitingAndSaysWhenItEnded) {
  EgressTransport t(sp_[0]);
  using Got = EgressTransport::Got;
  EgressFrames m;
  EXPECT_EQ(t.TryRead(&m), Got::kNothing);
  std::string two = Wire(Data(1, "one")) + Wire(Data(3, "two"));
  // Half of the first message: still nothing.
  ASSERT_TRUE(WriteAll(sp_[1], two.substr(0, 6)));
  EXPECT_EQ(t.TryRead(&m), Got::kNothing);
  ASSERT_TRUE(WriteAll(sp_[1], two.substr(6)));
  ASSERT_EQ(t.TryRead(&m), Got::kMessage);
  EXPECT_EQ(m.frames(0).data(), "one");
  ASSERT_EQ(t.TryRead(&m), Got::kMessage) << "from the buffer, the socket has nothing more";
  EXPECT_EQ(m.frames(0).data(), "two");
  EXPECT_EQ(t.TryRead(&m), Got::kNothing);
  EXPECT_TRUE(t.error().empty());
  pollfd p = {t.shutdown_fd(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0);
  t.Shutdown();
  EXPECT_EQ(poll(&p, 1, 0), 1) << "readable once shut down";
  EXPECT_EQ(t.TryRead(&m), Got::kEnded);

  EgressTransport u(sp_[1]);
  sp_[1] = -1;
  EXPECT_EQ(u.TryRead(&m), Got::kEnded) << "its peer shut down";
  EXPECT_EQ(u.error(), "the peer closed the tunnel");
}

TEST_F(EgressTransportTest, ShutdownEndsTheSocketForThePeerAtOnce) {
  EgressTransport t(sp_[0]);
  t.Shutdown();
  // The object (and its descriptor) lives on, but the peer sees the end.
  char c;
  EXPECT_EQ(read(sp_[1], &c, 1), 0);
}

}  // namespace
}  // namespace airlock
