package decode

import (
	"context"
	"sync"
)

// planParallel is how many files PlanFiles plans at once. Planning a file
// is a few small reads (its footer; its offset indexes where row groups
// are sliced), each a round trip on object storage: tens of
// milliseconds, against microseconds of work. Planning them one after
// another made a table of thousands of objects take minutes to plan
// (docs/storage.md). A variable so that tests can compare.
var planParallel = 16

// planEach plans every path (planFile) with up to planParallel at once,
// and returns each one's plan or error, in paths' order: the caller
// takes them in that order, so the error it reports is the same whatever
// the timing.
//
// Workers take the next index from a shared counter and write only their
// own slots of plans and errs; the caller reads them after every worker
// is done. When ctx ends, workers stop taking paths and the unplanned
// ones report ctx's error.
func planEach(ctx context.Context, fsys FS, paths []string, opts PlanOptions, parts []PartitionKey) ([]*filePlan, []error) {
	plans := make([]*filePlan, len(paths))
	errs := make([]error, len(paths))
	var (
		mu   sync.Mutex
		next int
		wg   sync.WaitGroup
	)
	take := func() int {
		mu.Lock()
		defer mu.Unlock()
		i := next
		next++
		return i
	}
	for range min(planParallel, len(paths)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := take(); i < len(paths); i = take() {
				if err := ctx.Err(); err != nil {
					errs[i] = err
					continue
				}
				plans[i], errs[i] = planFile(ctx, fsys, paths[i], opts, parts)
			}
		}()
	}
	wg.Wait()
	return plans, errs
}
