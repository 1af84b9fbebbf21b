// SPDX-License-Identifier: Apache-2.0

package remotecore

import (
	"context"

	"github.com/corestream/corestream/go/remoteledger"
	"github.com/corestream/corestream/go/remoteledger/internal/sdkshape/ledgerbackend"
	"github.com/corestream/corestream/go/remoteledger/internal/sdkshape/xdr"
)

// Backend is a *remoteledger.Backend as a ledgerbackend.LedgerBackend, for released
// stellar-rpc's ingest.Config.LedgerBackend. GetLatestLedgerSequence, GetLedgerRaw (a copy the
// caller owns) and Close are the embedded Backend's; its comments list what differs from
// captive core.
type Backend struct{ *remoteledger.Backend }

var _ ledgerbackend.LedgerBackend = Backend{}

// NewBackend checks url and the options without dialling; Close frees the Backend.
func NewBackend(url string, opts ...remoteledger.Option) (Backend, error) {
	b, err := remoteledger.NewBackend(url, opts...)
	return Backend{b}, err
}

// PrepareRange subscribes to r and waits for its first ledger.
func (b Backend) PrepareRange(ctx context.Context, r ledgerbackend.Range) error {
	return b.Backend.PrepareRange(ctx, toRange(r))
}

// IsPrepared reports whether every ledger of r can be asked of GetLedger.
func (b Backend) IsPrepared(ctx context.Context, r ledgerbackend.Range) (bool, error) {
	return b.Backend.IsPrepared(ctx, toRange(r))
}

// GetLedger waits for ledger sequence and decodes it.
func (b Backend) GetLedger(ctx context.Context, sequence uint32) (xdr.LedgerCloseMeta, error) {
	var lcm xdr.LedgerCloseMeta
	raw, err := b.GetLedgerRaw(ctx, sequence)
	if err == nil {
		err = lcm.UnmarshalBinary(raw)
	}
	return lcm, err
}
