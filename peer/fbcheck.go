package peer

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/flight"
)

// Checking an Arrow message header before arrow-go reads it
//
// A FlightData's data header is an Arrow IPC Message, a flatbuffer.
// arrow-go's IPC reader follows its offsets and trusts its vectors'
// lengths: it allocates a schema's claimed number of fields before it
// reads one, so a header of a few bytes that claims billions of fields
// makes the process die out of memory (found by fuzzing whole streams;
// a panic it would recover from, but not that). checkMessage walks what
// the reader will follow (the message, its schema's fields and their
// children, types, dictionaries and metadata, or its record batch's
// nodes and buffers) and refuses a header any of whose tables, strings or
// vectors does not lie within its bytes. A vector's length is then
// bounded by the header's size, and so is what the reader allocates for
// it. Offsets may point anywhere, so a few bytes of fields whose children
// are the same fields again, 64 deep, would describe more fields than
// atoms in the world, for the check and the reader alike: the check
// counts every table it visits and refuses a header with more visits
// than it has words (a header that arrow-go writes never shares one). It
// is a bounds check, not a full flatbuffer verifier: what it lets
// through is what arrow-go checks itself, or recovers from.

// checkedStream hands arrow-go's reader only messages whose headers pass
// checkMessage.
type checkedStream struct{ flight.DataStreamReader }

func (s checkedStream) Recv() (*flight.FlightData, error) {
	fd, err := s.DataStreamReader.Recv()
	if err == nil && len(fd.DataHeader) > 0 {
		err = checkMessage(fd.DataHeader)
	}
	return fd, err
}

// maxHeader bounds a message header: a schema of some 40,000 fields.
const maxHeader = 4 << 20

// maxFieldDepth bounds how deeply a schema's fields nest.
const maxFieldDepth = 64

var errBadHeader = errors.New("malformed Arrow message header")

// Arrow's Message union and Type union tags used here (Message.fbs,
// Schema.fbs).
const (
	headerSchema          = 1
	headerDictionaryBatch = 2
	headerRecordBatch     = 3
	typeUnion             = 14
)

// checkMessage checks an IPC Message header (see above).
func checkMessage(b []byte) error {
	if len(b) > maxHeader {
		return fmt.Errorf("%w: %d bytes (at most %d)", errBadHeader, len(b), maxHeader)
	}
	c := fbCheck{b: b}
	msg := c.root()
	kind := c.u8field(msg, 1)
	header := c.table(msg, 2)
	c.keyValues(msg, 4)
	switch {
	case c.err != nil || header == 0:
	case kind == headerSchema:
		c.fields(header, 1, 0)
		c.keyValues(header, 2)
		c.vector(header, 3, 8)
	case kind == headerRecordBatch:
		c.recordBatch(header)
	case kind == headerDictionaryBatch:
		if data := c.table(header, 1); data != 0 {
			c.recordBatch(data)
		}
	}
	return c.err
}

// fbCheck reads a flatbuffer with every position checked; the first
// failure is kept in err, and reads after it return zeros.
type fbCheck struct {
	b      []byte
	err    error
	visits int // tables visited
}

func (c *fbCheck) fail(what string, at int) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: %s at byte %d of %d", errBadHeader, what, at, len(c.b))
	}
}

func (c *fbCheck) u32(at int) uint32 {
	if c.err != nil || at < 0 || at+4 > len(c.b) {
		c.fail("a word past the end", at)
		return 0
	}
	return binary.LittleEndian.Uint32(c.b[at:])
}

func (c *fbCheck) u16(at int) int {
	if c.err != nil || at < 0 || at+2 > len(c.b) {
		c.fail("a short past the end", at)
		return 0
	}
	return int(binary.LittleEndian.Uint16(c.b[at:]))
}

// deref follows the offset stored at at.
func (c *fbCheck) deref(at int) int {
	to := int64(at) + int64(c.u32(at))
	if c.err == nil && to+4 > int64(len(c.b)) {
		c.fail("an offset past the end", at)
		return 0
	}
	return int(to)
}

// root is the position of the buffer's root table.
func (c *fbCheck) root() int { return c.checkTable(c.deref(0)) }

// checkTable checks the table at t and its vtable, and returns t.
func (c *fbCheck) checkTable(t int) int {
	if c.visits++; c.err == nil && c.visits > len(c.b)/4 {
		c.fail(fmt.Sprintf("%d tables in %d bytes (shared or looping offsets)", c.visits, len(c.b)), t)
		return 0
	}
	vt := int64(t) - int64(int32(c.u32(t)))
	if c.err == nil && (vt < 0 || vt+4 > int64(len(c.b))) {
		c.fail("a vtable past the end", t)
		return 0
	}
	size, tsize := c.u16(int(vt)), c.u16(int(vt)+2)
	if c.err == nil && (size < 4 || int(vt)+size > len(c.b) || t+tsize > len(c.b)) {
		c.fail("a table past the end", t)
		return 0
	}
	return t
}

// field is the position of slot k of the table at t, 0 if it is absent.
func (c *fbCheck) field(t, k int) int {
	if c.err != nil || t == 0 {
		return 0
	}
	vt := t - int(int32(c.u32(t)))
	if 4+2*k+2 > c.u16(vt) {
		return 0
	}
	off := c.u16(vt + 4 + 2*k)
	if off == 0 {
		return 0
	}
	if off >= c.u16(vt+2) {
		c.fail("a field past its table", t)
		return 0
	}
	return t + off
}

func (c *fbCheck) u8field(t, k int) int {
	f := c.field(t, k)
	if f == 0 {
		return 0
	}
	return int(c.b[f])
}

// table is the position of the table in slot k of t, 0 if absent.
func (c *fbCheck) table(t, k int) int {
	f := c.field(t, k)
	if f == 0 {
		return 0
	}
	return c.checkTable(c.deref(f))
}

// vector checks the vector in slot k of t, of elements of elem bytes, and
// returns the position of its first element and its length.
func (c *fbCheck) vector(t, k, elem int) (int, int) {
	f := c.field(t, k)
	if f == 0 {
		return 0, 0
	}
	v := c.deref(f)
	n := int64(c.u32(v))
	if c.err == nil && int64(v)+4+n*int64(elem) > int64(len(c.b)) {
		c.fail(fmt.Sprintf("a vector of %d elements past the end", n), v)
		return 0, 0
	}
	return v + 4, int(n)
}

// tables checks a vector of tables in slot k of t and calls each with
// each table's position.
func (c *fbCheck) tables(t, k int, each func(int)) {
	at, n := c.vector(t, k, 4)
	for i := 0; i < n && c.err == nil; i++ {
		each(c.checkTable(c.deref(at + 4*i)))
	}
}

func (c *fbCheck) keyValues(t, k int) {
	c.tables(t, k, func(kv int) {
		c.vector(kv, 0, 1)
		c.vector(kv, 1, 1)
	})
}

// fields checks a vector of Fields in slot k of t, and their children.
func (c *fbCheck) fields(t, k, depth int) {
	if depth > maxFieldDepth {
		c.fail(fmt.Sprintf("fields nested more than %d deep", maxFieldDepth), t)
		return
	}
	c.tables(t, k, func(f int) {
		c.vector(f, 0, 1) // name
		if typ := c.table(f, 3); typ != 0 && c.u8field(f, 2) == typeUnion {
			c.vector(typ, 1, 4) // type ids
		}
		if dict := c.table(f, 4); dict != 0 {
			c.table(dict, 1) // index type
		}
		c.fields(f, 5, depth+1)
		c.keyValues(f, 6)
	})
}

func (c *fbCheck) recordBatch(t int) {
	c.vector(t, 1, 16) // nodes
	c.vector(t, 2, 16) // buffers
	c.table(t, 3)      // compression
	c.vector(t, 4, 8)  // variadic buffer counts
}
