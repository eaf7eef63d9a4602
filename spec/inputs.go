package spec

import "strings"

// IcebergScheme starts an input or side table that is an Iceberg table:
// "iceberg:LOCATION[?snapshot=ID]" with LOCATION a metadata file (path,
// file:// or s3:// URL), or "iceberg:http(s)://CATALOG?table=NS.TABLE"
// for a REST catalog. Package iceberg parses the rest; the spec only
// anchors a relative metadata path to the spec's directory.
const IcebergScheme = "iceberg:"

// anchor makes a relative path in the spec relative to dir: a plain path
// or the metadata path of an Iceberg input. Absolute paths and URLs
// ("s3://...", "file:///...", "http://...") are left as they are.
func anchor(dir, p string) string {
	if dir == "" || dir == "." || p == "" {
		return p
	}
	if rest, ok := strings.CutPrefix(p, IcebergScheme); ok {
		if rest == "" || strings.HasPrefix(rest, "/") || strings.Contains(rest, "://") || strings.HasPrefix(rest, "file:") {
			return p
		}
		return IcebergScheme + dir + "/" + rest
	}
	if strings.HasPrefix(p, "/") || strings.Contains(p, "://") {
		return p
	}
	return dir + "/" + p
}

// IsIceberg reports whether an input or side table names an Iceberg table.
func IsIceberg(p string) bool { return strings.HasPrefix(p, IcebergScheme) }

// MaxBuckets bounds a join's declared bucket count.
const MaxBuckets = 1 << 20
