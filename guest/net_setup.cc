#include "guest/net_setup.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/fd_io.h"

namespace airlock::guest {
namespace {

// Request builds one rtnetlink request: the netlink header, the family
// header `T`, then attributes (nested ones by Begin/End).
template <typename T>
class Request {
 public:
  Request(uint16_t type, uint16_t flags) {
    buf_.resize(NLMSG_SPACE(sizeof(T)));
    header()->nlmsg_type = type;
    header()->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
    header()->nlmsg_seq = 1;
  }
  T* body() { return reinterpret_cast<T*>(NLMSG_DATA(header())); }

  void Add(uint16_t type, const void* data, size_t len) {
    size_t at = buf_.size();
    buf_.resize(at + RTA_SPACE(len));
    auto* rta = reinterpret_cast<struct rtattr*>(&buf_[at]);
    rta->rta_type = type;
    rta->rta_len = RTA_LENGTH(len);
    if (len > 0) memcpy(RTA_DATA(rta), data, len);
  }
  void AddString(uint16_t type, const std::string& s) { Add(type, s.c_str(), s.size() + 1); }
  void AddU32(uint16_t type, uint32_t v) { Add(type, &v, sizeof(v)); }
  // Begin opens a nested attribute; End closes the last one opened.
  size_t Begin(uint16_t type) {
    size_t at = buf_.size();
    Add(type, nullptr, 0);
    return at;
  }
  void End(size_t at) {
    reinterpret_cast<struct rtattr*>(&buf_[at])->rta_len = static_cast<uint16_t>(buf_.size() - at);
  }

  const std::string& Finish() {
    header()->nlmsg_len = static_cast<uint32_t>(buf_.size());
    return buf_;
  }

 private:
  struct nlmsghdr* header() { return reinterpret_cast<struct nlmsghdr*>(&buf_[0]); }
  std::string buf_;
};

// Talk sends `msg` on a fresh rtnetlink socket and returns the kernel's
// answer: 0, or the errno it acknowledged with (ETIMEDOUT when none came
// within 5 s, EPROTO when the answer was not an acknowledgement).
int Talk(const std::string& msg) {
  UniqueFd fd(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (fd.get() < 0) return errno;
  struct timeval wait {5, 0};
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
  struct sockaddr_nl kernel {};
  kernel.nl_family = AF_NETLINK;
  if (sendto(fd.get(), msg.data(), msg.size(), 0, reinterpret_cast<struct sockaddr*>(&kernel),
             sizeof(kernel)) < 0) {
    return errno;
  }
  alignas(struct nlmsghdr) char answer[4096];
  for (;;) {
    ssize_t n = recv(fd.get(), answer, sizeof(answer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? ETIMEDOUT : errno;
    int len = static_cast<int>(n);
    for (auto* h = reinterpret_cast<struct nlmsghdr*>(answer); NLMSG_OK(h, len);
         h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_type == NLMSG_ERROR) {
        return -reinterpret_cast<struct nlmsgerr*>(NLMSG_DATA(h))->error;
      }
      if (h->nlmsg_type == NLMSG_DONE) return EPROTO;
    }
  }
}

absl::Status Step(const char* what, int err) {
  if (err == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("egress interface: ", what, ": ", strerror(err)));
}

}  // namespace

absl::Status SetUpEgressInterface(const std::string& kind) {
  // The dummy module makes dummy0 in the initial namespace; it is unused.
  {
    Request<struct ifinfomsg> del(RTM_DELLINK, 0);
    del.AddString(IFLA_IFNAME, "dummy0");
    int err = Talk(del.Finish());
    if (err != 0 && err != ENODEV) return Step("removing dummy0", err);
  }
  {
    Request<struct ifinfomsg> add(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
    add.body()->ifi_family = AF_UNSPEC;
    add.body()->ifi_flags = IFF_UP;
    add.body()->ifi_change = IFF_UP;
    add.AddString(IFLA_IFNAME, kEgressInterface);
    size_t info = add.Begin(IFLA_LINKINFO);
    add.AddString(IFLA_INFO_KIND, kind);
    add.End(info);
    if (absl::Status s = Step("creating egress0", Talk(add.Finish())); !s.ok()) return s;
  }
  unsigned index = if_nametoindex(kEgressInterface);
  if (index == 0) return Step("finding egress0", errno);
  {
    Request<struct ifaddrmsg> addr(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
    addr.body()->ifa_family = AF_INET;
    addr.body()->ifa_prefixlen = kEgressPrefix;
    addr.body()->ifa_scope = RT_SCOPE_UNIVERSE;
    addr.body()->ifa_index = index;
    struct in_addr a {};
    inet_pton(AF_INET, kEgressAddress, &a);
    addr.Add(IFA_LOCAL, &a, sizeof(a));
    addr.Add(IFA_ADDRESS, &a, sizeof(a));
    if (absl::Status s = Step("adding 10.0.2.15/24", Talk(addr.Finish())); !s.ok()) return s;
  }
  {
    Request<struct rtmsg> route(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
    route.body()->rtm_family = AF_INET;
    route.body()->rtm_table = RT_TABLE_MAIN;
    route.body()->rtm_protocol = RTPROT_BOOT;
    route.body()->rtm_scope = RT_SCOPE_LINK;
    route.body()->rtm_type = RTN_UNICAST;
    route.AddU32(RTA_OIF, index);
    if (absl::Status s = Step("adding the default route", Talk(route.Finish())); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace airlock::guest
