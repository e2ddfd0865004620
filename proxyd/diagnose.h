// The facts `airlock daemon doctor` shows: how proxyd meets this host's
// network (resolver, operator settings, trust store) and, for each host
// asked about, whether an allowed sandbox connection would get through and
// what to set when it would not.
#ifndef AIRLOCK_PROXYD_DIAGNOSE_H_
#define AIRLOCK_PROXYD_DIAGNOSE_H_

#include <string>
#include <vector>

#include "protos/proxy/v1/proxy.pb.h"
#include "proxyd/attachment.h"

namespace airlock::proxyd {

// Diagnose tries each host on `port` (resolve, connect, TLS handshake
// verified like an upstream of an intercepted connection), at most a few
// seconds each, and sends nothing beyond the handshake.
airlock::proxy::v1::DiagnoseResponse Diagnose(const ProxyContext& px,
                                              const std::vector<std::string>& hosts,
                                              uint16_t port);

// Nameservers lists the "nameserver" lines of a resolv.conf text.
std::vector<std::string> Nameservers(const std::string& resolv_conf);

}  // namespace airlock::proxyd

#endif  // AIRLOCK_PROXYD_DIAGNOSE_H_
