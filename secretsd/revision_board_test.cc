#include "secretsd/revision_board.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace airlock::secretsd {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kLease(300);
constexpr milliseconds kMargin(50);

// A board past its first lease (a new one waits out the previous
// process's watchers, see ANewBoardWaitsOutThePreviousProcesssLease).
class SettledBoard : public RevisionBoard {
 public:
  SettledBoard(milliseconds lease, milliseconds margin) : RevisionBoard(lease, margin) {
    std::this_thread::sleep_for(lease + margin);
  }
};

milliseconds Since(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start);
}

TEST(RevisionBoardTest, ANewBoardWaitsOutThePreviousProcesssLease) {
  auto made = Clock::now();
  RevisionBoard board(kLease, kMargin);
  EXPECT_EQ(board.Changed(1), 0);
  EXPECT_GE(Since(made), kLease + kMargin);
  auto start = Clock::now();
  EXPECT_EQ(board.Changed(2), 0);
  EXPECT_LT(Since(start), kLease);
}

TEST(RevisionBoardTest, NoWatcherNoWait) {
  SettledBoard board(kLease, kMargin);
  auto start = Clock::now();
  EXPECT_EQ(board.Changed(1), 0);
  EXPECT_LT(Since(start), kLease);
}

TEST(RevisionBoardTest, AWatcherThatAcknowledgesEndsTheWait) {
  SettledBoard board(kLease, kMargin);
  std::vector<uint64_t> pushed;
  uint64_t id = 0;
  // The push acknowledges from its own thread, as a stream's writer and
  // proxyd's answer would.
  std::vector<std::thread> acks;
  id = board.Add([&](uint64_t r) {
    pushed.push_back(r);
    acks.emplace_back([&board, &id, r] { board.Acked(id, r); });
  });
  board.Answered(id);
  auto start = Clock::now();
  EXPECT_EQ(board.Changed(7), 0);
  EXPECT_LT(Since(start), kLease);
  for (auto& t : acks) t.join();
  EXPECT_EQ(pushed, std::vector<uint64_t>({7}));
}

TEST(RevisionBoardTest, ASilentWatcherIsWaitedOutForItsLease) {
  SettledBoard board(kLease, kMargin);
  int pushes = 0;
  uint64_t id = board.Add([&](uint64_t) { ++pushes; });
  board.Answered(id);
  auto start = Clock::now();
  EXPECT_EQ(board.Changed(3), 1);
  EXPECT_GE(Since(start), kLease);
  EXPECT_EQ(pushes, 1);
}

TEST(RevisionBoardTest, AWatcherNeverAnsweredTrustsNothingAndIsNotWaitedFor) {
  SettledBoard board(kLease, kMargin);
  int pushes = 0;
  board.Add([&](uint64_t) { ++pushes; });
  auto start = Clock::now();
  EXPECT_EQ(board.Changed(3), 0);
  EXPECT_LT(Since(start), kLease);
  EXPECT_EQ(pushes, 1);  // told all the same
}

TEST(RevisionBoardTest, AWatcherGoneAfterAnAnswerIsWaitedOutFromThatAnswer) {
  SettledBoard board(kLease, kMargin);
  uint64_t id = board.Add([](uint64_t) {});
  auto answered = Clock::now();
  board.Answered(id);
  board.Remove(id);
  EXPECT_EQ(board.watchers(), 0u);
  EXPECT_EQ(board.Changed(2), 0);
  EXPECT_GE(Since(answered), kLease + kMargin);
  // Once its lease is over, a change no longer waits for it.
  auto start = Clock::now();
  EXPECT_EQ(board.Changed(3), 0);
  EXPECT_LT(Since(start), kLease);
}

TEST(RevisionBoardTest, AWatcherRemovedWhileWaitedForIsWaitedOut) {
  SettledBoard board(kLease, kMargin);
  uint64_t id = board.Add([](uint64_t) {});
  board.Answered(id);
  std::thread remover([&] {
    std::this_thread::sleep_for(milliseconds(20));
    board.Remove(id);
  });
  auto start = Clock::now();
  EXPECT_EQ(board.Changed(5), 0);  // gone, so not "late"
  EXPECT_GE(Since(start), kLease - milliseconds(20));
  remover.join();
}

TEST(RevisionBoardTest, AnAcknowledgementOfALaterRevisionCounts) {
  SettledBoard board(kLease, kMargin);
  int pushes = 0;
  uint64_t id = board.Add([&](uint64_t) { ++pushes; });
  board.Answered(id);
  board.Acked(id, 9);
  auto start = Clock::now();
  EXPECT_EQ(board.Changed(8), 0);
  EXPECT_LT(Since(start), kLease);
  EXPECT_EQ(pushes, 0);  // it already has a later one
}

TEST(RevisionBoardTest, OnlyTheSilentOneOfTwoIsWaitedFor) {
  SettledBoard board(kLease, kMargin);
  std::atomic<uint64_t> quick{0};
  std::vector<std::thread> acks;
  quick = board.Add([&](uint64_t r) {
    acks.emplace_back([&board, &quick, r] { board.Acked(quick, r); });
  });
  uint64_t silent = board.Add([](uint64_t) {});
  board.Answered(quick);
  board.Answered(silent);
  auto start = Clock::now();
  EXPECT_EQ(board.Changed(4), 1);
  EXPECT_GE(Since(start), kLease);
  for (auto& t : acks) t.join();
}

}  // namespace
}  // namespace airlock::secretsd
