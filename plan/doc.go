// Package plan owns the arithmetic of capacity planning: from what was
// measured on a host (the pipeline's samples/s with 1, 2, … cores, the
// serial stages' cost per batch, the trainer client's cost per batch,
// bytes per sample, memory per unit in flight, a peer's rate and the
// requester's CPU to receive its output) it predicts what a training job
// of a given size needs: cores per GPU and per host, peers and their
// network bytes/s, memory, the expected stall fraction, and which
// resource binds. It also turns a live stall fraction into advice
// (Shortfall), for the daemon.
//
// Everything here is a pure function of its arguments: no clock, no I/O,
// no measurement (package bench measures; cmd/lastmile prints). It is a
// leaf package: it must never import another lastmile package.
package plan
