// SPDX-License-Identifier: Apache-2.0

package remoteledger

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeKeyPair writes an Ed25519 pair as corestreamd and WithTrustedKeys read it (PKCS #8 and
// SubjectPublicKeyInfo PEM, what `openssl genpkey -algorithm ed25519` and `openssl pkey -pubout`
// write) and returns the paths and the public key in hex.
func writeKeyPair(t *testing.T, dir, name string) (keyFile, pubFile, pubHex string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(priv)
	pubDER, _ := x509.MarshalPKIXPublicKey(pub)
	keyFile, pubFile = filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return keyFile, pubFile, hex.EncodeToString(pub)
}

// A signing corestreamd: ledgers verified with its key pass; another key, or an unsigned server,
// end the stream with ErrSignature and the library's message; a bad key file is ErrInvalid.
func TestTrustedKeys(t *testing.T) {
	dir := t.TempDir()
	key, pub, _ := writeKeyPair(t, dir, "core")
	_, otherPub, _ := writeKeyPair(t, dir, "other")
	signing := startDaemon(t, filepath.Join(dir, "signing"), 0, "--signing-key", key)
	noLeaks(t)

	s, err := New(signing.url(), WithTrustedKeys(pub))
	if err != nil {
		t.Fatal(err)
	}
	seqs, err := drain(t, s.RawLedgers(context.Background(), BoundedRange(1, 10)))
	if err != nil || len(seqs) != 10 {
		t.Fatalf("signed stream: %d ledgers, %v", len(seqs), err)
	}

	s, _ = New(signing.url(), WithTrustedKeys(otherPub))
	_, err = drain(t, s.RawLedgers(context.Background(), BoundedRange(1, 10)))
	if !errors.Is(err, ErrSignature) || !strings.Contains(err.Error(), "remoteledger: signature: ledger 1: signed by ") ||
		!strings.HasSuffix(err.Error(), ", which is not a trusted key") {
		t.Fatalf("another key: %v", err)
	}

	unsigned := startDaemon(t, filepath.Join(dir, "unsigned"), 0)
	s, _ = New(unsigned.url(), WithTrustedKeys(pub), WithResume(3))
	_, err = drain(t, s.RawLedgers(context.Background(), BoundedRange(1, 3)))
	if !errors.Is(err, ErrSignature) || err.Error() != "remoteledger: signature: ledger 1 is unsigned" {
		t.Fatalf("unsigned server: %v", err)
	}

	if _, err := New(signing.url(), WithTrustedKeys(key)); !errors.Is(err, ErrInvalid) ||
		err.Error() != `remoteledger: trusted keys "`+key+`": no PEM public key in it` {
		t.Fatalf("a private key as trusted keys: %v", err)
	}
}
