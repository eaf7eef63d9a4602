package decode

import (
	"fmt"
	"unsafe"

	"github.com/parquet-go/parquet-go/format"
)

// Checking thrift metadata before the reflective decoder reads it.
//
// parquet-go's thrift decoder makes a list's slice as long as the list
// header says, before it reads an element. A footer of a few hundred
// bytes that declared 2^32 column chunks made it ask for 24 GiB at once:
// an out-of-memory crash that no recover stops (FuzzPlanFooter found it).
// lastmiled plans the files its users name, so one such file would stop
// every user's jobs. checkThrift walks the bytes first, allocating
// nothing, and refuses them when they are malformed or would decode to
// more than maxThriftAlloc bytes.
//
// The estimate. Every list element takes at least a byte on the wire, so
// a list longer than the bytes left is malformed. What an element costs
// decoded depends on the Go type it lands in, which the bytes do not say:
// an empty struct, one byte, decodes to a 560-byte ColumnChunk in a row
// group's column list and to a 12-byte PageEncodingStats in a chunk's
// encoding stats. So the walk knows where parquet's lists of structs are
// (listOf) and charges each element its type's size; a list of structs it
// does not know is charged listStructBytes, the largest struct of the
// metadata. A struct met as a field costs structFieldBytes (it is held by
// value in its parent, or is a small union member behind a pointer), a
// binary its bytes. On real footers the estimate came within 0.7-1.3x of
// what the decoder allocated (runtime.MemStats around thrift.Unmarshal
// of testdata's footers and a generated 50-row-group one); a real footer
// decodes to about ten times its size (a column chunk of 50-150 bytes on
// the wire is a 560-byte struct), TestThriftAllocOfRealFooters.
//
// Cost: on a 77 KB footer (50 row groups of 18 columns) the walk took
// 0.36 ms and the decode after it 1.46 ms, so planning a file's footer
// costs a quarter more CPU; page indexes are a few hundred bytes.
//
// Rejected: a limit on the footer's length alone (a 256 MiB footer of
// one-byte column chunks is 140 GiB decoded, and real footers reach tens
// of MiB); decoding with a hand-written reader (the metadata's schema is
// large and parquet-go keeps it current); a memory limit for the process
// (the Go runtime cannot refuse one allocation, only collect sooner).

// maxThriftAlloc bounds what one footer or page index may make the
// reflective decoder allocate. Real footers decode to about ten times
// their size, so this admits footers of up to about 100 MiB, far past
// what writers make (parquet-mr and pyarrow footers of a few MiB already
// slow every reader); a larger one is refused with a message that says
// so.
const maxThriftAlloc = 1 << 30

// The sizes the estimate uses, in bytes: an element of a list of structs
// the walk does not know (at least the largest struct of parquet's
// metadata, TestThriftStructBytes), and a struct met as a field.
const (
	listStructBytes  = 576
	structFieldBytes = 64
)

// metaStruct names the structs of parquet's metadata that hold lists of
// structs, so that the walk knows what their elements decode to.
type metaStruct uint8

const (
	metaOther metaStruct = iota
	metaFile
	metaRowGroup
	metaColumnChunk
	metaColumnMeta
	metaOffsetIndex
)

// listOf is what field id of a parent struct holds when it is a list of
// structs: the elements' kind and Go size.
func listOf(parent metaStruct, id int16) (metaStruct, int64) {
	switch {
	case parent == metaFile && id == 2:
		return metaOther, int64(unsafe.Sizeof(format.SchemaElement{}))
	case parent == metaFile && id == 4:
		return metaRowGroup, int64(unsafe.Sizeof(format.RowGroup{}))
	case parent == metaFile && id == 5, parent == metaColumnMeta && id == 8:
		return metaOther, int64(unsafe.Sizeof(format.KeyValue{}))
	case parent == metaFile && id == 7:
		return metaOther, int64(unsafe.Sizeof(format.ColumnOrder{}))
	case parent == metaRowGroup && id == 1:
		return metaColumnChunk, int64(unsafe.Sizeof(format.ColumnChunk{}))
	case parent == metaRowGroup && id == 4:
		return metaOther, int64(unsafe.Sizeof(format.SortingColumn{}))
	case parent == metaColumnMeta && id == 13:
		return metaOther, int64(unsafe.Sizeof(format.PageEncodingStats{}))
	case parent == metaOffsetIndex && id == 1:
		return metaOther, int64(unsafe.Sizeof(format.PageLocation{}))
	}
	return metaOther, listStructBytes
}

// thriftElemBytes is what one element of thrift type t, in a list the
// walk does not know, costs decoded.
func thriftElemBytes(t byte) int64 {
	switch t {
	case tTrue, tFalse, tByte:
		return 1
	case tI16:
		return 2
	case tI32:
		return 4
	case tI64, tDouble:
		return 8
	case tStruct:
		return listStructBytes
	}
	return 24 // a slice or string header
}

// metaKind is the kind of struct v (what unmarshalThrift decodes into).
func metaKind(v any) metaStruct {
	switch v.(type) {
	case *format.FileMetaData:
		return metaFile
	case *format.OffsetIndex:
		return metaOffsetIndex
	}
	return metaOther
}

// checkThrift walks b as one thrift compact-protocol struct of kind k, as
// the reflective decoder will read it, and refuses it when it is
// malformed (a list longer than the bytes left, nesting deeper than 16, a
// value past the end) or would decode to more than maxThriftAlloc bytes.
func checkThrift(b []byte, k metaStruct) error {
	r := thriftReader{b: b}
	if err := r.checkStruct(k, 0); err != nil {
		return fmt.Errorf("malformed thrift metadata near byte %d of %d", r.pos, len(b))
	}
	if need := r.alloc + int64(len(b)); need > maxThriftAlloc {
		return fmt.Errorf("%d bytes of thrift metadata would take %d MiB to decode (the limit is %d MiB): the file is damaged or has far too many row groups or columns; rewrite it with fewer", len(b), need>>20, maxThriftAlloc>>20)
	}
	return nil
}

// checkStruct moves past a struct of kind k as skipStruct does, charging
// the lists of structs it knows by their elements' types.
func (r *thriftReader) checkStruct(k metaStruct, depth int) error {
	if depth > 16 {
		return errThrift
	}
	var last int16
	for {
		id, t, err := r.field(last)
		if err != nil {
			return err
		}
		switch t {
		case tStop:
			return nil
		case tStruct:
			r.alloc += structFieldBytes
			sub := metaOther
			if k == metaColumnChunk && id == 3 {
				sub = metaColumnMeta
			}
			err = r.checkStruct(sub, depth+1)
		case tList, tSet:
			err = r.checkList(k, id, depth+1)
		default:
			err = r.skip(t, depth+1)
		}
		if err != nil {
			return err
		}
		last = id
	}
}

// checkList moves past field id of a struct of kind k, a list.
func (r *thriftReader) checkList(k metaStruct, id int16, depth int) error {
	start := r.pos
	n, et, err := r.listHeader()
	if err != nil {
		return err
	}
	if et != tStruct {
		r.pos = start
		return r.skipList(depth)
	}
	ek, size := listOf(k, id)
	r.alloc += int64(n) * size
	for range n {
		if err := r.checkStruct(ek, depth+1); err != nil {
			return err
		}
	}
	return nil
}
