package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/lastmile/lastmile/shm"
)

// catOptions are cat's flags and argument once parsed.
type catOptions struct {
	dir    string
	max    int // batches; 0 reads to the end of the stream
	wait   time.Duration
	digest bool
	ring   string
}

// catRead is what cat read from a ring.
type catRead struct {
	d           *digest
	first, last shm.Cursor
	elapsed     time.Duration
	st          shm.ConsumerStats
	err         error // the stream's error, returned after the report
	// tensors and inArena count the tensors read, and those read from
	// the job's unit arena (ring format 4.2).
	tensors, inArena int64
}

func runCat(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseCatFlags(args, stderr)
	if err != nil {
		return err
	}
	if err := rankRingsHint(o.dir, o.ring); err != nil {
		return err
	}
	c, err := shm.WaitOpen(ctx, o.dir, o.ring, shm.OpenOptions{}, o.wait)
	if err != nil {
		return err
	}
	defer c.Close()
	if l := c.Leftover(); l != "" {
		fmt.Fprintf(stderr, "lastmile cat: %s\n", l)
	}

	r := readRing(ctx, c, o.max)
	if o.digest {
		if err := json.NewEncoder(stdout).Encode(r.d.result()); err != nil {
			return err
		}
		return r.err
	}
	writeCatSummary(stdout, c, r)
	return r.err
}

// parseCatFlags parses cat's flags and its one argument, the ring name.
func parseCatFlags(args []string, stderr io.Writer) (*catOptions, error) {
	fs := newFlags("cat", stderr)
	o := &catOptions{}
	dir := shmDirFlag(fs)
	fs.IntVar(&o.max, "n", 0, "stop after this many batches (0: read to the end of the stream)")
	fs.DurationVar(&o.wait, "wait", 10*time.Second, "how long to wait for the ring to appear (a ring left from an earlier run, finished and read, counts as not there yet)")
	fs.BoolVar(&o.digest, "digest", false, "print a JSON digest of every column (row count, SHA-256 of values, lengths and validity) instead of the summary")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: lastmile cat [flags] RING\n\nAttaches to a ring as its consumer, reads its batches and summarizes them.\n\nFlags:")
		printFlags(fs, "dir")
	}
	if err := parseArgs(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() != 1 {
		return nil, fmt.Errorf("%w: want one ring name, got %d arguments", errUsage, fs.NArg())
	}
	o.dir, o.ring = *dir, fs.Arg(0)
	return o, nil
}

// readRing reads batches from c until the stream ends, an error, or
// maxBatches (0: no limit), digesting each, then releases the last one.
func readRing(ctx context.Context, c *shm.Consumer, maxBatches int) catRead {
	r := catRead{d: newDigest()}
	start := time.Now()
	for maxBatches == 0 || r.d.Batches < int64(maxBatches) {
		b, err := c.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			r.err = err
			break
		}
		if r.d.Batches == 0 {
			r.first = b.Cursor
		}
		r.last = b.Cursor
		r.d.add(b)
		for i := range b.Tensors {
			r.tensors++
			if b.Tensors[i].InArena {
				r.inArena++
			}
		}
	}
	c.Release()
	r.elapsed = time.Since(start)
	r.st = c.Stats()
	return r
}

// writeCatSummary prints cat's report of what it read: the stream's
// totals and rates, its cursors, the consumer's waits and each field.
func writeCatSummary(stdout io.Writer, c *shm.Consumer, r catRead) {
	d := r.d
	secs := r.elapsed.Seconds()
	fmt.Fprintf(stdout, "ring %s: %d batches, %d rows%s, %.1f MB in %.2fs (%.0f rows/s, %.0f MB/s)\n",
		c.Name(), d.Batches, d.Rows, d.padding(), float64(d.Bytes)/1e6, secs, float64(d.Rows)/secs, float64(d.Bytes)/1e6/secs)
	if d.Batches > 0 {
		fmt.Fprintf(stdout, "cursor: first epoch %d batch %d rank %d, last epoch %d batch %d rank %d\n",
			r.first.Epoch, r.first.BatchIndex, r.first.Rank, r.last.Epoch, r.last.BatchIndex, r.last.Rank)
	}
	fmt.Fprintf(stdout, "waited on an empty ring %d times, %.3fs in all\n", r.st.EmptyWaits, r.st.EmptyWait.Seconds())
	if h := c.Header(); h.ArenaID != 0 {
		fmt.Fprintf(stdout, "unit arena %s (%.1f MB): %d of %d tensors read from it\n",
			shm.ArenaName(h.ArenaID), float64(h.ArenaSize)/1e6, r.inArena, r.tensors)
	}
	for _, f := range c.Header().Fields {
		fd := d.fields[f.Name]
		if fd == nil {
			continue
		}
		kind := "dense " + denseShape(f.Dims)
		switch f.Kind {
		case shm.Ragged:
			kind = fmt.Sprintf("ragged, %.1f values/row", float64(fd.values)/float64(max64(d.Rows, 1)))
		case shm.Jagged:
			kind = fmt.Sprintf("jagged%s, %d keys, %.1f values/row", weightedWord(f.Weighted), len(f.Keys), float64(fd.values)/float64(max64(d.Rows, 1)))
		}
		nulls := ""
		if f.Nullable {
			nulls = fmt.Sprintf(", %d nulls", fd.nulls)
		}
		fmt.Fprintf(stdout, "  %-16s %-8v %s%s\n", f.Name, f.DType, kind, nulls)
	}
	if msg := c.Message(); msg != "" {
		fmt.Fprintf(stdout, "producer says: %s\n", msg)
	}
}

// rankRingsHint returns an error listing the rings of a job's ranks
// (NAME.r0, NAME.r1, ...) when there is no ring NAME but there are those:
// a job with world_size > 1 has one ring per rank, and NAME is its bare
// name. It returns nil otherwise.
func rankRingsHint(dir, name string) error {
	if dir == "" {
		dir = shm.DefaultDir()
	}
	if _, err := os.Lstat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	type ring struct {
		name string
		rank int
	}
	var rings []ring
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), name+".r")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if r, err := strconv.Atoi(rest); err == nil && r >= 0 && strconv.Itoa(r) == rest {
			rings = append(rings, ring{e.Name(), r})
		}
	}
	if len(rings) == 0 {
		return nil
	}
	sort.Slice(rings, func(i, j int) bool { return rings[i].rank < rings[j].rank })
	names := make([]string, len(rings))
	for i, r := range rings {
		names[i] = r.name
	}
	flag := ""
	if dir != shm.DefaultDir() {
		flag = "-shm-dir " + dir + " "
	}
	return fmt.Errorf("no ring %s in %s, but %d rings of its ranks (one per rank when world_size > 1): %s; read one: lastmile cat %s%s",
		name, dir, len(names), strings.Join(names, ", "), flag, names[0])
}

// denseShape is a dense field's shape per batch: [B], or [B, 8] for a
// stack of 8 columns.
func denseShape(dims []int64) string {
	var b strings.Builder
	b.WriteString("[B")
	for _, d := range dims {
		fmt.Fprintf(&b, ", %d", d)
	}
	b.WriteString("]")
	return b.String()
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// digest accumulates, per field, SHA-256 hashes of the values, of the row
// lengths (ragged fields, as int64 little-endian) and of the validity bytes,
// over every batch in stream order. It does not depend on how rows were cut
// into batches, so a test can compare it with one computed from the input;
// except for jagged fields, hashed like ragged ones in each batch's
// key-major order (lengths from the offsets), which the batch size decides,
// and their weights, if weighted, in the same order. The Python client's
// lastmile.digest computes the same.
type digest struct {
	Batches, Rows, Bytes int64
	// Pad is the padding rows of padded batches (pad_rows), included in
	// Rows; PadUnknown counts padded batches of a format x.0 ring, which
	// does not say how many of their rows are padding.
	Pad, PadUnknown int64
	order           []string
	fields          map[string]*fieldDigest
}

type fieldDigest struct {
	hValues, hLengths, hValid, hWeights hash.Hash
	values, nulls                       int64 // ragged values and nulls seen
	hasLengths, hasValid, hasWeights    bool
	buf                                 []byte
}

func newDigest() *digest { return &digest{fields: map[string]*fieldDigest{}} }

func (d *digest) field(name string) *fieldDigest {
	f := d.fields[name]
	if f == nil {
		f = &fieldDigest{hValues: sha256.New(), hLengths: sha256.New(), hValid: sha256.New(), hWeights: sha256.New()}
		d.fields[name] = f
		d.order = append(d.order, name)
	}
	return f
}

func (d *digest) add(b *shm.Batch) {
	d.Batches++
	d.Rows += int64(b.Rows)
	if n, known := b.RealRows(); !known {
		d.PadUnknown++
	} else {
		d.Pad += int64(b.Rows - n)
	}
	for i := range b.Tensors {
		t := &b.Tensors[i]
		d.Bytes += int64(len(t.Data))
		f := d.field(t.Name)
		switch t.Role {
		case shm.RoleDense, shm.RoleValues:
			f.hValues.Write(t.Data)
			if t.Role == shm.RoleValues {
				f.values += int64(len(t.Data)) / max(1, int64(t.DType.Size()))
			}
		case shm.RoleOffsets:
			f.hasLengths = true
			n := len(t.Data) / 8
			offs := unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(t.Data))), n)
			f.buf = f.buf[:0]
			for j := 1; j < n; j++ {
				f.buf = binary.LittleEndian.AppendUint64(f.buf, uint64(offs[j]-offs[j-1]))
			}
			f.hLengths.Write(f.buf)
		case shm.RoleWeights:
			f.hasWeights = true
			f.hWeights.Write(t.Data)
		case shm.RoleValidity:
			f.hasValid = true
			f.hValid.Write(t.Data)
			for _, v := range t.Data {
				if v == 0 {
					f.nulls++
				}
			}
		}
	}
}

// padding describes the padding rows among the rows read, for the
// summary: "" when there are none.
func (d *digest) padding() string {
	s := ""
	if d.Pad > 0 {
		s = fmt.Sprintf(" (%d of them padding)", d.Pad)
	}
	if d.PadUnknown > 0 {
		s += fmt.Sprintf(" (%d padded batches of a format x.0 ring, which does not say how many rows are padding)", d.PadUnknown)
	}
	return s
}

// DigestResult is the JSON form of a digest.
type DigestResult struct {
	Batches int64                  `json:"batches"`
	Rows    int64                  `json:"rows"`
	Fields  map[string]FieldDigest `json:"fields"`
}

// FieldDigest is one field's hashes, hex-encoded.
type FieldDigest struct {
	Values  string `json:"values"`
	Lengths string `json:"lengths,omitempty"`
	Valid   string `json:"valid,omitempty"`
	Weights string `json:"weights,omitempty"` // a weighted jagged field's
}

func (d *digest) result() DigestResult {
	r := DigestResult{Batches: d.Batches, Rows: d.Rows, Fields: map[string]FieldDigest{}}
	for name, f := range d.fields {
		fd := FieldDigest{Values: hex.EncodeToString(f.hValues.Sum(nil))}
		if f.hasLengths {
			fd.Lengths = hex.EncodeToString(f.hLengths.Sum(nil))
		}
		if f.hasValid {
			fd.Valid = hex.EncodeToString(f.hValid.Sum(nil))
		}
		if f.hasWeights {
			fd.Weights = hex.EncodeToString(f.hWeights.Sum(nil))
		}
		r.Fields[name] = fd
	}
	return r
}

// weightedWord qualifies a jagged field in cat's summary.
func weightedWord(weighted bool) string {
	if weighted {
		return " weighted"
	}
	return ""
}
