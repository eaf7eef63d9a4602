package expr_test

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/expr"
)

func TestTimestamp(t *testing.T) {
	at := func(s string) int64 {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UnixNano()
	}
	ts := []int64{at("2025-11-19T23:59:59.999999999Z"), at("2025-11-20T00:00:00Z"), at("2025-11-20T06:00:00Z"), at("1969-12-31T23:59:59Z"), 0}
	b := batch(ints("ts", column.Int64, ts, nil), ints("us", column.Int64, []int64{ts[0] / 1e3, ts[1] / 1e3, ts[2] / 1e3, -1e6, 0}, nil))
	for _, tc := range []struct {
		src  string
		want []int64
	}{
		{`ts >= timestamp("2025-11-20")`, []int64{0, 1, 1, 0, 0}},
		{`ts >= timestamp("2025-11-20 06:00:00")`, []int64{0, 0, 1, 0, 0}},
		{`ts >= timestamp("2025-11-20T07:00:00+01:00")`, []int64{0, 0, 1, 0, 0}},
		{`ts < timestamp("1970-01-01T00:00:00.000000001Z")`, []int64{0, 0, 0, 1, 1}},
		{`us >= timestamp("2025-11-20", "us")`, []int64{0, 1, 1, 0, 0}},
		{`(timestamp("2025-11-27") - ts) / 86400000000000`, []int64{7, 7, 6, 20419, 20419}},
		{`timestamp("1969-12-31T23:59:59.5Z", "s") + 0 * ts`, []int64{-1, -1, -1, -1, -1}},
		{`timestamp("1969-12-31T23:59:59.5Z", "ms") + 0 * ts`, []int64{-500, -500, -500, -500, -500}},
		{`timestamp("2262-04-11T23:47:16.854775807Z") + 0 * ts`, []int64{math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64}},
		{`timestamp("1677-09-21T00:12:43.145224192Z") + 0 * ts`, []int64{math.MinInt64, math.MinInt64, math.MinInt64, math.MinInt64, math.MinInt64}},
	} {
		checkInts(t, b, tc.src, tc.want, nil)
	}
}

func TestTimestampErrors(t *testing.T) {
	sch := expr.Schema{{Name: "ts", Type: typ(expr.Int64, false)}, {Name: "query", Type: typ(expr.String, false)}}
	for _, tc := range []struct {
		src string
		pos int
		msg string
	}{
		{`timestamp()`, 0, `timestamp wants 1 or 2 arguments (time[, unit]), got 0`},
		{`timestamp(query)`, 10, `timestamp wants a constant string time, got string column "query"`},
		{`timestamp(20251120)`, 10, `timestamp wants a constant string time, got integer 20251120`},
		{`timestamp("2025-11-20", "days")`, 24, `timestamp wants a unit "ns", "us", "ms" or "s", got string "days"`},
		{`timestamp("20/11/2025")`, 10, `timestamp: "20/11/2025" is not a time such as 2025-11-20, 2025-11-20 06:00:00 or 2025-11-20T06:00:00+01:00 (RFC 3339; no zone is UTC)`},
		{`timestamp("2262-04-11T23:47:16.854775808Z")`, 10, `timestamp: 2262-04-11T23:47:16.854775808Z does not fit an int64 of ns since 1970 (in ns: 1677-09-21 to 2262-04-11)`},
		{`timestamp("1677-09-21T00:12:43.145224191Z")`, 10, `timestamp: 1677-09-21T00:12:43.145224191Z does not fit an int64 of ns since 1970 (in ns: 1677-09-21 to 2262-04-11)`},
		{`timestamp("9999-12-31", "s") > ts`, 0, ``},
	} {
		_, err := expr.Compile(tc.src, sch)
		if tc.msg == "" {
			if err != nil {
				t.Errorf("Compile(%q): %v", tc.src, err)
			}
			continue
		}
		var e *expr.Error
		if !errors.As(err, &e) || e.Pos != tc.pos || e.Msg != tc.msg {
			t.Errorf("Compile(%q) = %v\nwant at %d: %s", tc.src, err, tc.pos, tc.msg)
		}
	}
}

func TestDate(t *testing.T) {
	b := batch(ints("day", column.Int32, []int64{20411, 20412, 20413, -1, 0}, nil))
	checkInts(t, b, `day >= date("2025-11-20")`, []int64{0, 1, 1, 0, 0}, nil)
	checkInts(t, b, `day == date("2025-11-20T23:59:59Z")`, []int64{0, 1, 0, 0, 0}, nil)
	checkInts(t, b, `day == date("2025-11-21T00:30:00+01:00")`, []int64{0, 1, 0, 0, 0}, nil)
	checkInts(t, b, `day == date("1969-12-31 12:00:00")`, []int64{0, 0, 0, 1, 0}, nil)
	sch := expr.Schema{{Name: "day", Type: typ(expr.Int32, false)}}
	for src, msg := range map[string]string{
		`date(day)`:             `date wants a constant string day, got int32 column "day"`,
		`date("2025-11-20", 1)`: `date wants 1 arguments (day), got 2`,
		`date("tomorrow")`:      `date: "tomorrow" is not a time such as 2025-11-20, 2025-11-20 06:00:00 or 2025-11-20T06:00:00+01:00 (RFC 3339; no zone is UTC)`,
	} {
		_, err := expr.Compile(src, sch)
		var e *expr.Error
		if !errors.As(err, &e) || e.Msg != msg {
			t.Errorf("Compile(%q) = %v, want %s", src, err, msg)
		}
	}
}

// TestTimestampTakesColumnUnit: a timestamp() without a unit compared with
// a timestamp column counts the column's unit (rounded down), on either
// side and in an in list; one with another unit is an error; one plus
// or minus a whole number is an instant still.
func TestTimestampTakesColumnUnit(t *testing.T) {
	us := func(s string) int64 {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UnixMicro()
	}
	vals := []int64{us("2025-11-19T23:59:59.999999Z"), us("2025-11-20T00:00:00Z"), us("2025-11-20T06:00:00Z"), -1, 0}
	b := batch(ints("ts", column.Int64, vals, nil), ints("n", column.Int64, vals, nil))
	sch := expr.BatchSchema(b)
	sch[0].Unit = 1e3 // ts counts microseconds; n is a plain number
	checkUnits(t, b, sch, []unitCase{
		{src: `ts >= timestamp("2025-11-20")`, want: []int64{0, 1, 1, 0, 0}},
		{src: `timestamp("2025-11-20") <= ts`, want: []int64{0, 1, 1, 0, 0}},
		{src: `ts >= timestamp("2025-11-20", "us")`, want: []int64{0, 1, 1, 0, 0}},
		{src: `ts < timestamp("1970-01-01T00:00:00.0000005Z")`, want: []int64{0, 0, 0, 1, 1}},  // 0 µs is before 500 ns
		{src: `ts <= timestamp("1969-12-31T23:59:59.9999995Z")`, want: []int64{0, 0, 0, 1, 0}}, // -1 µs is not after
		{src: `ts > timestamp("1969-12-31T23:59:59.9999995Z")`, want: []int64{1, 1, 1, 0, 1}},
		{src: `timestamp("1970-01-01T00:00:00.0000005Z") > ts`, want: []int64{0, 0, 0, 1, 1}},
		{src: `ts >= timestamp("1969-12-31T23:59:59.9999995Z")`, want: []int64{1, 1, 1, 0, 1}},
		{src: `ts == timestamp("1969-12-31T23:59:59.999999Z")`, want: []int64{0, 0, 0, 1, 0}},
		{src: `ts == timestamp("1969-12-31T23:59:59.9999995Z")`,
			msg: `int64 column "ts" counts microseconds, and timestamp(...) falls between two of them: no value is equal to it`},
		{src: `ts in [timestamp("2025-11-20T00:00:00.0000001Z")]`,
			msg: `int64 column "ts" counts microseconds, and timestamp(...) falls between two of them: no value is equal to it`},
		{src: `ts in [timestamp("2025-11-20"), timestamp("1970-01-01")]`, want: []int64{0, 1, 0, 0, 1}},
		{src: `n >= timestamp("2025-11-20")`, want: []int64{0, 0, 0, 0, 0}},      // no unit: nanoseconds
		{src: `ts >= timestamp("2025-11-20") - 0`, want: []int64{0, 1, 1, 0, 0}}, // an instant still (TestTimestampArithmeticAgainstColumn)
		{src: `ts >= timestamp("2025-11-20", "ms")`,
			msg: `int64 column "ts" counts microseconds and timestamp(...) milliseconds: give timestamp() the column's unit "us", or none`},
		{src: `timestamp("2025-11-20", "ns") > ts`,
			msg: `int64 column "ts" counts microseconds and timestamp(...) nanoseconds: give timestamp() the column's unit "us", or none`},
		{src: `ts in [timestamp("2025-11-20", "s")]`,
			msg: `int64 column "ts" counts microseconds and timestamp(...) seconds: give timestamp() the column's unit "us", or none`},
	})
}

// TestDateColumnUnit: a DATE column counts days: a timestamp() without a
// unit compared with it counts days too, date() is its own unit, and a
// date() compared with a timestamp column, or a timestamp() with a unit
// with a date column, is an error.
func TestDateColumnUnit(t *testing.T) {
	b := batch(ints("day", column.Int32, []int64{20411, 20412, 20413, -1, 0}, nil), ints("ts", column.Int64, []int64{0, 1, 2, 3, 4}, nil))
	sch := expr.BatchSchema(b)
	sch[0].Unit, sch[1].Unit = 86400e9, 1e3
	checkUnits(t, b, sch, []unitCase{
		{src: `day >= date("2025-11-20")`, want: []int64{0, 1, 1, 0, 0}},
		{src: `day >= timestamp("2025-11-20")`, want: []int64{0, 1, 1, 0, 0}},
		{src: `day >= timestamp("2025-11-19T12:00:00Z")`, want: []int64{0, 1, 1, 0, 0}}, // no day before noon is after it
		{src: `day <= timestamp("1969-12-31T12:00:00Z")`, want: []int64{0, 0, 0, 1, 0}},
		{src: `ts >= date("2025-11-20")`,
			msg: `int64 column "ts" counts microseconds and date(...) days: compare it with a timestamp() without a unit, which takes the column's`},
		{src: `day < timestamp("2025-11-20", "us")`,
			msg: `int32 column "day" counts days and timestamp(...) microseconds: compare it with date(...), or a timestamp() without a unit, which takes the column's`},
	})
}

// unitCase is a condition over a batch whose schema gives units, and the
// rows it keeps, or the compile error it gives.
type unitCase struct {
	src  string
	want []int64
	msg  string
}

func checkUnits(t *testing.T, b *column.Batch, sch expr.Schema, cases []unitCase) {
	t.Helper()
	for _, tc := range cases {
		e, err := expr.Compile(tc.src, sch)
		if tc.msg != "" {
			var ee *expr.Error
			if !errors.As(err, &ee) || ee.Msg != tc.msg {
				t.Errorf("Compile(%q) = %v, want %s", tc.src, err, tc.msg)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.src, err)
		}
		out := &column.Column{Name: "out"}
		if err := e.Eval(b, out); err != nil {
			t.Fatal(err)
		}
		var got []int64
		for i := range out.Len {
			got = append(got, int64(out.Data[i]))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.src, got, tc.want)
		}
	}
}
