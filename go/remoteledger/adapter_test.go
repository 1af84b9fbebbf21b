// SPDX-License-Identifier: Apache-2.0

package remoteledger_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/corestream/corestream/go/remoteledger"
	"github.com/corestream/corestream/go/remoteledger/internal/sdkshape"
	"github.com/corestream/corestream/go/remoteledger/internal/sdkshape/ledgerbackend"
	"github.com/corestream/corestream/go/remoteledger/internal/sdkshape/remotecore"
)

// The adapters of docs/rpc-wiring.md (internal/sdkshape/remotecore, compiled against the SDK's
// method sets; TestDocShowsTheAdapters keeps the doc equal to them) used as RPC uses them,
// against a real corestreamd: v2's opener and LedgerStream, and v1's LedgerBackend with the
// decode (the stand-in xdr.LedgerCloseMeta keeps the bytes it is given).
func TestAdapters(t *testing.T) {
	url := remoteledger.StartTestDaemon(t)
	remoteledger.NoLeaks(t)
	ctx := context.Background()

	var opener sdkshape.CoreOpener = remotecore.Opener{URL: url, Passphrase: "Test SDF Network ; September 2015",
		Options: []remoteledger.Option{remoteledger.WithResume(-1)}}
	if opener.NetworkPassphrase() != "Test SDF Network ; September 2015" {
		t.Fatalf("passphrase %q", opener.NetworkPassphrase())
	}
	stream, err := opener.OpenCore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seq := uint32(1)
	for raw, err := range stream.RawLedgers(ctx, ledgerbackend.BoundedRange(1, 5)) {
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(raw, remoteledger.SyntheticLedger(seq, 1000)) {
			t.Fatalf("ledger %d differs", seq)
		}
		seq++
	}
	if seq != 6 {
		t.Fatalf("RawLedgers of [1,5] ended at %d", seq)
	}
	if s, err := (remotecore.Opener{URL: "core-box:8462"}).OpenCore(ctx); s != nil || !errors.Is(err, remoteledger.ErrInvalid) {
		t.Fatalf("OpenCore of a bad URL: %v, %v", s, err)
	}

	var backend ledgerbackend.LedgerBackend
	backend, err = remotecore.NewBackend(url)
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	if err := backend.PrepareRange(ctx, ledgerbackend.UnboundedRange(2)); err != nil {
		t.Fatal(err)
	}
	if ok, err := backend.IsPrepared(ctx, ledgerbackend.BoundedRange(3, 9)); !ok || err != nil {
		t.Fatalf("IsPrepared([3,9]) after PrepareRange(2..): %v, %v", ok, err)
	}
	for seq := uint32(2); seq <= 6; seq++ {
		lcm, err := backend.GetLedger(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if raw, _ := lcm.MarshalBinary(); !bytes.Equal(raw, remoteledger.SyntheticLedger(seq, 1000)) {
			t.Fatalf("ledger %d differs", seq)
		}
	}
	if latest, err := backend.GetLatestLedgerSequence(ctx); err != nil || latest == 0 { // the ring trails the live stream
		t.Fatalf("latest %d, %v", latest, err)
	}
	if err := backend.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := backend.GetLedger(ctx, 7); !errors.Is(err, remoteledger.ErrClosed) {
		t.Fatalf("GetLedger after Close: %v", err)
	}
}
