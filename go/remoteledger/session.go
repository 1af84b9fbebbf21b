// SPDX-License-Identifier: Apache-2.0

package remoteledger

/*
#include <corestream/remoteledger.h>
*/
import "C"

import (
	"context"
	"fmt"
	"io"
)

// Session is one subscription pulled a ledger at a time, for a caller that asks for ledgers
// rather than ranging over them (the SDK's GetLedger shape). It holds a connection (several in
// turn under WithResume) until Close. Use it from one goroutine at a time.
type Session struct {
	s          *Stream
	cs         *C.rl_stream
	rng        Range
	next       uint32 // the sequence due next; 0 before a tip subscription's first ledger
	err        error  // the session is over: every call returns this
	reconnects uint64 // kept past Close
	run        string // kept past Close
	meter      meter  // WithMetrics
}

// Open dials and subscribes to ledgerRange, returning once the server has accepted (the
// ledgers follow with Next). Errors are those of a dial (ErrDial, ErrUnauthorized, ErrTLS, the
// timeouts), ErrInvalid for a range that cannot be streamed, ctx.Err(); ctx bounds only the dial.
func (s *Stream) Open(ctx context.Context, ledgerRange Range) (*Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cs, nerr := s.newC()
	if nerr != nil {
		return nil, nerr
	}
	release := guard(ctx, cs)
	r := C.rl_stream_open(cs, cRange(ledgerRange))
	release()
	var err error
	switch {
	case r != C.RL_OK:
		err = resultError(ctx, cs, r)
	case ctx.Err() != nil: // done as the dial ended: its cancel may have landed on the session
		err = ctx.Err()
	}
	if err != nil {
		freeC(cs)
		return nil, err
	}
	p := &Session{s: s, cs: cs, rng: ledgerRange, next: ledgerRange.from, meter: s.newMeter()}
	p.meter.sync(cs) // the open's own retries (WithResume)
	return p, nil
}

// Next waits for the session's next ledger and returns it, BORROWED until the next call on the
// Session (Next, GetLedger, Close), with its LedgerInfo. io.EOF when the session is over without
// an error: a bounded range complete, or an unbounded stream the server closed cleanly.
// Otherwise the stream's error, as RawLedgers yields it, or ctx.Err() when ctx is done first.
// After io.EOF or an error, every later call returns the same; a session whose call was
// cancelled is over too (open another).
func (p *Session) Next(ctx context.Context) ([]byte, LedgerInfo, error) {
	if p.err != nil {
		return nil, LedgerInfo{}, p.err
	}
	if err := ctx.Err(); err != nil {
		return nil, LedgerInfo{}, p.fail(err)
	}
	release := guard(ctx, p.cs)
	defer release()
	p.meter.start()
	for {
		ledger, info, r := next(p.cs)
		p.meter.sync(p.cs)
		switch r {
		case C.RL_OK:
			p.next = info.Sequence + 1
			p.s.observe(nil, info)
			p.meter.ledger(info)
			return ledger, info, nil
		case C.RL_AGAIN:
			if err := ctx.Err(); err != nil {
				return nil, LedgerInfo{}, p.fail(err)
			}
		case C.RL_END:
			return nil, LedgerInfo{}, p.fail(io.EOF)
		default:
			return nil, LedgerInfo{}, p.fail(resultError(ctx, p.cs, r))
		}
	}
}

// GetLedger returns ledger seq, BORROWED as Next's, reading forward to it (the ledgers before it
// are dropped). Ledgers come in order only: a seq the session has passed, or outside its bounded
// range, is ErrInvalid (and leaves the session as it was); otherwise the errors are Next's.
func (p *Session) GetLedger(ctx context.Context, seq uint32) ([]byte, error) {
	if p.err != nil {
		return nil, p.err
	}
	if p.rng.bounded && (seq < p.rng.from || seq > p.rng.to) {
		return nil, fmt.Errorf("%w: ledger %d is outside the session's range %v", ErrInvalid, seq, p.rng)
	}
	if seq < p.next {
		return nil, fmt.Errorf("%w: ledger %d was passed: the session is at %d", ErrInvalid, seq, p.next)
	}
	for {
		ledger, info, err := p.Next(ctx)
		if err != nil {
			return nil, err
		}
		if info.Sequence == seq {
			return ledger, nil
		}
		if info.Sequence > seq { // a tip subscription that started past seq
			return nil, p.fail(fmt.Errorf("%w: ledger %d was passed: the session started at %d",
				ErrInvalid, seq, info.Sequence))
		}
	}
}

// Reconnects is the count of reconnections so far (WithResume), also after Close.
func (p *Session) Reconnects() uint64 {
	if p.cs != nil {
		p.reconnects = uint64(C.rl_stream_reconnects(p.cs))
	}
	return p.reconnects
}

// Run is the run token of the session's server (its X-Corestream-Run): the first one a
// connection of the session answered with (with WithAllowRunChange, the latest), "" when the
// server sends none (an older corestreamd). It stays the same across restarts of the server on
// its data directory; a resume onto another run ends the session with ErrRunChanged. Also after
// Close.
func (p *Session) Run() string {
	if p.cs != nil {
		p.run = C.GoString(C.rl_stream_run(p.cs))
	}
	return p.run
}

// Close ends the session (close 1000 to the server when the connection is up) and frees it; the
// bytes last returned are gone. Safe to call more than once.
func (p *Session) Close() error {
	if p.cs == nil {
		return nil
	}
	p.Reconnects()
	p.Run()
	freeC(p.cs)
	p.cs = nil
	if p.err == nil {
		p.err = fmt.Errorf("%w: the session is closed", ErrInvalid)
	}
	return nil
}

// fail records err as the session's outcome; the connection is already closed by the library.
func (p *Session) fail(err error) error {
	p.err = err
	return err
}
