// A restored sandbox's guest memory: its own copy of the snapshot's memory
// image, made in the kernel before QEMU starts.
//
// A snapshot keeps the guest's RAM as a sparse file (only the pages the
// guest had written). Loading those pages through QEMU's migration stream
// costs a page fault per page, all of them before the guest runs; on a
// nested host that was most of a restore. Instead the pages are copied
// into a new memfd with sendfile (no page fault: the kernel allocates and
// fills them), QEMU maps that memfd as the guest's RAM (shared, so free
// page reporting gives pages back by punching holes in it), and the
// migration stream carries only device state.
//
// Each sandbox gets its own copy: a snapshot's file is never mapped by a
// VM, so a guest (or a QEMU it took over) cannot change what another
// sandbox restores, and a guest's memory is charged to its own cgroup
// (the jail makes the copy after joining it).
#ifndef AIRLOCK_VMMD_MEMORY_IMAGE_H_
#define AIRLOCK_VMMD_MEMORY_IMAGE_H_

namespace airlock::vmmd {

// The descriptor QEMU finds its guest memory at (a memory backend whose
// mem-path is /proc/self/fd/4).
inline constexpr int kMemoryImageFd = 4;
inline constexpr char kMemoryImagePath[] = "/proc/self/fd/4";

// CopyToMemfd makes a memfd (close-on-exec) the size of the file open at
// `image_fd` and copies the file's data into it, leaving its holes as
// holes. Returns the memfd, or -errno. Allocates nothing and calls only
// system calls, so a child forked from a threaded vmmd may call it.
int CopyToMemfd(int image_fd);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_MEMORY_IMAGE_H_
