// SPDX-License-Identifier: Apache-2.0

package remoteledger

import "testing"

// For the tests of package remoteledger_test (the adapters'): the harness, exported to them.

// StartTestDaemon runs a corestreamd with the synthetic source on a fresh data dir, stopped at
// cleanup, and returns its ws:// URL; the test skips without $CORESTREAMD.
func StartTestDaemon(t *testing.T) string { return startDaemon(t, t.TempDir(), 0).url() }

// SyntheticLedger is the synthetic source's ledger seq of size bytes.
func SyntheticLedger(seq uint32, size int) []byte { return synthetic(seq, size) }

// NoLeaks checks at cleanup that every C stream was freed and no goroutine was left.
func NoLeaks(t *testing.T) { noLeaks(t) }
