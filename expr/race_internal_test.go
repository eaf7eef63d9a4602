//go:build race

package expr

// raceEnabled shortens the randomized tests, which the race detector
// slows tenfold; they run in full without it.
const raceEnabled = true
