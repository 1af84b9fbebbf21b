// SPDX-License-Identifier: Apache-2.0

package remoteledger

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// pubnetLedgers are five public-network LedgerCloseMeta (v0) that stellar-core wrote, 412 B to
// 1.1 MB, in the realmeta directory beside the project (../shared/realmeta; its README says
// where they come from). They are read in place, never copied into the repository.
var pubnetLedgers = []string{"pubnet-ledger-6154623.xdr", "pubnet-ledger-16154623.xdr",
	"pubnet-ledger-26154623.xdr", "pubnet-ledger-36154623.xdr", "pubnet-ledger-46154623.xdr"}

// realmetaDir is $CS_REALMETA_DIR (the ctest sets it from the CMake cache variable of the same
// name); the test skips, naming the path, when the directory is not there.
func realmetaDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CS_REALMETA_DIR")
	if dir == "" {
		t.Skip("CS_REALMETA_DIR is not set: point it at ../shared/realmeta to run the real-ledger tests")
	}
	if _, err := os.Stat(filepath.Join(dir, "SHA256SUMS")); err != nil {
		t.Skipf("%s is absent: the real-ledger tests need it (%v)", dir, err)
	}
	return dir
}

// The five public-network ledgers, renumbered 1..5 in a dump directory of symlinks and served by
// the file source, reach the Go module byte-exact. The dump cycles (ledgers 6..10 are records
// 1..5 again), so ten ledgers are asked for: the renumbering is checked too. The source is
// endless rather than --file-count 5: a bounded dump at 50 ms is over, and the daemon gone,
// about 250 ms after it listens, which a subscriber on a loaded machine can miss.
func TestFileSourceOverPublicNetworkLedgers(t *testing.T) {
	dir := realmetaDir(t)
	dump := filepath.Join(t.TempDir(), "dump")
	if err := os.Mkdir(dump, 0o700); err != nil {
		t.Fatal(err)
	}
	want := make([][]byte, len(pubnetLedgers))
	for i, name := range pubnetLedgers {
		src := filepath.Join(dir, name)
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = b
		if err := os.Symlink(src, filepath.Join(dump, "ledger-"+strconv.Itoa(i+1)+".xdr")); err != nil {
			t.Fatal(err)
		}
	}
	if len(want[0]) != 412 || len(want[4]) != 1112744 {
		t.Fatalf("the public-network ledgers are %d and %d bytes, want 412 and 1112744 (see its README)",
			len(want[0]), len(want[4]))
	}
	d := startDaemonSource(t, t.TempDir(), 0, "--source", "file", "--file-dir", dump, "--cadence", "50ms")
	noLeaks(t)
	s, err := New(d.url())
	if err != nil {
		t.Fatal(err)
	}
	const last = 10
	var infos []LedgerInfo
	n := 0
	for b, err := range s.RawLedgers(context.Background(), BoundedRange(1, last),
		WithLedgerObserver(func(i LedgerInfo) { infos = append(infos, i) })) {
		if err != nil {
			t.Fatalf("after %d ledgers: %v\n%s", n, err, d.log.String())
		}
		w := want[n%len(want)]
		if !bytes.Equal(b, w) {
			t.Fatalf("ledger %d is %d bytes differing from %s (%d bytes)", n+1, len(b),
				pubnetLedgers[n%len(want)], len(w))
		}
		n++
	}
	if n != last || len(infos) != last {
		t.Fatalf("%d ledgers and %d infos, want %d", n, len(infos), last)
	}
	for i, info := range infos {
		if info.Sequence != uint32(i+1) || info.Size != len(want[i%len(want)]) {
			t.Fatalf("ledger %d: info %+v, want sequence %d of %d bytes", i+1, info, i+1, len(want[i%len(want)]))
		}
	}
}
