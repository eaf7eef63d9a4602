package gpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/lastmile/lastmile/cuda"
	"github.com/lastmile/lastmile/shm"
)

// DeviceRing is the daemon's side of device staging for one ring
// (docs/gpu.md, "device"): the daemon's own mapping of the ring,
// registered in place; one device slot per ring slot, in one allocation
// the trainer opens through a CUDA IPC handle; one interprocess event per
// slot, recorded after the copy into it; and a stream for the copies.
//
// Protocol, per published batch s in ring slot k = s mod N:
//
//  1. the producer fills ring slot k (as always);
//  2. Stage(s, used) copies its used bytes into device slot k on the
//     stream, records event k, and waits for the copy: once Stage
//     returns, the ring slot may be published and later reused, and the
//     device slot holds the batch;
//  3. the producer publishes s; the trainer, taking s, makes its stream
//     wait on event k (already complete, unless the stream wait races a
//     later record, which the next rule excludes) and reads device slot k;
//  4. the trainer releases ring slot k only after its own work on device
//     slot k is done, so the producer cannot refill ring slot k, nor Stage
//     into device slot k, while the trainer still reads it.
//
// Rejected for now: returning from Stage before the copy completes and
// waiting at the next Acquire of the slot instead. It would take the DMA
// off the packing goroutine's time, but needs a hook in shm's Acquire;
// the synchronous wait costs one slot's copy time per batch
// (unverified: not measured on a GPU).
//
// Stager (stager.go) makes one per rank of a device-staged run and
// announces it in the ring (format 1.2).
type DeviceRing struct {
	c      *cuda.Context
	f      *os.File
	m      *cuda.Mapping
	buf    *cuda.DeviceBuffer
	s      *cuda.Stream
	events []*cuda.Event

	slots      int64
	slotSize   int64
	dataOffset int64
	busID      string
	generation uint64
}

// MaxDeviceSlots is the most ring slots device staging serves: the
// announcement's event handles must fit in page 0's reserved bytes.
const MaxDeviceSlots = 38

// OpenDeviceRing registers the ring file at path with c and makes its
// device slots, events and stream. busID names c's GPU in the
// announcement; generation tells trainers apart the exports of different
// daemon lives. On failure it undoes what it made and returns the error:
// the caller then leaves the ring to host staging.
func OpenDeviceRing(c *cuda.Context, path, busID string, generation uint64) (r *DeviceRing, err error) {
	r = &DeviceRing{c: c, busID: busID, generation: generation}
	defer func() {
		if err != nil {
			err = fmt.Errorf("device staging of ring %s: %w (the ring stays with host staging)", path, errors.Join(err, r.Close()))
			r = nil
		}
	}()
	if r.f, err = os.OpenFile(path, os.O_RDWR, 0); err != nil {
		return r, err
	}
	// held until Close: the trainer's sign that the slots outlive the
	// producer's close (a finished run) but not lastmiled's death
	if err = shm.LockDeviceSlots(int(r.f.Fd())); err != nil {
		return r, err
	}
	st, err := r.f.Stat()
	if err != nil {
		return r, err
	}
	if r.m, err = cuda.Map(int(r.f.Fd()), st.Size()); err != nil {
		return r, err
	}
	h, err := shm.ParseHeader(r.m.Bytes, st.Size())
	if err != nil {
		return r, err
	}
	r.slots, r.slotSize, r.dataOffset = int64(h.SlotCount), h.SlotSize, h.DataOffset
	if r.slots > MaxDeviceSlots {
		return r, fmt.Errorf("%d slots: device staging serves at most %d (use fewer ring slots or staging: host)", r.slots, MaxDeviceSlots)
	}
	if _, err = r.m.Register(c, cuda.RegisterPortable); err != nil {
		return r, err
	}
	if r.buf, err = c.Alloc(r.slots * r.slotSize); err != nil {
		return r, err
	}
	if r.s, err = c.NewStream(cuda.StreamNonBlocking); err != nil {
		return r, err
	}
	for k := int64(0); k < r.slots; k++ {
		ev, err := c.NewEvent(cuda.EventInterprocess | cuda.EventDisableTiming)
		if err != nil {
			return r, err
		}
		r.events = append(r.events, ev)
	}
	return r, nil
}

// Stage copies batch seq's used bytes from its ring slot into its device
// slot, records the slot's event and waits for the copy (step 2 above).
func (r *DeviceRing) Stage(seq uint64, used int64) error {
	if used <= 0 || used > r.slotSize {
		return fmt.Errorf("stage batch %d: %d used bytes in a slot of %d", seq, used, r.slotSize)
	}
	k := int64(seq % uint64(r.slots))
	off := r.dataOffset + k*r.slotSize
	dst := r.buf.Ptr + cuda.DevicePtr(k*r.slotSize)
	if err := r.s.CopyHtoD(dst, r.slotSize, r.m.Bytes[off:off+used]); err != nil {
		return fmt.Errorf("stage batch %d: %w", seq, err)
	}
	if err := r.events[k].Record(r.s); err != nil {
		return fmt.Errorf("stage batch %d: %w", seq, err)
	}
	if err := r.s.Synchronize(); err != nil {
		return fmt.Errorf("stage batch %d: %w", seq, err)
	}
	return nil
}

// DeviceSlot returns device slot k's allocation and offset (tests, checks).
func (r *DeviceRing) DeviceSlot(k int) (cuda.DevicePtr, int64) {
	return r.buf.Ptr + cuda.DevicePtr(int64(k)*r.slotSize), r.slotSize
}

// Announcement returns the bytes that announce the device slots in the
// ring's page 0, at AnnounceOffset (docs/ring-format.md 3.6.1).
func (r *DeviceRing) Announcement() ([]byte, error) {
	a := Announcement{Slots: int(r.slots), PCIBusID: r.busID, Generation: r.generation}
	var err error
	if a.Mem, err = r.buf.IPCHandle(); err != nil {
		return nil, err
	}
	for _, ev := range r.events {
		h, err := ev.IPCHandle()
		if err != nil {
			return nil, err
		}
		a.Events = append(a.Events, h)
	}
	return a.Encode()
}

// errLeftInPlace marks a Close that leaked what a copy may still use:
// the context they live in must stay retained too (Stager.Close).
var errLeftInPlace = errors.New("the ring's mapping and device slots are left in place")

// Close waits for the last copy, frees the device slots, events and
// stream, unregisters the mapping and only then unmaps it. If the wait
// fails, the slots and the mapping are leaked, not freed under a copy
// that may still run. It is safe on a half-made DeviceRing.
func (r *DeviceRing) Close() error {
	var errs []error
	if r.s != nil {
		if err := r.s.Synchronize(); err != nil {
			// A copy may still read the ring and write the slots: both
			// are leaked, not freed or unmapped under the driver (as
			// Mapping.Close leaves a range it could not unregister).
			errs = append(errs, fmt.Errorf("wait for the staging stream: %w (%w)", err, errLeftInPlace))
			r.buf, r.m = nil, nil
		}
	}
	for _, ev := range r.events {
		errs = append(errs, ev.Destroy())
	}
	r.events = nil
	if r.s != nil {
		errs = append(errs, r.s.Destroy())
		r.s = nil
	}
	if r.buf != nil {
		errs = append(errs, r.buf.Free())
		r.buf = nil
	}
	if r.m != nil {
		errs = append(errs, r.m.Close())
		r.m = nil
	}
	if r.f != nil {
		errs = append(errs, r.f.Close())
		r.f = nil
	}
	return errors.Join(errs...)
}

// AnnounceOffset is where the device staging block lies in page 0: the
// announcement area of format 1.2 (docs/ring-format.md 3.6.1), which the
// daemon writes through shm.Producer.Announce.
const AnnounceOffset = 1544

// Announcement is the device staging block of a ring's page 0 (docs/gpu.md).
type Announcement struct {
	Slots      int
	PCIBusID   string
	Generation uint64
	Mem        cuda.IPCMemHandle
	Events     []cuda.IPCEventHandle
}

const announceHead = 96 // the fixed part, before the per-slot event handles

// Encode lays a out; its first word, device_staging = 1, is the one a
// writer stores last.
func (a Announcement) Encode() ([]byte, error) {
	if a.Slots < 1 || a.Slots > MaxDeviceSlots || len(a.Events) != a.Slots {
		return nil, fmt.Errorf("announcement: %d slots with %d event handles: want 1 to %d, one handle each", a.Slots, len(a.Events), MaxDeviceSlots)
	}
	if len(a.PCIBusID) > 16 {
		return nil, fmt.Errorf("announcement: PCI bus id %q longer than 16 bytes", a.PCIBusID)
	}
	b := make([]byte, announceHead+64*a.Slots)
	le := binary.LittleEndian
	le.PutUint32(b[0:], 1)
	le.PutUint32(b[4:], uint32(a.Slots))
	copy(b[8:24], a.PCIBusID)
	le.PutUint64(b[24:], a.Generation)
	copy(b[32:96], a.Mem[:])
	for k, h := range a.Events {
		copy(b[announceHead+64*k:], h[:])
	}
	return b, nil
}

// ParseAnnouncement reads the block at AnnounceOffset of page 0 (b starts
// there). ok is false when the ring announces no device staging.
func ParseAnnouncement(b []byte) (a Announcement, ok bool, err error) {
	if len(b) < announceHead {
		return a, false, fmt.Errorf("announcement: %d bytes, want at least %d", len(b), announceHead)
	}
	le := binary.LittleEndian
	switch le.Uint32(b[0:]) {
	case 0:
		return a, false, nil
	case 1:
	default:
		return a, false, fmt.Errorf("announcement: unknown device_staging %d", le.Uint32(b[0:]))
	}
	n := le.Uint32(b[4:])
	if n < 1 || n > MaxDeviceSlots || len(b) < announceHead+64*int(n) {
		return a, false, fmt.Errorf("announcement: %d device slots in %d bytes (at most %d)", n, len(b), MaxDeviceSlots)
	}
	a.Slots = int(n)
	bus := b[8:24]
	for i, c := range bus {
		if c == 0 {
			bus = bus[:i]
			break
		}
	}
	a.PCIBusID = string(bus)
	a.Generation = le.Uint64(b[24:])
	copy(a.Mem[:], b[32:96])
	a.Events = make([]cuda.IPCEventHandle, n)
	for k := range a.Events {
		copy(a.Events[k][:], b[announceHead+64*k:])
	}
	return a, true, nil
}

// DeviceSlotBase returns the device slots' allocation (tests, checks).
func (r *DeviceRing) DeviceSlotBase() cuda.DevicePtr { return r.buf.Ptr }
