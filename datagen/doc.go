// Package datagen owns lastmile's deterministic sample data: recommender-style
// Parquet tables (ids, a label, dense float features, skewed categorical ids,
// list<int64> sequences, strings, optionally nullable columns) written by
// `lastmile gen` and used as fixtures and benchmark input.
//
// Every value is a pure function of (Config.Seed, row_id, column) computed
// from a splitmix64 hash, never from a sequential random stream. So the same
// rows come out whatever Files and RowGroupRows are, files can be written in
// parallel, and a test can recompute any row's exact values with Expected or
// a Generator instead of trusting a Parquet reader. Given the same Config and
// the same parquet-go version, Write produces byte-identical files.
//
// # Layout written
//
// Columns, in order (see Schema for the machine-readable form):
//
//	row_id    INT64 required, PLAIN                 0..Rows-1, unique
//	user_id   INT64 required, PLAIN                 zipf over 1M users
//	item_id   INT64 required, PLAIN                 zipf over 10M items
//	label     INT32 required, RLE_DICTIONARY        1 for ~5% of rows, else 0
//	dense_j   FLOAT required, PLAIN                 j even ~N(0,1); j odd >= 0, 20% zeros
//	cat_j     INT64 required, RLE_DICTIONARY if cardinality <= 100k, else PLAIN
//	seq_j     LIST<INT64 required> required, PLAIN  3-level list, length 0..SeqMaxLen
//	query     BYTE_ARRAY (STRING) required, RLE_DICTIONARY
//	dense_opt FLOAT optional, PLAIN                 (Nullable only)
//	cat_opt   INT64 optional, RLE_DICTIONARY        (Nullable only)
//	seq_opt   LIST<INT64 required> optional, PLAIN  null and empty lists (Nullable only)
//	query_opt BYTE_ARRAY (STRING) optional, RLE_DICTIONARY (Nullable only)
//
// The choices follow what Spark (parquet-mr) and pyarrow write by default
// where that is cheap to mimic: data pages v1 (Config.DataPageVersion 1;
// parquet-go's own default is v2), pages of about 1 MiB, dictionary pages
// encoded PLAIN followed by RLE_DICTIONARY data pages (as pyarrow does with
// format version >= 2.4; parquet-mr's v1 writer labels the same layout
// PLAIN_DICTIONARY), RLE definition and repetition levels, page statistics
// and CRCs, and one compression codec for every column. Both writers would
// also try a dictionary for the high-cardinality columns and fall back to
// PLAIN once the dictionary passed 1 MiB; datagen writes those columns PLAIN
// from the start, as the brief for lastmile asks. Each column chunk that is
// dictionary encoded has exactly one dictionary page, before its data pages.
//
// # What it must never do
//
// datagen is the oracle the decoders are tested against, so it must never
// import lastmile's decode, pool, shm or cmd packages, nor share their code:
// a bug shared by the writer and the reader would cancel out. It may import
// only the leaf package column (for the DType and Kind in ColumnInfo). It
// owns no global mutable state and defines no flags; cmd binds flags into a
// Config.
package datagen
