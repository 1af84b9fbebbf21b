package remoteledger

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A program in a module of its own, outside this one, built with a replace directive (as a
// user's tree would before a release) and run against the server.
func TestOutsideModule(t *testing.T) {
	d := startDaemon(t, t.TempDir(), 0)
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(here, "..", "example", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/rlexample\n\ngo 1.23\n\n" +
		"require github.com/corestream/corestream/go/remoteledger v0.0.0\n\n" +
		"replace github.com/corestream/corestream/go/remoteledger => " + here + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	build := exec.Command(goBin, "build", "-o", "rlexample", ".")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in %s: %v\n%s", dir, err, out)
	}
	run := exec.Command(filepath.Join(dir, "rlexample"), "-url", d.url(), "-from", "1", "-to", "5")
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("rlexample: %v\n%s", err, out)
	}
	sum := sha256.New()
	for seq := uint32(1); seq <= 5; seq++ {
		sum.Write(synthetic(seq, 1000))
	}
	want := fmt.Sprintf("range [1,5]: 5 ledgers, 5000 bytes, sha256 %x\n", sum.Sum(nil))
	if string(out) != want {
		t.Fatalf("rlexample printed %q, want %q", out, want)
	}

	// And its errors reach it.
	run = exec.Command(filepath.Join(dir, "rlexample"), "-url", "ws://127.0.0.1:1", "-to", "2")
	out, err = run.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "connection refused") {
		t.Fatalf("rlexample against a closed port: %v\n%s", err, out)
	}
}
