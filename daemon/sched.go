package daemon

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Scheduler shares a fixed number of decode tokens (CPUs) between jobs in
// proportion to their weights. A job's engine workers take a token before
// decoding a unit and give it back after (engine Options.Gate), so a job
// decodes only while it holds tokens.
//
// The policy is stride scheduling (Waldspurger and Weihl, 1995) charged by
// time: every client has a pass value; a token freed goes to the waiting
// client with the lowest pass, and a client's pass grows by the time it
// held a token divided by its weight. Over any window in which two clients
// both wait for tokens, each gets CPU time in proportion to its weight. To
// keep a client from taking every free token at once before its charge
// shows, a grant is charged up front with the client's average hold time
// and corrected when the token comes back.
//
// A client that had nothing to do banks little credit: when it starts
// waiting again its pass is raised to maxLag below the lowest pass of the
// clients that are active, so it competes from then on rather than
// monopolizing the tokens to catch up on a long idle period, while the
// short gaps of a busy job (the end of an epoch, a slow batch) do not cost
// it its share.
//
// Tokens are not preempted: a unit runs to its end. Pause stops all grants
// (a daemon draining), Resume restarts them.
//
// A zero Scheduler is not usable; call NewScheduler.
type Scheduler struct {
	mu       sync.Mutex
	capacity int
	busy     int
	paused   bool
	clients  map[*Client]struct{}
	vtime    float64 // pass of the last grant: where idle clients rejoin
}

// NewScheduler returns a scheduler of n tokens.
func NewScheduler(n int) *Scheduler {
	return &Scheduler{capacity: max(n, 1), clients: make(map[*Client]struct{})}
}

// Client is one job's share of a Scheduler.
type Client struct {
	s       *Scheduler
	weight  float64
	pass    float64
	held    int
	waiters []*waiter
	avg     time.Duration // average hold time, the up-front charge
	closed  bool

	// Counters, under s.mu.
	grants   int64
	holdTime time.Duration
	waitTime time.Duration
}

type waiter struct {
	ch      chan struct{}
	granted bool
	charge  float64
}

// maxLag is the most credit, in weighted token time, a client keeps while
// it has nothing to do.
const maxLag = 200 * time.Millisecond

// ErrSchedulerClosed is returned by Acquire on a closed Client.
var ErrSchedulerClosed = errors.New("scheduler client closed")

// NewClient registers a client of the given weight (at least 1).
func (s *Scheduler) NewClient(weight int) *Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &Client{s: s, weight: float64(max(weight, 1)), avg: time.Millisecond, pass: s.vtime}
	s.clients[c] = struct{}{}
	return c
}

// SetCapacity changes the number of tokens; tokens held beyond a lowered
// capacity are returned as their units finish.
func (s *Scheduler) SetCapacity(n int) {
	s.mu.Lock()
	s.capacity = max(n, 1)
	s.dispatch()
	s.mu.Unlock()
}

// Pause stops granting tokens; Resume restarts.
func (s *Scheduler) Pause() {
	s.mu.Lock()
	s.paused = true
	s.mu.Unlock()
}

// Resume undoes Pause.
func (s *Scheduler) Resume() {
	s.mu.Lock()
	s.paused = false
	s.dispatch()
	s.mu.Unlock()
}

// Stats returns the capacity and the tokens held now.
func (s *Scheduler) Stats() (capacity, busy int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.capacity, s.busy
}

// SetWeight changes the client's weight; it applies to later charges.
func (c *Client) SetWeight(w int) {
	c.s.mu.Lock()
	c.weight = float64(max(w, 1))
	c.s.mu.Unlock()
}

// ClientStats are a client's counters.
type ClientStats struct {
	Grants   int64
	Held     int
	HoldTime time.Duration // total time tokens were held
	WaitTime time.Duration // total time Acquire waited
}

// Stats returns the client's counters.
func (c *Client) Stats() ClientStats {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return ClientStats{Grants: c.grants, Held: c.held, HoldTime: c.holdTime, WaitTime: c.waitTime}
}

// Close unregisters the client; its waiters fail with ErrSchedulerClosed.
// Tokens it holds are returned by their release functions as usual.
func (c *Client) Close() {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c.closed = true
	for _, w := range c.waiters {
		close(w.ch)
	}
	c.waiters = nil
	delete(s.clients, c)
	s.dispatch()
}

// Reopen registers a closed client again, its counters kept: a done job
// brought back to production (revive.go). Its banked credit is dropped, as
// for any client that rejoins after idling.
func (c *Client) Reopen() {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !c.closed {
		return
	}
	c.closed = false
	c.pass = max(c.pass, s.vtime)
	s.clients[c] = struct{}{}
}

// Acquire waits for a token and returns the function that gives it back
// (call it exactly once). It fails if ctx is done first or the client is
// closed. Its signature is engine Options.Gate's.
func (c *Client) Acquire(ctx context.Context) (func(), error) {
	s := c.s
	start := time.Now()
	s.mu.Lock()
	if c.closed {
		s.mu.Unlock()
		return nil, ErrSchedulerClosed
	}
	if c.held == 0 && len(c.waiters) == 0 {
		// Rejoining after idling: at most maxLag of banked credit.
		c.pass = max(c.pass, s.minActivePass()-float64(maxLag))
	}
	w := &waiter{ch: make(chan struct{})}
	c.waiters = append(c.waiters, w)
	s.dispatch()
	s.mu.Unlock()

	select {
	case <-w.ch:
	case <-ctx.Done():
	}
	s.mu.Lock()
	if !w.granted {
		if !c.closed {
			c.removeWaiter(w)
		}
		s.mu.Unlock()
		if c.closed {
			return nil, ErrSchedulerClosed
		}
		return nil, ctx.Err()
	}
	c.waitTime += time.Since(start)
	s.mu.Unlock()
	got := time.Now()
	var once sync.Once
	return func() { once.Do(func() { c.release(w, time.Since(got)) }) }, nil
}

func (c *Client) removeWaiter(w *waiter) {
	for i, x := range c.waiters {
		if x == w {
			c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
			return
		}
	}
}

func (c *Client) release(w *waiter, held time.Duration) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy--
	c.held--
	c.holdTime += held
	// Correct the up-front charge with the real hold time.
	c.pass += float64(held)/c.weight - w.charge
	c.avg += (held - c.avg) / 8
	s.dispatch()
}

// minActivePass returns the lowest pass of the clients holding or waiting
// for tokens, or vtime if none is. Called with s.mu held.
func (s *Scheduler) minActivePass() float64 {
	best, found := 0.0, false
	for c := range s.clients {
		if (c.held > 0 || len(c.waiters) > 0) && (!found || c.pass < best) {
			best, found = c.pass, true
		}
	}
	if !found {
		return s.vtime
	}
	return best
}

// dispatch grants free tokens to the waiting clients with the lowest pass.
// Called with s.mu held.
func (s *Scheduler) dispatch() {
	for !s.paused && s.busy < s.capacity {
		var best *Client
		for c := range s.clients {
			if len(c.waiters) > 0 && (best == nil || c.pass < best.pass) {
				best = c
			}
		}
		if best == nil {
			return
		}
		w := best.waiters[0]
		best.waiters = best.waiters[1:]
		w.granted = true
		w.charge = float64(best.avg) / best.weight
		best.pass += w.charge
		best.held++
		best.grants++
		s.busy++
		s.vtime = best.pass
		close(w.ch)
	}
}
