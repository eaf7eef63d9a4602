package bench

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/lastmile/lastmile/decode"
)

// Target (e) holds the pipeline to decoding its input columns alone, in
// the same run. Both sides are measured in rounds, each round one pass of
// decode alone and one run of the pipeline per epoch count, and the order
// within a round flips from one round to the next (decode alone first in
// the first round, last in the second, ...): a VM whose speed drifts
// during the run slows both sides alike, and neither always runs first
// (after the data generation, say) or always right after the other. Each
// side keeps its fastest run; Rounds records every round's pair, so that a
// reader sees the spread the best-of hides.
//
// Before, every decode-alone pass ran in one phase and every pipeline run
// in a later one: a drift between the phases went straight into the ratio.

// PipelineRound is one round of target (e): the seconds of each side's run
// in it and the ratios of that round's runs alone.
type PipelineRound struct {
	// Order names the round's runs as they ran: "decode_only",
	// "first_epoch" (the one-epoch run), "pipeline" (the Epochs run).
	Order             []string `json:"order"`
	DecodeOnlySeconds float64  `json:"decode_only_seconds"`
	DecodeOnlyCPU     float64  `json:"decode_only_cpu_seconds"`
	FirstEpochSeconds float64  `json:"first_epoch_seconds"`
	FirstEpochCPU     float64  `json:"first_epoch_cpu_seconds"`
	PipelineSeconds   float64  `json:"pipeline_seconds,omitempty"` // none in the v2 variant
	// FirstEpochRatio and PipelineRatio are the runs' input rows/s over
	// this round's decode alone.
	FirstEpochRatio float64 `json:"first_epoch_ratio"`
	PipelineRatio   float64 `json:"pipeline_ratio,omitempty"`
}

// roundSides are the two sides of target (e): a pass of decode alone, and
// a run of the pipeline for some epochs returning the trainer's report.
// RunPipeline's sides decode and run for real; tests record the calls.
type roundSides struct {
	decode   func(ctx context.Context) (decode.Result, error)
	pipeline func(ctx context.Context, epochs int) (PipelineRun, map[string]any, error)
}

// roundsResult is what measureRounds keeps: the fastest run of each side
// (Runs in the order of the epochs asked for), every round, and the
// trainer's report of the last epoch count's latest run.
type roundsResult struct {
	DecodeOnly decode.Result
	Runs       []PipelineRun
	Rounds     []PipelineRound
	Trainer    map[string]any
}

// roundOrder is the order of round i's steps: as given in even rounds,
// reversed in odd ones.
func roundOrder[T any](i int, steps []T) []T {
	s := slices.Clone(steps)
	if i%2 == 1 {
		slices.Reverse(s)
	}
	return s
}

// measureRounds runs repeats rounds of decode alone and the pipeline for
// each of epochs (see the comment at the top of this file). label names
// the measurement in the log.
func measureRounds(ctx context.Context, repeats int, epochs []int, sides roundSides, label string, log io.Writer) (*roundsResult, error) {
	res := &roundsResult{Runs: make([]PipelineRun, len(epochs))}
	// Step -1 is decode alone, step k the pipeline for epochs[k].
	steps := []int{-1}
	for k := range epochs {
		steps = append(steps, k)
	}
	for i := range repeats {
		var round PipelineRound
		var dec decode.Result
		runs := make([]PipelineRun, len(epochs))
		for _, s := range roundOrder(i, steps) {
			if s < 0 {
				fmt.Fprintf(log, "(e) %sdecode alone, round %d of %d ...\n", label, i+1, repeats)
				d, err := sides.decode(ctx)
				if err != nil {
					return nil, err
				}
				dec = d
				round.Order = append(round.Order, "decode_only")
				continue
			}
			fmt.Fprintf(log, "(e) %sthe pipeline, %d epoch(s), read by a Python trainer process, round %d of %d ...\n", label, epochs[s], i+1, repeats)
			p, tr, err := sides.pipeline(ctx, epochs[s])
			if err != nil {
				return nil, err
			}
			runs[s] = p
			if s == len(epochs)-1 {
				res.Trainer = tr
			}
			round.Order = append(round.Order, runName(epochs[s]))
		}
		res.add(dec, runs, round)
	}
	return res, nil
}

// add keeps round's runs where they are the fastest so far and records
// the round.
func (res *roundsResult) add(dec decode.Result, runs []PipelineRun, round PipelineRound) {
	if res.DecodeOnly.Seconds == 0 || dec.Seconds < res.DecodeOnly.Seconds {
		res.DecodeOnly = dec
	}
	round.DecodeOnlySeconds, round.DecodeOnlyCPU = dec.Seconds, dec.CPUSeconds
	for k, p := range runs {
		res.Runs[k].keepFaster(p)
		ratio := 0.0
		if p.Seconds > 0 {
			ratio = float64(p.Epochs) * dec.Seconds / p.Seconds
		}
		if p.Epochs == 1 {
			round.FirstEpochSeconds, round.FirstEpochCPU, round.FirstEpochRatio = p.Seconds, p.CPUSeconds, ratio
		} else {
			round.PipelineSeconds, round.PipelineRatio = p.Seconds, ratio
		}
	}
	res.Rounds = append(res.Rounds, round)
}

// runName is the name Rounds give a pipeline run of epochs epochs.
func runName(epochs int) string {
	if epochs == 1 {
		return "first_epoch"
	}
	return "pipeline"
}

// keepFaster makes p the run q if p is empty or q was faster.
func (p *PipelineRun) keepFaster(q PipelineRun) {
	if p.Seconds == 0 || (q.Seconds > 0 && q.Seconds < p.Seconds) {
		*p = q
	}
}

// writeRounds prints every round of target (e): its order and its ratios;
// epochs is the many-epoch run's.
func writeRounds(w io.Writer, label string, rounds []PipelineRound, epochs int) {
	for i, rd := range rounds {
		line := fmt.Sprintf("decode alone %.2fs, 1 epoch %.2fs (%.2fx)", rd.DecodeOnlySeconds, rd.FirstEpochSeconds, rd.FirstEpochRatio)
		if rd.PipelineSeconds > 0 {
			line += fmt.Sprintf(", %d epochs %.2fs (%.2fx)", epochs, rd.PipelineSeconds, rd.PipelineRatio)
		}
		first := "decode alone first"
		if len(rd.Order) > 0 && rd.Order[0] != "decode_only" {
			first = "decode alone last"
		}
		fmt.Fprintf(w, "%-52s %s\n", fmt.Sprintf("(e) %sround %d (%s)", label, i+1, first), line)
	}
}
