package main_test

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// relay stands for the network between a GPU host and its peer: it
// forwards TCP connections from a loopback port to target and passes
// every chunk the target sends back through tamper first, which may
// change its bytes (a corrupted stream) or sleep (a slow link). It
// returns how many of p's bytes to forward: fewer than all forwards
// those and then closes the connection both ways (a stream cut short).
// conn numbers the connections from 1.
func relay(t *testing.T, target string, tamper func(conn int64, p []byte) int) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var conns atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go forward(c, target, conns.Add(1), tamper)
		}
	}()
	return l.Addr().String()
}

func forward(c net.Conn, target string, id int64, tamper func(int64, []byte) int) {
	defer c.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	go func() {
		io.Copy(up, c)
		up.(*net.TCPConn).CloseWrite()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			keep := tamper(id, buf[:n])
			if _, err := c.Write(buf[:keep]); err != nil || keep < n {
				return // both ends close
			}
		}
		if err != nil {
			return
		}
	}
}

// via makes the GPU host reach its peer at addr (a relay) instead of the
// peer's own address; call it before start.
func (c *cluster) via(addr string) {
	path := filepath.Join(c.gpu.dir, "lastmiled.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		c.t.Fatal(err)
	}
	os.WriteFile(path, []byte(strings.Replace(string(b), "addrs: [\""+c.peerAddr+"\"]", "addrs: [\""+addr+"\"]", 1)), 0o644)
}
