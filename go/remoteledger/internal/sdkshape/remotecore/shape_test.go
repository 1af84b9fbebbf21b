// SPDX-License-Identifier: Apache-2.0

package remotecore_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corestream/corestream/go/remoteledger/internal/sdkshape"
	"github.com/corestream/corestream/go/remoteledger/internal/sdkshape/remotecore"
)

// The adapters against the upstream method sets. LedgerStream and LedgerBackend are asserted in
// the adapters' own text (so RPC's copy asserts them against the real SDK too); CoreOpener lives
// in stellar-rpc, out of the adapters' reach.
var _ sdkshape.CoreOpener = remotecore.Opener{}

var updateDoc = flag.Bool("update-doc", false, "rewrite the adapters' blocks in docs/rpc-wiring.md from the sources")

// docPath is docs/rpc-wiring.md of the repository this module is in.
const docPath = "../../../../../docs/rpc-wiring.md"

// importRewrites are the stand-ins' import paths and the upstream ones the doc shows.
var importRewrites = strings.NewReplacer(
	`"github.com/corestream/corestream/go/remoteledger/internal/sdkshape/ledgerbackend"`,
	`"github.com/stellar/go-stellar-sdk/ingest/ledgerbackend"`,
	`"github.com/corestream/corestream/go/remoteledger/internal/sdkshape/xdr"`,
	`"github.com/stellar/go-stellar-sdk/xdr"`,
)

// adapterFiles are shown in the doc, in this order, each between
// "<!-- begin remotecore/NAME" and "<!-- end remotecore/NAME -->" lines.
var adapterFiles = []string{"range.go", "stream.go", "backend.go"}

// The doc shows the adapters as they are compiled here: each file, its stand-in imports
// rewritten to the SDK's, in a ```go block between its markers. go test -run
// TestDocShowsTheAdapters -update-doc rewrites the blocks after a change to the sources.
func TestDocShowsTheAdapters(t *testing.T) {
	doc, err := os.ReadFile(docPath)
	if os.IsNotExist(err) {
		t.Skipf("%s is absent: the module is outside its repository", docPath)
	}
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for _, name := range adapterFiles {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		want := "```go\n" + importRewrites.Replace(string(src)) + "```\n"
		if strings.Contains(want, "corestream/go/remoteledger/internal") {
			t.Fatalf("%s imports a stand-in that importRewrites does not map to upstream", name)
		}
		begin, end := "<!-- begin remotecore/"+name, "<!-- end remotecore/"+name+" -->"
		i := strings.Index(text, begin)
		j := strings.Index(text, end)
		if i < 0 || j < i {
			t.Fatalf("%s has no %q ... %q block", docPath, begin, end)
		}
		i += strings.Index(text[i:], "\n") + 1 // past the begin line
		if got := text[i:j]; got != want {
			if *updateDoc {
				text = text[:i] + want + text[j:]
				continue
			}
			t.Errorf("%s's block for %s differs from the source (go test -run %s -update-doc rewrites it); "+
				"want:\n%s\ngot:\n%s", filepath.Base(docPath), name, t.Name(), want, got)
		}
	}
	if *updateDoc && text != string(doc) {
		if err := os.WriteFile(docPath, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s rewritten", docPath)
	}
}
