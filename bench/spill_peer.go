package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lastmile/lastmile/peer"
)

// The spill measurement's peer: a process of its own pinned to the other
// CPU, serving units over mutual TLS, and the CPU it spent.

// pinCores pins every thread of this process to one CPU and returns it
// and another CPU for the peer.
func pinCores() (local, other int, err error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 0, 0, err
	}
	var allowed []int
	for c := 0; c < 1024 && len(allowed) < 2; c++ {
		if set.IsSet(c) {
			allowed = append(allowed, c)
		}
	}
	if len(allowed) < 2 {
		return 0, 0, errors.New("spill: the measurement needs two CPUs, one for each side")
	}
	return allowed[0], allowed[1], PinProcess(allowed[0])
}

// PinProcess pins every thread of this process to cpu; threads created
// later inherit it. It sets GOMAXPROCS to 1 as well, as a process started
// on one CPU (taskset, a cgroup cpuset) has it: the runtime sizes
// GOMAXPROCS at start and does not follow a later change of affinity, and
// two Ps time-sliced on one CPU make the garbage collector's dedicated
// worker take half the CPU while it runs.
func PinProcess(cpu int) error {
	var one unix.CPUSet
	one.Set(cpu)
	if err := setAffinity(&one); err != nil {
		return fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	runtime.GOMAXPROCS(1)
	return nil
}

// startPeer makes mutual-TLS certificates and starts the peer command on
// a free loopback port, pinned to cpu.
func startPeer(ctx context.Context, cfg SpillConfig, cpu int) (string, func(), func() float64, peer.TLSFiles, error) {
	certs, err := os.MkdirTemp("", "lastmile-bench-certs-")
	if err != nil {
		return "", nil, nil, peer.TLSFiles{}, err
	}
	ca, err := peer.NewCA(certs, "bench CA", time.Hour)
	if err != nil {
		return "", nil, nil, peer.TLSFiles{}, err
	}
	srv, err1 := ca.Issue(certs, "peer", []string{"127.0.0.1"}, time.Hour)
	cli, err2 := ca.Issue(certs, "requester", []string{"127.0.0.1"}, time.Hour)
	if err := errors.Join(err1, err2); err != nil {
		return "", nil, nil, peer.TLSFiles{}, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, peer.TLSFiles{}, err
	}
	addr := l.Addr().String()
	l.Close()
	args := append(append([]string{}, cfg.PeerCommand[1:]...), "-spill-cpu", strconv.Itoa(cpu),
		"-spill-tls", strings.Join([]string{srv.CA, srv.Cert, srv.Key}, ","), "-spill-root", cfg.Data, addr)
	cmd := exec.CommandContext(ctx, cfg.PeerCommand[0], args...)
	cmd.Stderr = cfg.Log
	if err := cmd.Start(); err != nil {
		return "", nil, nil, peer.TLSFiles{}, err
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait(); os.RemoveAll(certs) }
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, nil, peer.TLSFiles{}, fmt.Errorf("spill: the peer did not listen on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	pid := cmd.Process.Pid
	return addr, stop, func() float64 { return pidCPU(pid) }, cli, nil
}

// pidCPU is the user+system time of process pid so far, in seconds (0 if
// /proc cannot tell).
func pidCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: utime and stime are the 14th and 15th of the line.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return float64(ut+st) / 100 // USER_HZ is 100 on Linux
}
