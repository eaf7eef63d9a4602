package peer

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
	grpcpeer "google.golang.org/grpc/peer"
)

// Refused handshakes. A peer trusts nobody without a certificate its CA
// signed; a client refused during the TLS handshake never reaches DoGet,
// so its refusal is seen here, where gRPC's server handshake returns:
// handshakeCreds wraps the server's transport credentials, sorts each
// failed handshake into one of a few reasons, counts it (every one) and
// logs it (at most one line a second a reason, so that a port scanner
// cannot flood the log; the line says how many it stands for).

// Reasons a TLS handshake was refused, the values of
// lastmile_peer_refused_total's reason label.
const (
	// ReasonNoCertificate: the client presented no certificate.
	ReasonNoCertificate = "no_certificate"
	// ReasonUntrusted: the client's certificate did not verify against
	// the peer's CA (another CA signed it, it expired, or it is not for
	// client authentication).
	ReasonUntrusted = "untrusted_certificate"
	// ReasonHandshake: any other failed handshake: not TLS (plaintext,
	// HTTP), no common version or cipher, cut off or timed out midway.
	ReasonHandshake = "tls_handshake"
	// ReasonNoHello: the connection closed before sending a byte: TCP
	// health checks (Kubernetes' tcpSocket readiness probe) and port
	// scans. Counted, and logged at Debug only.
	ReasonNoHello = "no_hello"
)

// handshakeHints say what to do about each reason, in its log line.
var handshakeHints = map[string]string{
	ReasonNoCertificate: "give the client a certificate signed by this peer's CA (lastmile certs, docs/peers.md); " +
		"a Go client sends none when no CA this peer trusts signed its own",
	ReasonUntrusted: "give the client a certificate signed by this peer's CA, or add its CA to peer.tls.ca",
	ReasonHandshake: "the client does not speak TLS 1.3 with a certificate, or gave up midway: configure peers.tls on the requester",
	ReasonNoHello:   "a TCP health check or a port scan",
}

// hintRemoteRefused is the hint of a handshake the client broke off with
// an alert about the peer's own certificate (bad_certificate,
// unknown_certificate, unknown_ca, certificate_expired...): the requester
// did not accept this peer's certificate, most often because the address
// or name it dials is not among the certificate's (lastmile certs -hosts).
const hintRemoteRefused = "the requester refused this peer's certificate: it must name the address or name the requester dials " +
	"(lastmile certs -hosts ADDR,NAME, or peers.server_name on the requester), be valid now, and be signed by a CA in the requester's peers.tls.ca"

// handshakeHint says what to do about a refused handshake of reason.
func handshakeHint(reason string, err error) string {
	if reason == ReasonHandshake {
		// crypto/tls reports an alert from the other side as a
		// *net.OpError "remote error" wrapping the alert; its type is
		// unexported, so the alert is told by its text.
		if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Op == "remote error" && oe.Err != nil {
			a := oe.Err.Error()
			if strings.Contains(a, "certificate") || strings.Contains(a, "unknown certificate authority") {
				return hintRemoteRefused
			}
		}
	}
	return handshakeHints[reason]
}

// handshakeReason sorts a failed server handshake's error.
func handshakeReason(err error) string {
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return ReasonUntrusted
	}
	if errors.Is(err, io.EOF) {
		return ReasonNoHello
	}
	// crypto/tls has no sentinel for this one; TestHandshakeRefusals
	// fails if its text changes.
	if strings.Contains(err.Error(), "didn't provide a certificate") {
		return ReasonNoCertificate
	}
	return ReasonHandshake
}

// handshakeCreds is the server's transport credentials, reporting every
// failed handshake to refused.
type handshakeCreds struct {
	credentials.TransportCredentials
	refused func(remote net.Addr, err error)
}

func (c *handshakeCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		c.refused(conn.RemoteAddr(), err)
		return out, info, err
	}
	if ti, ok := info.(credentials.TLSInfo); ok {
		return out, connInfo{TLSInfo: ti, conn: out}, nil
	}
	return out, info, nil
}

// connInfo is a TLS connection's AuthInfo with the connection, which a
// handler closes when its requester stalls (closeConn).
type connInfo struct {
	credentials.TLSInfo
	conn net.Conn
}

// tlsInfo returns the TLS state of a call's AuthInfo.
func tlsInfo(ai credentials.AuthInfo) (credentials.TLSInfo, bool) {
	switch ai := ai.(type) {
	case connInfo:
		return ai.TLSInfo, true
	case credentials.TLSInfo:
		return ai, true
	}
	return credentials.TLSInfo{}, false
}

// closeConn closes the connection of ctx's call, where the handshake
// recorded it.
func closeConn(ctx context.Context) {
	if p, ok := grpcpeer.FromContext(ctx); ok {
		if ci, ok := p.AuthInfo.(connInfo); ok {
			ci.conn.Close()
		}
	}
}

func (c *handshakeCreds) Clone() credentials.TransportCredentials {
	return &handshakeCreds{TransportCredentials: c.TransportCredentials.Clone(), refused: c.refused}
}

// refuseHandshake counts a failed handshake and logs it, rate-limited.
func (s *Server) refuseHandshake(remote net.Addr, err error) {
	reason := handshakeReason(err)
	switch reason {
	case ReasonNoCertificate:
		s.stats.RefusedNoCert.Add(1)
	case ReasonUntrusted:
		s.stats.RefusedUntrusted.Add(1)
	case ReasonNoHello:
		s.stats.RefusedNoHello.Add(1)
	default:
		s.stats.RefusedHandshake.Add(1)
	}
	ok, suppressed := s.handshakeLog.allow(reason, time.Now())
	if !ok {
		return
	}
	level := slog.LevelWarn
	if reason == ReasonNoHello {
		level = slog.LevelDebug
	}
	addr := "unknown"
	if remote != nil {
		addr = remote.String()
	}
	s.log.Log(context.Background(), level, "refused a TLS handshake", "reason", reason, "addr", addr, "err", err,
		"suppressed", suppressed, "hint", handshakeHint(reason, err))
}

// logEvery lets a log line of each key through at most once an interval,
// and counts the lines it held back since the last one let through. A
// zero logEvery allows one line a second.
type logEvery struct {
	mu       sync.Mutex
	interval time.Duration
	last     map[string]time.Time
	held     map[string]int64
}

// allow says whether a line of key may be logged at now, and if so how
// many lines of key were held back since the last.
func (l *logEvery) allow(key string, now time.Time) (ok bool, held int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last, l.held = map[string]time.Time{}, map[string]int64{}
	}
	interval := l.interval
	if interval <= 0 {
		interval = time.Second
	}
	if last, seen := l.last[key]; seen && now.Sub(last) < interval {
		l.held[key]++
		return false, 0
	}
	l.last[key] = now
	held = l.held[key]
	l.held[key] = 0
	return true, held
}
