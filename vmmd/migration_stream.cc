#include "vmmd/migration_stream.h"

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"

namespace airlock::vmmd {
namespace {

// migration/savevm.c and migration/ram.c (QEMU 7.2).
constexpr uint32_t kFileMagic = 0x5145564d;  // "QEVM"
constexpr uint8_t kSectionStart = 0x01;
constexpr uint8_t kSectionPart = 0x02;
constexpr uint8_t kSectionEnd = 0x03;
constexpr uint8_t kSectionFooter = 0x7e;
constexpr uint64_t kFlagZero = 0x02;
constexpr uint64_t kFlagMemSize = 0x04;
constexpr uint64_t kFlagPage = 0x08;
constexpr uint64_t kFlagEos = 0x10;
constexpr uint64_t kFlagContinue = 0x20;
constexpr uint64_t kFlagsMask = 0xfff;  // below the 4 KiB target page
constexpr uint64_t kPageSize = 4096;

class Reader {
 public:
  explicit Reader(absl::string_view s) : s_(s) {}
  size_t pos() const { return pos_; }
  bool Have(size_t n) const { return s_.size() - pos_ >= n; }
  uint8_t U8() { return static_cast<uint8_t>(s_[pos_++]); }
  uint32_t Be32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | U8();
    return v;
  }
  uint64_t Be64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | U8();
    return v;
  }
  absl::string_view Bytes(size_t n) {
    absl::string_view v = s_.substr(pos_, n);
    pos_ += n;
    return v;
  }

 private:
  absl::string_view s_;
  size_t pos_ = 0;
};

void Append(std::string& out, absl::string_view v) { out.append(v.data(), v.size()); }

void PutBe64(std::string& out, uint64_t v) {
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

absl::Status Bad(const std::string& what, size_t at) {
  return absl::InvalidArgumentError(
      absl::StrCat("unexpected migration stream at byte ", at, ": ", what));
}

}  // namespace

absl::StatusOr<SplitStream> SplitGuestMemory(absl::string_view stream, const PageWriter& write) {
  Reader in(stream);
  if (!in.Have(8) || in.Be32() != kFileMagic) return Bad("not a QEMU migration stream", 0);
  // The configuration section before "ram" is copied as it is; the ram
  // section starts with its header: START, id, "ram", instance 0, version 4.
  const std::string ram_header("\x03ram\0\0\0\0\0\0\0\x04", 12);
  size_t at = stream.find(ram_header, 8);
  if (at == absl::string_view::npos || at < 13 || stream[at - 5] != kSectionStart) {
    return Bad("no ram section", 8);
  }
  SplitStream result;
  std::string& out = result.devices;
  out.reserve(stream.size() / 2);
  Append(out, stream.substr(0, at - 5));
  Reader r(stream.substr(at - 5));
  size_t base = at - 5;
  auto here = [&] { return base + r.pos(); };

  // START: header, then the blocks and their sizes, EOS, footer.
  size_t section_begin = r.pos();
  r.U8();
  uint32_t ram_id = r.Be32();
  r.Bytes(ram_header.size());
  if (!r.Have(8)) return Bad("truncated", here());
  uint64_t first = r.Be64();
  if ((first & kFlagsMask) != kFlagMemSize) return Bad("no block list", here());
  uint64_t total = first & ~kFlagsMask;
  std::map<std::string, uint64_t> blocks;
  uint64_t sum = 0;
  while (sum < total) {
    if (!r.Have(1)) return Bad("truncated block list", here());
    uint8_t len = r.U8();
    if (!r.Have(len + 8u)) return Bad("truncated block list", here());
    std::string name(r.Bytes(len));
    uint64_t length = r.Be64();
    blocks[name] = length;
    sum += length;
  }
  if (sum != total) return Bad("block sizes do not add up", here());
  std::string guest_ram;
  for (const auto& [name, length] : blocks) {
    if (guest_ram.empty() || length > blocks[guest_ram]) guest_ram = name;
  }
  result.ram_block = guest_ram;
  result.ram_bytes = blocks[guest_ram];
  std::vector<bool> has_content(blocks[guest_ram] / kPageSize + 1, false);
  if (!r.Have(8) || r.Be64() != kFlagEos) return Bad("no end of the block list", here());
  if (!r.Have(5) || r.U8() != kSectionFooter || r.Be32() != ram_id) return Bad("no footer", here());
  Append(out, stream.substr(base + section_begin, r.pos() - section_begin));

  // PART and END sections of "ram", each a list of page records ending in
  // EOS, then its footer. What follows the END is device state: copied.
  std::string src_block, dest_block;
  while (true) {
    if (!r.Have(5)) return Bad("truncated before the ram section ended", here());
    uint8_t type = r.U8();
    uint32_t id = r.Be32();
    if ((type != kSectionPart && type != kSectionEnd) || id != ram_id) {
      return Bad(absl::StrCat("section type ", static_cast<int>(type), " id ", id,
                              " between ram's"),
                 here());
    }
    out.push_back(static_cast<char>(type));
    Append(out, stream.substr(base + r.pos() - 4, 4));
    while (true) {
      if (!r.Have(8)) return Bad("truncated page record", here());
      uint64_t word = r.Be64();
      uint64_t flags = word & kFlagsMask;
      uint64_t offset = word & ~kFlagsMask;
      if (flags == kFlagEos) {
        PutBe64(out, word);
        break;
      }
      uint64_t kind = flags & ~kFlagContinue;
      if (kind != kFlagZero && kind != kFlagPage) {
        return Bad(absl::StrCat("page record flags 0x", absl::Hex(flags)), here());
      }
      if (!(flags & kFlagContinue)) {
        if (!r.Have(1)) return Bad("truncated block name", here());
        uint8_t len = r.U8();
        if (!r.Have(len)) return Bad("truncated block name", here());
        src_block = std::string(r.Bytes(len));
        if (blocks.count(src_block) == 0) return Bad("record of an unknown block", here());
      } else if (src_block.empty()) {
        return Bad("record continues no block", here());
      }
      if (offset >= blocks[src_block]) return Bad("page beyond its block", here());
      size_t payload = kind == kFlagZero ? 1 : kPageSize;
      if (!r.Have(payload)) return Bad("truncated page", here());
      absl::string_view data = r.Bytes(payload);
      if (src_block == guest_ram) {
        size_t index = offset / kPageSize;
        if (kind == kFlagZero && data[0] == 0 && !has_content[index]) {
          ++result.zero_pages_dropped;
          continue;
        }
        std::string filled;
        if (kind == kFlagZero) filled.assign(kPageSize, data[0]);
        if (absl::Status s = write(offset, kind == kFlagZero ? filled : data); !s.ok()) return s;
        // A zero page written over content is zero again, and a later
        // zero record of it need not be.
        has_content[index] = !(kind == kFlagZero && data[0] == 0);
        ++result.pages;
        continue;
      }
      // A record that continued a dropped one's block names it again.
      if (src_block == dest_block && (flags & kFlagContinue)) {
        PutBe64(out, word);
      } else {
        PutBe64(out, offset | kind);
        out.push_back(static_cast<char>(src_block.size()));
        out.append(src_block);
      }
      dest_block = src_block;
      Append(out, data);
    }
    if (!r.Have(5) || r.U8() != kSectionFooter || r.Be32() != ram_id) {
      return Bad("no footer", here());
    }
    out.push_back(static_cast<char>(kSectionFooter));
    Append(out, stream.substr(base + r.pos() - 4, 4));
    if (type == kSectionEnd) break;
  }
  Append(out, stream.substr(here()));
  return result;
}

}  // namespace airlock::vmmd
