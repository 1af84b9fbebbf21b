// SPDX-License-Identifier: Apache-2.0

package remoteledger_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/corestream/corestream/go/remoteledger"
)

// ingestMetrics implements remoteledger.Metrics; RPC would hold Prometheus collectors here (the
// Metrics doc shows them) and register them on its own registry.
type ingestMetrics struct {
	mu         sync.Mutex
	ledgers    int
	bytes      int
	fetch      time.Duration // a summary, in RPC: ledger_fetch_duration_seconds
	latency    time.Duration // a gauge: the last live ledger's, server to here
	reconnects int
}

func (m *ingestMetrics) Ledger(l remoteledger.LedgerSample) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ledgers++
	m.bytes += l.Info.Size
	m.fetch += l.Wait
	if d, ok := l.Info.Delivery(); ok { // not for a ledger replayed from the server's ring
		m.latency = d
	}
}

func (m *ingestMetrics) Reconnected() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reconnects++
}

// Metrics for a registry the caller owns: the module imports no metrics library.
func ExampleWithMetrics() {
	m := &ingestMetrics{}
	s, err := remoteledger.New(os.Getenv("CORESTREAMD_URL"), remoteledger.WithMetrics(m))
	if err != nil {
		log.Fatal(err)
	}
	for _, err := range s.RawLedgers(context.Background(), remoteledger.BoundedRange(1, 4)) {
		if err != nil {
			log.Fatal(err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	fmt.Printf("%d ledgers, %d bytes, %d reconnects\n", m.ledgers, m.bytes, m.reconnects)
	// Output:
	// 4 ledgers, 4000 bytes, 0 reconnects
}
