package peer

import (
	"context"
	"testing"
	"time"
)

// TestFairShare: with one requester a peer's slots are all its own; with
// two, each gets half, and a slot given back is another's to take.
func TestFairShare(t *testing.T) {
	var f fairShare
	f.perClient = map[string]int{}
	for i := range 4 {
		if !f.take("a", 4) {
			t.Fatalf("a alone: take %d refused", i)
		}
	}
	if f.take("a", 4) {
		t.Fatal("a took a fifth of 4 slots")
	}
	for range 2 {
		f.give("a")
	}
	// b arrives: shares are 2 each; a holds 2 and may take no more.
	if !f.take("b", 4) || !f.take("b", 4) || f.take("b", 4) {
		t.Fatal("b's share of two is wrong")
	}
	if f.take("a", 4) {
		t.Fatal("a took past its share while b is active")
	}
	f.give("b")
	f.give("b")
	if !f.take("a", 4) {
		t.Fatal("a may not take b's freed slots once b has none")
	}
}

func TestBudget(t *testing.T) {
	b := newBudget(100)
	ctx := context.Background()
	if err := b.take(ctx, 60); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		b.take(ctx, 60) // waits: 120 > 100
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("a take over the budget did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	b.give(60)
	<-done
	b.give(60)
	if err := b.take(ctx, 500); err != nil { // more than all of it, alone: allowed
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := b.take(cctx, 1); err == nil {
		t.Fatal("a take past a canceled context succeeded")
	}
}
