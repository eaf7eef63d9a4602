//go:build race

package engine_test

// raceSparse thins the property tests' samples under the race detector,
// which runs them several times slower (sampled).
const raceSparse = 3
