//go:build !race

package engine_test

const raceSparse = 1
