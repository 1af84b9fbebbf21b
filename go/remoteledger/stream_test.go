// SPDX-License-Identifier: Apache-2.0

package remoteledger

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"iter"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// drain ranges over ledgers, checking each against the synthetic source, and returns the
// sequences seen and the error yielded, if any.
func drain(t *testing.T, ledgers iter.Seq2[[]byte, error]) (seqs []uint32, err error) {
	t.Helper()
	for b, e := range ledgers {
		if e != nil {
			if err != nil {
				t.Fatalf("a second error after %v: %v", err, e)
			}
			err = e
			continue
		}
		if err != nil {
			t.Fatalf("a ledger after the error %v", err)
		}
		if len(b) < 4 {
			t.Fatalf("a %d-byte ledger", len(b))
		}
		seq := binary.BigEndian.Uint32(b)
		if !bytes.Equal(b, synthetic(seq, len(b))) {
			t.Fatalf("ledger %d differs from the synthetic source's", seq)
		}
		seqs = append(seqs, seq)
	}
	return seqs, err
}

func wantSeqs(t *testing.T, got []uint32, from, to uint32) {
	t.Helper()
	if len(got) != int(to-from+1) {
		t.Fatalf("got %d ledgers %v, want [%d,%d]", len(got), got, from, to)
	}
	for i, s := range got {
		if s != from+uint32(i) {
			t.Fatalf("ledger %d is %d, want %d (all: %v)", i, s, from+uint32(i), got)
		}
	}
}

func TestBoundedRangeIsDeliveredWholeAndVerified(t *testing.T) {
	d := startDaemon(t, t.TempDir(), 0)
	noLeaks(t)
	s, err := New(d.url())
	if err != nil {
		t.Fatal(err)
	}
	var infos []LedgerInfo
	seqs, err := drain(t, s.RawLedgers(context.Background(), BoundedRange(1, 20),
		WithLedgerObserver(func(i LedgerInfo) { infos = append(infos, i) })))
	if err != nil {
		t.Fatalf("bounded range: %v", err)
	}
	wantSeqs(t, seqs, 1, 20)
	if len(infos) != 20 || infos[19].Sequence != 20 || infos[19].Size != 1000 || infos[19].Reconnects != 0 ||
		infos[19].ReceivedUnixNano == 0 {
		t.Fatalf("ledger info: %+v", infos)
	}
	// The same Stream again, and a single ledger.
	seqs, err = drain(t, s.RawLedgers(context.Background(), SingleLedgerRange(7)))
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, seqs, 7, 7)
}

func TestUnboundedRangeEndsWithTheContext(t *testing.T) {
	d := startDaemon(t, t.TempDir(), 0)
	noLeaks(t)
	s, _ := New(d.url())

	// Cancelled from the loop body: the next step yields context.Canceled and nothing more.
	ctx, cancel := context.WithCancel(context.Background())
	var n int
	var got error
	for b, err := range s.RawLedgers(ctx, UnboundedRange(0)) {
		if err != nil {
			got = err
			continue
		}
		if n > 0 && len(b) != 1000 {
			t.Fatalf("ledger of %d bytes", len(b))
		}
		if n++; n == 5 {
			cancel()
		}
	}
	if n != 5 || !errors.Is(got, context.Canceled) {
		t.Fatalf("after %d ledgers: %v, want 5 then context.Canceled", n, got)
	}

	// A deadline passing while the library waits for the next ledger (the server SIGSTOPped):
	// the C cancel makes the wait return at once, long before the idle timeout.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	start := time.Time{}
	var seen int
	for _, err := range s.RawLedgers(ctx, UnboundedRange(0)) {
		if err != nil {
			got = err
			continue
		}
		if seen++; seen == 2 {
			d.signal(syscall.SIGSTOP)
			start = time.Now()
			time.AfterFunc(200*time.Millisecond, cancel)
		}
	}
	took := time.Since(start)
	d.signal(syscall.SIGCONT)
	if !errors.Is(got, context.Canceled) || took > 3*time.Second {
		t.Fatalf("cancelled while waiting: %v after %v", got, took)
	}

	// An already-done context: no dial.
	if _, err := drain(t, s.RawLedgers(ctx, UnboundedRange(0))); !errors.Is(err, context.Canceled) {
		t.Fatalf("done context: %v", err)
	}
}

// A server that accepts and never answers the upgrade: the dial waits (handshake timeout 10 s
// by default), and the context's cancel ends it at once.
func TestCancelDuringTheHandshake(t *testing.T) {
	noLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	defer func() {
		ln.Close()
		for c := range accepted {
			c.Close()
		}
	}()
	s, _ := New("ws://" + ln.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = drain(t, s.RawLedgers(ctx, BoundedRange(1, 2)))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Fatalf("cancelled handshake: %v after %v", err, time.Since(start))
	}

	// The same for a pull session's dial.
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	if p, err := s.Open(ctx, UnboundedRange(0)); p != nil || !errors.Is(err, context.DeadlineExceeded) ||
		time.Since(start) > 3*time.Second {
		t.Fatalf("cancelled Open: %v after %v", err, time.Since(start))
	}

	// And without a context deadline, the handshake timeout.
	s, _ = New("ws://"+ln.Addr().String(), WithHandshakeTimeout(200*time.Millisecond))
	_, err = drain(t, s.RawLedgers(context.Background(), BoundedRange(1, 2)))
	want := "remoteledger: dial ws://" + ln.Addr().String() +
		"/stream?end=2&start=1: handshake timeout: no upgrade response within 200ms"
	if !errors.Is(err, ErrHandshakeTimeout) || !errors.Is(err, ErrDial) || err.Error() != want {
		t.Fatalf("handshake timeout: %v, want %q", err, want)
	}
}

func TestBreakClosesTheSession(t *testing.T) {
	d := startDaemon(t, t.TempDir(), 0)
	noLeaks(t)
	s, _ := New(d.url())
	var n int
	for b, err := range s.RawLedgers(context.Background(), BoundedRange(1, 1000)) {
		if err != nil {
			t.Fatal(err)
		}
		if binary.BigEndian.Uint32(b) != uint32(n+1) {
			t.Fatalf("ledger %d", binary.BigEndian.Uint32(b))
		}
		if n++; n == 3 {
			break
		}
	}
	if n != 3 || liveStreams.Load() != 0 {
		t.Fatalf("%d ledgers, %d C streams after break", n, liveStreams.Load())
	}
	// A panic in the body unwinds through the iterator, which still frees the stream.
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v", p)
			}
		}()
		for range s.RawLedgers(context.Background(), BoundedRange(1, 1000)) {
			panic("boom")
		}
	}()
	if liveStreams.Load() != 0 {
		t.Fatal("C stream left after a panic")
	}
}

func TestErrors(t *testing.T) {
	daemonBin(t)
	dir := t.TempDir()

	t.Run("invalid URL", func(t *testing.T) {
		_, err := New("core-box:8462")
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "core-box:8462") {
			t.Fatalf("New: %v", err)
		}
		if liveStreams.Load() != 0 {
			t.Fatal("C stream left")
		}
	})

	t.Run("dial refused", func(t *testing.T) {
		noLeaks(t)
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		s, _ := New("ws://" + addr)
		_, err := drain(t, s.RawLedgers(context.Background(), BoundedRange(1, 2)))
		if !errors.Is(err, ErrDial) || errors.Is(err, ErrUnauthorized) ||
			!strings.HasSuffix(err.Error(), "connect: connection refused") {
			t.Fatalf("refused: %v", err)
		}
		if _, _, err := s.Bounds(context.Background()); !errors.Is(err, ErrDial) {
			t.Fatalf("bounds refused: %v", err)
		}
	})

	t.Run("too far behind", func(t *testing.T) {
		d := startDaemon(t, filepath.Join(dir, "behind"), 0, "--start-ledger", "100")
		noLeaks(t)
		s, _ := New(d.url())
		waitLatest(t, s, 101)
		_, err := drain(t, s.RawLedgers(context.Background(), BoundedRange(5, 8)))
		var tfb *TooFarBehindError
		if !errors.As(err, &tfb) || !errors.Is(err, ErrTooFarBehind) {
			t.Fatalf("too far behind: %v", err)
		}
		if tfb.Requested != 5 || tfb.Oldest != 100 || tfb.Latest < 101 {
			t.Fatalf("bounds: %+v", *tfb)
		}
		if !strings.HasPrefix(err.Error(), "remoteledger: requested ledger is behind the server's retention: requested 5, server retains [100,") {
			t.Fatalf("message: %v", err)
		}
		// Resume never retries it.
		s, _ = New(d.url(), WithResume(-1))
		if _, err := drain(t, s.RawLedgers(context.Background(), UnboundedRange(5))); !errors.As(err, &tfb) {
			t.Fatalf("with resume: %v", err)
		}
	})

	t.Run("truncated", func(t *testing.T) {
		// Five ledgers two seconds apart: the daemon exits once its source ends, and a client
		// that a busy machine let connect only after that would meet EOF, not the truncation.
		d := startDaemon(t, filepath.Join(dir, "short"), 0, "--synthetic-count", "5", "--synthetic-interval", "2s")
		noLeaks(t)
		s, _ := New(d.url())
		seqs, err := drain(t, s.RawLedgers(context.Background(), BoundedRange(1, 10)))
		if !errors.Is(err, ErrTruncated) || len(seqs) != 5 {
			t.Fatalf("after %v: %v", seqs, err)
		}
	})

	t.Run("token", func(t *testing.T) {
		tokens := filepath.Join(dir, "tokens")
		if err := os.WriteFile(tokens, []byte("rpc 0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		d := startDaemon(t, filepath.Join(dir, "auth"), 0, "--auth-tokens", tokens)
		noLeaks(t)
		for _, c := range []struct {
			opts []Option
			want string
		}{
			{nil, "server requires a token (401)"},
			{[]Option{WithBearerToken("wrong")}, "server rejected the token (401)"},
		} {
			s, _ := New(d.url(), c.opts...)
			_, err := drain(t, s.RawLedgers(context.Background(), BoundedRange(1, 2)))
			if !errors.Is(err, ErrUnauthorized) || !errors.Is(err, ErrDial) || !strings.HasSuffix(err.Error(), c.want) {
				t.Fatalf("%v, want ...%s", err, c.want)
			}
			// Resume does not retry a refused token either.
			s, _ = New(d.url(), append(c.opts, WithResume(-1))...)
			if _, err := drain(t, s.RawLedgers(context.Background(), BoundedRange(1, 2))); !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("with resume: %v", err)
			}
		}
		s, _ := New(d.url(), WithBearerToken("0123456789abcdef0123456789abcdef"))
		seqs, err := drain(t, s.RawLedgers(context.Background(), BoundedRange(1, 3)))
		if err != nil {
			t.Fatal(err)
		}
		wantSeqs(t, seqs, 1, 3)
		if _, err := New(d.url(), WithBearerToken("a\nb")); !errors.Is(err, ErrInvalid) {
			t.Fatalf("token with a newline: %v", err)
		}
	})

	t.Run("tls", func(t *testing.T) {
		ca, cert, key := certs(t, dir)
		d := startDaemon(t, filepath.Join(dir, "tls"), 0, "--tls-cert", cert, "--tls-key", key)
		noLeaks(t)
		wss := strings.Replace(d.url(), "ws://", "wss://", 1)
		s, _ := New(wss) // the system's CAs do not know ours
		_, err := drain(t, s.RawLedgers(context.Background(), BoundedRange(1, 2)))
		if !errors.Is(err, ErrTLS) || errors.Is(err, ErrDial) || !strings.Contains(err.Error(), "certificate verify failed") {
			t.Fatalf("unknown CA: %v", err)
		}
		s, _ = New(wss, WithTLSCAFile(filepath.Join(dir, "missing.pem")))
		if _, err := drain(t, s.RawLedgers(context.Background(), BoundedRange(1, 2))); !errors.Is(err, ErrTLS) {
			t.Fatalf("missing CA file: %v", err)
		}
		s, _ = New(wss, WithTLSCAFile(ca), WithTLSServerName("other.test"))
		if _, err := drain(t, s.RawLedgers(context.Background(), BoundedRange(1, 2))); !errors.Is(err, ErrTLS) ||
			!strings.Contains(err.Error(), "hostname mismatch") {
			t.Fatalf("wrong name: %v", err)
		}
		for _, opts := range [][]Option{{WithTLSCAFile(ca)}, {WithTLSCAFile(ca), WithTLSServerName("corestream.test")}} {
			s, _ = New(wss, opts...)
			seqs, err := drain(t, s.RawLedgers(context.Background(), BoundedRange(1, 3)))
			if err != nil {
				t.Fatal(err)
			}
			wantSeqs(t, seqs, 1, 3)
			// The ring is written after a ledger goes out live: it may trail by a ledger or two.
			if oldest, latest, err := s.Bounds(context.Background()); err != nil || oldest != 1 || latest < 1 {
				t.Fatalf("bounds over https: [%d,%d], %v", oldest, latest, err)
			}
		}
	})

	t.Run("idle timeout", func(t *testing.T) {
		d := startDaemon(t, filepath.Join(dir, "idle"), 0)
		noLeaks(t)
		s, _ := New(d.url(), WithIdleTimeout(300*time.Millisecond))
		var n int
		var got error
		for _, err := range s.RawLedgers(context.Background(), UnboundedRange(0)) {
			if err != nil {
				got = err
				continue
			}
			if n++; n == 2 {
				d.signal(syscall.SIGSTOP)
			}
		}
		d.signal(syscall.SIGCONT)
		if !errors.Is(got, ErrIdleTimeout) || !errors.Is(got, ErrRead) ||
			got.Error() != "remoteledger: read: idle timeout: no complete message for 300ms" {
			t.Fatalf("idle: %v", got)
		}
	})
}

// The server killed (SIGKILL) and started again on the same port and data dir mid-range: with
// resume the loop sees [1,60] once each, in order, byte-exact: what it missed replayed from the
// new server's ring, the rest live.
func TestResumeAcrossAServerRestart(t *testing.T) {
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir, 0)
	port := d.port
	var m countingMetrics
	s, _ := New(d.url(), WithResume(100), WithResumeBackoff(20*time.Millisecond, 200*time.Millisecond),
		WithMetrics(&m))
	probe, _ := New(d.url())
	var reconnects uint64
	var replayed int
	var seqs []uint32
	var err error
	restarted := false
	for b, e := range s.RawLedgers(context.Background(), BoundedRange(1, 60),
		WithLedgerObserver(func(i LedgerInfo) {
			reconnects = i.Reconnects
			if i.EmitEndUnixNano == 0 {
				replayed++
			}
		})) {
		if e != nil {
			err = e
			break
		}
		seq := binary.BigEndian.Uint32(b)
		if !bytes.Equal(b, synthetic(seq, len(b))) {
			t.Fatalf("ledger %d differs", seq)
		}
		seqs = append(seqs, seq)
		if len(seqs) == 10 && !restarted {
			restarted = true
			d.stop(syscall.SIGKILL)
			// The new server continues the ring (which trails the live stream by a ledger or
			// two), and is let run ahead, so the reconnect is served from its ring first.
			d = startDaemon(t, dataDir, port, "--start-ledger", itoa(ringLatest(t, dataDir)+1))
			if strings.Contains(d.log.String(), "ring reset") {
				t.Fatalf("the ring was not kept:\n%s", d.log.String())
			}
			waitLatest(t, probe, seq+8)
		}
	}
	if err != nil {
		t.Fatalf("after %v: %v", seqs, err)
	}
	wantSeqs(t, seqs, 1, 60)
	if reconnects < 1 || replayed < 8 {
		t.Fatalf("reconnects %d, ledgers replayed from the ring %d", reconnects, replayed)
	}
	// The Metrics saw the same: every ledger once, and each reconnection.
	if mseqs, size, mreconnects := m.snapshot(); !equalSeqs(mseqs, seqs) || size != 60*1000 ||
		uint64(mreconnects) != reconnects {
		t.Fatalf("metrics: ledgers %v, %d bytes, %d reconnects; the loop saw %d reconnects", mseqs, size,
			mreconnects, reconnects)
	}
	if liveStreams.Load() != 0 {
		t.Fatal("C stream left")
	}
}

func itoa(v uint32) string { return strconv.FormatUint(uint64(v), 10) }

func TestBoundsAndSession(t *testing.T) {
	d := startDaemon(t, t.TempDir(), 0)
	noLeaks(t)
	var m countingMetrics
	s, _ := New(d.url(), WithMetrics(&m))
	waitLatest(t, s, 12)
	oldest, latest, err := s.Bounds(context.Background())
	if err != nil || oldest != 1 || latest < 12 {
		t.Fatalf("bounds [%d,%d], %v", oldest, latest, err)
	}
	if tip, err := s.GetLatestLedgerSequence(context.Background()); err != nil || tip < latest {
		t.Fatalf("latest %d, %v", tip, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := s.Bounds(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled bounds: %v", err)
	}

	p, err := s.Open(context.Background(), BoundedRange(3, 10))
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.GetLedger(context.Background(), 5)
	if err != nil || binary.BigEndian.Uint32(b) != 5 || !bytes.Equal(b, synthetic(5, 1000)) {
		t.Fatalf("GetLedger(5): %v", err)
	}
	if _, err := p.GetLedger(context.Background(), 4); !errors.Is(err, ErrInvalid) {
		t.Fatalf("GetLedger(4) after 5: %v", err)
	}
	if _, err := p.GetLedger(context.Background(), 11); !errors.Is(err, ErrInvalid) {
		t.Fatalf("GetLedger(11) outside [3,10]: %v", err)
	}
	_, info, err := p.Next(context.Background())
	if err != nil || info.Sequence != 6 {
		t.Fatalf("Next: %d, %v", info.Sequence, err)
	}
	if _, err := p.GetLedger(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Next(context.Background()); err != io.EOF {
		t.Fatalf("after the range: %v", err)
	}
	if _, _, err := p.Next(context.Background()); err != io.EOF {
		t.Fatalf("again: %v", err)
	}
	p.Close()
	p.Close()
	// The Metrics saw each ledger the session read, those GetLedger read past included.
	if mseqs, size, reconnects := m.snapshot(); !equalSeqs(mseqs, []uint32{3, 4, 5, 6, 7, 8, 9, 10}) ||
		size != 8000 || reconnects != 0 {
		t.Fatalf("metrics: ledgers %v, %d bytes, %d reconnects", mseqs, size, reconnects)
	}

	// A cancelled Next ends its session.
	p, err = s.Open(context.Background(), UnboundedRange(0))
	if err != nil {
		t.Fatal(err)
	}
	// Ledgers the daemon sent before it stopped still arrive (a busy machine may have let several
	// through since Open): they are read until the deadline ends a Next.
	d.signal(syscall.SIGSTOP)
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	for i := 0; i < 1000; i++ {
		if _, _, err = p.Next(ctx); err != nil {
			break
		}
	}
	d.signal(syscall.SIGCONT)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next past its deadline: %v", err)
	}
	if _, _, err := p.Next(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the session goes on after its cancel: %v", err)
	}
	p.Close()
}
