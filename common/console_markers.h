// The lines the guest agent writes on the serial console for vmmd, which
// reads the console's file (the kernel runs quiet, so these are nearly all
// of it). One header for both sides: a renamed marker is renamed on both.
#ifndef AIRLOCK_COMMON_CONSOLE_MARKERS_H_
#define AIRLOCK_COMMON_CONSOLE_MARKERS_H_

namespace airlock {

// The agent runs (its first act as init): the kernel's own start is over.
// For whoever reads a hung boot's console: it says which side hung.
inline constexpr char kAgentStartedMarker[] = "AIRLOCK-AGENT-STARTED";
// The agent's port is open: vmmd connects.
inline constexpr char kAgentReadyMarker[] = "AIRLOCK-AGENT-READY";
// The boot failed; the line goes on with the reason.
inline constexpr char kAgentFailedMarker[] = "AIRLOCK-AGENT-FAILED";
// The answer to a KVM probe's boot (airlock.probe=1), which powers off.
inline constexpr char kProbeMarker[] = "AIRLOCK-PROBE-OK";

}  // namespace airlock

#endif  // AIRLOCK_COMMON_CONSOLE_MARKERS_H_
