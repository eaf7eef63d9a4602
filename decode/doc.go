// Package decode plans Parquet files into work units and decodes a unit's
// projected columns into a column.Batch.
//
// Planning (PlanFiles) reads each file's footer once, resolves the
// projected columns into Fields and cuts the files into Units: row groups,
// or slices of row groups no longer than PlanOptions.MaxUnitRows. A Unit is
// self-contained and serializable: it names the file, the size and
// modification time the plan saw, the row range and the byte ranges of its
// column chunks, so any process holding the plan's Fields can decode it.
// Partition columns (partition.go) are declared by the caller, take their
// values from each file's KEY=VALUE directories, and travel in the unit;
// they are filled (FillPartition), never decoded.
//
// Decoding (Decoder) is lastmile's own page decoder: column-chunk bytes are
// read with ReadAt in windows (pagereader.go), page headers are parsed by a
// small thrift compact-protocol reader (pageheader.go), and pages are
// decompressed with klauspost/compress. PLAIN fixed-width values decompress
// straight into the output column: v2 pages directly, v1 snappy pages after
// their level sections are decoded alone (snappyprefix.go), other v1 pages
// in place with the values then moved over the levels. Repetition and
// definition levels are decoded by our own RLE/bit-packed hybrid reader
// (hybrid.go); lists take their rows from the zero repetition levels;
// dictionaries are decoded once per chunk and indexes gathered. docs/decode.md records the
// measurements that chose this path over parquet-go's page API and arrow-go's
// pqarrow, which remain in compare_*.go for benchmarks only.
//
// Contracts:
//   - Only projected columns are ever read from disk or decompressed.
//   - A corrupt or truncated file yields an *Error naming the file, row group,
//     column and, where known, the page offset; never a panic.
//   - A Decoder is used by one goroutine at a time and reuses its buffers
//     and the caller's column.Batch buffers across units.
//
// This package must never import a lastmile package other than column: the
// pool, ring and daemon build on it, not the other way round.
package decode
