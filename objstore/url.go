package objstore

import (
	"fmt"
	"strings"
)

// Scheme is the URL scheme of S3 names.
const Scheme = "s3"

// Object names one object (or, for a prefix, the key is a prefix).
type Object struct {
	Bucket string
	Key    string
}

// String returns the object's URL, "s3://bucket/key".
func (o Object) String() string { return Scheme + "://" + o.Bucket + "/" + o.Key }

// ParseURL splits "s3://bucket/key" into its bucket and key. The key may
// be empty ("s3://bucket/" or "s3://bucket": the whole bucket, as a
// prefix). Bucket names follow S3's rules loosely (3 to 63 bytes of
// lower-case letters, digits, '.', '-' and, for S3-compatible stores, '_');
// keys are at most 1024 bytes, with no NUL and no "." or ".." segment (S3
// would take them literally; a local mirror would not).
func ParseURL(s string) (Object, error) {
	rest, ok := strings.CutPrefix(s, Scheme+"://")
	if !ok {
		return Object{}, fmt.Errorf("%q: not an s3:// URL", s)
	}
	bucket, key, _ := strings.Cut(rest, "/")
	if err := validBucket(bucket); err != nil {
		return Object{}, fmt.Errorf("%q: %w", s, err)
	}
	if err := validKey(key); err != nil {
		return Object{}, fmt.Errorf("%q: %w", s, err)
	}
	return Object{Bucket: bucket, Key: key}, nil
}

func validBucket(b string) error {
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("bucket name %q: want 3 to 63 bytes", b)
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return fmt.Errorf("bucket name %q: only lower-case letters, digits, '.', '-' and '_' are allowed", b)
		}
	}
	return nil
}

func validKey(k string) error {
	if len(k) > 1024 {
		return fmt.Errorf("key of %d bytes: at most 1024", len(k))
	}
	if strings.IndexByte(k, 0) >= 0 {
		return fmt.Errorf("key contains a NUL byte")
	}
	for _, seg := range strings.Split(k, "/") {
		if seg == "." || seg == ".." {
			return fmt.Errorf("key %q has a %q segment", k, seg)
		}
	}
	return nil
}
