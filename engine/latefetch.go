package engine

import (
	"sync/atomic"

	"github.com/lastmile/lastmile/decode"
)

// lateFetch decides how a job's late columns are fetched from remote
// inputs: with the rest of the unit, whole, before its rows are known
// (the default: their bytes arrive while the early columns decode), or
// by the pages the unit's selection wants, once it is known
// (decode.DeferPrefetch and PrefetchSelected: no byte of a page without a
// kept row is fetched, but the late columns' fetch starts only after the
// early decode).
//
// What it goes by is the share of the late columns' data pages that the
// selections left unread (decode.Stats, counted from the pages' index
// whatever was fetched), over every unit computed so far: deferring
// starts once a quarter of them go unread and stops below an eighth, and
// nothing is decided before deferMinPages pages were seen. With local
// files nothing is prefetched either way.
//
// Concurrency: every worker adds its unit's counts (atomics) and stores
// the decision; two workers deciding at once may store it in either
// order, which only delays a switch by a unit. A worker applies the
// decision to its decoder when it starts its next unit (sync), and the
// next unit's announcement (skipFields) reads it as it is then. Either
// way the output is the same: only what is fetched ahead, and when,
// changes.
//
// Rejected: deciding from the spec (whether a filter drops rows in runs
// depends on how the data is laid out, not on the expression); always
// fetching late columns after the selection (a job that leaves no page
// unread, like a random sample, would pay the later fetch for nothing);
// a spec setting (the share is measured better than guessed, and
// lastmile_late_fetch_deferred shows what was chosen).
type lateFetch struct {
	on           atomic.Bool
	read, unread atomic.Int64 // late data pages decoded, and left unread
	unreadBytes  atomic.Int64 // the compressed bytes of the unread ones
	skip         []bool       // plan fields to leave out of unit prefetches while on
}

// neverDefer keeps every job's late columns prefetched whole: the
// reference that tests and benchmarks measure deferring against
// (SetNeverDeferForTest in export_test.go).
var neverDefer atomic.Bool

const (
	deferMinPages = 32
	deferOnShare  = 0.25
	deferOffShare = 0.125
)

func newLateFetch(fields int, late []int) *lateFetch {
	l := &lateFetch{skip: make([]bool, fields)}
	for _, fi := range late {
		l.skip[fi] = true
	}
	return l
}

// note adds a unit's late-column page counts (the decoder's Stats after
// its late decode, and before) and updates the decision.
func (l *lateFetch) note(after, before decode.Stats) {
	read := l.read.Add(after.Pages - before.Pages)
	unread := l.unread.Add(after.PagesUnread - before.PagesUnread)
	l.unreadBytes.Add(after.BytesUnread - before.BytesUnread)
	l.on.Store(!neverDefer.Load() && deferLate(l.on.Load(), read, unread))
}

// deferLate is the decision: whether to defer the late columns' fetch,
// given whether it is deferred now and the late pages decoded and left
// unread so far.
func deferLate(on bool, read, unread int64) bool {
	total := read + unread
	if total < deferMinPages {
		return on
	}
	share := float64(unread) / float64(total)
	switch {
	case share >= deferOnShare:
		return true
	case share < deferOffShare:
		return false
	}
	return on
}

// skipFields returns the fields to leave out of a unit's prefetch: the
// late ones while deferring, else none.
func (l *lateFetch) skipFields() []bool {
	if l == nil || !l.on.Load() {
		return nil
	}
	return l.skip
}

// sync makes w's decoder defer the late columns' prefetch, or not, as
// the job's decision now says.
func (l *lateFetch) sync(w *unitWorker, late []int) {
	if on := l.on.Load(); on != w.deferring {
		w.deferring = on
		if on {
			w.dec.DeferPrefetch(late)
		} else {
			w.dec.DeferPrefetch(nil)
		}
	}
}

// LatePages is what the late columns' decodes of a run did with their
// data pages: decoded, or left unread because they hold no kept row
// (by the offset index), and the unread pages' compressed bytes; and
// whether their remote prefetch is deferred to the pages wanted now.
type LatePages struct {
	Pages, PagesUnread, BytesUnread int64
	Deferred                        bool
}

func (l *lateFetch) pages() LatePages {
	if l == nil {
		return LatePages{}
	}
	return LatePages{Pages: l.read.Load(), PagesUnread: l.unread.Load(), BytesUnread: l.unreadBytes.Load(), Deferred: l.on.Load()}
}
