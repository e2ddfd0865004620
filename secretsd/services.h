// The built-in services: which environment variables a guest sees for
// each, which hosts its value is injected into, and how (Credential.format).
// The table itself is data, in services.cc.
#ifndef AIRLOCK_SECRETSD_SERVICES_H_
#define AIRLOCK_SECRETSD_SERVICES_H_

#include <string>
#include <vector>

namespace airlock::secretsd {

// Credential formats, as proxyd places them (proxyd/inject.h):
//   "header:<name>"             header <name> carries the value
//   "header:<name>=<template>"  it carries <template>, its "%s" replaced by
//                               the value (Kits' formats, "Token %s")
//   "bearer"                    `Authorization: Bearer <value>`
//   "basic:<user>"              `Authorization: Basic base64(<user>:<value>)`
//   "replace"                   every occurrence of the sentinel becomes the
//                               value
// The header formats fill the header when the guest left it out or sent the
// sentinel in it; a value of the guest's own is left alone. The exact rules
// are ParseFormat's (common/inject_format.h), which secretsd applies
// to a Kit's formats.
inline constexpr char kFormatBearer[] = "bearer";
inline constexpr char kFormatReplace[] = "replace";

// ServiceHost is one host of a service and how its value is placed there.
struct ServiceHost {
  std::string host;
  std::string format;
};

// ServiceDef is one row of the built-in table.
struct ServiceDef {
  std::string name;
  // Guest environment variables, all set to the service's sentinel.
  std::vector<std::string> env;
  std::vector<ServiceHost> hosts;
  // Format as the Services RPC reports it: the hosts' common format, or a
  // name for a per-host mix ("github").
  std::string format;

  // HostNames lists hosts[].host.
  std::vector<std::string> HostNames() const;
};

// BuiltinServices is the whole table, in a stable order.
const std::vector<ServiceDef>& BuiltinServices();

// FindService is the row named `name`, or nullptr.
const ServiceDef* FindService(const std::string& name);

// ServiceOwningEnv is the service whose guest env includes `env`, or
// nullptr.
const ServiceDef* ServiceOwningEnv(const std::string& env);

}  // namespace airlock::secretsd

#endif  // AIRLOCK_SECRETSD_SERVICES_H_
