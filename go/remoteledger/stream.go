// SPDX-License-Identifier: Apache-2.0

package remoteledger

/*
#cgo pkg-config: remoteledger
#include <stdlib.h>
#include <corestream/remoteledger.h>
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"
)

// pollInterval bounds each wait inside rl_stream_next, so the loop looks at its context at least
// this often even if a cancel were missed; the cancel itself is what makes it prompt.
const pollInterval = 250 * time.Millisecond

// liveStreams counts the C streams allocated and not yet freed (the tests check it returns to 0).
var liveStreams atomic.Int64

// Stream is a corestreamd's ledgers, by URL. It holds no connection: every RawLedgers
// iteration, Open and Bounds dials its own, so a Stream is reusable, safe for concurrent use and
// safe to keep in a configuration.
type Stream struct {
	url string
	cfg config
}

// New returns a Stream for url: ws://, wss://, http:// (dialled as ws://) or https:// (as wss://)
// with a host; an empty or "/" path means /stream, and other query parameters are kept. Nothing
// is dialled: the URL and options are checked by the library, and an error (ErrInvalid, with the
// library's reason) means they could never work.
func New(url string, opts ...Option) (*Stream, error) {
	s := &Stream{url: url}
	for _, o := range opts {
		o(&s.cfg)
	}
	if err := checkLake(&s.cfg); err != nil {
		return nil, err
	}
	cs, err := s.newC()
	if err != nil {
		return nil, err
	}
	freeC(cs)
	return s, nil
}

// URL is the URL New was given.
func (s *Stream) URL() string { return s.url }

// newC makes a C stream from the URL and options (the library copies both, strings included).
func (s *Stream) newC() (*C.rl_stream, error) {
	var o C.rl_options
	o.struct_size = C.sizeof_rl_options
	c := &s.cfg
	o.max_message_size = C.int64_t(c.maxMessageSize)
	o.max_chunk_size = C.int64_t(c.maxChunkSize)
	o.dial_timeout_ns = C.int64_t(c.dialTimeout)
	o.handshake_timeout_ns = C.int64_t(c.handshakeTimeout)
	o.idle_timeout_ns = C.int64_t(c.idleTimeout)
	o.resume_retries = C.int64_t(c.resumeRetries)
	o.resume_backoff_ns = C.int64_t(c.resumeBackoff)
	o.resume_backoff_max_ns = C.int64_t(c.resumeBackoffMax)
	o.tls_insecure_skip_verify = C.bool(c.insecureSkipVerify)
	o.allow_run_change = C.bool(c.allowRunChange)
	var strs []*C.char
	cstr := func(v string) *C.char {
		if v == "" {
			return nil
		}
		p := C.CString(v)
		strs = append(strs, p)
		return p
	}
	o.tls_ca_file = cstr(c.caFile)
	o.tls_ca_dir = cstr(c.caDir)
	o.tls_server_name = cstr(c.serverName)
	o.tls_cert_file = cstr(c.certFile)
	o.tls_key_file = cstr(c.keyFile)
	o.bearer_token = cstr(c.bearerToken)
	o.trusted_keys_file = cstr(c.trustedKeys)
	curl := cstr(s.url)
	if curl == nil {
		curl = C.CString("")
		strs = append(strs, curl)
	}
	defer func() {
		for _, p := range strs {
			C.free(unsafe.Pointer(p))
		}
	}()

	var cs *C.rl_stream
	r := C.rl_stream_new(&cs, curl, &o)
	if cs == nil {
		return nil, fmt.Errorf("remoteledger: cannot create a stream: %s", C.GoString(C.rl_result_name(r)))
	}
	liveStreams.Add(1)
	if r != C.RL_OK {
		err := resultError(context.Background(), cs, r)
		freeC(cs)
		return nil, err
	}
	return cs, nil
}

// freeC frees cs; a session still open is closed with 1000 first.
func freeC(cs *C.rl_stream) {
	C.rl_stream_free(cs)
	liveStreams.Add(-1)
}

// guard maps ctx's end to rl_stream_cancel(cs) until release is called. release returns only
// once a cancel that has started is over, so cs may be freed right after it.
func guard(ctx context.Context, cs *C.rl_stream) (release func()) {
	if ctx.Done() == nil {
		return func() {}
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		C.rl_stream_cancel(cs)
		close(fired)
	})
	return func() {
		if !stop() {
			<-fired
		}
	}
}

func cRange(r Range) C.rl_range {
	return C.rl_range{from: C.uint32_t(r.from), to: C.uint32_t(r.to), bounded: C.bool(r.bounded)}
}

// RawLedgers yields every ledger of ledgerRange in order, as the SDK's
// ledgerbackend.LedgerStream does: each one verified and BORROWED (valid until the next step of
// the loop; copy what you keep). It dials when the loop starts and has closed the connection and
// freed everything when the loop statement returns: after a bounded range's last ledger, when
// the server ends an unbounded stream cleanly (no error), after yielding an error (once; see the
// Err values), when ctx is done (yields ctx.Err()), or on break. An unbounded range from 0 starts
// at the next ledger the server publishes.
//
// The StreamOptions are this package's (WithLedgerObserver). The SDK's LedgerStream.RawLedgers
// takes none (its StreamOption and WithStreamMetrics were dropped; WithMetrics is the
// equivalent here); the adapter in docs/rpc-wiring.md passes none.
func (s *Stream) RawLedgers(ctx context.Context, ledgerRange Range, opts ...StreamOption) iter.Seq2[[]byte, error] {
	var sc streamConfig
	for _, o := range opts {
		o(&sc)
	}
	return func(yield func([]byte, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(nil, err)
			return
		}
		cs, err := s.newC()
		if err != nil {
			yield(nil, err)
			return
		}
		defer freeC(cs)
		release := guard(ctx, cs)
		defer release() // before the free: deferred calls run in reverse

		if r := C.rl_stream_open(cs, cRange(ledgerRange)); r != C.RL_OK {
			yield(nil, resultError(ctx, cs, r))
			return
		}
		m := s.newMeter()
		m.sync(cs) // the open's own retries (WithResume)
		m.start()
		for {
			ledger, info, r := next(cs)
			m.sync(cs)
			switch r {
			case C.RL_OK:
				s.observe(sc.observer, info)
				m.ledger(info)
				if !yield(ledger, nil) {
					return // the free sends close 1000 "consumer done"
				}
				m.start()
			case C.RL_AGAIN:
				if err := ctx.Err(); err != nil {
					yield(nil, err)
					return
				}
			case C.RL_END:
				return
			default:
				yield(nil, resultError(ctx, cs, r))
				return
			}
		}
	}
}

func (s *Stream) observe(extra func(LedgerInfo), info LedgerInfo) {
	if s.cfg.observer != nil {
		s.cfg.observer(info)
	}
	if extra != nil {
		extra(info)
	}
}

// next is one rl_stream_next of at most pollInterval. On RL_OK the slice is the library's buffer.
func next(cs *C.rl_stream) ([]byte, LedgerInfo, C.rl_result) {
	var p *C.uint8_t
	var n C.size_t
	var ci C.rl_ledger_info
	r := C.rl_stream_next(cs, C.int64_t(pollInterval), &p, &n, &ci)
	if r != C.RL_OK {
		return nil, LedgerInfo{}, r
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), int(n)), infoOf(cs, &ci), r
}

// infoOf is the LedgerInfo of a ledger rl_stream_next returned on cs.
func infoOf(cs *C.rl_stream, ci *C.rl_ledger_info) LedgerInfo {
	return LedgerInfo{
		Sequence:          uint32(ci.sequence),
		EmitStartUnixNano: int64(ci.emit_start_unix_nano),
		EmitEndUnixNano:   int64(ci.emit_end_unix_nano),
		ReceivedUnixNano:  int64(ci.received_unix_nano),
		Size:              int(ci.size),
		Chunks:            int(ci.chunks),
		DiscardedPartials: int(ci.discarded_partials),
		Reconnects:        uint64(C.rl_stream_reconnects(cs)),
	}
}

// Bounds is the range of ledgers the server retains and can serve, from its /healthz: latest is
// the newest ledger in its retention ring (it may trail a live stream by a ledger or two), oldest
// the first a subscriber may still ask for; both 0 while the ring is empty. One short HTTP
// request on its own connection, with the Stream's TLS options and bearer token, to the stream
// URL's path with its last segment replaced (/stream -> /healthz). Errors: those of a dial
// (ErrDial, also for a status other than 200, ErrUnauthorized, ErrTLS, the timeouts),
// ErrProtocol for an answer without the numbers, ctx.Err().
func (s *Stream) Bounds(ctx context.Context) (oldest, latest uint32, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	cs, err := s.newC()
	if err != nil {
		return 0, 0, err
	}
	defer freeC(cs)
	release := guard(ctx, cs)
	var o, l C.uint32_t
	r := C.rl_stream_bounds(cs, &o, &l)
	release()
	if r != C.RL_OK {
		return 0, 0, resultError(ctx, cs, r)
	}
	return uint32(o), uint32(l), nil
}

// GetLatestLedgerSequence is Bounds' latest, as the SDK's LedgerBackend method of that name.
func (s *Stream) GetLatestLedgerSequence(ctx context.Context) (uint32, error) {
	_, latest, err := s.Bounds(ctx)
	return latest, err
}

// resultError turns a failed call's result into its Go error, with the library's message. Read
// right after the failing call, before any other call on cs.
func resultError(ctx context.Context, cs *C.rl_stream, r C.rl_result) error {
	msg := C.GoString(C.rl_stream_error(cs))
	if msg == "" {
		msg = "remoteledger: " + C.GoString(C.rl_result_name(r))
	}
	lib := func(kinds ...error) error { return &libError{msg: msg, kinds: kinds} }
	switch r {
	case C.RL_ERR_CANCELLED:
		if err := ctx.Err(); err != nil {
			return err
		}
		return context.Canceled // a cancel that outlived its call's context (see Session)
	case C.RL_ERR_TOO_FAR_BEHIND:
		var req, oldest, latest C.uint32_t
		C.rl_stream_too_far_behind(cs, &req, &oldest, &latest)
		return &TooFarBehindError{Requested: uint32(req), Oldest: uint32(oldest), Latest: uint32(latest)}
	case C.RL_ERR_GAP:
		return lib(ErrGap)
	case C.RL_ERR_TRUNCATED:
		return lib(ErrTruncated)
	case C.RL_ERR_PROTOCOL:
		return lib(ErrProtocol)
	case C.RL_ERR_DIAL:
		if strings.HasSuffix(msg, "(401)") {
			return lib(ErrDial, ErrUnauthorized)
		}
		return lib(ErrDial)
	case C.RL_ERR_TLS:
		return lib(ErrTLS)
	case C.RL_ERR_DIAL_TIMEOUT:
		return lib(ErrDialTimeout, ErrDial)
	case C.RL_ERR_HANDSHAKE_TIMEOUT:
		return lib(ErrHandshakeTimeout, ErrDial)
	case C.RL_ERR_READ:
		return lib(ErrRead)
	case C.RL_ERR_IDLE_TIMEOUT:
		return lib(ErrIdleTimeout, ErrRead)
	case C.RL_ERR_INVALID:
		return lib(ErrInvalid)
	case C.RL_ERR_RUN_CHANGED:
		return lib(ErrRunChanged)
	case C.RL_ERR_SIGNATURE:
		return lib(ErrSignature)
	case C.RL_ERR_HOLE:
		return lib(ErrHole)
	default: // RL_ERR_NOMEM, or a result newer than this package
		return errors.New(msg)
	}
}
