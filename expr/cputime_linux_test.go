package expr_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/expr"
)

// threadCPU is the CPU time of the calling thread
// (clock_gettime(CLOCK_THREAD_CPUTIME_ID)).
func threadCPU() time.Duration {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// TestCPUTimeTable prints the table of docs/expressions.md
// ("Performance"): for each benchmark expression over the benchmark
// batch, the least CPU time of the calling thread per batch over 25
// rounds. On a shared machine CPU time varies far less than wall time.
// Run with EXPR_CPUTIME=1 go test -run CPUTimeTable -v ./expr/.
func TestCPUTimeTable(t *testing.T) {
	if os.Getenv("EXPR_CPUTIME") == "" {
		t.Skip("set EXPR_CPUTIME=1 to print the CPU time table")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	bt := benchBatch(benchRows)

	type item struct {
		src  string
		ev   bool
		e    *expr.Expr
		out  column.Column
		sel  []int32
		best time.Duration
	}
	var items []*item
	for _, src := range []string{
		"label == 1",
		"label == 1 or user_id % 10 == 0",
		"label == 1 and user_id % 10 == 0",
		"label == 1 or (user_id % 10 == 0 and not is_null(cat_opt))",
		"dense_0 * 2.5 - dense_1 >= 0.1",
		"cat_0 in (3, 17, 42)",
		`query == "foo" or starts_with(query, "ab")`,
		"E:clip(log1p(dense_0), 0, 10)",
		"E:hash_mod(query, 65536)",
		"E:hash_mod(user_id, 1000003)",
		"E:user_id % 10",
		"E:dense_0 * 2.5 - dense_1",
		"E:bucketize(dense_0, [0.1, 0.5, 1, 5])",
		"E:fill_null(cat_opt, -1)",
		"E:cast(label, float32)",
		"E:if(label == 1, 1.0, 0.0)",
		"E:cast(dense_0, bfloat16)",
	} {
		s, ev := strings.CutPrefix(src, "E:") // E: Eval, else Filter
		e, err := expr.Compile(s, expr.BatchSchema(bt))
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, &item{src: s, ev: ev, e: e, sel: make([]int32, 0, benchRows), best: time.Hour})
	}
	for range 25 {
		for _, it := range items {
			c0 := threadCPU()
			const reps = 8
			for range reps {
				var err error
				if it.ev {
					err = it.e.Eval(bt, &it.out)
				} else {
					it.sel, err = it.e.Filter(bt, it.sel)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			it.best = min(it.best, (threadCPU()-c0)/reps)
		}
	}
	fmt.Println("| expression | call | µs per batch | Mrows/s |\n|---|---|---|---|")
	for _, it := range items {
		call := "Filter"
		if it.ev {
			call = "Eval"
		}
		fmt.Printf("| `%s` | %s | %.0f | %.0f |\n", it.src, call, float64(it.best)/1e3, benchRows/it.best.Seconds()/1e6)
	}
}
