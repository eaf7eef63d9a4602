package engine

// SetNeverDeferForTest makes every job prefetch its late columns whole
// (on) or decide as usual (off), for tests and benchmarks of package
// engine_test to measure deferring against; it returns the old setting.
func SetNeverDeferForTest(on bool) bool { return neverDefer.Swap(on) }

// SetNeverPruneForTest makes every job read every unit, whatever its
// statistics (on), or prune as usual (off); it returns the old setting.
func SetNeverPruneForTest(on bool) bool { return neverPrune.Swap(on) }
