// SPDX-License-Identifier: Apache-2.0

package remoteledger

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// exampleNames are the Example functions (examples_test.go, example_metrics_test.go): TestMain
// starts their servers only when -run selects one of them.
var exampleNames = []string{"ExampleStream_RawLedgers", "ExampleBackend", "ExampleWithResume",
	"ExampleWithBearerToken", "ExampleWithMetrics"}

// exampleToken is the bearer token the examples' TLS server accepts.
const exampleToken = "0123456789abcdef0123456789abcdef"

// TestMain starts the servers the examples read, and tells them where through the environment
// (an example reads its URL as a program reads its configuration): CORESTREAMD_URL, a plain
// corestreamd; CORESTREAMD_TLS_URL, CORESTREAMD_CA_FILE and CORESTREAMD_TOKEN, one with TLS and
// bearer tokens. Both have the synthetic source (1000-byte ledgers every 20 ms) from ledger 1.
// Without $CORESTREAMD the tests skip one by one, and the examples, which cannot skip, are left
// out of a run that did not name any.
func TestMain(m *testing.M) {
	flag.Parse()
	stop, err := startExampleServers()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

func startExampleServers() (stop func(), err error) {
	run := flag.Lookup("test.run").Value.String()
	bin := os.Getenv("CORESTREAMD")
	if bin == "" {
		if run == "" {
			fmt.Println("CORESTREAMD is not set: the examples need a corestreamd, and are not run")
			_ = flag.Set("test.run", "^Test")
		}
		return func() {}, nil
	}
	wanted := run == ""
	if !wanted {
		re, err := regexp.Compile(strings.Split(run, "/")[0])
		if err != nil {
			return nil, err
		}
		for _, name := range exampleNames {
			wanted = wanted || re.MatchString(name)
		}
	}
	if !wanted {
		return func() {}, nil
	}
	dir, err := os.MkdirTemp("", "remoteledger-examples-")
	if err != nil {
		return nil, err
	}
	var daemons []*daemon
	stop = func() {
		for _, d := range daemons {
			d.stop(syscall.SIGTERM)
		}
		os.RemoveAll(dir)
	}
	fail := func(err error) (func(), error) { stop(); return nil, err }
	synthetic := []string{"--source", "synthetic", "--synthetic-interval", "20ms", "--emit-window", "0",
		"--synthetic-size", "1000"}

	d, err := launch(bin, filepath.Join(dir, "plain"), 0, synthetic...)
	if err != nil {
		return fail(err)
	}
	daemons = append(daemons, d)

	ca, cert, key, err := writeCerts(dir)
	if err != nil {
		return fail(err)
	}
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("examples "+exampleToken+"\n"), 0o600); err != nil {
		return fail(err)
	}
	tls, err := launch(bin, filepath.Join(dir, "tls"), 0, append(synthetic, "--tls-cert", cert, "--tls-key", key,
		"--auth-tokens", tokens)...)
	if err != nil {
		return fail(err)
	}
	daemons = append(daemons, tls)
	for k, v := range map[string]string{
		"CORESTREAMD_URL":     d.url(),
		"CORESTREAMD_TLS_URL": fmt.Sprintf("wss://127.0.0.1:%d", tls.port),
		"CORESTREAMD_CA_FILE": ca,
		"CORESTREAMD_TOKEN":   exampleToken,
	} {
		os.Setenv(k, v)
	}
	return stop, nil
}
