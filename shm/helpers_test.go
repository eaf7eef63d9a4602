package shm_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/shm"
)

// testFields covers every tensor role: dense scalar, dense with trailing
// dimensions, nullable ragged int64, ragged UTF-8 text.
var testFields = []shm.Field{
	{Name: "label", Kind: shm.Dense, DType: shm.Float32},
	{Name: "dense", Kind: shm.Dense, DType: shm.Int32, Dims: []int64{4}},
	{Name: "ids", Kind: shm.Ragged, DType: shm.Int64, Nullable: true},
	{Name: "text", Kind: shm.Ragged, DType: shm.Uint8, UTF8: true},
}

type tensorData struct {
	field int
	role  shm.Role
	dtype shm.DType
	shape []int64
	data  []byte
}

// batchRows is the row count of batch seq.
func batchRows(seq uint64) int { return 3 + int(seq%5) }

func batchCursor(seq uint64) shm.Cursor {
	c := shm.Cursor{Epoch: seq / 10, BatchIndex: seq % 10, Rank: 7}
	if seq%10 == 9 {
		c.Flags = shm.FlagLastInEpoch
	}
	return c
}

// expectBatch returns the tensors of batch seq of testFields, in table
// order. Every byte depends on seq, so a batch read from the wrong slot or
// a torn one cannot pass checkBatch.
func expectBatch(seq uint64) []tensorData {
	rows := batchRows(seq)
	le := binary.LittleEndian
	var out []tensorData

	label := make([]byte, 4*rows)
	for i := 0; i < rows; i++ {
		le.PutUint32(label[4*i:], math.Float32bits(float32(seq)*1000+float32(i)))
	}
	out = append(out, tensorData{0, shm.RoleDense, shm.Float32, []int64{int64(rows)}, label})

	dense := make([]byte, 16*rows)
	for j := 0; j < 4*rows; j++ {
		le.PutUint32(dense[4*j:], uint32(seq)*100+uint32(j))
	}
	out = append(out, tensorData{1, shm.RoleDense, shm.Int32, []int64{int64(rows), 4}, dense})

	var ids, offs, valid []byte
	offs = le.AppendUint64(offs, 0)
	n := 0
	for i := 0; i < rows; i++ {
		ok := (i+int(seq))%4 != 0
		if ok {
			for k := 0; k < (i+int(seq))%3+1; k++ {
				ids = le.AppendUint64(ids, seq<<20|uint64(i)<<8|uint64(k))
				n++
			}
			valid = append(valid, 1)
		} else {
			valid = append(valid, 0)
		}
		offs = le.AppendUint64(offs, uint64(n))
	}
	out = append(out,
		tensorData{2, shm.RoleValues, shm.Int64, []int64{int64(n)}, ids},
		tensorData{2, shm.RoleOffsets, shm.Int64, []int64{int64(rows) + 1}, offs},
		tensorData{2, shm.RoleValidity, shm.Uint8, []int64{int64(rows)}, valid})

	var text, toffs []byte
	toffs = le.AppendUint64(toffs, 0)
	for i := 0; i < rows; i++ {
		text = fmt.Appendf(text, "batch %d, row %d: é", seq, i)
		toffs = le.AppendUint64(toffs, uint64(len(text)))
	}
	out = append(out,
		tensorData{3, shm.RoleValues, shm.Uint8, []int64{int64(len(text))}, text},
		tensorData{3, shm.RoleOffsets, shm.Int64, []int64{int64(rows) + 1}, toffs})
	return out
}

// writeBatch acquires a slot and publishes batch seq of testFields.
func writeBatch(ctx context.Context, p *shm.Producer, seq uint64) error {
	s, err := p.Acquire(ctx)
	if err != nil {
		return err
	}
	if s.Seq() != seq {
		return fmt.Errorf("acquired sequence %d, want %d", s.Seq(), seq)
	}
	if err := s.SetRows(batchRows(seq)); err != nil {
		return err
	}
	s.SetCursor(batchCursor(seq))
	for _, td := range expectBatch(seq) {
		if err := s.AddTensor(td.field, td.role, td.dtype, td.data, td.shape...); err != nil {
			p.Discard(s)
			return err
		}
	}
	return p.Publish(s)
}

// checkBatch compares a delivered batch with batch seq of testFields.
func checkBatch(b *shm.Batch, seq uint64) error {
	if b.Seq != seq {
		return fmt.Errorf("batch seq %d, want %d", b.Seq, seq)
	}
	if b.Rows != batchRows(seq) {
		return fmt.Errorf("batch %d: %d rows, want %d", seq, b.Rows, batchRows(seq))
	}
	if b.Cursor != batchCursor(seq) {
		return fmt.Errorf("batch %d: cursor %+v, want %+v", seq, b.Cursor, batchCursor(seq))
	}
	want := expectBatch(seq)
	if len(b.Tensors) != len(want) {
		return fmt.Errorf("batch %d: %d tensors, want %d", seq, len(b.Tensors), len(want))
	}
	for i, w := range want {
		g := b.Tensors[i]
		if g.Field != w.field || g.Role != w.role || g.DType != w.dtype || !slicesEqual(g.Shape, w.shape) {
			return fmt.Errorf("batch %d tensor %d: field %d %v %v %v, want field %d %v %v %v",
				seq, i, g.Field, g.Role, g.DType, g.Shape, w.field, w.role, w.dtype, w.shape)
		}
		if g.Name != testFields[w.field].Name {
			return fmt.Errorf("batch %d tensor %d: name %q", seq, i, g.Name)
		}
		if g.Offset%shm.PayloadAlign != 0 {
			return fmt.Errorf("batch %d tensor %d: offset %d not aligned", seq, i, g.Offset)
		}
		if !bytes.Equal(g.Data, w.data) {
			return fmt.Errorf("batch %d tensor %d (%s %v): payload differs", seq, i, g.Name, g.Role)
		}
	}
	return nil
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// consumeAll reads batches until Next fails, checking each, and returns
// how many arrived and the final error.
func consumeAll(ctx context.Context, c *shm.Consumer, first uint64) (uint64, error) {
	seq := first
	for {
		b, err := c.Next(ctx)
		if err != nil {
			return seq - first, err
		}
		if err := checkBatch(b, seq); err != nil {
			return seq - first, fmt.Errorf("content check: %w", err)
		}
		seq++
	}
}

func testConfig(t testing.TB, name string, slots int) shm.Config {
	return shm.Config{Dir: t.TempDir(), Name: name, Slots: slots, SlotSize: 8192, Fields: testFields}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Header offsets the tests peek at through the file (§3.2, §3.3).
const (
	offProducerWaiting = 140
	offConsumerWaiting = 268
)

// readWord reads the u32 at off of the ring file (see waitForWord).
func readWord(t *testing.T, path string, off int64) uint32 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [4]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint32(b[:])
}

// waitForWord polls the ring file until the u32 at off equals want: the
// page cache is the mapping's memory, so a pread sees the shared word. It
// is how a test knows a peer really went to sleep, without timing.
func waitForWord(t *testing.T, path string, off int64, want uint32) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if readWord(t, path, off) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("word at %d of %s never became %d", off, path, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// The helper process: the test binary re-executed with
// -test.run=^TestHelperProcess$ and LASTMILE_SHM_HELPER set to a role.
// It talks to its parent in lines on stdout and reads go-ahead lines on
// stdin.

const helperEnv = "LASTMILE_SHM_HELPER"

type helper struct {
	cmd   *exec.Cmd
	lines *bufio.Scanner
	stdin io.WriteCloser
}

// startHelper starts a helper with role and settings (KEY=VALUE pairs).
func startHelper(t testing.TB, role string, env ...string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v=false")
	cmd.Env = append(childEnv(helperEnv+"="+role), env...)
	return startCmd(t, cmd)
}

// childEnv is the environment of a helper process with vars added. It
// turns off the race runtime's one-second sleep at exit (GORACE
// atexit_sleep_ms; ignored by a binary built without -race), which every
// helper's exit otherwise waits out.
func childEnv(vars ...string) []string {
	env := append(os.Environ(), strings.TrimSpace("GORACE=atexit_sleep_ms=0 "+os.Getenv("GORACE")))
	return append(env, vars...)
}

func startCmd(t testing.TB, cmd *exec.Cmd) *helper {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, lines: bufio.NewScanner(out), stdin: in}
	t.Cleanup(func() {
		h.cmd.Process.Kill()
		h.cmd.Wait()
	})
	return h
}

// expect reads the helper's next line and checks its first word.
func (h *helper) expect(t testing.TB, word string) []string {
	t.Helper()
	if !h.lines.Scan() {
		t.Fatalf("helper exited before saying %s: %v", word, h.lines.Err())
	}
	f := strings.Fields(h.lines.Text())
	if len(f) == 0 || f[0] != word {
		t.Fatalf("helper said %q, want %s", h.lines.Text(), word)
	}
	return f[1:]
}

func (h *helper) goAhead(t testing.TB) {
	t.Helper()
	if _, err := io.WriteString(h.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
}

func (h *helper) kill(t testing.TB) {
	t.Helper()
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	h.cmd.Wait()
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// TestHelperProcess is not a test: it is the body of helper processes.
func TestHelperProcess(t *testing.T) {
	role := os.Getenv(helperEnv)
	if role == "" {
		t.Skip("helper process body; runs only when re-executed by another test")
	}
	err := runHelper(role)
	if err != nil {
		fmt.Fprintf(os.Stderr, "helper %s: %v\n", role, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runHelper(role string) error {
	ctx := context.Background()
	in := bufio.NewScanner(os.Stdin)
	dir, name := os.Getenv("H_DIR"), os.Getenv("H_NAME")
	switch role {
	case "produce":
		// Publish H_BATCHES batches; pause for a go-ahead after H_PAUSE of
		// them; then end as H_END says: close, fail, hang (half-write the
		// next slot, say HALF and wait to be killed) or wait.
		p, err := shm.Create(shm.Config{Dir: dir, Name: name, Slots: envInt("H_SLOTS", 4), SlotSize: 8192, Fields: testFields})
		if err != nil {
			fmt.Println("ERROR", err)
			return nil
		}
		fmt.Println("READY", os.Getpid(), p.Generation())
		pause := envInt("H_PAUSE", -1)
		n := uint64(envInt("H_BATCHES", 0))
		for seq := uint64(0); seq < n; seq++ {
			if int(seq) == pause {
				fmt.Println("PUBLISHED", seq)
				in.Scan()
			}
			if err := writeBatch(ctx, p, seq); err != nil {
				return err
			}
		}
		switch end := os.Getenv("H_END"); {
		case end == "close":
			return p.CloseWith("done")
		case strings.HasPrefix(end, "fail:"):
			return p.Fail(strings.TrimPrefix(end, "fail:"))
		case end == "hang":
			s, err := p.Acquire(ctx)
			if err != nil {
				return err
			}
			s.SetRows(batchRows(n))
			td := expectBatch(n)[0]
			buf, err := s.Add(td.field, td.role, td.dtype, td.shape...)
			if err != nil {
				return err
			}
			for i := range buf[:len(buf)/2] {
				buf[i] = 0xee
			}
			fmt.Println("HALF", n)
			select {}
		default:
			fmt.Println("WAITING")
			in.Scan()
			return p.Close()
		}
	case "open":
		// Attach to the ring and say what happened (run as another user).
		c, err := shm.Open(dir, name)
		if err != nil {
			fmt.Println("ERROR", err)
			return nil
		}
		c.Close()
		fmt.Println("OPENED")
	case "consume":
		c, err := shm.Open(dir, name)
		if err != nil {
			return err
		}
		got, err := consumeAll(ctx, c, 0)
		fmt.Printf("END %d %s\n", got, strings.ReplaceAll(fmt.Sprint(err), " ", "_"))
		return c.Close()
	case "bench-consume":
		res, err := shm.RunHandoffConsumer(ctx, dir, name)
		if err != nil {
			return err
		}
		fmt.Println("CONSUMED", res.Batches, res.Wait.Nanoseconds()/max(res.Batches, 1))
		return nil
	case "small-space":
		return smallSpaceHelper(dir)
	}
	return errors.New("unknown helper role " + role)
}
