package ops_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/ops"
)

func list32col(name string, rows [][]int32) column.Column {
	c := column.Column{Name: name, Kind: column.List, DType: column.Int32, Width: 1, Len: len(rows), Offsets: []int64{0}}
	n := int64(0)
	for _, r := range rows {
		for _, v := range r {
			c.Data = binary.LittleEndian.AppendUint32(c.Data, uint32(v))
			n++
		}
		c.Offsets = append(c.Offsets, n)
	}
	return c
}

func TestSpecRejects(t *testing.T) {
	b := batchOf(
		i64col("id", []int64{1}, nil),
		i32col("n", []int32{1}, []byte{1}),
		list32col("s", [][]int32{{1}}),
		listcol("s64", [][]int64{{1}}, nil),
		boolcolRV("flag", []bool{true}, []byte{1}),
	)
	bad := []string{
		"- sample: {key: id, rates: [{rate: 0}]}",
		"- sample: {key: id, rates: [{rate: 1.5}]}",
		"- sample: {key: id, rates: [{rate: -0.5}]}",
		"- sample: {key: id, rates: [{rate: .nan}]}",
		"- sample: {key: id, rates: [{rate: 0.5}, {rate: 0.2}]}",
		"- sequence: {column: s, length: 4, pad_value: 3000000000}",
		"- sequence: {column: s, length: 4, pad_value: 1.5}",
		"- sequence: {column: s64, length: 4, pad_value: 1.5}",
		"- sequence: {column: s, length: -1}",
		"- nulls: {policy: fill, columns: [n], fill: 1.5}",
		"- nulls: {policy: fill, columns: [n], fill: 3000000000}",
		"- nulls: {policy: fill, columns: [flag], fill: 2}",
	}
	for _, op := range bad {
		j, err := parseJob("", op)
		if err == nil {
			_, err = ops.Compile(context.Background(), j, fieldsOf(b), ops.Env{})
		}
		if err == nil {
			t.Errorf("%s: accepted", op)
		}
	}
}

func boolcolRV(name string, vals []bool, valid []byte) column.Column {
	c := column.Column{Name: name, Kind: column.Fixed, DType: column.Bool, Width: 1, Len: len(vals), Valid: valid}
	for _, v := range vals {
		x := byte(0)
		if v {
			x = 1
		}
		c.Data = append(c.Data, x)
	}
	return c
}
