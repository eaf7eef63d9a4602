package ops

import "testing"

func TestPathBucket(t *testing.T) {
	for _, tc := range []struct {
		path string
		n    int
		want int
		ok   bool
	}{
		{"/d/bucket=3/part-0.parquet", 8, 3, true},
		{"s3://b/t/data/key_bucket=7/x/f.parquet", 8, 7, true},
		{"/d/bucket=8/f.parquet", 8, 0, false},
		{"/d/bucket=-1/f.parquet", 8, 0, false},
		{"/d/bucket=x/f.parquet", 8, 0, false},
		{"/d/f.parquet", 8, 0, false},
		{"/d/bucket=2/bucket=5/f.parquet", 8, 5, true}, // the innermost
		{"bucket=1", 8, 0, false},                      // a file name is no directory
	} {
		got, err := pathBucket(tc.path, tc.n)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("pathBucket(%q, %d) = %d, %v", tc.path, tc.n, got, err)
		}
	}
}

// FuzzPathBucket: any file name gives a bucket in range or an error.
func FuzzPathBucket(f *testing.F) {
	f.Add("/d/bucket=3/part-0.parquet", 8)
	f.Add("s3://b/key_bucket=0/f", 1)
	f.Add("bucket=99999999999999999999/x", 4)
	f.Fuzz(func(t *testing.T, p string, n int) {
		if n <= 0 || n > 1<<20 {
			return
		}
		b, err := pathBucket(p, n)
		if err == nil && (b < 0 || b >= n) {
			t.Fatalf("pathBucket(%q, %d) = %d", p, n, b)
		}
	})
}
