package iceberg

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Scheme starts an Iceberg table where a job spec takes an input or a side
// table: "iceberg:LOCATION" reads the table from its metadata file, and
// "iceberg:http://HOST/PATH?table=NS.TABLE" from a REST catalog.
const Scheme = "iceberg:"

// Ref names an Iceberg table and, optionally, one of its snapshots. It is
// parsed from, and printed back to, the text a spec holds:
//
//	iceberg:warehouse/db/events/metadata/00002-x.metadata.json
//	iceberg:file:///warehouse/db/events/metadata/v2.metadata.json?snapshot=3051729675574597004
//	iceberg:s3://bucket/db/events/metadata/v2.metadata.json
//	iceberg:http://catalog:8181/api/catalog?table=db.events&snapshot=42
//
// A location is a local path, a file:// URL or an s3:// URL (read through
// the job's decode.FS); an http or https location is a REST catalog's base
// URL, with the table named by the table parameter ("ns.table", namespace
// levels separated by dots). The snapshot parameter pins a snapshot id;
// without it the table's current snapshot is read (and the daemon pins it
// when it accepts the job). A location may not contain '?'.
type Ref struct {
	// Metadata is the metadata file's location; "" for a catalog table.
	Metadata string
	// Catalog is the REST catalog's base URL; "" for a metadata file.
	Catalog string
	// Namespace and Table name a catalog table.
	Namespace []string
	Table     string
	// Snapshot is the snapshot id to read; 0 means the current snapshot.
	Snapshot int64
}

// IsRef reports whether a spec input names an Iceberg table.
func IsRef(input string) bool { return strings.HasPrefix(input, Scheme) }

// ParseRef parses a spec input of the form Ref documents.
func ParseRef(input string) (Ref, error) {
	if !IsRef(input) {
		return Ref{}, fmt.Errorf("iceberg table %q: want %sLOCATION", input, Scheme)
	}
	loc, query, _ := strings.Cut(strings.TrimPrefix(input, Scheme), "?")
	if loc == "" {
		return Ref{}, fmt.Errorf("iceberg table %q: no location: want %sPATH/metadata/vN.metadata.json or %shttp://CATALOG?table=NS.TABLE", input, Scheme, Scheme)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return Ref{}, fmt.Errorf("iceberg table %q: parameters: %v", input, err)
	}
	var r Ref
	for k, vs := range q {
		if len(vs) != 1 {
			return Ref{}, fmt.Errorf("iceberg table %q: parameter %s given %d times", input, k, len(vs))
		}
		switch k {
		case "snapshot":
			id, err := strconv.ParseInt(vs[0], 10, 64)
			if err != nil || id == 0 {
				return Ref{}, fmt.Errorf("iceberg table %q: snapshot: want a snapshot id (a non-zero integer), got %q", input, vs[0])
			}
			r.Snapshot = id
		case "table":
			parts := strings.Split(vs[0], ".")
			for _, p := range parts {
				if p == "" || strings.ContainsAny(p, "/\x00\x1f") {
					return Ref{}, fmt.Errorf("iceberg table %q: table: want NAMESPACE.TABLE (names without '/'), got %q", input, vs[0])
				}
			}
			if len(parts) < 2 {
				return Ref{}, fmt.Errorf("iceberg table %q: table: want NAMESPACE.TABLE, got %q", input, vs[0])
			}
			r.Namespace, r.Table = parts[:len(parts)-1], parts[len(parts)-1]
		default:
			return Ref{}, fmt.Errorf("iceberg table %q: unknown parameter %q (allowed: snapshot, table)", input, k)
		}
	}
	scheme, _, isURL := strings.Cut(loc, "://")
	switch {
	case isURL && (scheme == "http" || scheme == "https"):
		u, err := url.Parse(loc)
		if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return Ref{}, fmt.Errorf("iceberg table %q: catalog URL %q: want http(s)://HOST[:PORT][/PATH]", input, loc)
		}
		if r.Table == "" {
			return Ref{}, fmt.Errorf("iceberg table %q: a REST catalog needs ?table=NAMESPACE.TABLE", input)
		}
		r.Catalog = strings.TrimSuffix(loc, "/")
	case r.Table != "":
		return Ref{}, fmt.Errorf("iceberg table %q: table= is for REST catalogs (http:// or https://); %q is a metadata file", input, loc)
	default:
		if _, err := localOrURL(loc); err != nil {
			return Ref{}, fmt.Errorf("iceberg table %q: %v", input, err)
		}
		r.Metadata = loc
	}
	return r, nil
}

// String returns the spec text for r, which ParseRef reads back.
func (r Ref) String() string {
	var b strings.Builder
	b.WriteString(Scheme)
	q := url.Values{}
	if r.Catalog != "" {
		b.WriteString(r.Catalog)
		q.Set("table", strings.Join(append(append([]string(nil), r.Namespace...), r.Table), "."))
	} else {
		b.WriteString(r.Metadata)
	}
	if r.Snapshot != 0 {
		q.Set("snapshot", strconv.FormatInt(r.Snapshot, 10))
	}
	if len(q) > 0 {
		b.WriteByte('?')
		b.WriteString(q.Encode())
	}
	return b.String()
}

// localOrURL returns the name decode.FS opens for a location in table
// metadata or a spec: the path of a file:// or file: URL, an s3:// URL
// as it is (s3a:// and s3n://, which Spark writes, read as s3://), a
// plain path as it is. Other schemes are errors.
func localOrURL(loc string) (string, error) {
	scheme, rest, ok := strings.Cut(loc, "://")
	switch {
	case !ok && strings.HasPrefix(loc, "file:"):
		return strings.TrimPrefix(loc, "file:"), nil // file:/path, as Hadoop writes it
	case !ok:
		if strings.Contains(loc, "\x00") {
			return "", fmt.Errorf("location %q holds a NUL byte", loc)
		}
		return loc, nil
	}
	switch scheme {
	case "file":
		if !strings.HasPrefix(rest, "/") {
			return "", fmt.Errorf("location %q: want file:///ABSOLUTE/PATH", loc)
		}
		return rest, nil
	case "s3", "s3a", "s3n":
		if rest == "" || strings.HasPrefix(rest, "/") {
			return "", fmt.Errorf("location %q: want s3://BUCKET/KEY", loc)
		}
		return "s3://" + rest, nil
	}
	return "", fmt.Errorf("location %q: scheme %s:// is not supported (local paths, file:// and s3:// are)", loc, scheme)
}
