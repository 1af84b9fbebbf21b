// SPDX-License-Identifier: Apache-2.0

package remoteledger

/*
#include <corestream/remoteledger.h>
*/
import "C"

import "time"

// Metrics receives what a Stream delivers, for a metrics registry the caller owns (Prometheus,
// say) without this package importing one: the caller implements it and passes it to
// WithMetrics. It is what the SDK's stream metrics measured (ledgerbackend's
// ledger_fetch_duration_seconds, the time a reader waited for each ledger), plus what a
// corestreamd adds: the bytes, the server-to-client latency and the reconnections.
//
// Both methods are called on the goroutine that is reading the ledgers (the RawLedgers loop,
// the caller of Session.Next, of Backend.PrepareRange or Backend.GetLedgerRaw), in the hot
// path: they must not block. Several Streams, Sessions and Backends may share one Metrics, and
// call it from their own goroutines at once: an implementation shared that way is safe for
// concurrent use (Prometheus collectors are).
//
// A minimal implementation over Prometheus collectors:
//
//	type promMetrics struct {
//		ledgers, bytes, reconnects prometheus.Counter
//		fetch                      prometheus.Summary // ledger_fetch_duration_seconds
//		latency                    prometheus.Gauge   // of the last live ledger
//	}
//
//	func (m promMetrics) Ledger(l remoteledger.LedgerSample) {
//		m.ledgers.Inc()
//		m.bytes.Add(float64(l.Info.Size))
//		m.fetch.Observe(l.Wait.Seconds())
//		if d, ok := l.Info.Delivery(); ok {
//			m.latency.Set(d.Seconds())
//		}
//	}
//
//	func (m promMetrics) Reconnected() { m.reconnects.Inc() }
type Metrics interface {
	// Ledger is called once for every ledger received and verified, just after the observers
	// (WithObserver, WithLedgerObserver) and before it is yielded or returned: in a RawLedgers
	// loop, by Session.Next, and by a Backend for each ledger its PrepareRange or GetLedgerRaw
	// reads, those it reads past on the way to the one asked for included, and those it reads
	// from a lake (WithLake; Info.Chunks 0, the wait the object's fetch). A Backend's
	// GetLedgerRaw that answers from the ledger it already holds (the same sequence again)
	// reads nothing and reports nothing.
	Ledger(LedgerSample)

	// Reconnected is called once for each connection made after the first of a RawLedgers
	// call, a Session or a Backend's prepared range: each reconnection of WithResume (the
	// same count as LedgerInfo.Reconnects), and each new subscription a Backend opens to serve
	// a ledger it has passed or to go on after a cancelled call.
	Reconnected()
}

// LedgerSample is one ledger as Metrics.Ledger sees it.
type LedgerSample struct {
	// Info is the ledger's LedgerInfo: Info.Size its bytes, Info.Delivery() its latency from
	// the server's source to this host (ok false for a ledger replayed from the server's ring).
	Info LedgerInfo
	// Wait is how long the reader waited for the ledger, from the start of the call or loop
	// step that read it (or from the previous ledger, for one a Backend read past) to the
	// moment it was verified: the SDK's ledger_fetch_duration_seconds. The time the loop body
	// or the caller spends between calls is not in it, nor is the dial that opens a call, a
	// Session or a Backend's subscription (as the SDK leaves PrepareRange out); a
	// reconnection's (WithResume) is.
	Wait time.Duration
}

// WithMetrics reports every ledger and reconnection of the Stream's calls (RawLedgers, Open,
// NewBackend's Backend) to m. nil: none (the default).
func WithMetrics(m Metrics) Option { return func(c *config) { c.metrics = m } }

// meter feeds a Metrics from one C stream. Without a Metrics every method is a no-op that does
// not read the clock.
type meter struct {
	m          Metrics
	reconnects uint64    // of the C session, as last reported
	since      time.Time // the start of the current wait
}

func (s *Stream) newMeter() meter { return meter{m: s.cfg.metrics} }

// start marks the start of a wait for a ledger.
func (m *meter) start() {
	if m.m != nil {
		m.since = time.Now()
	}
}

// session is a new C session (rl_stream_open): its reconnection count starts again at 0.
func (m *meter) session() { m.reconnects = 0 }

// sync reports the reconnections cs made since the last look.
func (m *meter) sync(cs *C.rl_stream) {
	if m.m == nil {
		return
	}
	for n := uint64(C.rl_stream_reconnects(cs)); m.reconnects < n; m.reconnects++ {
		m.m.Reconnected()
	}
}

// ledger reports one ledger, waited for since start, and starts the next wait.
func (m *meter) ledger(info LedgerInfo) {
	if m.m == nil {
		return
	}
	now := time.Now()
	m.m.Ledger(LedgerSample{Info: info, Wait: now.Sub(m.since)})
	m.since = now
}

// resubscribed reports a connection a Backend made by itself.
func (m *meter) resubscribed() {
	if m.m != nil {
		m.m.Reconnected()
	}
}
