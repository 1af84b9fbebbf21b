// SPDX-License-Identifier: Apache-2.0

// Package remotecore is ingestion's view of a corestreamd: libremoteledger's Go module with the
// SDK's types, as a ledgerbackend.LedgerStream (stellar-rpc v2's live ingestion, with its
// CoreOpener; stream.go) and as a ledgerbackend.LedgerBackend (released stellar-rpc's ingest
// service; backend.go). Both use toRange.
package remotecore

import (
	"github.com/corestream/corestream/go/remoteledger"
	"github.com/corestream/corestream/go/remoteledger/internal/sdkshape/ledgerbackend"
)

// toRange is the SDK's Range as remoteledger's.
func toRange(r ledgerbackend.Range) remoteledger.Range {
	if r.Bounded() {
		return remoteledger.BoundedRange(r.From(), r.To())
	}
	return remoteledger.UnboundedRange(r.From())
}
