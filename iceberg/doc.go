// Package iceberg turns an Apache Iceberg table snapshot into the list of
// Parquet data files a job reads: it reads the table's metadata (from a
// metadata file location or a REST catalog), selects a snapshot (the
// current one or one by id), reads the snapshot's manifest list and
// manifests, reads the snapshot's position deletes, deletion vectors and
// equality deletes and gives each data file its deleted rows (deletes.go,
// dvdeletes.go, eqdeletes.go), and prunes data files with the job's filters through their partition values
// and column statistics. It also reports how the table is bucketed
// (Iceberg bucket[N] partitions), which bucket joins use.
//
// Every byte of metadata, manifest list and manifest is read through a
// decode.FS, the same view of the files the job's data goes through, so
// that the daemon reads a user's table only as far as that user may
// (package asuser); REST catalog responses come over HTTP from the catalog
// the spec names.
//
// The package reads; it never writes a table (tests write theirs with
// package icebergtest). It imports decode (where bytes come from) and expr
// (statistics ranges), and must never import ops, engine or anything above.
// The Iceberg library is used for its Avro manifest codecs, schemas,
// partition specs and transforms (the root package
// github.com/apache/iceberg-go), and its deletion vector codec
// (table/dv, which brings only the roaring bitmap library): its table and
// catalog packages would bring cloud SDKs, gRPC and Substrait into the
// build (docs/storage.md).
package iceberg
