#include "secretsd/crypto.h"

#include "gtest/gtest.h"

namespace airlock::secretsd {
namespace {

SecretKey Key(char fill) { return std::move(*SecretKey::FromBytes(std::string(kKeySize, fill))); }

TEST(CryptoTest, RoundTripUsesAFreshNonceEveryTime) {
  SecretKey key = Key('k');
  const std::string plain = "sk-ant-api03-round-trip-value";
  auto a = Seal(key, plain, "anthropic@global");
  auto b = Seal(key, plain, "anthropic@global");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->size(), kNonceSize + plain.size() + kTagSize);
  EXPECT_NE(a->substr(0, kNonceSize), b->substr(0, kNonceSize));
  EXPECT_NE(*a, *b);
  EXPECT_EQ(a->find(plain), std::string::npos);
  auto back = Open(key, *a, "anthropic@global");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, plain);
  EXPECT_EQ(*Open(key, *b, "anthropic@global"), plain);
}

TEST(CryptoTest, AnyFlippedByteFailsToOpen) {
  SecretKey key = Key('k');
  auto sealed = Seal(key, "value-to-protect", "id@global");
  ASSERT_TRUE(sealed.ok());
  // Every position: nonce, ciphertext and tag.
  for (size_t i = 0; i < sealed->size(); ++i) {
    std::string bad = *sealed;
    bad[i] ^= 0x01;
    auto out = Open(key, bad, "id@global");
    EXPECT_EQ(out.status().code(), absl::StatusCode::kDataLoss) << "byte " << i;
  }
  EXPECT_FALSE(Open(key, sealed->substr(0, sealed->size() - 1), "id@global").ok());
  EXPECT_FALSE(Open(key, *sealed + "x", "id@global").ok());
  EXPECT_FALSE(Open(key, "", "id@global").ok());
}

TEST(CryptoTest, WrongAadOrKeyFails) {
  SecretKey key = Key('k');
  auto sealed = Seal(key, "moved-value", "openai@global");
  ASSERT_TRUE(sealed.ok());
  auto moved = Open(key, *sealed, "openai@box1");
  EXPECT_EQ(moved.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(moved.status().message().find("moved-value"), std::string::npos);
  EXPECT_FALSE(Open(key, *sealed, "").ok());
  EXPECT_FALSE(Open(Key('j'), *sealed, "openai@global").ok());
  EXPECT_TRUE(Open(key, *sealed, "openai@global").ok());
}

TEST(CryptoTest, KeysHaveExactlyThirtyTwoBytes) {
  EXPECT_FALSE(SecretKey::FromBytes(std::string(31, 'a')).ok());
  EXPECT_FALSE(SecretKey::FromBytes(std::string(33, 'a')).ok());
  auto k = SecretKey::FromBytes(std::string(32, 'a'));
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->bytes(), std::string(32, 'a'));
  auto g1 = SecretKey::Generate();
  auto g2 = SecretKey::Generate();
  ASSERT_TRUE(g1.ok() && g2.ok());
  EXPECT_NE(g1->bytes(), g2->bytes());
  // A moved-from key is wiped, so it no longer opens anything.
  SecretKey moved = std::move(*g1);
  EXPECT_EQ(g1->bytes(), std::string(kKeySize, '\0'));
  EXPECT_NE(moved.bytes(), std::string(kKeySize, '\0'));
}

TEST(CryptoTest, RandomBytesDiffer) {
  auto a = RandomBytes(16);
  auto b = RandomBytes(16);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 16u);
  EXPECT_NE(*a, *b);
}

}  // namespace
}  // namespace airlock::secretsd
