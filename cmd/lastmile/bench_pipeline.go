package main

import (
	"path/filepath"

	"github.com/lastmile/lastmile/bench"
)

// baselineScript finds bench/baseline/dataloader.py next to the python/
// directory of the source tree.
func baselineScript() string {
	return filepath.Join(filepath.Dir(pythonDir()), "bench", "baseline", "dataloader.py")
}

func defaultPipelineConfig() bench.PipelineConfig {
	return bench.PipelineConfig{
		Spec:       filepath.Join(filepath.Dir(pythonDir()), "examples", "ctr-8rank.yaml"),
		Python:     pythonPath(),
		PythonPath: pythonDir(),
		Baseline:   baselineScript(),
	}
}
