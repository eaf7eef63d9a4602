package peer

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// cutRelay forwards loopback connections to target until cut: then it
// holds every connection open and forwards nothing, as a network that
// drops every packet (a requester host that lost power, or was
// partitioned away).
type cutRelay struct {
	mu  sync.Mutex
	cut chan struct{}
}

func (r *cutRelay) start(t *testing.T, target string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.cut = make(chan struct{})
	stop := make(chan struct{})
	t.Cleanup(func() { l.Close(); close(stop) })
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			select {
			case <-r.cut:
				<-stop // held: nothing more crosses
				return
			default:
			}
			if n > 0 {
				if _, err := dst.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go pipe(up, c)
				pipe(c, up)
			}()
		}
	}()
	return l.Addr().String()
}

func (f *fixture) flightClientAs(name, addr string) flight.Client {
	f.t.Helper()
	tc, _ := f.ca.issue(name).ClientTLS("127.0.0.1")
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { conn.Close() })
	return flight.NewClientFromConn(conn, nil)
}

// TestDeadRequesterReleasesSlots: a requester whose host dies or is cut
// off while its units' outputs stream back left them blocked in gRPC's
// send (found by a review): the peer had no keepalive and no bound on a
// stalled send, so the units held their admission slots and their memory
// until TCP gave up on the connection (about 15 minutes of retransmissions on a real
// network; here, where the relay's socket stays up, for ever). A
// requester alone at a peer may hold every slot (its fair share is all
// of them), and every other GPU host was then refused as busy. The peer
// now pings a requester it has heard nothing from (HTTP/2 keepalive) and
// ends its streams when it does not answer, freeing what its units hold.
func TestDeadRequesterReleasesSlots(t *testing.T) {
	oldTime, oldTimeout := keepaliveTime, keepaliveTimeout
	keepaliveTime, keepaliveTimeout = time.Second, time.Second // gRPC's least
	t.Cleanup(func() { keepaliveTime, keepaliveTimeout = oldTime, oldTimeout })
	f := newFixture(t)
	hold, free := held(t)
	s, addr := f.server(func(s *Server) { s.hook = func() { <-hold } }) // MaxInFlight 4, 4 workers
	var relay cutRelay
	far := f.flightClientAs("gpu-1", relay.start(t, addr))
	// Units whose output (a padded sequence, megabytes) is more than
	// the transport buffers, so that sending them blocks once the link is
	// cut.
	name := "dead"
	text := strings.Replace(f.text(name), "length: 8,", "length: 4096,", 1)
	job := f.job(name)
	ptext, err := portableJob(f.roots, text, job)
	if err != nil {
		t.Fatal(err)
	}
	units := localPlan(t, f.job(name+"plan")).Units
	tk := func(i int) *flight.Ticket {
		u := units[i%len(units)]
		u.File, _ = f.roots.Locate(u.File)
		b, err := marshalTicket(ptext, jobHash([]byte(ptext)), nil, u, WirePlain, Self())
		if err != nil {
			t.Fatal(err)
		}
		return &flight.Ticket{Ticket: b}
	}
	ctx, cancel := context.WithCancel(context.Background())
	for i := range s.cfg.MaxInFlight {
		if _, err := far.DoGet(ctx, tk(i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the far requester's units to be admitted", func() bool { return s.InFlight() == int64(s.cfg.MaxInFlight) })
	close(relay.cut)
	free()   // the units compute, and send their outputs into the cut link
	cancel() // its deadline passes; nothing reaches the peer
	const bound = 30 * time.Second
	start := time.Now()
	for s.InFlight() > 0 {
		if time.Since(start) > bound {
			s.mem.mu.Lock()
			used := s.mem.used
			s.mem.mu.Unlock()
			t.Fatalf("%v after its requester was cut off, %d of the peer's %d slots are still held by its units, with %d bytes of the memory budget",
				bound, s.InFlight(), s.cfg.MaxInFlight, used)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("released after %v", time.Since(start).Round(time.Second))
}
