package decode

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
)

func TestPartitionValues(t *testing.T) {
	keys := []PartitionKey{{Name: "dt"}, {Name: "hour", Type: PartitionInt64}}
	cases := []struct {
		path string
		want []string
		err  string
	}{
		{"/data/t/dt=2026-11-27/hour=3/part-0.parquet", []string{"2026-11-27", "3"}, ""},
		{"s3://bucket/t/hour=-1/dt=2026-11-27/part-0.parquet", []string{"2026-11-27", "-1"}, ""},
		{"ctr/dt=a%2Fb%3Dc/hour=0/x.parquet", []string{"a/b=c", "0"}, ""},
		{"/t/dt=/hour=0/x.parquet", []string{"", "0"}, ""},
		{"/t/dt=__HIVE_DEFAULT_PARTITION__/hour=0/x.parquet", []string{hiveNull, "0"}, ""},
		{"/t/dt=1/x.parquet", nil, `partition "hour": no directory of the path is named hour=VALUE`},
		{"/t/dt=1/hour=2.parquet", nil, `partition "hour": no directory`},
		{"/t/dt=1/dt=2/hour=0/x.parquet", nil, `partition "dt": two directories of the path name it`},
		{"/t/dt=1/hour=x/x.parquet", nil, `partition "hour": value "x" is not an int64`},
		{"/t/dt=1/hour=__HIVE_DEFAULT_PARTITION__/x.parquet", nil, `which an int64 partition column cannot hold`},
		{"/t/dt=%zz/hour=0/x.parquet", nil, `partition "dt": directory "dt=%zz"`},
		{"/t/dtx=1/hour=0/x.parquet", nil, `partition "dt": no directory`},
		{"/t/dt=" + strings.Repeat("v", MaxPartitionValue+1) + "/hour=0/x.parquet", nil, "bytes (at most 1024)"},
	}
	for _, tc := range cases {
		got, err := PartitionValues(tc.path, keys)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one containing %q", tc.path, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, %v; want %q", tc.path, got, err, tc.want)
		}
	}
}

func TestDatePartitions(t *testing.T) {
	keys := []PartitionKey{{Name: "dt", Type: PartitionDate}}
	for _, tc := range []struct {
		path string
		day  int32
		err  string
	}{
		{"/t/dt=2026-11-27/x.parquet", 20784, ""},
		{"/t/dt=1970-01-01/x.parquet", 0, ""},
		{"/t/dt=1969-12-31/x.parquet", -1, ""},
		{"/t/dt=2026-11-27 00:00:00/x.parquet", 0, `value "2026-11-27 00:00:00" is not a date (YYYY-MM-DD): declare it a string`},
		{"/t/dt=2026-02-30/x.parquet", 0, "is not a date"},
		{"/t/dt=__HIVE_DEFAULT_PARTITION__/x.parquet", 0, "which a date (YYYY-MM-DD) partition column cannot hold"},
	} {
		vs, err := PartitionValues(tc.path, keys)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an error containing %q", tc.path, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		f := keys[0].Field()
		var c column.Column
		if err := FillPartition(&f, vs[0], 3, &c); err != nil {
			t.Fatal(err)
		}
		if err := c.Check(); err != nil || !slices.Equal(c.Int32s(), []int32{tc.day, tc.day, tc.day}) {
			t.Errorf("%s: %v (%v), want day %d", tc.path, c.Int32s(), err, tc.day)
		}
	}
}

func TestSplitPartitions(t *testing.T) {
	keys := []PartitionKey{{Name: "dt"}, {Name: "hour", Type: PartitionInt64}}
	files, parts, err := splitPartitions([]string{"hour", "a", "b"}, keys)
	if err != nil || !slices.Equal(files, []string{"a", "b"}) || len(parts) != 1 || parts[0].Name != "hour" {
		t.Errorf("a projection: %q %v %v", files, parts, err)
	}
	files, parts, err = splitPartitions(nil, keys)
	if err != nil || files != nil || len(parts) != 2 || parts[0].Name != "dt" {
		t.Errorf("every column: %q %v %v", files, parts, err)
	}
	if _, _, err := splitPartitions([]string{"dt"}, keys); err == nil {
		t.Errorf("a projection of partition columns only: no error")
	}
}

func TestFillPartition(t *testing.T) {
	var c column.Column
	s := PartitionKey{Name: "dt"}.Field()
	for _, rows := range []int{5, 0, 3} { // buffers reused, shrinking and growing
		if err := FillPartition(&s, "2026-11-27", rows, &c); err != nil {
			t.Fatal(err)
		}
		if err := c.Check(); err != nil || c.Len != rows {
			t.Fatalf("%d rows: %v (len %d)", rows, err, c.Len)
		}
		for i := range rows {
			if string(c.Row(i)) != "2026-11-27" {
				t.Fatalf("row %d: %q", i, c.Row(i))
			}
		}
	}
	n := PartitionKey{Name: "hour", Type: PartitionInt64}.Field()
	if err := FillPartition(&n, "-7", 4, &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(); err != nil || !slices.Equal(c.Int64s(), []int64{-7, -7, -7, -7}) {
		t.Fatalf("int64: %v %v", c.Int64s(), err)
	}
	if err := FillPartition(&n, "x", 4, &c); err == nil {
		t.Errorf("an int64 partition filled from %q", "x")
	}
}

// TestUnitPartitionTravels: a unit's partition values survive the trip
// to a peer, and a unit with too many or too long ones is refused.
func TestUnitPartitionTravels(t *testing.T) {
	u := Unit{File: "ctr/dt=1/x.parquet", FileSize: 100, Rows: 1, Partition: []string{"1", "a"}}
	b, err := u.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back Unit
	if err := back.UnmarshalBinary(b); err != nil || !slices.Equal(back.Partition, u.Partition) {
		t.Fatalf("round trip: %q, %v", back.Partition, err)
	}
	for _, bad := range [][]string{make([]string, maxPartitions+1), {strings.Repeat("x", MaxPartitionValue+1)}} {
		u.Partition = bad
		j, _ := json.Marshal(u)
		if err := back.UnmarshalBinary(append([]byte{unitVersion}, j...)); err == nil {
			t.Errorf("a unit with %d partition values (the first %d bytes) accepted", len(bad), len(bad[0]))
		}
	}
}

// FuzzPartitionValues: any path gives values that each pass their key's
// check, or an error; never a panic.
func FuzzPartitionValues(f *testing.F) {
	f.Add("/data/t/dt=2026-11-27/hour=3/part-0.parquet")
	f.Add("dt=%41/hour=/x")
	f.Add("hour=1/hour=2/dt=/")
	keys := []PartitionKey{{Name: "dt"}, {Name: "hour", Type: PartitionInt64}}
	f.Fuzz(func(t *testing.T, path string) {
		vs, err := PartitionValues(path, keys)
		if err != nil {
			return
		}
		if len(vs) != len(keys) {
			t.Fatalf("%d values for %d keys", len(vs), len(keys))
		}
		var c column.Column
		for i, k := range keys {
			pf := k.Field()
			if err := FillPartition(&pf, vs[i], 2, &c); err != nil {
				t.Fatalf("a value the plan accepted does not fill: %v", err)
			}
		}
	})
}
