package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// printJobAdvice prints what a running job needs (the "advice" part of
// the daemon's job view: its trainers' stalls over the last minutes, in
// words), after printJob's table; nothing before the daemon has it.
func printJobAdvice(w io.Writer, raw json.RawMessage) error {
	var v struct {
		Advice *struct {
			WindowSeconds float64   `json:"window_seconds"`
			Stall         []float64 `json:"stall"`
			Cores         float64   `json:"cores"`
			Headroom      float64   `json:"headroom"`
			Advice        string    `json:"advice"`
		} `json:"advice"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.Advice == nil {
		return nil
	}
	a := v.Advice
	stalls := make([]string, len(a.Stall))
	for r, s := range a.Stall {
		stalls[r] = fmt.Sprintf("%d: %.1f%%", r, 100*s)
	}
	tw := newTable(w)
	fmt.Fprintf(tw, "advice\t%s\n", a.Advice)
	fmt.Fprintf(tw, "stall by rank\t%s (share of the last %.0fs waiting on an empty ring)\n", strings.Join(stalls, ", "), a.WindowSeconds)
	if a.Headroom >= 0 {
		fmt.Fprintf(tw, "cpu\t%.2f cores used on average; headroom %.0f%% of the daemon's decode tokens\n", a.Cores, 100*a.Headroom)
	}
	return tw.Flush()
}
