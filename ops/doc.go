// Package ops runs a job's pipeline, the row-local "last-mile" ops of
// spec.Job.Pipeline (filter, sample, join, map, sequence, cast, nulls,
// stack, jagged, select, rename, drop), over one work unit's rows at a
// time. stack and jagged make feature groups, one ring field from several
// columns: the ops prepare the members and the engine packs them
// (groups.go). The user
// documentation of every op is docs/pipeline.md; this comment says how
// they run.
//
// # Compile
//
// Compile checks every op against the input file's schema before any work
// starts, walking the ops in spec order with the schema as it stands after
// each: unknown columns (with a suggestion), wrong types, expression errors
// (with their offset), side tables that are missing, mistyped, too large
// for max_memory or, for a left join, have a duplicate key. Every such
// error is a *spec.FieldError naming the op's field and line. Then it loads
// the side tables, once, into read-only hash tables all workers share.
//
// An op compiles to steps over values. A value is a column's contents: an
// input column as decoded, or what one step computes. Values never change;
// an op that replaces a column makes a new value and points the schema at
// it, so every step reads exactly what its op saw in spec order, wherever
// the step ends up running. select, rename and drop change the schema
// only and compile to no step; steps whose values reach neither the output
// nor another step are dropped. The input columns that remain are Needs:
// nothing else is decoded (projection pushdown).
//
// # Select and Apply
//
// The engine decodes a unit in two phases (late materialization): first
// the Early columns for all rows, which Select turns into the surviving
// row indexes; then every other Needs column for those rows only, which
// Apply turns into the output batch.
//
// Deciding whether a row survives is row-local and deterministic for every
// op (a filter's predicate, a sample's hash, a join's lookup, a null, a
// list's length), so the drops of a pipeline commute: the surviving rows
// are those every drop keeps, each judging the values its op saw. That is
// what lets them run apart from the ops around them:
//
//   - Select runs filter, sample and semi/anti join, each over the rows
//     the ones before kept, plus the maps, casts and other steps they read
//     (a filter after a map sees the derived column). A filter or sample
//     that would evaluate its expression for few of the rows first gathers
//     the values it needs to the survivors. When no computing step sits
//     between them, each State runs the drops in the order that has cost
//     least so far (cheapest per dropped row first, measured): the rows
//     that survive are the same in any order.
//   - nulls: skip and sequence on_long: skip run in Select too when the
//     columns they read are early anyway; otherwise Apply runs them, so a
//     heavy list column is never decoded for rows a filter drops.
//   - Apply recomputes, over the kept rows, every computing step whose
//     value is needed: maps, casts, sequences, left joins (gathering the
//     table's columns), sample weights (1/rate of the rule each row
//     matched), nulls fills. Then the drops left to it, then the checks
//     (nulls: error, on_long: error) on the rows it keeps, so a null in a
//     row that some op drops is no error. Then it moves columns that pass
//     through unchanged from the decoded batch into the output without a
//     copy, and cuts the rows its own drops removed.
//
// Apply depends only on its input batch, never on an earlier Select, so
// the output is the same whether a unit is processed whole or in pieces,
// by any worker. A worker runs a unit like this:
//
//	prog, err := ops.Compile(ctx, job, fields, ops.Env{Seed: job.Seed, Workers: n}) // once
//	st := prog.NewState()                                                      // per worker
//	// per unit: decode prog.Early() for every row into early, then
//	sel, err := st.Select(&early, nil)
//	// decode the other prog.Needs() columns for the rows sel into late,
//	// and gather early's columns by sel into late too; then
//	err = st.Apply(&late, &out) // out: prog.Output(), len(sel) rows or fewer
//
// # Performance
//
// Nothing interprets rows one at a time: expressions evaluate over whole
// columns (package expr), and every op is a loop over typed slices or a
// memmove per row (per run of rows where it can). Columns that reach the
// output unchanged, and lists a ragged sequence only cuts, are taken over
// from the decoded batch rather than copied. A State keeps every buffer (expression scratch,
// selection vectors, computed columns) from unit to unit, so a worker in
// steady state does not allocate except for output buffers that must
// grow.
//
// # Imports
//
// ops may import column, expr, spec and decode (to load side tables). It
// must never import engine, shm, pool, bench, daemon or cmd: the engine
// runs pipelines, not the other way round (the repository's deps_test.go enforces it).
package ops
