// Package spec owns lastmile's job specification: the YAML (or JSON) file
// that names a job's inputs, projected columns, batching, ring geometry,
// ranks and epochs, and (with the ops package) its last-mile pipeline.
//
// Parsing is strict. Unknown fields are errors, every error names the field
// by its dotted path, its line in the file and what is allowed, and all
// errors of a file are reported together, so a user fixes a spec in one
// round trip. Validation happens before any work starts.
//
// spec imports no other lastmile package: it describes a job, it never runs
// one.
package spec
