//go:build race

package main_test

// raceBuild: under -race the daemon binary is built with the race
// detector too, and a race it reports fails the test that ran it.
const raceBuild = true
