package daemon

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPeerPidfdRefusedIsNoFallback: where the kernel has SO_PEERPIDFD
// but gives no pidfd for the connection, the caller is foreign; its pid
// is not opened instead (found by a review). Linux 6.5 to 6.15 answer SO_PEERPIDFD for a
// caller that has exited (and been reaped) with EINVAL: falling back to
// pidfd_open(pid) then opens whichever process has taken that pid since,
// a host root process as likely as any, which is the race SO_PEERPIDFD
// is there to close (contained.go). Only ENOPROTOOPT (a kernel before
// 6.5) says the option is missing.
//
// Here the socket is a TCP connection on loopback, whose SO_PEERPIDFD is
// ENODATA (it records no peer pid) on every kernel that has the option,
// and the pid SO_PEERCRED "gave" is this process's: a host process in
// the daemon's pid namespace holding the number the caller had.
func TestPeerPidfdRefusedIsNoFallback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	raw, err := s.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var foreign bool
	var optErr error
	raw.Control(func(fd uintptr) {
		if pidfd, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, soPeerPidfd); err == nil {
			unix.Close(pidfd)
		} else {
			optErr = err
		}
		foreign = callerForeign(int(fd), int32(os.Getpid()))
	})
	if errors.Is(optErr, syscall.ENOPROTOOPT) {
		t.Skip("this kernel has no SO_PEERPIDFD")
	}
	t.Logf("SO_PEERPIDFD: %v", optErr)
	if !foreign {
		t.Errorf("SO_PEERPIDFD gave no pidfd (%v), and the caller was judged by whichever process holds its pid now (pidfd_open): in the daemon's pid namespace, not foreign", optErr)
	}
}
