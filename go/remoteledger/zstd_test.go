// SPDX-License-Identifier: Apache-2.0

package remoteledger

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// zstdCLI is data compressed by the zstd program (the test's encoder; the package only decodes).
func zstdCLI(t *testing.T, data []byte) []byte {
	t.Helper()
	if _, err := exec.LookPath("zstd"); err != nil {
		t.Skip("the zstd program is not installed (scripts/setup.sh installs it)")
	}
	cmd := exec.Command("zstd", "-q", "-c")
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("zstd: %v", err)
	}
	return out
}

// Every frame of a zstd stream is decoded (skippable ones skipped); a truncated or corrupt one,
// or one decoding past the bound, is an error.
func TestUnzstd(t *testing.T) {
	a, b := synthetic(1, 300000), []byte("a second frame")
	skippable := []byte{0x50, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 1, 2, 3}
	frames := append(append(append([]byte{}, zstdCLI(t, a)...), skippable...), zstdCLI(t, b)...)
	got, err := unzstd(frames, -1)
	if err != nil || !bytes.Equal(got, append(append([]byte{}, a...), b...)) {
		t.Fatalf("two frames and a skippable one: %d bytes, %v", len(got), err)
	}
	if _, err := unzstd(frames, int64(len(a))); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("over the bound: %v", err)
	}
	if _, err := unzstd(frames[:len(frames)-3], -1); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("truncated: %v", err)
	}
	if _, err := unzstd([]byte("not zstd at all"), -1); err == nil || !strings.Contains(err.Error(), "zstd: ") {
		t.Fatalf("not zstd: %v", err)
	}
}
