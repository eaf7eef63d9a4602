package iceberg

import (
	"maps"
	"strings"
	"testing"
)

// TestNameMapping: the table property schema.name-mapping.default gives
// the names of files without field ids their ids, a struct member's by
// the dotted path of every name it and its struct have had; a mapping
// that is not JSON, or maps one name to two ids, is an error naming the
// property.
func TestNameMapping(t *testing.T) {
	tests := []struct {
		name    string
		mapping string // "" for no property
		want    map[string]int32
		err     string
	}{
		{"none", "", nil, ""},
		{"renamed: both names",
			`[{"field-id": 1, "names": ["id"]}, {"field-id": 4, "names": ["score", "rating"]},
			  {"field-id": 5, "names": ["user"], "fields": [{"field-id": 6, "names": ["age"]}]}]`,
			map[string]int32{"id": 1, "score": 4, "rating": 4, "user": 5, "user.age": 6}, ""},
		{"a struct and its member renamed",
			`[{"field-id": 5, "names": ["user", "person"], "fields": [{"field-id": 6, "names": ["age", "years"]},
			  {"field-id": 7, "names": ["addr"], "fields": [{"field-id": 8, "names": ["city"]}]}]}]`,
			map[string]int32{"user": 5, "person": 5, "user.age": 6, "user.years": 6, "person.age": 6, "person.years": 6,
				"user.addr": 7, "person.addr": 7, "user.addr.city": 8, "person.addr.city": 8}, ""},
		{"a name without an id is left out", `[{"names": ["legacy"]}, {"field-id": 2, "names": ["part"]}]`,
			map[string]int32{"part": 2}, ""},
		{"not JSON", `[{"field-id": 1,`, nil, "schema.name-mapping.default"},
		{"one name, two ids", `[{"field-id": 1, "names": ["id"]}, {"field-id": 2, "names": ["id"]}]`, nil,
			`the name "id" is mapped to field ids 1 and 2`},
		{"one member name, two ids", `[{"field-id": 5, "names": ["user"], "fields": [{"field-id": 6, "names": ["age"]}, {"field-id": 7, "names": ["age"]}]}]`,
			nil, `the name "user.age" is mapped to field ids 6 and 7`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &Metadata{}
			if tc.mapping != "" {
				m.Properties = map[string]string{nameMappingKey: tc.mapping}
			}
			got, err := m.nameMapping()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || !maps.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Fatalf("%v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
