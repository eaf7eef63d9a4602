// Package expr is the expression language of lastmile pipelines: the
// predicates of filter ops and the computed columns of map ops, written as
// text in a pipeline spec and evaluated over whole column.Batch columns.
//
// Compile parses an expression, checks it against the input Schema and
// returns an *Expr:
//
//	e, err := expr.Compile(`label == 1 or user_id % 10 == 0`, schema)
//	sel, err = e.Filter(batch, sel)      // rows where it is true
//	err = e.Eval(batch, &outColumn)      // one value per row
//
// Evaluation is vectorized: each node of the checked tree runs one tight
// loop over a whole column (or over the rows a selection vector keeps)
// into a typed scratch vector, so there is no per-row interpretation and,
// once the scratch has grown to the batch size, no allocation. An *Expr
// owns that scratch: it must be used by one goroutine at a time; Clone
// gives each worker its own.
//
// The language (grammar, types, numeric promotion, null semantics, every
// function and the hash of hash_mod) is specified in docs/expressions.md;
// that file and this package change together.
//
// This package must never import another lastmile package except column
// (the repository's deps_test.go enforces it), must never keep global mutable state, and
// must never panic on user input: bad expressions are *Error values with
// the byte offset of the problem, and runtime surprises (integer division
// by zero, a float that does not fit an int) are nulls, not panics.
package expr
