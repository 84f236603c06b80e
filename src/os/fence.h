// Self-fencing (docs/architecture.md, "Self-fencing"): in cluster mode another node may rerun a
// job once this node's heartbeat has lapsed past node_timeout. The daemon stamps a fence file
// after every heartbeat the store accepted; each shim reads it and stops its job when the
// stamp is older than RunSpec::fence_after_ms. The shim needs nothing else from the daemon,
// so the fence holds while the daemon is frozen (SIGSTOP), stuck or dead.
//
// Times are CLOCK_BOOTTIME milliseconds, not wall time: a clock step (NTP, an admin's date)
// must neither fence every job nor keep a stale node's jobs running, and unlike
// CLOCK_MONOTONIC it keeps counting while the machine is suspended, as the other nodes'
// clocks do. Writer and readers share the machine, hence the clock; the stamp carries the
// boot id, so a file left from before a reboot counts as absent.
//
// The file: one line "BOOTTIME_MS BOOT_ID\n", replaced atomically (temp file, rename).
#pragma once

#include <cstdint>
#include <string>

#include "trainq/status.h"

namespace trainq {

// Milliseconds of CLOCK_BOOTTIME: since boot, suspend included.
int64_t BootClockMs();

// This boot's id (/proc/sys/kernel/random/boot_id, 36 characters); "" if unreadable.
const std::string& BootId();

// Records that the node's heartbeat was renewed at `renewed_at_ms` (BootClockMs). Pass the
// time read *before* sending the heartbeat that succeeded: the store's record of it is then
// at least as fresh as the stamp, so a shim never believes the node fresher than the leader
// does. Atomic (temp file, rename), not fsync'd: a power loss ends the jobs too. The file is
// created 0600, for the daemon's user, as the shims are.
Status WriteFenceStamp(const std::string& path, int64_t renewed_at_ms);

// The stamp in `path`: kNotFound when the file is absent or was written in another boot,
// kInvalid when it is not a stamp (cut short, edited by hand).
Result<int64_t> ReadFenceStamp(const std::string& path);

// How often a shim reads the fence file: fence_after_ms / 10, within 50..500 ms.
int64_t FenceCheckIntervalMs(int64_t fence_after_ms);

}  // namespace trainq
