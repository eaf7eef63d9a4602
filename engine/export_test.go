package engine

// SetNeverDeferForTest makes every job prefetch its late columns whole
// (on) or decide as usual (off), for tests and benchmarks of package
// engine_test to measure deferring against; it returns the old setting.
func SetNeverDeferForTest(on bool) bool { return neverDefer.Swap(on) }

// SetNeverPruneForTest makes every job read every unit, whatever its
// statistics (on), or prune as usual (off); it returns the old setting.
func SetNeverPruneForTest(on bool) bool { return neverPrune.Swap(on) }

// SetCopyWindowForTest makes every shuffle window copy each row it takes
// into its own batch (on), as it did before it pointed at rows (off: as
// usual); it returns the old setting.
func SetCopyWindowForTest(on bool) bool { return copyWindow.Swap(on) }

// SetCopyCacheForTest makes the unit cache store copies of units (on), as
// it did before it kept their buffers (off: as usual); it returns the old
// setting.
func SetCopyCacheForTest(on bool) bool { return copyCache.Swap(on) }
