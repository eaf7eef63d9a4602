//go:build race

package chaos_test

// raceBuild: under -race the daemon is built with the race detector too
// (except for a soak, which measures memory), and a race it reports fails
// the test that ran it.
const raceBuild = true
