package ops_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/ops"
)

// unitBatch is four rows of microsecond timestamps ts (row 2 null) and
// tb, millisecond timestamps ms, a DATE column d, a condition k and the
// row number. Days: ts 19, 20, null, 21; tb 21, 18, 22, 19; ms and d as
// ts, with row 2 the 22nd.
func unitBatch(t *testing.T) (*column.Batch, []decode.Field) {
	t.Helper()
	at := func(s string) time.Time {
		v, err := time.Parse(time.DateOnly, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	us := func(days ...string) []int64 {
		var out []int64
		for _, d := range days {
			if d == "" {
				out = append(out, 0)
				continue
			}
			out = append(out, at(d).UnixMicro())
		}
		return out
	}
	var ms []int64
	var days []int32
	for _, d := range []string{"2025-11-19", "2025-11-20", "2025-11-22", "2025-11-21"} {
		ms = append(ms, at(d).UnixMilli())
		days = append(days, int32(at(d).Unix()/86400))
	}
	b := batchOf(
		i64col("ts", us("2025-11-19", "2025-11-20", "", "2025-11-21"), []byte{1, 1, 0, 1}),
		i64col("tb", us("2025-11-21", "2025-11-18", "2025-11-22", "2025-11-19"), nil),
		i64col("ms", ms, nil),
		i32col("d", days, nil),
		i64col("k", []int64{0, 1, 1, 0}, nil),
		i64col("row", []int64{0, 1, 2, 3}, nil),
	)
	fields := fieldsOf(b)
	fields[0].TimeUnit = 1000
	fields[1].TimeUnit = 1000
	fields[2].TimeUnit = 1e6
	fields[3].TimeUnit = 86400e9
	return b, fields
}

// A map whose result is a timestamp of its inputs' unit — a bare copy,
// if(), fill_null(), min(), max(), clip() over timestamp columns of that
// unit and timestamp() constants, a cast that keeps the count — is a
// timestamp column of that unit: a later filter's timestamp() without a
// unit counts it, as for an input column (docs/expressions.md). Counting
// nanoseconds against microseconds instead keeps no row.
func TestMappedTimestampKeepsUnit(t *testing.T) {
	b, fields := unitBatch(t)
	for _, tc := range []struct {
		value string
		want  []int64
	}{
		{"ts", []int64{1, 3}},
		{"`ts`", []int64{1, 3}},
		{"if(k > 0, ts, tb)", []int64{0, 1}},                                          // 21 20 null 19
		{"if(is_null(ts), null, ts)", []int64{1, 3}},                                  // as ts
		{"fill_null(ts, tb)", []int64{1, 2, 3}},                                       // 19 20 22 21
		{`fill_null(ts, timestamp("2025-11-20"))`, []int64{1, 2, 3}},                  // the instant in microseconds
		{`fill_null(ts, timestamp("2025-11-20", "us"))`, []int64{1, 2, 3}},            // the column's unit, given
		{"max(ts, tb)", []int64{0, 1, 3}},                                             // 21 20 null 21
		{`min(tb, timestamp("2025-11-21"))`, []int64{0, 2}},                           // 21 18 21 19
		{`clip(tb, timestamp("2025-11-19"), timestamp("2025-11-20"))`, []int64{0, 2}}, // 20 19 20 19
		{"cast(ts, float64)", []int64{1, 3}},
		{"cast(ts, int64)", []int64{1, 3}},
	} {
		j := job(t, "", "- map: {ts2: '"+tc.value+"'}", `- filter: 'ts2 >= timestamp("2025-11-20")'`)
		p, err := ops.Compile(context.Background(), j, fields, ops.Env{})
		if err != nil {
			t.Errorf("ts2 = %s: %v", tc.value, err)
			continue
		}
		if got := ints2(t, run(t, p, b), "row"); !slices.Equal(got, tc.want) {
			t.Errorf("ts2 = %s: ts2 >= timestamp(\"2025-11-20\") kept rows %v, want %v (ts2 counts microseconds)", tc.value, got, tc.want)
		}
	}
	// A millisecond copy counts milliseconds, and a DATE copy days.
	for _, tc := range []struct {
		value string
		want  []int64
	}{
		{"ms", []int64{1, 2, 3}},
		{"d", []int64{1, 2, 3}},
		{"cast(d, int64)", []int64{1, 2, 3}},
		{`fill_null(d, date("2025-11-20"))`, []int64{1, 2, 3}},
	} {
		j := job(t, "", "- map: {t2: '"+tc.value+"'}", `- filter: 't2 >= timestamp("2025-11-20")'`)
		p, err := ops.Compile(context.Background(), j, fields, ops.Env{})
		if err != nil {
			t.Errorf("t2 = %s: %v", tc.value, err)
			continue
		}
		if got := ints2(t, run(t, p, b), "row"); !slices.Equal(got, tc.want) {
			t.Errorf("t2 = %s: kept rows %v, want %v", tc.value, got, tc.want)
		}
	}
}

// The same expressions directly in a filter compare in the column's unit.
func TestDerivedTimestampComparedInItsUnit(t *testing.T) {
	b, fields := unitBatch(t)
	for _, tc := range []struct {
		filter string
		want   []int64
	}{
		{`if(k > 0, ts, tb) >= timestamp("2025-11-20")`, []int64{0, 1}},
		{`fill_null(ts, tb) >= timestamp("2025-11-20")`, []int64{1, 2, 3}},
		{`timestamp("2025-11-20") <= max(ts, tb)`, []int64{0, 1, 3}},
	} {
		j := job(t, "", "- filter: '"+tc.filter+"'")
		p, err := ops.Compile(context.Background(), j, fields, ops.Env{})
		if err != nil {
			t.Errorf("%s: %v", tc.filter, err)
			continue
		}
		if got := ints2(t, run(t, p, b), "row"); !slices.Equal(got, tc.want) {
			t.Errorf("%s: kept rows %v, want %v", tc.filter, got, tc.want)
		}
	}
}

// A cast op of a DATE column to int64 or float64, or of a timestamp
// column to float64, keeps counting the same unit: timestamp() against
// it counts days (microseconds). One to int32 or float32 changes the
// values (wraps, rounds): a timestamp() without a unit against it is an
// error.
func TestCastOpOfTimestampKeepsUnit(t *testing.T) {
	b, fields := unitBatch(t)
	for _, tc := range []struct {
		cast string
		col  string
		want []int64
	}{
		{"{d: int64}", "d", []int64{1, 2, 3}},
		{"{d: float64}", "d", []int64{1, 2, 3}},
		{"{ts: float64}", "ts", []int64{1, 3}},
		{"{ms: float64}", "ms", []int64{1, 2, 3}},
	} {
		j := job(t, "", "- cast: "+tc.cast, "- filter: '"+tc.col+` >= timestamp("2025-11-20")'`)
		p, err := ops.Compile(context.Background(), j, fields, ops.Env{})
		if err != nil {
			t.Errorf("cast %s: %v", tc.cast, err)
			continue
		}
		if got := ints2(t, run(t, p, b), "row"); !slices.Equal(got, tc.want) {
			t.Errorf("cast %s: kept rows %v, want %v", tc.cast, got, tc.want)
		}
	}
	for _, c := range []string{"{ts: int32}", "{ts: float32}"} {
		j := job(t, "", "- cast: "+c, `- filter: 'ts >= timestamp("2025-11-20")'`)
		_, err := ops.Compile(context.Background(), j, fields, ops.Env{})
		if err == nil || !strings.Contains(err.Error(), `"ts"`) {
			t.Errorf("cast %s, then ts >= timestamp(...): error %v, want one naming \"ts\"", c, err)
		}
	}
}

// Where a map's result is computed from timestamps but its unit cannot
// be known — arithmetic, a timestamp beside a number of no unit, a cast
// that changes the values — a later timestamp() without a unit compared with it is an
// error naming the column and saying to give timestamp() a unit; one
// with a unit compiles and counts it.
func TestTimestampOfUnknownUnitRefused(t *testing.T) {
	b, fields := unitBatch(t)
	for _, value := range []string{
		"ts + 3600000000",
		"tb - ts",
		"ts * 1000",
		"-ts",
		"abs(ts)",
		"if(k > 0, ts, ms * 1000)",
		"max(ts, ms * 1000)",
		"fill_null(ts, k)",
		"cast(ts, int32)",
		"cast(ts, float32)",
	} {
		j := job(t, "", "- map: {x: '"+value+"'}", `- filter: 'x >= timestamp("2025-11-20")'`)
		_, err := ops.Compile(context.Background(), j, fields, ops.Env{})
		if err == nil {
			t.Errorf("x = %s: x >= timestamp(\"2025-11-20\") compiled", value)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, `"x"`) || !strings.Contains(msg, "unit") {
			t.Errorf("x = %s: error %q names neither the column nor a unit", value, msg)
		}
		j = job(t, "", "- map: {x: '"+value+"'}", `- filter: 'x >= timestamp("2025-11-20", "us")'`)
		if _, err := ops.Compile(context.Background(), j, fields, ops.Env{}); err != nil {
			t.Errorf("x = %s, timestamp with a unit: %v", value, err)
		}
	}
	// The +1 hour keeps its rows when the unit is given.
	j := job(t, "", "- map: {x: 'ts + 3600000000'}", `- filter: 'x >= timestamp("2025-11-20T01:00:00Z", "us")'`)
	p, err := ops.Compile(context.Background(), j, fields, ops.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ints2(t, run(t, p, b), "row"); !slices.Equal(got, []int64{1, 3}) {
		t.Errorf("kept rows %v, want [1 3]", got)
	}
}

// A timestamp() whose unit is not the column's, in if(), fill_null(),
// min(), max() or clip() with it, is an error, as in a comparison; so
// are timestamp columns of two units there (max would compare their
// counts, fill_null and if would mix them in one column).
func TestTimestampOfOtherUnitInCopyRefused(t *testing.T) {
	_, fields := unitBatch(t)
	for _, value := range []string{
		"if(k > 0, ts, ms)",
		"max(ts, ms)",
		"min(tb, ts, ms)",
		"clip(ts, ms, tb)",
		"fill_null(ts, ms)",
		"fill_null(ts, d)",
		`fill_null(ts, timestamp("2025-11-20", "ns"))`,
		`if(k > 0, ts, timestamp("2025-11-20", "ms"))`,
		`max(ts, timestamp("2025-11-20", "s"))`,
		`clip(ms, timestamp("2025-11-20", "us"), timestamp("2025-11-21", "us"))`,
	} {
		j := job(t, "", "- map: {x: '"+value+"'}")
		if _, err := ops.Compile(context.Background(), j, fields, ops.Env{}); err == nil {
			t.Errorf("x = %s compiled", value)
		}
	}
}

// bucketize's timestamp() boundaries without a unit count the unit of
// the timestamp it buckets, a copy's included (b <= x, so a boundary
// between two counts is rounded up); one of another unit is an error, as
// is one without a unit against a timestamp of unknown unit.
func TestBucketizeTimestampCountsUnit(t *testing.T) {
	b, fields := unitBatch(t)
	for _, tc := range []struct {
		pipeline []string
		want     []int64
	}{
		{[]string{`- map: {bk: 'bucketize(tb, [timestamp("2025-11-19"), timestamp("2025-11-21")])'}`}, []int64{2, 0, 2, 1}},
		{[]string{"- map: {t2: tb}", `- map: {bk: 'bucketize(t2, [timestamp("2025-11-19"), timestamp("2025-11-21")])'}`}, []int64{2, 0, 2, 1}},
		{[]string{`- map: {bk: 'bucketize(ms, [timestamp("2025-11-19T23:59:59.9999Z")])'}`}, []int64{0, 1, 1, 1}}, // rounded up to 11-20
		{[]string{`- map: {bk: 'bucketize(d, [timestamp("2025-11-21")])'}`}, []int64{0, 0, 1, 1}},
	} {
		j := job(t, "", tc.pipeline...)
		p, err := ops.Compile(context.Background(), j, fields, ops.Env{})
		if err != nil {
			t.Errorf("%v: %v", tc.pipeline, err)
			continue
		}
		if got := ints2(t, run(t, p, b), "bk"); !slices.Equal(got, tc.want) {
			t.Errorf("%v: buckets %v, want %v", tc.pipeline, got, tc.want)
		}
	}
	for _, value := range []string{
		`bucketize(ts, [timestamp("2025-11-20", "ms")])`,
		`bucketize(ts * 1000, [timestamp("2025-11-20")])`,
	} {
		j := job(t, "", "- map: {bk: '"+value+"'}")
		if _, err := ops.Compile(context.Background(), j, fields, ops.Env{}); err == nil {
			t.Errorf("%s compiled", value)
		}
	}
}

type msKeyRow struct {
	TS int64 `parquet:"ts,timestamp(millisecond)"`
	V  int64 `parquet:"v"`
}

type usKeyRow struct {
	TS int64 `parquet:"ts,timestamp(microsecond)"`
	V  int64 `parquet:"v"`
}

// A join on a timestamp key whose side table's key counts another unit
// would match no row (microseconds never equal milliseconds of the same
// instant): it is an error naming both units. Keys of one unit join.
func TestJoinOnTimestampKeysOfTwoUnitsRefused(t *testing.T) {
	b, fields := unitBatch(t)
	tb := col(t, b, "tb").Int64s()
	dir := t.TempDir()
	msPath, usPath := filepath.Join(dir, "ms.parquet"), filepath.Join(dir, "us.parquet")
	writeTable(t, msPath, []msKeyRow{{TS: tb[1] / 1000, V: 7}})
	writeTable(t, usPath, []usKeyRow{{TS: tb[1], V: 7}})
	for _, kind := range []string{"left", "semi"} {
		cols := ""
		if kind == "left" {
			cols = ", columns: [v]"
		}
		j := job(t, "", fmt.Sprintf("- join: {kind: %s, table: %s, on: tb, table_key: ts%s}", kind, msPath, cols))
		_, err := ops.Compile(context.Background(), j, fields, ops.Env{})
		if err == nil || !strings.Contains(err.Error(), "milliseconds") || !strings.Contains(err.Error(), "microseconds") {
			t.Errorf("%s join of microsecond tb on millisecond ts: error %v, want one naming both units", kind, err)
		}
		j = job(t, "", fmt.Sprintf("- join: {kind: %s, table: %s, on: tb, table_key: ts%s}", kind, usPath, cols))
		p, err := ops.Compile(context.Background(), j, fields, ops.Env{})
		if err != nil {
			t.Errorf("%s join on keys of one unit: %v", kind, err)
			continue
		}
		if kind == "semi" {
			if got := ints2(t, run(t, p, b), "row"); !slices.Equal(got, []int64{1}) {
				t.Errorf("semi join on keys of one unit kept rows %v, want [1]", got)
			}
		}
	}
}
