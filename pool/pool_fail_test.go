package pool_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lastmile/lastmile/pool"
)

// Failures: work and emit errors, cancellation, panics and Goexit.

func TestWorkError(t *testing.T) {
	const n = 100
	for _, w := range []int{1, 2, 3, 8} {
		for _, k := range []int{0, 1, 17, n - 1} {
			t.Run(fmt.Sprintf("W=%d/k=%d", w, k), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					c := newChecker(t, pool.Config{Workers: w}, n)
					// Later units are fast, earlier ones slow, so units after k
					// finish before those before it.
					c.delay = func(i int) time.Duration { return time.Duration(n-i) * time.Millisecond }
					c.fail = func(i int) error {
						if i == k {
							return errBoom
						}
						return nil
					}
					err := c.run(t.Context())
					checkUnitError(t, err, k, "work", errBoom)
					c.check()
					if len(c.emitted) != k {
						t.Errorf("emitted %d units, want exactly %d (those before the failure)", len(c.emitted), k)
					}
				})
			})
		}
	}
}

func checkUnitError(t *testing.T, err error, index int, op string, target error) {
	t.Helper()
	var ue *pool.UnitError
	if !errors.As(err, &ue) {
		t.Fatalf("Run returned %v (%T), want a *pool.UnitError", err, err)
	}
	if ue.Index != index || ue.Op != op {
		t.Errorf("UnitError{Index: %d, Op: %q}, want {%d, %q}", ue.Index, ue.Op, index, op)
	}
	if target != nil && !errors.Is(err, target) {
		t.Errorf("errors.Is(%v, %v) = false", err, target)
	}
	want := fmt.Sprintf("unit %d: ", index)
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name the unit (%q)", err, want)
	}
}

// TestLowestFailureWins: unit 10 fails first in time, unit 3 later; the
// error is unit 3's, units 0..2 are emitted, and no unit after 10 starts
// once 10 has failed, however far InFlight would let the workers run.
func TestLowestFailureWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const w = 2
		c := newChecker(t, pool.Config{Workers: w, InFlight: 64}, 1000)
		var failedAt10 atomic.Bool
		var startedAfter atomic.Int32
		c.delay = func(i int) time.Duration {
			if i > 10 && failedAt10.Load() {
				startedAfter.Add(1)
			}
			switch i {
			case 3:
				return time.Second
			case 10:
				return 0
			}
			return time.Millisecond
		}
		c.fail = func(i int) error {
			switch i {
			case 3:
				return fmt.Errorf("late: %w", errBoom)
			case 10:
				failedAt10.Store(true)
				return errors.New("early")
			}
			return nil
		}
		err := c.run(t.Context())
		checkUnitError(t, err, 3, "work", errBoom)
		c.check()
		if len(c.emitted) != 3 {
			t.Errorf("emitted %v, want [0 1 2]", c.emitted)
		}
		// A worker may have claimed one unit past 10 before the failure was
		// published; no more.
		if s := startedAfter.Load(); s > w {
			t.Errorf("%d units after 10 started after it failed", s)
		}
	})
}

func TestEmitError(t *testing.T) {
	for _, w := range []int{1, 2, 8} {
		t.Run(fmt.Sprintf("W=%d", w), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const j = 13
				var calls []int
				var canceled atomic.Int32
				err := pool.Run(t.Context(), pool.Config{Workers: w}, 100,
					func(ctx context.Context, _, i, _ int) (int, error) {
						if i > j {
							// Units after j may be running when emit fails:
							// they see their ctx canceled.
							select {
							case <-ctx.Done():
								canceled.Add(1)
								return 0, ctx.Err()
							case <-time.After(time.Hour):
								t.Errorf("unit %d not canceled", i)
							}
						}
						return i, nil
					},
					func(i, r int) error {
						calls = append(calls, i)
						if i == j {
							synctest.Wait() // let unit j+1 start
							return errBoom
						}
						return nil
					})
				checkUnitError(t, err, j, "emit", errBoom)
				if !strings.HasPrefix(err.Error(), "emit unit 13: ") {
					t.Errorf("error %q, want it to start with the failed step", err)
				}
				if len(calls) != j+1 || calls[j] != j {
					t.Errorf("emit called for %v, want 0..%d", calls, j)
				}
				if canceled.Load() == 0 {
					t.Errorf("no running unit saw its ctx canceled")
				}
			})
		})
	}
}

// TestCancel cancels ctx while unit 0 blocks, the other workers have run
// ahead and are parked on the InFlight window, and the emitter waits for
// unit 0.
func TestCancel(t *testing.T) {
	for _, w := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("W=%d", w), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				c := newChecker(t, pool.Config{Workers: w}, 100)
				var block sync.Once
				c.fail = func(i int) error {
					if i == 0 {
						var err error
						block.Do(func() {
							<-ctx.Done()
							err = ctx.Err()
						})
						return err
					}
					return nil
				}
				errc := make(chan error)
				go func() { errc <- c.run(ctx) }()
				synctest.Wait() // everyone is parked
				// Unit 0 blocks; the rest of the window runs.
				want := int64(c.inFlight)
				if w == 1 {
					want = 1 // the only worker is stuck in unit 0
				}
				if got := c.maxLive.Load(); got != want {
					t.Errorf("%d units started before cancel, want %d", got, want)
				}
				start := time.Now()
				cancel()
				if err := <-errc; err != context.Canceled {
					t.Fatalf("Run = %v, want context.Canceled", err)
				}
				if d := time.Since(start); d != 0 {
					t.Errorf("Run took %v to return after cancel", d)
				}
				c.check()
				if len(c.emitted) != 0 {
					t.Errorf("emitted %v after cancel", c.emitted)
				}
			})
		})
	}
}

// TestCancelDuringEmit cancels from inside emit: Run emits nothing more and
// returns ctx.Err(), not a unit error.
func TestCancelDuringEmit(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var emitted int
	err := pool.Run(ctx, pool.Config{Workers: 2}, 1000,
		func(ctx context.Context, _, i, _ int) (int, error) { return i, nil },
		func(i, _ int) error {
			emitted++
			if i == 5 {
				cancel()
			}
			return nil
		})
	if err != context.Canceled || emitted != 6 {
		t.Fatalf("Run = %v after %d emits, want context.Canceled after 6", err, emitted)
	}
}

// TestCanceledBefore: a ctx that is already done emits nothing.
func TestCanceledBefore(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := pool.Run(ctx, pool.Config{Workers: 2}, 10,
		func(ctx context.Context, _, i, _ int) (int, error) { return i, nil },
		func(i, _ int) error {
			t.Errorf("emit(%d) called with a canceled ctx", i)
			return nil
		})
	if err != context.Canceled {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
}

// TestDeadline: a unit that returns ctx.Err() on a deadline gives
// context.DeadlineExceeded, not a unit error.
func TestDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		err := pool.Run(ctx, pool.Config{Workers: 2}, 10,
			func(ctx context.Context, _, i, _ int) (int, error) {
				if i == 4 {
					<-ctx.Done()
					return 0, fmt.Errorf("read row group: %w", ctx.Err())
				}
				return i, nil
			},
			func(int, int) error { return nil })
		if err != context.DeadlineExceeded {
			t.Fatalf("Run = %v, want context.DeadlineExceeded", err)
		}
	})
}

func TestWorkPanic(t *testing.T) {
	for _, w := range []int{1, 3} {
		t.Run(fmt.Sprintf("W=%d", w), func(t *testing.T) {
			var emitted []int
			err := pool.Run(t.Context(), pool.Config{Workers: w}, 20,
				func(_ context.Context, _, i, _ int) (int, error) {
					if i == 4 {
						panicInUnit()
					}
					return i, nil
				},
				func(i, _ int) error {
					emitted = append(emitted, i)
					return nil
				})
			checkUnitError(t, err, 4, "work", nil)
			var pe *pool.PanicError
			if !errors.As(err, &pe) {
				t.Fatalf("Run = %v, want a *pool.PanicError inside", err)
			}
			if pe.Value != "kaboom" {
				t.Errorf("panic value %v, want kaboom", pe.Value)
			}
			msg := err.Error()
			if !strings.Contains(msg, "panic: kaboom") || !strings.Contains(msg, "panicInUnit") {
				t.Errorf("error message lacks the panic value or the stack:\n%s", msg)
			}
			if len(emitted) != 4 {
				t.Errorf("emitted %v, want [0 1 2 3]", emitted)
			}
		})
	}
}

func panicInUnit() { panic("kaboom") }

// TestWorkPanicError: panic(err) unwraps to err.
func TestWorkPanicError(t *testing.T) {
	err := pool.Run(t.Context(), pool.Config{Workers: 2}, 5,
		func(_ context.Context, _, i, _ int) (int, error) {
			if i == 2 {
				panic(errBoom)
			}
			return i, nil
		},
		func(int, int) error { return nil })
	checkUnitError(t, err, 2, "work", errBoom)
}

// TestWorkGoexit: a work function that calls runtime.Goexit (t.FailNow from
// a helper, say) fails its unit instead of hanging Run.
func TestWorkGoexit(t *testing.T) {
	err := pool.Run(t.Context(), pool.Config{Workers: 2}, 10,
		func(_ context.Context, _, i, _ int) (int, error) {
			if i == 3 {
				runtime.Goexit()
			}
			return i, nil
		},
		func(int, int) error { return nil })
	checkUnitError(t, err, 3, "work", nil)
	if !strings.Contains(err.Error(), "Goexit") {
		t.Errorf("Run = %v, want it to mention Goexit", err)
	}
}

// TestEmitPanic: a panic in emit reaches the caller after the workers have
// stopped (synctest would report a goroutine left behind).
func TestEmitPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		defer func() {
			if p := recover(); p != "emit kaboom" {
				t.Errorf("recovered %v, want the emit panic", p)
			}
		}()
		_ = pool.Run(t.Context(), pool.Config{Workers: 4}, 100,
			func(ctx context.Context, _, i, _ int) (int, error) {
				time.Sleep(time.Millisecond)
				return i, nil
			},
			func(i, _ int) error {
				if i == 7 {
					panic("emit kaboom")
				}
				return nil
			})
		t.Error("Run returned")
	})
}

// TestNoLeaks runs the ways Run can end on real time and checks that the
// goroutine count comes back to where it was.
