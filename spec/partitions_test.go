package spec_test

import (
	"strings"
	"testing"

	"github.com/lastmile/lastmile/spec"
)

func TestPartitions(t *testing.T) {
	j, err := spec.Parse("", []byte(minimal+"partitions: {hour: int64, dt: string}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []spec.Partition{{Name: "hour", Type: "int64"}, {Name: "dt", Type: "string"}}
	if len(j.Partitions) != 2 {
		t.Fatalf("partitions %+v, want %+v", j.Partitions, want)
	}
	for i, p := range j.Partitions {
		if p.Name != want[i].Name || p.Type != want[i].Type {
			t.Errorf("partitions[%d] = %+v, want %+v (in the spec's order)", i, p, want[i])
		}
	}
	if !j.Partitions.Has("dt") || j.Partitions.Has("day") {
		t.Errorf("Has: dt %v, day %v", j.Partitions.Has("dt"), j.Partitions.Has("day"))
	}
	// The job as the daemon records it parses back to the same columns,
	// in the same order.
	b, err := j.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := spec.Parse("", b)
	if err != nil {
		t.Fatalf("the marshaled job does not parse: %v\n%s", err, b)
	}
	if len(back.Partitions) != 2 || back.Partitions[0].Name != "hour" || back.Partitions[1].Type != "string" {
		t.Errorf("marshaled and parsed back: %+v\n%s", back.Partitions, b)
	}
}

func TestPartitionsErrors(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"a list", "partitions: [dt]\n", "6: partitions: want a mapping of partition column to type"},
		{"bad type", "partitions: {dt: day}\n", `6: partitions.dt: want the type string, int64 or date, got "day"`},
		{"bad key", "partitions: {\"d=t\": string}\n", `6: partitions.d=t: want a partition key of letters, digits and _`},
		{"digit first", "partitions: {1dt: string}\n", "want a partition key"},
		{"iceberg", "partitions: {dt: string}\ninputs: [\"iceberg:/t/metadata.json\"]\n", "an Iceberg table keeps its partition values in its metadata"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := minimal + tc.src
			if strings.Contains(tc.src, "inputs:") {
				src = strings.Replace(minimal, "inputs: [data/]\n", "", 1) + tc.src
			}
			_, err := spec.Parse("job.yaml", []byte(src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
