package main

import (
	"context"
	"fmt"
	"io"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return fmt.Errorf("bench: not built yet")
}
