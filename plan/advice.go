package plan

import (
	"fmt"
	"math"
	"time"
)

// Shortfall is what a running job lacks, from what its trainers felt.
type Shortfall struct {
	// Stall is the share of the window the worst rank waited on an empty
	// ring; Rank is that rank.
	Stall float64 `json:"stall"`
	Rank  int     `json:"rank"`
	// MoreCores is the cores to add to Cores for the stall to go, and
	// Peers the CPU peers (of PeerCores cores) that would do instead;
	// 0 when none are configured.
	MoreCores int `json:"more_cores"`
	Peers     int `json:"peers"`
}

// Need says what a job needs whose worst rank waited stall of a window
// while production had cores cores (what its workers could hold).
//
// A trainer that waited a share s of its time took 1−s of what it would
// take fed, so production must grow by s/(1−s) of what it gives; with
// rate about linear in cores near the present size, that is cores·s/(1−s)
// more cores, or as many peer cores.
func Need(stall float64, rank int, cores float64, peerCores int) Shortfall {
	s := Shortfall{Stall: stall, Rank: rank}
	if stall <= 0 || cores <= 0 || math.IsNaN(stall) {
		return s
	}
	stall = min(stall, 0.99) // a rank that only waited: at least 100x
	extra := cores * stall / (1 - stall)
	s.MoreCores = max(RoundUp(extra), 1)
	if peerCores > 0 {
		s.Peers = max(RoundUp(extra/float64(peerCores)), 1)
	}
	return s
}

// Advice is the shortfall in words: "rank 3 waited 12% of the last 5m0s:
// about 3 more cores or 1 peer". A stall under threshold is not advice:
// it says the job is fed, with its headroom (the share of its CPU left
// unused, < 0 when unknown).
func (s Shortfall) Advice(window time.Duration, threshold, headroom float64) string {
	if s.Stall < threshold {
		msg := fmt.Sprintf("fed: no rank waited more than %.0f%% of the last %s", 100*threshold, window)
		if headroom >= 0 {
			msg += fmt.Sprintf("; about %.0f%% of its CPU unused", 100*headroom)
		}
		return msg
	}
	msg := fmt.Sprintf("rank %d waited %.0f%% of the last %s: about %d more %s", s.Rank, 100*s.Stall, window,
		s.MoreCores, plural(s.MoreCores, "core", "cores"))
	if s.Peers > 0 {
		msg += fmt.Sprintf(" or %d %s", s.Peers, plural(s.Peers, "peer", "peers"))
	}
	return msg
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
