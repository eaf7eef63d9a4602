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
// WriteNPY writes the same rows as NumPy .npy files (one per column part:
// values, offsets, validity) for the DataLoader baseline of `lastmile bench`,
// and WriteSpamUsers / WriteSpamUsersNPY the side table of the example
// pipeline's anti-join: the user ids whose hash falls under a fraction.
//
// # Layout written
//
// Columns, in order (see Schema for the machine-readable form):
//
//	row_id    INT64 required, PLAIN                  0..Rows-1, unique
//	user_id   INT64 required, PLAIN                  zipf-like over 1M users
//	item_id   INT64 required, PLAIN                  zipf-like over 10M items
//	label     INT32 required, RLE_DICTIONARY         1 for ~5% of rows, else 0
//	dense_j   FLOAT required, PLAIN                  j even ~N(0,1); j odd >= 0, 20% zeros
//	cat_j     INT64 required, RLE_DICTIONARY if its cardinality <= 100k, else PLAIN
//	seq_j     LIST<INT64 required> required, PLAIN   3-level list, lengths 0..SeqMaxLen
//	query     BYTE_ARRAY STRING required, RLE_DICTIONARY
//	dense_opt FLOAT optional, PLAIN                  (Nullable only)
//	cat_opt   INT64 optional, RLE_DICTIONARY         (Nullable only)
//	seq_opt   LIST<INT64 required> optional, PLAIN   null and empty lists (Nullable only)
//	query_opt BYTE_ARRAY STRING optional, RLE_DICTIONARY (Nullable only)
//
// A list is <name> (LIST) { repeated group list { required int64 element } }:
// maximum repetition level 1, maximum definition level 1 (2 for seq_opt,
// where 0 is a null list, 1 an empty one). parquet-go annotates INT32 and
// INT64 leaves with the logical type INT(32|64, signed); pyarrow and Spark
// write none. Decoders should go by the physical type.
//
// Where the brief left a choice open, datagen does what Spark (parquet-mr)
// and pyarrow do by default and parquet-go can be made to do:
//
//   - Data page v1 headers (Config.DataPageVersion 1). parquet-go's own
//     default is v2, and v2 is available for tests.
//   - Pages of about 1 MiB before compression (Config.PageBytes), RLE
//     repetition and definition levels, page statistics and page CRCs, and
//     a column index and offset index after the row groups.
//   - Dictionary-encoded chunks have exactly one dictionary page, encoded
//     PLAIN and placed first, then RLE_DICTIONARY data pages. pyarrow (format
//     version >= 2.4) writes the same; parquet-mr's v1 writer labels it
//     PLAIN_DICTIONARY, the same bytes. label is dictionary encoded because
//     both writers would do it.
//   - Both writers try a dictionary on every column and fall back to PLAIN
//     once it passes 1 MiB, so their high-cardinality columns start with
//     dictionary pages and switch part-way through a chunk. datagen writes
//     ids, dense floats and sequences PLAIN from the start instead, as
//     lastmile's brief asks; no chunk mixes encodings.
//   - One codec for all columns: snappy (raw blocks from s2's fast,
//     snappy-compatible encoder), zstd at level 1 (pyarrow's default) or
//     none.
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
