// Package gpu owns what lastmile knows about the GPUs of its host and
// where it puts work for them: the inventory (NVML through
// github.com/NVIDIA/go-nvml: index, UUID, name, memory, PCI bus id, NUMA
// node, CPU affinity), the mapping of a job's ranks to GPUs, the NUMA
// placement of a rank's ring (OnNode: the pages are allocated on the
// GPU's node when the ring is created), and the host's self-test
// (`lastmile gpu check`, Check) of host-to-device bandwidth from ring
// slots registered in place, pageable and pinned memory; and device
// staging's daemon side (DeviceRing for one ring, Stager for a run, the
// announcement block's layout).
//
// Every function here works on a host without a GPU, a driver, NVML or
// cgo: Inventory then returns an error for which NoGPU is true, and
// callers place nothing. The package never fails a job for want of a
// GPU; it is the caller's choice to warn.
//
// It imports package cuda (the driver API) and package shm (to build a
// real ring for the self-test) and no other lastmile package; the daemon
// and the commands import it.
package gpu
