package decode

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	arrowpq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/format"
)

// decRow holds decimals as Spark stores them: INT32 (precision <= 9),
// INT64 (<= 18), a 16-byte FIXED_LEN_BYTE_ARRAY (<= 38); dictionary,
// PLAIN and DELTA_BINARY_PACKED; required and optional. (parquet-go
// writes no list of decimals; a list's values take the same paths.)
type decRow struct {
	Price  int32    `parquet:"price,decimal(2:9),dict"`
	Amount int64    `parquet:"amount,decimal(4:18),delta"`
	Big    [16]byte `parquet:"big,decimal(3:38)"`
	BigD   [16]byte `parquet:"big_dict,decimal(3:38),dict"`
	Opt    *int64   `parquet:"opt,decimal(1:18),optional"`
}

func decPrice(i int) int64  { return int64((i*7919)%200000 - 100000) }
func decAmount(i int) int64 { return int64(i)*123456789 - 1e12 }

// decBig is row i's 16-byte unscaled value: small negatives, and values
// past int64 both ways.
func decBig(i int) *big.Int {
	switch i % 3 {
	case 0:
		return big.NewInt(int64(-100 * i))
	case 1:
		v, _ := new(big.Int).SetString("1000000000000000000000000000000", 10)
		return v.Add(v, big.NewInt(int64(i)))
	}
	v, _ := new(big.Int).SetString("-10000000000000000000000000", 10)
	return v.Mul(v, big.NewInt(int64(i%50+1)))
}

func be16(v *big.Int) (b [16]byte) {
	m := new(big.Int).Set(v)
	if v.Sign() < 0 {
		m.Add(m, new(big.Int).Lsh(big.NewInt(1), 128))
	}
	m.FillBytes(b[:])
	return b
}

// exactFloat is the float64 nearest u / 10^scale.
func exactFloat(u *big.Int, scale int) float64 {
	f, _ := new(big.Rat).SetFrac(u, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)).Float64()
	return f
}

func writeDecimals(t testing.TB, path string, rows, version int, codec string) {
	rs := make([]decRow, rows)
	for i := range rs {
		rs[i] = decRow{Price: int32(decPrice(i)), Amount: decAmount(i), Big: be16(decBig(i)), BigD: be16(decBig(i % 40))}
		if i%5 != 0 {
			v := decAmount(i) / 7
			rs[i].Opt = &v
		}
	}
	writePG(t, path, rs, codec, version)
}

// TestDecimal decodes every way Spark stores a decimal to float64, and
// checks each value against the exact quotient: equal where it has at
// most 15 digits, within two units in the last place past that.
func TestDecimal(t *testing.T) {
	for _, version := range []int{1, 2} {
		for _, codec := range []string{"none", "snappy"} {
			t.Run(fmt.Sprintf("v%d/%s", version, codec), func(t *testing.T) {
				t.Parallel()
				p := filepath.Join(t.TempDir(), "dec.parquet")
				writeDecimals(t, p, 3000, version, codec)
				plan := planPaths(t, PlanOptions{}, p)
				for _, f := range plan.Fields {
					if f.DType != column.Float64 || !f.Decimal {
						t.Fatalf("field %s: %v decimal %v, want float64 from DECIMAL", f.Name, f.DType, f.Decimal)
					}
				}
				checkDecimals(t, plan)
			})
		}
	}
}

func checkDecimals(t *testing.T, plan *Plan) {
	t.Helper()
	rows := eachUnit(t, plan, func(_ Unit, b *column.Batch, first int) {
		f64 := func(c int) []float64 { return b.Columns[c].Float64s() }
		for r := range b.Rows {
			i := first + r
			checkDecimal(t, i, "price", f64(0)[r], big.NewInt(decPrice(i)), 2)
			checkDecimal(t, i, "amount", f64(1)[r], big.NewInt(decAmount(i)), 4)
			checkDecimal(t, i, "big", f64(2)[r], decBig(i), 3)
			checkDecimal(t, i, "big_dict", f64(3)[r], decBig(i%40), 3)
			if valid := b.Columns[4].Valid[r] == 1; valid != (i%5 != 0) {
				t.Fatalf("row %d opt: valid %v", i, valid)
			} else if valid {
				checkDecimal(t, i, "opt", f64(4)[r], big.NewInt(decAmount(i)/7), 1)
			}
		}
	})
	if rows != 3000 {
		t.Fatalf("%d rows, want 3000", rows)
	}
}

// checkDecimal checks row's got against u / 10^scale: the nearest
// float64 where u has at most 15 digits, within two units in the last
// place past that.
func checkDecimal(t *testing.T, row int, col string, got float64, u *big.Int, scale int) {
	t.Helper()
	want := exactFloat(u, scale)
	ulp := math.Nextafter(math.Abs(want), math.Inf(1)) - math.Abs(want)
	if u.IsInt64() && math.Abs(float64(u.Int64())) < 1<<53 && got != want || math.Abs(got-want) > 2*ulp {
		t.Fatalf("row %d %s: %v, want %v", row, col, got, want)
	}
}

func TestDecimalScalesDisagree(t *testing.T) {
	type a struct {
		V int64 `parquet:"v,decimal(2:18)"`
	}
	type b struct {
		V int64 `parquet:"v,decimal(3:18)"`
	}
	dir := t.TempDir()
	writePG(t, filepath.Join(dir, "a.parquet"), []a{{1}}, "none", 1)
	writePG(t, filepath.Join(dir, "b.parquet"), []b{{1}}, "none", 1)
	_, err := PlanFiles(context.Background(), []string{dir}, PlanOptions{})
	if !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("got %v, want ErrSchemaMismatch for scales 2 and 3", err)
	}
}

func TestBeFloat(t *testing.T) {
	for _, s := range []string{"0", "-1", "1", "-100", "127", "-128", "9223372036854775807", "-9223372036854775808",
		"9223372036854775808", "-9223372036854775809", "170141183460469231731687303715884105727", "-170141183460469231731687303715884105728"} {
		v, _ := new(big.Int).SetString(s, 10)
		b := be16(v)
		want, _ := new(big.Float).SetInt(v).Float64()
		if got := beFloat(b[:]); math.Abs(got-want) > math.Abs(want)*1e-15 {
			t.Errorf("%s: %v, want %v", s, got, want)
		}
		if v.IsInt64() && v.Int64() >= math.MinInt32 && v.Int64() <= math.MaxInt32 {
			short := b[12:]
			if got := beFloat(short); got != float64(v.Int64()) {
				t.Errorf("%s in 4 bytes: %v", s, got)
			}
		}
	}
}

// TestDecimalArrow reads decimals as arrow (pyarrow) writes them: in
// FIXED_LEN_BYTE_ARRAYs sized to the precision (5 bytes for
// decimal(10, 2), 13 for decimal(30, 5)), or as INT32 and INT64 with
// store_decimal_as_integer.
func TestDecimalArrow(t *testing.T) {
	for _, asInt := range []bool{false, true} {
		t.Run(fmt.Sprintf("as_integer=%v", asInt), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "dec.parquet")
			small, wide := &arrow.Decimal128Type{Precision: 10, Scale: 2}, &arrow.Decimal128Type{Precision: 30, Scale: 5}
			schema := arrow.NewSchema([]arrow.Field{
				{Name: "small", Type: small}, {Name: "wide", Type: wide, Nullable: true},
				{Name: "int", Type: &arrow.Decimal128Type{Precision: 7, Scale: 3}},
			}, nil)
			bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
			defer bld.Release()
			want := make([][3]*big.Int, 2000)
			for i := range want {
				s := big.NewInt(decPrice(i) * 10000) // up to 10 digits
				w := decBig(i)
				n := big.NewInt(decPrice(i) * 9)
				want[i] = [3]*big.Int{s, w, n}
				bld.Field(0).(*array.Decimal128Builder).Append(decimal128.FromBigInt(s))
				if i%4 == 1 {
					bld.Field(1).(*array.Decimal128Builder).AppendNull()
					want[i][1] = nil
				} else {
					bld.Field(1).(*array.Decimal128Builder).Append(decimal128.FromBigInt(w))
				}
				bld.Field(2).(*array.Decimal128Builder).Append(decimal128.FromBigInt(n))
			}
			rec := bld.NewRecordBatch()
			defer rec.Release()
			props := arrowpq.NewWriterProperties(arrowpq.WithCompression(compress.Codecs.Snappy),
				arrowpq.WithStoreDecimalAsInteger(asInt), arrowpq.WithDataPageSize(1024))
			writeArrow(t, p, rec, props, pqarrow.DefaultWriterProps())
			plan := planPaths(t, PlanOptions{}, p)
			wantPhys := []string{"FIXED_LEN_BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"}
			if asInt {
				wantPhys = []string{"INT64", "FIXED_LEN_BYTE_ARRAY", "INT32"}
			}
			for i, fd := range plan.Fields {
				if got := format.Type(fd.Physical).String(); got != wantPhys[i] || fd.DType != column.Float64 {
					t.Fatalf("field %s: %s %v, want %s float64", fd.Name, got, fd.DType, wantPhys[i])
				}
			}
			row := eachUnit(t, plan, func(_ Unit, b *column.Batch, first int) {
				for r := range b.Rows {
					for c, scale := range []int{2, 5, 3} {
						v, col := want[first+r][c], &b.Columns[c]
						if v == nil {
							if col.Valid[r] != 0 {
								t.Fatalf("row %d %s: not null", first+r, col.Name)
							}
							continue
						}
						checkDecimal(t, first+r, col.Name, col.Float64s()[r], v, scale)
					}
				}
			})
			if row != len(want) {
				t.Fatalf("%d rows, want %d", row, len(want))
			}
		})
	}
}
