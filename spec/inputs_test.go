package spec

import (
	"fmt"
	"testing"
)

func TestAnchor(t *testing.T) {
	for _, tc := range []struct{ dir, in, want string }{
		{"/jobs", "data", "/jobs/data"},
		{"/jobs", "/abs/data", "/abs/data"},
		{"/jobs", "s3://b/t/", "s3://b/t/"},
		{"/jobs", "iceberg:wh/t/metadata/v1.metadata.json", "iceberg:/jobs/wh/t/metadata/v1.metadata.json"},
		{"/jobs", "iceberg:/wh/t/metadata/v1.metadata.json?snapshot=3", "iceberg:/wh/t/metadata/v1.metadata.json?snapshot=3"},
		{"/jobs", "iceberg:file:///wh/v1.metadata.json", "iceberg:file:///wh/v1.metadata.json"},
		{"/jobs", "iceberg:s3://b/t/metadata/v1.metadata.json", "iceberg:s3://b/t/metadata/v1.metadata.json"},
		{"/jobs", "iceberg:http://cat:8181?table=db.t", "iceberg:http://cat:8181?table=db.t"},
		{".", "iceberg:wh/v1.metadata.json", "iceberg:wh/v1.metadata.json"},
	} {
		if got := anchor(tc.dir, tc.in); got != tc.want {
			t.Errorf("anchor(%q, %q) = %q, want %q", tc.dir, tc.in, got, tc.want)
		}
	}
}

func TestJoinBuckets(t *testing.T) {
	base := "version: 1\ninputs: [d]\nbatch: {size: 8}\npipeline:\n  - join: {kind: semi, table: t, on: k, buckets: %s}\n"
	for _, tc := range []struct {
		n  string
		ok bool
	}{{"0", true}, {"16", true}, {"-1", false}, {"2000000", false}} {
		_, err := Parse("job.yaml", []byte(fmt.Sprintf(base, tc.n)))
		if (err == nil) != tc.ok {
			t.Errorf("buckets %s: %v", tc.n, err)
		}
	}
}
