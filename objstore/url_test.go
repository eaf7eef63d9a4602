package objstore

import (
	"strings"
	"testing"

	"github.com/lastmile/lastmile/decode"
)

func TestParseURL(t *testing.T) {
	f := func(in, bucket, key string, ok bool) {
		t.Helper()
		o, err := ParseURL(in)
		if (err == nil) != ok || (ok && (o.Bucket != bucket || o.Key != key)) {
			t.Fatalf("ParseURL(%q) = %+v, %v; want %q %q ok=%v", in, o, err, bucket, key, ok)
		}
	}
	f("s3://data/ctr/day=1/a.parquet", "data", "ctr/day=1/a.parquet", true)
	f("s3://data/", "data", "", true)
	f("s3://data", "data", "", true)
	f("s3://my.bucket-1/k", "my.bucket-1", "k", true)
	f("s3://Data/k", "", "", false)         // upper case
	f("s3://ab/k", "", "", false)           // too short
	f("s3://data/a/../b", "", "", false)    // dot-dot segment
	f("s3://data/a/./b", "", "", false)     // dot segment
	f("s3://data/a\x00b", "", "", false)    // NUL
	f("http://data/k", "", "", false)       // scheme
	f("/local/path.parquet", "", "", false) // no scheme
	f("s3://data/"+strings.Repeat("k", 1025), "", "", false)
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"s3://data/ctr/a.parquet", "s3://data/", "s3://a.b-c/x/../y", "s3:///k", "s3://x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseURL(s)
		if err != nil {
			return
		}
		// A parsed URL round-trips and its parts are valid.
		if validBucket(o.Bucket) != nil || validKey(o.Key) != nil {
			t.Fatalf("%q parsed to invalid %+v", s, o)
		}
		if back, err := ParseURL(o.String()); err != nil || back != o {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", s, o, o.String(), back, err)
		}
	})
}

func TestCoalesce(t *testing.T) {
	r := func(off, n int64) decode.Range { return decode.Range{Off: off, Len: n} }
	cases := []struct {
		desc string
		in   []decode.Range
		tail int64 // tail offset; 0: no tail
		want []decode.Range
	}{
		{"far apart stay apart", []decode.Range{r(100, 10), r(1000, 10)}, 0, []decode.Range{r(100, 10), r(1000, 10)}},
		{"near ones merge, out of order", []decode.Range{r(150, 10), r(100, 10)}, 0, []decode.Range{r(100, 60)}},
		{"overlapping", []decode.Range{r(100, 50), r(120, 10)}, 0, []decode.Range{r(100, 50)}},
		{"split at max block", []decode.Range{r(0, 250)}, 0, []decode.Range{r(0, 100), r(100, 100), r(200, 50)}},
		{"clipped by the tail", []decode.Range{r(100, 50), r(900, 50)}, 120, []decode.Range{r(100, 20)}},
	}
	for _, c := range cases {
		got := coalesce(c.in, 50, 100, c.tail, c.tail > 0)
		if len(got) != len(c.want) {
			t.Fatalf("%s: %v, want %v", c.desc, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("%s: %v, want %v", c.desc, got, c.want)
			}
		}
	}
}
