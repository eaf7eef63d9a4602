package spec_test

import (
	"strings"
	"testing"

	"github.com/lastmile/lastmile/spec"
)

func TestHashed(t *testing.T) {
	j, err := spec.Parse("", []byte(minimal+"hashed: {tags: 1000003, \"user.query\": 1_000}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Hashed) != 2 || j.Hashed["tags"] != 1000003 || j.Hashed["user.query"] != 1000 {
		t.Fatalf("hashed %v", j.Hashed)
	}
	// The job as the daemon records it (and a peer receives it) parses
	// back the same.
	b, err := j.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := spec.Parse("", b)
	if err != nil {
		t.Fatalf("the marshaled job does not parse: %v\n%s", err, b)
	}
	if len(back.Hashed) != 2 || back.Hashed["tags"] != 1000003 || back.Hashed["user.query"] != 1000 {
		t.Errorf("marshaled and parsed back: %v\n%s", back.Hashed, b)
	}
}

func TestHashedErrors(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"a list", "hashed: [tags]\n", "6: hashed: want a mapping of string column to modulus"},
		{"zero", "hashed: {tags: 0}\n", `6: hashed.tags: want a modulus from 1 to 9223372036854775807 (the ids are 0 to modulus-1), got "0"`},
		{"negative", "hashed: {tags: -5}\n", `hashed.tags: want a modulus from 1`},
		{"past int64", "hashed: {tags: 9223372036854775808}\n", `hashed.tags: want a modulus from 1`},
		{"a word", "hashed: {tags: big}\n", `hashed.tags: want a modulus from 1`},
		{"twice", "hashed: {tags: 5, tags: 7}\n", `hashed.tags: given twice`},
		{"not in columns", "columns: [a]\nhashed: {tags: 5}\n", `hashed.tags: "tags" is not in the job's columns; add it there`},
		{"a partition", "partitions: {dt: string}\nhashed: {dt: 5}\n", `hashed.dt: "dt" is a partition column; hash it in the pipeline instead`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := spec.Parse("job.yaml", []byte(minimal+tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
