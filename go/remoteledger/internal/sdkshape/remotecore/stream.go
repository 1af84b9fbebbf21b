// SPDX-License-Identifier: Apache-2.0

package remotecore

import (
	"context"
	"iter"

	"github.com/corestream/corestream/go/remoteledger"
	"github.com/corestream/corestream/go/remoteledger/internal/sdkshape/ledgerbackend"
)

// Stream is a *remoteledger.Stream as a ledgerbackend.LedgerStream.
type Stream struct{ *remoteledger.Stream }

var _ ledgerbackend.LedgerStream = Stream{}

// RawLedgers yields each ledger of r, raw and verified, BORROWED until the next step.
func (s Stream) RawLedgers(ctx context.Context, r ledgerbackend.Range) iter.Seq2[[]byte, error] {
	return s.Stream.RawLedgers(ctx, toRange(r))
}

// Opener is v2's CoreOpener for a corestreamd. A corestreamd does not announce its network:
// Passphrase comes from RPC's configuration.
type Opener struct {
	URL        string
	Passphrase string
	Options    []remoteledger.Option // remoteledger.WithResume(-1), TLS, token, WithMetrics
}

// OpenCore checks the URL and options without dialling: each RawLedgers call dials.
func (o Opener) OpenCore(context.Context) (ledgerbackend.LedgerStream, error) {
	s, err := remoteledger.New(o.URL, o.Options...)
	if err != nil {
		return nil, err // never a Stream holding a nil *remoteledger.Stream
	}
	return Stream{s}, nil
}

// NetworkPassphrase is the configured passphrase.
func (o Opener) NetworkPassphrase() string { return o.Passphrase }
