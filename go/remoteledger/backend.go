// SPDX-License-Identifier: Apache-2.0

package remoteledger

/*
#include <corestream/remoteledger.h>
*/
import "C"

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"
)

// ErrClosed: the Backend was closed. A GetLedgerRaw or PrepareRange that Close interrupted
// returns it too.
var ErrClosed = errors.New("remoteledger: backend closed")

// Backend is a corestreamd as the SDK's ledgerbackend.LedgerBackend, with raw bytes where the
// SDK decodes: PrepareRange, then GetLedgerRaw for each sequence in turn, as with captive core.
// An adapter of about twenty lines (docs/rpc-wiring.md) adds the SDK's types and the XDR decode
// (GetLedger).
//
// It holds one C stream and at most one subscription (one connection; WithResume reconnects it
// by itself) from PrepareRange until Close, and reads it on the calling goroutine, inside
// PrepareRange and GetLedgerRaw only: no goroutine runs per ledger or in the background. The
// Stream's options apply (timeouts, resume, TLS, token, observers, WithMetrics).
//
// The semantics are captive core's (ingest/ledgerbackend.CaptiveStellarCore) where a remote
// stream allows them; each method's comment says where they differ. In short: no catchup (the
// server serves what its ring retains, and the live tip; with WithLake, a SEP-54 lake serves the
// history before the ring), a ledger already passed is served again
// by a new subscription instead of being an error, a cancelled call leaves the backend prepared,
// GetLatestLedgerSequence is the server's and needs no PrepareRange.
//
// # Goroutines
//
// Every method is safe for concurrent use. PrepareRange and GetLedgerRaw run one at a time (a
// second waits for the first to return), so use them from one goroutine, as captive core's.
// IsPrepared, GetLatestLedgerSequence and Close never wait for them: Close interrupts a
// PrepareRange or GetLedgerRaw in progress (it returns ErrClosed), waits for it to return, and
// frees the C stream. A blocked call's own ctx interrupts it the same way (it returns ctx.Err()).
type Backend struct {
	s  *Stream
	op sync.Mutex // held by PrepareRange and GetLedgerRaw for their whole call, and by Close to free cs
	cm sync.Mutex // orders Close's rl_stream_cancel with rl_stream_reset (taken before mu)

	mu       sync.Mutex   // guards the fields below; never held while waiting on the network
	cs       *C.rl_stream // nil once closed
	closed   bool
	prepared *Range // nil: not prepared
	base     Range  // the prepared range, a tip range's from set to its first ledger
	failed   error  // the prepared range ended with this error: returned until PrepareRange
	open     bool   // a C session is open on cs
	next     uint32 // the sequence the open session delivers next
	run      string // the run token of the prepared range's first subscription

	// Touched under op only.
	last       []byte // the ledger last read: the C buffer (or a Go copy of it), valid while have
	lastSeq    uint32
	have       bool
	meter      meter
	lake       *lake  // WithLake; nil without
	ringOldest uint32 // with a lake: the ledgers before it are the lake's (0: none known yet)

	closing     context.Context // done once Close was called: ends a lake request in progress
	stopClosing context.CancelFunc
}

// NewBackend returns a Backend for url with opts, as New checks them (nothing is dialled; an
// error is ErrInvalid with the library's reason). Close frees it.
func NewBackend(url string, opts ...Option) (*Backend, error) {
	s, err := New(url, opts...)
	if err != nil {
		return nil, err
	}
	cs, err := s.newC()
	if err != nil {
		return nil, err
	}
	b := &Backend{s: s, cs: cs, meter: s.newMeter(), lake: newLake(s)}
	b.closing, b.stopClosing = context.WithCancel(context.Background())
	return b, nil
}

// Stream is the Backend's URL and options as a Stream, for RawLedgers, Open and Bounds on
// connections of their own.
func (b *Backend) Stream() *Stream { return b.s }

// PrepareRange subscribes to ledgerRange and waits for its first ledger, which GetLedgerRaw then
// returns without waiting. It returns at once, doing nothing, when IsPrepared(ledgerRange) holds;
// otherwise a previous subscription is closed first. ctx bounds the whole call, the dial and
// the wait for the first ledger; once PrepareRange has returned, ctx no longer matters (RPC
// passes one it cancels on return). An error leaves the Backend unprepared: those of a dial
// (ErrDial, ErrUnauthorized, ErrTLS, the timeouts), *TooFarBehindError for a from the server no
// longer retains, ErrInvalid for a range that cannot be streamed, ctx.Err(), ErrClosed.
//
// With WithLake, a from the ring no longer holds (close 4001) or that lies in a hole of it (4002)
// is read from the lake instead, and so are the ledgers after it until the ring holds the next
// one: GetLedgerRaw then subscribes from that one and goes on from the ring, with no gap and no
// duplicate (the ring's oldest, learnt from its 4001 answer, is where it joins; a ring that pruned
// past it meanwhile answers 4001 again, and the lake serves on). The errors add ErrLake (the lake
// could not be read) and, for a ledger neither holds, the ring's *TooFarBehindError (or ErrHole)
// with a message naming the lake's answer too: "remoteledger: ledger 1 is in neither the lake
// nor the server's ring: the lake has no http://…/FFFFFFFE--1.xdr.zst (404: …); the server's
// ring holds [200,300]".
//
// As captive core, a bounded range ends at its to (GetLedgerRaw past it is an error) and an
// unbounded one follows the network. Unlike captive core:
//   - Nothing is replayed or caught up: the ledgers come from the server's retention ring (and
//     with WithLake, a lake's history before it) and then live, so a from older than both is
//     *TooFarBehindError (captive core replays it from history archives), and a bounded range may reach past the network's tip (its later
//     ledgers are waited for; captive core refuses a range ahead of the latest checkpoint).
//   - UnboundedRange(0) is the tip (the next ledger the server publishes); no sequence is
//     special (captive core cannot start from ledger 1) and nothing is rounded to a checkpoint.
//   - The blocking wait for the first ledger is bounded by ctx and Close only (captive core's
//     by its own context as well).
func (b *Backend) PrepareRange(ctx context.Context, ledgerRange Range) error {
	b.op.Lock()
	defer b.op.Unlock()
	if err := b.usable(); err != nil {
		return err
	}
	if ok, _ := b.IsPrepared(ctx, ledgerRange); ok {
		return nil
	}
	if ledgerRange.bounded && ledgerRange.to < ledgerRange.from {
		return fmt.Errorf("%w: range %v ends before it starts", ErrInvalid, ledgerRange)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	b.prepared, b.failed, b.run = nil, nil, ""
	b.mu.Unlock()
	b.have = false
	b.ringOldest = 0
	b.reset()

	seq, err := ledgerRange.from, error(nil)
	if seq == 0 { // the tip: the ring's, never the lake's
		if err = b.subscribe(ctx, ledgerRange, false); err == nil {
			seq, err = b.read(ctx, 0)
		}
	} else {
		err = b.ledger(ctx, seq, ledgerRange, false)
	}
	if err != nil {
		return b.unprepare(err)
	}
	base := ledgerRange
	if base.from == 0 {
		base.from = seq
	}
	b.mu.Lock()
	b.prepared, b.base = &ledgerRange, base
	b.mu.Unlock()
	return nil
}

// IsPrepared reports whether ledgerRange is inside the prepared range (Range.Contains, with a
// tip range starting at the first ledger it delivered) and the subscription has not failed:
// every ledger of it can then be asked of GetLedgerRaw without another PrepareRange. It is false
// once closed.
//
// Unlike captive core, which is prepared only for ranges starting at or after the next ledger
// of its stream (or at the one it holds), a range starting at a ledger already passed is
// prepared too: GetLedgerRaw serves those again, by a new subscription. The error is always nil
// (the SDK's method has one).
func (b *Backend) IsPrepared(ctx context.Context, ledgerRange Range) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.closed && b.prepared != nil && b.failed == nil && b.base.Contains(ledgerRange), nil
}

// GetLedgerRaw returns ledger sequence of the prepared range, raw LedgerCloseMeta XDR verified
// by the library, in a slice the caller owns (a copy, as the SDK's GetLedgerRaw returns). It
// blocks until the ledger arrives, as captive core's GetLedger does, reading forward past the
// ledgers before it (they are dropped). The same sequence again returns the same bytes (a fresh
// copy) without reading. Errors: ErrInvalid when not prepared, for a sequence before the
// prepared range or past the end of a bounded one ("reading past bounded range", as captive
// core); ctx.Err() when ctx is done first; ErrClosed when Close interrupts it; otherwise the
// stream's error (as Session.Next returns them: *TooFarBehindError, ErrGap, ErrRead, ErrTruncated
// for a server that ended the stream first, ...), after which the Backend is no longer prepared
// and returns that error again until PrepareRange.
//
// Unlike captive core:
//   - A sequence already passed (before the one the subscription delivers next), inside the
//     prepared range, is served by a new subscription from it: the server replays it from its
//     ring (a *TooFarBehindError if it no longer has it, unless WithLake's lake has it), and the
//     reading goes on from there.
//     The cost is that of a new subscription: a dial, an upgrade, the ring's replay. Captive
//     core refuses it ("requested ledger is behind the captive core stream"). The server must
//     be of the same run (X-Corestream-Run) as the prepared range's first subscription, as
//     within one (ErrRunChanged otherwise, unless WithAllowRunChange; PrepareRange starts a new
//     range on whatever run the server has).
//   - A call that ctx interrupts drops the connection, and leaves the Backend prepared: the next
//     call subscribes again, from the sequence it asks for (the cost of a new subscription).
//     Captive core keeps its stream across a cancelled GetLedger.
//   - The ledgers are checked for order, length and checksum and against the server's run
//     token, not against the previous ledger's hash (the XDR is not decoded here); captive core
//     checks the hash chain. A ledger read from a lake is checked for its place only (its
//     object's batch header names it alone): a lake sends no checksum.
//   - After the last ledger of a bounded range, the server ends that subscription (captive
//     core closes its process); the range stays prepared, its ledgers served again on demand.
//   - The bytes are one copy per call. For no copy at all, use Stream.RawLedgers or Session,
//     which lend the library's buffer.
func (b *Backend) GetLedgerRaw(ctx context.Context, sequence uint32) ([]byte, error) {
	b.op.Lock()
	defer b.op.Unlock()
	if err := b.usable(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	prepared, base, failed := b.prepared, b.base, b.failed
	b.mu.Unlock()
	switch {
	case failed != nil:
		return nil, failed
	case prepared == nil:
		return nil, fmt.Errorf("%w: the backend is not prepared: call PrepareRange first", ErrInvalid)
	case sequence < base.from:
		return nil, fmt.Errorf("%w: ledger %d is before the prepared range %v", ErrInvalid, sequence, base)
	case base.bounded && sequence > base.to:
		return nil, fmt.Errorf("%w: reading past bounded range (requested sequence=%d, last ledger in range=%d)",
			ErrInvalid, sequence, base.to)
	}
	if b.have && sequence == b.lastSeq {
		return bytes.Clone(b.last), nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := b.ledger(ctx, sequence, base, true); err != nil {
		return nil, b.fail(ctx, err)
	}
	return bytes.Clone(b.last), nil
}

// ledger leaves ledger sequence of rng (a range from it or before it) in b.last: from the open
// session, reading forward, or from a new subscription from it (again: one of the Backend's own,
// for Metrics.Reconnected); with a lake, from the lake when the ring does not hold it.
func (b *Backend) ledger(ctx context.Context, sequence uint32, rng Range, again bool) error {
	for {
		if b.lake != nil && sequence < b.ringOldest {
			return b.fromLake(ctx, sequence, nil)
		}
		b.mu.Lock()
		open, next := b.open, b.next
		b.mu.Unlock()
		var err error
		if !open || sequence < next {
			r := UnboundedRange(sequence)
			if rng.bounded {
				r = BoundedRange(sequence, rng.to)
			}
			b.have = false
			b.reset()
			err = b.subscribe(ctx, r, again)
		}
		if err == nil {
			_, err = b.read(ctx, sequence)
		}
		if err == nil || b.lake == nil {
			return err
		}
		var behind *TooFarBehindError
		switch {
		case errors.As(err, &behind):
			// Behind the ring: the ledgers before its oldest are the lake's from now on. The
			// ring's answer is for the ledger the session needed next, sequence or one before it
			// on the way: the loop asks the lake, or the ring again if it holds sequence.
			oldest := behind.Oldest
			if oldest == 0 && behind.Latest == 0 { // the close reason was unreadable
				oldest, _, _ = b.s.Bounds(ctx)
			}
			b.ringOldest = max(oldest, behind.Requested+1)
			b.have = false
			b.reset()
		case errors.Is(err, ErrHole):
			b.have = false
			b.reset()
			return b.fromLake(ctx, sequence, err)
		default:
			return err
		}
	}
}

// fromLake leaves ledger sequence in b.last, read from the lake. ringErr is why the ring did not
// serve it (nil: the ledger is before the ring's oldest, known from an earlier answer); a
// ledger the lake does not have either ends with an error naming both answers, which is the
// ring's for errors.Is and errors.As (*TooFarBehindError, ErrHole).
func (b *Backend) fromLake(ctx context.Context, sequence uint32, ringErr error) error {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.closing, cancel)()
	b.meter.start()
	ledger, err := b.lake.ledger(lctx, sequence)
	if err != nil && lctx.Err() != nil {
		return b.interrupted(ctx)
	}
	var miss *lakeMissing
	if errors.As(err, &miss) {
		if ringErr == nil {
			oldest, latest, _ := b.s.Bounds(ctx) // the ring's bounds now, for the message
			ringErr = &TooFarBehindError{Requested: sequence, Oldest: oldest, Latest: latest}
		}
		return &lakeMissError{seq: sequence, lake: miss, ring: ringErr}
	}
	if err != nil {
		return err
	}
	b.last, b.lastSeq, b.have = ledger, sequence, true
	info := LedgerInfo{Sequence: sequence, ReceivedUnixNano: time.Now().UnixNano(), Size: len(ledger)}
	b.s.observe(nil, info)
	b.meter.ledger(info)
	return nil
}

// lakeMissError: a ledger neither the ring nor the lake holds. It is the ring's error for
// errors.Is and errors.As, with the lake's answer in its message.
type lakeMissError struct {
	seq  uint32
	lake *lakeMissing
	ring error
}

func (e *lakeMissError) Error() string {
	lake := "the lake has no " + e.lake.where
	if e.lake.detail != "" {
		lake += " (404: " + e.lake.detail + ")"
	}
	ring := e.ring.Error()
	var behind *TooFarBehindError
	switch {
	case errors.As(e.ring, &behind) && (behind.Oldest != 0 || behind.Latest != 0):
		ring = fmt.Sprintf("the server's ring holds [%d,%d]", behind.Oldest, behind.Latest)
	case errors.As(e.ring, &behind):
		ring = "the server's ring does not reach back to it"
	}
	return fmt.Sprintf("remoteledger: ledger %d is in neither the lake nor the server's ring: %s; %s", e.seq, lake,
		ring)
}

// Unwrap is the ring's error.
func (e *lakeMissError) Unwrap() error { return e.ring }

// GetLatestLedgerSequence is the newest ledger the server retains, from its /healthz (Bounds'
// latest: it may trail a live stream by a ledger or two), on a connection of its own. It may be
// called at any time, from any goroutine.
//
// Unlike captive core's, it needs no PrepareRange, and it is the server's tip, not the last
// ledger this Backend has read or buffered; it costs one HTTP request per call.
func (b *Backend) GetLatestLedgerSequence(ctx context.Context) (uint32, error) {
	if err := b.usable(); err != nil {
		return 0, err
	}
	return b.s.GetLatestLedgerSequence(ctx)
}

// Close ends the subscription (close 1000 to the server), interrupts a PrepareRange or
// GetLedgerRaw in progress (it returns ErrClosed), waits for it to return and frees the C
// stream. Every later call returns ErrClosed, except IsPrepared (false) and Close (nil). Safe
// from any goroutine, as captive core's; unlike it, there is no process or files to clean up.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	b.stopClosing()
	b.cm.Lock()
	C.rl_stream_cancel(b.cs) // cs is freed only under op, which a blocked call holds
	b.cm.Unlock()

	b.op.Lock()
	defer b.op.Unlock()
	b.mu.Lock()
	cs := b.cs
	b.cs, b.open, b.prepared = nil, false, nil
	b.mu.Unlock()
	b.have = false
	freeC(cs)
	if b.lake != nil {
		b.lake.close()
	}
	return nil
}

// usable is ErrClosed once closed.
func (b *Backend) usable() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	return nil
}

// reset makes cs as good as new: no session (a live one is closed with 1000), no
// cancellation. Called under op, with no canceller armed.
func (b *Backend) reset() {
	b.cm.Lock()
	defer b.cm.Unlock()
	b.mu.Lock()
	closed := b.closed
	b.open = false
	b.mu.Unlock()
	if !closed { // else leave Close's cancel in place: Close frees cs next
		C.rl_stream_reset(b.cs)
	}
}

// subscribe opens a session on ledgerRange, checking its run against the prepared range's
// first subscription. again: a subscription of the Backend's own (Metrics.Reconnected).
func (b *Backend) subscribe(ctx context.Context, ledgerRange Range, again bool) error {
	release := guardFired(ctx, b.cs)
	r := C.rl_stream_open(b.cs, cRange(ledgerRange))
	fired := release()
	if r != C.RL_OK {
		return b.callError(ctx, r)
	}
	b.meter.session()
	if again {
		b.meter.resubscribed()
	}
	b.meter.sync(b.cs)
	run := C.GoString(C.rl_stream_run(b.cs))
	b.mu.Lock()
	b.open, b.next = true, ledgerRange.from
	b.mu.Unlock()
	if fired {
		return b.interrupted(ctx)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case run == "" || b.run == "" || b.s.cfg.allowRunChange:
		if run != "" {
			b.run = run
		}
	case run != b.run:
		msg := fmt.Sprintf("remoteledger: dial %s: run changed: the server is now run %s, the session began on run %s",
			C.GoString(C.rl_stream_endpoint(b.cs)), run, b.run)
		return &libError{msg: msg, kinds: []error{ErrRunChanged}}
	}
	return nil
}

// read reads the open session forward until ledger sequence (0: the first that comes), which it
// leaves in b.last, and returns the sequence read.
func (b *Backend) read(ctx context.Context, sequence uint32) (uint32, error) {
	release := guardFired(ctx, b.cs)
	defer release()
	b.meter.start()
	for {
		var p *C.uint8_t
		var n C.size_t
		var ci C.rl_ledger_info
		b.have = false // the call below reuses the buffer
		r := C.rl_stream_next(b.cs, C.int64_t(pollInterval), &p, &n, &ci)
		b.meter.sync(b.cs)
		switch r {
		case C.RL_OK:
		case C.RL_AGAIN:
			if ctx.Err() != nil {
				release()
				return 0, b.interrupted(ctx)
			}
			continue
		case C.RL_END:
			b.have = false
			return 0, fmt.Errorf("%w: the server ended the stream before ledger %d", ErrTruncated, sequence)
		default:
			release()
			return 0, b.callError(ctx, r)
		}
		info := infoOf(b.cs, &ci)
		b.last, b.lastSeq, b.have = unsafe.Slice((*byte)(unsafe.Pointer(p)), int(n)), info.Sequence, true
		b.mu.Lock()
		b.next = info.Sequence + 1
		b.mu.Unlock()
		b.s.observe(nil, info)
		b.meter.ledger(info)
		if sequence != 0 && info.Sequence < sequence {
			continue // one before it: the session delivers in order from where it was
		}
		if sequence != 0 && info.Sequence > sequence { // the library delivers in order: not reached
			return 0, fmt.Errorf("%w: got ledger %d, expected %d", ErrGap, info.Sequence, sequence)
		}
		if release() {
			// ctx ended as the ledger arrived: the stream is cancelled for good. Keep the
			// ledger (in Go memory: the reset frees the buffer) and reset.
			b.last = bytes.Clone(b.last)
			b.reset()
		}
		return info.Sequence, nil
	}
}

// callError is the error of a C call that failed with r: ErrClosed when Close cancelled it,
// ctx.Err() when ctx did, the stream's error otherwise.
func (b *Backend) callError(ctx context.Context, r C.rl_result) error {
	if r == C.RL_ERR_CANCELLED {
		return b.interrupted(ctx)
	}
	return resultError(ctx, b.cs, r)
}

// interrupted is the error of a call that a cancel ended (or that saw its ctx done).
func (b *Backend) interrupted(ctx context.Context) error {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return context.Canceled
}

// unprepare ends a PrepareRange that failed with err.
func (b *Backend) unprepare(err error) error {
	b.have = false
	b.reset()
	return err
}

// fail ends a GetLedgerRaw that failed with err: an interruption (ctx, Close) leaves the range
// prepared, to be subscribed again by the next call; a tip subscription that began past the
// ledger is subscribed again at once; any other error ends the prepared range.
func (b *Backend) fail(ctx context.Context, err error) error {
	b.have = false
	b.reset()
	if errors.Is(err, ErrClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	b.mu.Lock()
	b.failed = err
	b.mu.Unlock()
	return err
}

// guardFired is guard, with release reporting whether the cancel fired (the C stream is then
// cancelled for good: reset it before its next use).
func guardFired(ctx context.Context, cs *C.rl_stream) (release func() bool) {
	if ctx.Done() == nil {
		return func() bool { return false }
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		C.rl_stream_cancel(cs)
		close(fired)
	})
	done, was := false, false
	return func() bool {
		if !done {
			done = true
			if !stop() {
				<-fired
				was = true
			}
		}
		return was
	}
}
