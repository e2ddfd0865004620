#include "vmmd/migration_stream.h"

#include <map>
#include <vector>

#include "gtest/gtest.h"

namespace airlock::vmmd {
namespace {

void Be32(std::string& s, uint32_t v) {
  for (int i = 3; i >= 0; --i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void Be64(std::string& s, uint64_t v) {
  for (int i = 7; i >= 0; --i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// A stream shaped as QEMU 7.2 saves a VM: header, a configuration section,
// ram's START/PART/END sections, device state, EOF.
struct Stream {
  std::string s;
  Stream() {
    Be32(s, 0x5145564d);
    Be32(s, 3);
    s += "\x07";  // configuration: copied as it is
    Be32(s, 7);
    s += "microvm";
    s += "\x01";  // START ram
    Be32(s, 2);
    s += std::string("\x03ram\0\0\0\0\0\0\0\x04", 12);
    Be64(s, ((1 << 20) + (64 << 10)) | 0x04);
    s += "\x03rom";
    Be64(s, 64 << 10);
    s += "\x0bmicrovm.ram";
    Be64(s, 1 << 20);
    Be64(s, 0x10);
    Footer();
  }
  void Footer() {
    s += "\x7e";
    Be32(s, 2);
  }
  void Section(char type) {
    s.push_back(type);
    Be32(s, 2);
  }
  void Zero(uint64_t offset, const std::string& block = "") {
    Header(offset | 0x02, block);
    s.push_back('\0');
  }
  void Page(uint64_t offset, char fill, const std::string& block = "") {
    Header(offset | 0x08, block);
    s += std::string(4096, fill);
  }
  void Header(uint64_t word, const std::string& block) {
    if (block.empty()) {
      Be64(s, word | 0x20);
    } else {
      Be64(s, word);
      s.push_back(static_cast<char>(block.size()));
      s += block;
    }
  }
  void Eos() { Be64(s, 0x10); }
};

// Parse replays the records of the stream's ram sections onto memory that
// starts zeroed, as a restore does, and returns the pages of each block.
std::map<std::string, std::map<uint64_t, char>> Replay(const std::string& s) {
  std::map<std::string, std::map<uint64_t, char>> mem;
  size_t at = s.find(std::string("\x03ram\0\0\0\0\0\0\0\x04", 12)) + 12;
  auto be64 = [&](size_t p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(s[p + i]);
    return v;
  };
  at += 8 + 4 + 8 + 12 + 8 + 8 + 5;  // block list, EOS, footer
  std::string block;
  while (s[at] == 0x02 || s[at] == 0x03) {
    bool end = s[at] == 0x03;
    at += 5;
    while (true) {
      uint64_t w = be64(at);
      at += 8;
      if (w == 0x10) break;
      if (!(w & 0x20)) {
        uint8_t len = s[at++];
        block = s.substr(at, len);
        at += len;
      }
      if (w & 0x02) {
        mem[block][w & ~0xfffull] = s[at++];
      } else {
        mem[block][w & ~0xfffull] = s[at];
        at += 4096;
      }
    }
    at += 5;
    if (end) break;
  }
  return mem;
}

// Split runs SplitGuestMemory with a writer that keeps each page's first
// byte (the tests' pages are one byte repeated).
absl::StatusOr<SplitStream> Split(const std::string& stream, std::map<uint64_t, char>* image) {
  return SplitGuestMemory(stream, [image](uint64_t offset, absl::string_view page) {
    EXPECT_EQ(page.size(), 4096u);
    EXPECT_EQ(page, std::string(4096, page[0]));
    (*image)[offset] = page[0];
    return absl::OkStatus();
  });
}

TEST(SplitGuestMemoryTest, TheGuestRamGoesToTheImageAndTheRestStays) {
  Stream st;
  st.Section(0x02);
  st.Page(0, 'a', "microvm.ram");
  st.Zero(4096);       // RAM, never written: left out
  st.Zero(0);          // RAM written above: zero again in the image
  st.Zero(0, "rom");   // a ROM's zero page: stays in the stream
  st.Page(4096, 'r');  // continues rom
  st.Zero(8192, "microvm.ram");  // left out, so the next ROM record must name its block
  st.Page(12288, 'b');
  st.Page(8192, 'q', "rom");
  st.Eos();
  st.Footer();
  st.Section(0x03);
  st.Zero(16384, "microvm.ram");
  st.Page(16384, 'c');
  st.Page(12288, 'd');  // a later pass gave the page new content
  st.Eos();
  st.Footer();
  std::string devices = "\x04 device state \x1f";
  st.s += devices;

  std::map<uint64_t, char> image;
  auto split = Split(st.s, &image);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->ram_block, "microvm.ram");
  EXPECT_EQ(split->ram_bytes, 1u << 20);
  EXPECT_EQ(split->pages, 5u);
  EXPECT_EQ(split->zero_pages_dropped, 3u);
  EXPECT_EQ(split->devices.substr(split->devices.size() - devices.size()), devices);
  // Restored from the image plus the remaining stream, the VM ends up with
  // what the whole stream gave it, page for page, in every block.
  auto before = Replay(st.s);
  auto after = Replay(split->devices);
  EXPECT_EQ(after.count("microvm.ram"), 0u) << "no guest RAM record is left in the stream";
  after["microvm.ram"] = image;
  for (auto& [block, pages] : before) {
    for (auto& [offset, fill] : pages) {
      char got = after[block].count(offset) ? after[block][offset] : '\0';
      EXPECT_EQ(got, fill) << block << " @" << offset;
    }
  }
  EXPECT_EQ(after["rom"].size(), before["rom"].size());
}

TEST(SplitGuestMemoryTest, AWriterErrorIsReturned) {
  Stream st;
  st.Section(0x02);
  st.Page(0, 'a', "microvm.ram");
  st.Eos();
  st.Footer();
  auto r = SplitGuestMemory(st.s, [](uint64_t, absl::string_view) {
    return absl::ResourceExhaustedError("disk full");
  });
  EXPECT_EQ(r.status(), absl::ResourceExhaustedError("disk full"));
}

TEST(SplitGuestMemoryTest, WhatItDoesNotKnowIsRefused) {
  std::map<uint64_t, char> image;
  EXPECT_FALSE(Split("not a stream", &image).ok());
  Stream st;
  st.Section(0x02);
  st.Header(0x40, "microvm.ram");  // XBZRLE
  st.s += "xx";
  auto r = Split(st.s, &image);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("flags 0x40"), std::string::npos) << r.status();
  Stream cut;
  cut.Section(0x02);
  cut.Page(0, 'a', "microvm.ram");
  cut.s.resize(cut.s.size() - 100);
  EXPECT_FALSE(Split(cut.s, &image).ok());
  Stream other;
  other.s.push_back('\x02');
  Be32(other.s, 9);  // another iterable section between ram's
  EXPECT_FALSE(Split(other.s, &image).ok());
  Stream beyond;
  beyond.Section(0x02);
  beyond.Page(1 << 20, 'a', "microvm.ram");  // past the block's end
  EXPECT_FALSE(Split(beyond.s, &image).ok());
}

}  // namespace
}  // namespace airlock::vmmd
