package shm_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"

	"github.com/lastmile/lastmile/shm"
)

// realRing creates a ring with a few batches in it and returns its file's
// bytes, to seed the fuzzers with real headers and slots.
func realRing(f *testing.F) ([]byte, shm.Header) {
	cfg := testConfig(f, "seed", 3)
	p, err := shm.Create(cfg)
	if err != nil {
		f.Fatal(err)
	}
	ctx := testCtx(f)
	for seq := uint64(0); seq < 3; seq++ {
		if err := writeBatch(ctx, p, seq); err != nil {
			f.Fatal(err)
		}
	}
	p.Close()
	b, err := os.ReadFile(p.Path())
	if err != nil {
		f.Fatal(err)
	}
	h, err := shm.ParseHeader(b, int64(len(b)))
	if err != nil {
		f.Fatal(err)
	}
	return b, h
}

// headerOf returns the header of a new ring of the given fields, to seed
// FuzzParseHeader: a jagged field gives a key table after the field
// entries (format 2.0), a weighted one flag bit 2 (format 3.0).
func headerOf(f *testing.F, name string, fields []shm.Field) []byte {
	cfg := testConfig(f, name, 2)
	cfg.Fields = fields
	p, err := shm.Create(cfg)
	if err != nil {
		f.Fatal(err)
	}
	defer p.Close()
	b, err := os.ReadFile(p.Path())
	if err != nil {
		f.Fatal(err)
	}
	h, err := shm.ParseHeader(b, int64(len(b)))
	if err != nil {
		f.Fatal(err)
	}
	return b[:h.HeaderSize]
}

// addSlotSeeds seeds f with every slot of the ring file, cut after its
// used bytes and 64 more.
func addSlotSeeds(f *testing.F, file []byte) {
	h, err := shm.ParseHeader(file, int64(len(file)))
	if err != nil {
		f.Fatal(err)
	}
	for k := 0; k < h.SlotCount; k++ {
		slot := file[h.DataOffset+int64(k)*h.SlotSize : h.DataOffset+int64(k+1)*h.SlotSize]
		used := binary.LittleEndian.Uint64(slot[8:])
		f.Add(slot[:min(used+64, uint64(len(slot)))])
	}
}

func FuzzParseHeader(f *testing.F) {
	file, h := realRing(f)
	hdr := file[:h.HeaderSize]
	f.Add(hdr, int64(len(file)))
	f.Add(hdr, int64(100))
	f.Add(hdr[:4096], int64(len(file)))
	f.Add(headerOf(f, "seed-jagged", jaggedFields), int64(len(file)))
	f.Add(headerOf(f, "seed-weighted", weightedFields), int64(len(file)))
	f.Add([]byte("LMRING\x00\x01"), int64(8))
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		h, err := shm.ParseHeader(b, size)
		if err != nil {
			return
		}
		if h.HeaderSize > int64(len(b)) || h.HeaderSize > h.DataOffset ||
			h.DataOffset+int64(h.SlotCount)*h.SlotSize > size || h.SlotSize%4096 != 0 {
			t.Fatalf("accepted inconsistent header %+v for %d bytes of a %d-byte file", h, len(b), size)
		}
	})
}

func FuzzParseSlot(f *testing.F) {
	file, _ := realRing(f)
	addSlotSeeds(f, file)
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, b []byte) {
		orig := bytes.Clone(b)
		sh, tensors, err := shm.ParseSlot(b, testFields, nil)
		if !bytes.Equal(b, orig) {
			t.Fatal("ParseSlot modified its input")
		}
		if err != nil {
			return
		}
		if sh.UsedBytes > int64(len(b)) || len(tensors) != shm.TensorCount(testFields) {
			t.Fatalf("accepted slot header %+v with %d tensors for %d bytes", sh, len(tensors), len(b))
		}
		for _, tn := range tensors {
			if tn.Offset+int64(len(tn.Data)) > sh.UsedBytes || tn.Offset%shm.PayloadAlign != 0 {
				t.Fatalf("tensor %s %v at %d+%d outside used_bytes %d", tn.Name, tn.Role, tn.Offset, len(tn.Data), sh.UsedBytes)
			}
		}
	})
}

// FuzzParseWeightedSlot parses slots of a ring with a weighted jagged
// field (format 3): whatever it accepts has tensors inside used_bytes and
// exactly one weight per value.
func FuzzParseWeightedSlot(f *testing.F) {
	cfg := testConfig(f, "seed-weighted", 3)
	cfg.Fields = weightedFields
	p, err := shm.Create(cfg)
	if err != nil {
		f.Fatal(err)
	}
	ctx := testCtx(f)
	for _, lengths := range [][]int64{{1, 3, 0, 2}, {0, 0, 0, 0}, {5, 0, 1, 1}} {
		if err := writeWeighted(ctx, p, 2, lengths, nil); err != nil {
			f.Fatal(err)
		}
	}
	p.Close()
	file, err := os.ReadFile(p.Path())
	if err != nil {
		f.Fatal(err)
	}
	addSlotSeeds(f, file)
	f.Fuzz(func(t *testing.T, b []byte) {
		sh, tensors, err := shm.ParseSlot(b, weightedFields, nil)
		if err != nil {
			return
		}
		var values, weights int64 = -1, -2
		for _, tn := range tensors {
			if tn.Offset+int64(len(tn.Data)) > sh.UsedBytes || tn.Offset%shm.PayloadAlign != 0 {
				t.Fatalf("tensor %s %v at %d+%d outside used_bytes %d", tn.Name, tn.Role, tn.Offset, len(tn.Data), sh.UsedBytes)
			}
			switch {
			case tn.Name == "scored" && tn.Role == shm.RoleValues:
				values = tn.Shape[0]
			case tn.Name == "scored" && tn.Role == shm.RoleWeights:
				weights = tn.Shape[0]
			}
		}
		if values != weights {
			t.Fatalf("accepted %d weights for %d values", weights, values)
		}
	})
}
