// Package pool runs numbered units of work on a fixed set of goroutines and
// delivers their results in plan order, with a bound on how many results
// exist at once.
//
// It owns lastmile's decode stage's concurrency: the claim counter, the
// reorder ring, parking and waking, cancellation, and turning a panic in a
// unit into an error. It knows nothing of Parquet, batches or rings: a unit
// is an index and a function, so the result of a unit may as well be
// computed by a remote peer as decoded here.
//
// The package imports no other lastmile package (the caller sizes the pool,
// for example with cpus.Available), starts no goroutine that outlives Run,
// and keeps no global state.
package pool
