// gRPC's clock in the guest agent.
#ifndef AIRLOCK_GUEST_GRPC_CLOCK_H_
#define AIRLOCK_GUEST_GRPC_CLOCK_H_

namespace airlock::guest {

// InitGrpc initializes gRPC for the process (the servers built later find
// it done). gRPC 1.51 will not start its clock until CLOCK_MONOTONIC reads
// 2 s or more (it sleeps in steps of 100 ms until then), which a guest's
// agent reaches ~1 s into the boot: InitGrpc moves gRPC's own monotonic
// clock 5 s ahead first, as later gRPC releases do themselves. Only
// gRPC's reading moves (its deadlines are relative, and its timed waits
// convert through the same clock); the guest's clock and what processes
// see are untouched. Where it stops: it relies on gpr_now_impl, the hook
// gRPC's own tests use, which is not in gRPC's headers; a gRPC without it
// fails to link, never silently.
void InitGrpc();

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_GRPC_CLOCK_H_
