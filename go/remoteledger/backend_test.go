// SPDX-License-Identifier: Apache-2.0

package remoteledger

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// countingMetrics is a Metrics that keeps what it was told.
type countingMetrics struct {
	mu         sync.Mutex
	seqs       []uint32
	bytes      int
	reconnects int
	waits      []time.Duration
}

func (m *countingMetrics) Ledger(l LedgerSample) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seqs = append(m.seqs, l.Info.Sequence)
	m.bytes += l.Info.Size
	m.waits = append(m.waits, l.Wait)
}

func (m *countingMetrics) Reconnected() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reconnects++
}

func (m *countingMetrics) snapshot() (seqs []uint32, size, reconnects int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]uint32(nil), m.seqs...), m.bytes, m.reconnects
}

// wantLedger checks that b is the synthetic ledger seq.
func wantLedger(t *testing.T, b []byte, err error, seq uint32) {
	t.Helper()
	if err != nil {
		t.Fatalf("ledger %d: %v", seq, err)
	}
	if len(b) < 4 || binary.BigEndian.Uint32(b) != seq || !bytes.Equal(b, synthetic(seq, len(b))) {
		t.Fatalf("ledger %d: got %d bytes, not the synthetic ledger", seq, len(b))
	}
}

func prepared(t *testing.T, b *Backend, r Range) bool {
	t.Helper()
	ok, err := b.IsPrepared(context.Background(), r)
	if err != nil {
		t.Fatalf("IsPrepared(%v): %v", r, err)
	}
	return ok
}

func TestBackendBoundedRange(t *testing.T) {
	d := startDaemon(t, t.TempDir(), 0)
	noLeaks(t)
	var m countingMetrics
	b, err := NewBackend(d.url(), WithMetrics(&m))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()

	if _, err := b.GetLedgerRaw(ctx, 3); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "call PrepareRange first") {
		t.Fatalf("before PrepareRange: %v", err)
	}
	if prepared(t, b, BoundedRange(3, 8)) {
		t.Fatal("prepared before PrepareRange")
	}
	if err := b.PrepareRange(ctx, BoundedRange(3, 8)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		r    Range
		want bool
	}{{BoundedRange(3, 8), true}, {BoundedRange(4, 6), true}, {SingleLedgerRange(8), true},
		{BoundedRange(2, 8), false}, {BoundedRange(3, 9), false}, {UnboundedRange(3), false}} {
		if got := prepared(t, b, c.r); got != c.want {
			t.Fatalf("IsPrepared(%v) = %v, want %v", c.r, got, c.want)
		}
	}
	// PrepareRange's ledger, already read, then the rest, one at a time.
	for seq := uint32(3); seq <= 5; seq++ {
		l, err := b.GetLedgerRaw(ctx, seq)
		wantLedger(t, l, err, seq)
	}
	// The caller owns the bytes: the same ledger again is the same, whatever was done to them.
	l, err := b.GetLedgerRaw(ctx, 5)
	wantLedger(t, l, err, 5)
	clear(l)
	l, err = b.GetLedgerRaw(ctx, 5)
	wantLedger(t, l, err, 5)
	// Forward past 6 and 7 to 8, the range's last.
	l, err = b.GetLedgerRaw(ctx, 8)
	wantLedger(t, l, err, 8)
	if _, err := b.GetLedgerRaw(ctx, 9); !errors.Is(err, ErrInvalid) ||
		!strings.Contains(err.Error(), "reading past bounded range (requested sequence=9, last ledger in range=8)") {
		t.Fatalf("past the range: %v", err)
	}
	if _, err := b.GetLedgerRaw(ctx, 2); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "before the prepared range") {
		t.Fatalf("before the range: %v", err)
	}
	// A ledger already passed: a new subscription from it, and on from there.
	for seq := uint32(4); seq <= 6; seq++ {
		l, err := b.GetLedgerRaw(ctx, seq)
		wantLedger(t, l, err, seq)
	}
	if !prepared(t, b, BoundedRange(3, 8)) {
		t.Fatal("not prepared after serving a passed ledger")
	}
	seqs, size, reconnects := m.snapshot()
	want := []uint32{3, 4, 5, 6, 7, 8, 4, 5, 6}
	if !equalSeqs(seqs, want) || size != 1000*len(want) || reconnects != 1 {
		t.Fatalf("metrics: ledgers %v (want %v), %d bytes, %d reconnects (want 1)", seqs, want, size, reconnects)
	}

	// Another range replaces it.
	if err := b.PrepareRange(ctx, SingleLedgerRange(12)); err != nil {
		t.Fatal(err)
	}
	if prepared(t, b, BoundedRange(3, 8)) || !prepared(t, b, SingleLedgerRange(12)) {
		t.Fatal("IsPrepared after the second PrepareRange")
	}
	l, err = b.GetLedgerRaw(ctx, 12)
	wantLedger(t, l, err, 12)

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := b.GetLedgerRaw(ctx, 12); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if err := b.PrepareRange(ctx, SingleLedgerRange(12)); !errors.Is(err, ErrClosed) {
		t.Fatalf("PrepareRange after Close: %v", err)
	}
	if _, err := b.GetLatestLedgerSequence(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("GetLatestLedgerSequence after Close: %v", err)
	}
	if prepared(t, b, SingleLedgerRange(12)) {
		t.Fatal("prepared after Close")
	}
}

// closeInterrupts closes b while a call of it (what) waits, and checks that the call returns
// ErrClosed on done and that Close returned promptly.
func closeInterrupts(t *testing.T, b *Backend, done <-chan error, what string) {
	t.Helper()
	start := time.Now()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("%s interrupted by Close: %v", what, err)
		}
	case <-time.After(waitFor):
		t.Fatalf("%s did not return after Close", what)
	}
	if time.Since(start) > 3*time.Second {
		t.Fatalf("Close took %v", time.Since(start))
	}
}

func equalSeqs(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestBackendUnboundedRange(t *testing.T) {
	d := startDaemon(t, t.TempDir(), 0)
	noLeaks(t)
	b, err := NewBackend(d.url())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()

	// From the tip: PrepareRange waits for the next ledger published.
	if err := b.PrepareRange(ctx, UnboundedRange(0)); err != nil {
		t.Fatal(err)
	}
	waitLatest(t, b.Stream(), 1) // the ring is written just after a ledger goes out live
	latest, err := b.GetLatestLedgerSequence(ctx)
	if err != nil || latest == 0 {
		t.Fatalf("latest %d, %v", latest, err)
	}
	// The ledger PrepareRange holds is at most a ledger or two past the ring's latest, read after
	// it: the prepared range starts there.
	first := latest + 10
	if !prepared(t, b, UnboundedRange(first)) {
		t.Fatalf("UnboundedRange(%d) is not prepared", first)
	}
	for first > 1 && prepared(t, b, UnboundedRange(first-1)) {
		first--
	}
	if !prepared(t, b, BoundedRange(first, first+5)) {
		t.Fatal("a bounded range inside the unbounded one is not prepared")
	}
	// Blocking, as the ledgers are published.
	for seq := first; seq < first+10; seq++ {
		l, err := b.GetLedgerRaw(ctx, seq)
		wantLedger(t, l, err, seq)
	}
	if _, err := b.GetLedgerRaw(ctx, first-1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("before the tip range: %v", err)
	}

	// From a ledger the ring holds, then that ledger again after passing it: served by a new
	// subscription (the ring replays it).
	if err := b.PrepareRange(ctx, UnboundedRange(2)); err != nil {
		t.Fatal(err)
	}
	for seq := uint32(2); seq <= 20; seq++ {
		l, err := b.GetLedgerRaw(ctx, seq)
		wantLedger(t, l, err, seq)
	}
	for _, seq := range []uint32{5, 6, 7, 30} {
		l, err := b.GetLedgerRaw(ctx, seq)
		wantLedger(t, l, err, seq)
	}
	// PrepareRange of a range already prepared does nothing (the stream stays where it is).
	if err := b.PrepareRange(ctx, UnboundedRange(10)); err != nil {
		t.Fatal(err)
	}
	l, err := b.GetLedgerRaw(ctx, 31)
	wantLedger(t, l, err, 31)
}

// A ledger older than the server's ring: PrepareRange fails with the bounds and leaves the
// Backend unprepared; a ledger passed that the ring no longer has ends the prepared range.
func TestBackendTooFarBehind(t *testing.T) {
	d := startDaemon(t, t.TempDir(), 0, "--start-ledger", "100")
	noLeaks(t)
	b, err := NewBackend(d.url())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	var tfb *TooFarBehindError
	if err := b.PrepareRange(ctx, BoundedRange(5, 8)); !errors.As(err, &tfb) || tfb.Requested != 5 || tfb.Oldest != 100 {
		t.Fatalf("PrepareRange behind the ring: %v", err)
	}
	if prepared(t, b, BoundedRange(5, 8)) {
		t.Fatal("prepared after a failed PrepareRange")
	}
	if _, err := b.GetLedgerRaw(ctx, 5); !errors.Is(err, ErrInvalid) {
		t.Fatalf("GetLedgerRaw after a failed PrepareRange: %v", err)
	}
	if err := b.PrepareRange(ctx, UnboundedRange(101)); err != nil {
		t.Fatal(err)
	}
	l, err := b.GetLedgerRaw(ctx, 101)
	wantLedger(t, l, err, 101)
}

// A Backend reading an unbounded range with resume while its server is SIGKILLed and started
// again on the same port and data dir: every ledger in order, byte-exact; the reconnection is
// the library's (one subscription), counted by the Metrics. Then a server of another run (a
// fresh data dir): the Backend's own new subscription for a passed ledger is refused with
// ErrRunChanged, and the range is no longer prepared.
func TestBackendResumeAcrossRestart(t *testing.T) {
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir, 0)
	port := d.port
	var m countingMetrics
	b, err := NewBackend(d.url(), WithResume(100), WithResumeBackoff(20*time.Millisecond, 200*time.Millisecond),
		WithMetrics(&m))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	noLeaks(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
	defer cancel()
	if err := b.PrepareRange(ctx, UnboundedRange(1)); err != nil {
		t.Fatal(err)
	}
	for seq := uint32(1); seq <= 40; seq++ {
		l, err := b.GetLedgerRaw(ctx, seq)
		wantLedger(t, l, err, seq)
		if seq == 10 {
			d.stop(syscall.SIGKILL)
			d = startDaemon(t, dataDir, port, "--start-ledger", itoa(ringLatest(t, dataDir)+1))
		}
	}
	if _, _, reconnects := m.snapshot(); reconnects < 1 {
		t.Fatalf("%d reconnects across the restart", reconnects)
	}

	d.stop(syscall.SIGKILL)
	d = startDaemon(t, t.TempDir(), port)
	_, err = b.GetLedgerRaw(ctx, 5)
	if !errors.Is(err, ErrRunChanged) || !strings.Contains(err.Error(), "run changed: the server is now run "+d.run()) {
		t.Fatalf("a passed ledger from a server of another run: %v", err)
	}
	if prepared(t, b, UnboundedRange(1)) {
		t.Fatal("still prepared after ErrRunChanged")
	}
	if _, err2 := b.GetLedgerRaw(ctx, 41); err2 != err {
		t.Fatalf("after ErrRunChanged: %v, want the same error", err2)
	}
	// PrepareRange starts afresh, on the new run.
	if err := b.PrepareRange(ctx, UnboundedRange(2)); err != nil {
		t.Fatal(err)
	}
	l, err := b.GetLedgerRaw(ctx, 3)
	wantLedger(t, l, err, 3)
}

// A GetLedgerRaw that its context ends returns ctx.Err() promptly and leaves the range prepared
// (the next call subscribes again); one that Close interrupts returns ErrClosed, and Close
// returns once it has.
func TestBackendCancelAndClose(t *testing.T) {
	d := startDaemon(t, t.TempDir(), 0)
	noLeaks(t)
	reading := make(chan uint32, 1)
	var m countingMetrics
	b, err := NewBackend(d.url(), WithMetrics(&m), WithObserver(func(i LedgerInfo) {
		select {
		case reading <- i.Sequence:
		default:
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	if err := b.PrepareRange(ctx, UnboundedRange(1)); err != nil {
		t.Fatal(err)
	}
	<-reading

	// A deadline passing while the server is stopped: the wait ends at once.
	d.signal(syscall.SIGSTOP)
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	start := time.Now()
	_, err = b.GetLedgerRaw(tctx, 1000)
	cancel()
	d.signal(syscall.SIGCONT)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Fatalf("past its deadline: %v after %v", err, time.Since(start))
	}
	if !prepared(t, b, UnboundedRange(1)) {
		t.Fatal("not prepared after a cancelled call")
	}
	// An already-done context: nothing is read.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.GetLedgerRaw(cctx, 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("done context: %v", err)
	}
	// The next call subscribes again, from the ledger it asks for.
	_, _, before := m.snapshot()
	l, err := b.GetLedgerRaw(ctx, 2)
	wantLedger(t, l, err, 2)
	if _, _, after := m.snapshot(); after != before+1 {
		t.Fatalf("reconnects %d, then %d: want one new subscription", before, after)
	}

	// Close while GetLedgerRaw waits for a ledger far ahead: the observer says the call is
	// reading (it sees the ledgers it passes on the way).
	for len(reading) > 0 {
		<-reading
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.GetLedgerRaw(ctx, 1_000_000)
		done <- err
	}()
	select {
	case <-reading:
	case <-time.After(waitFor):
		t.Fatal("GetLedgerRaw read nothing")
	}
	// IsPrepared and GetLatestLedgerSequence do not wait for it.
	if !prepared(t, b, UnboundedRange(1)) {
		t.Fatal("not prepared while reading")
	}
	if _, err := b.GetLatestLedgerSequence(ctx); err != nil {
		t.Fatal(err)
	}
	closeInterrupts(t, b, done, "GetLedgerRaw")
	if liveStreams.Load() != 0 {
		t.Fatal("the C stream was not freed by Close")
	}
}
