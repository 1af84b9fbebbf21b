#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Makes the TLS material of the tests in directory $1 with the openssl CLI (see certs.h):
#   ca.pem ca.key              a CA
#   server.pem server.key      signed by it, for 127.0.0.1 and localhost (SAN IP and DNS)
#   other.pem other.key        signed by it, for other.example only
#   expired.pem expired.key    signed by it, for 127.0.0.1 and localhost, valid only in Jan 2020
#   client.pem client.key      signed by it, for client authentication
#   signing.key signing.pub    an Ed25519 ledger-signing pair, made with the two lines
#                              docs/operations/signing.md gives; other-signing.* another one;
#                              both.pub the two public keys in one file; ec.pub a P-256 public key
# `openssl x509 -days` cannot go negative and OpenSSL 3.0 has no -not_before, so the expired one
# goes through `openssl ca`, whose -startdate/-enddate take any dates.
set -eu
dir=$1
cd "$dir"

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1" 2>/dev/null; }

key ca.key
openssl req -x509 -new -key ca.key -sha256 -days 30 -subj "/CN=corestream test CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -out ca.pem

# leaf NAME SAN EKU: NAME.key and NAME.pem signed by the CA, valid for 30 days.
leaf() {
  key "$1.key"
  printf 'subjectAltName=%s\nextendedKeyUsage=%s\nbasicConstraints=CA:FALSE\n' "$2" "$3" > "$1.ext"
  openssl req -new -key "$1.key" -subj "/CN=$1" -out "$1.csr"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -sha256 -days 30 \
    -extfile "$1.ext" -out "$1.pem" 2>/dev/null
}
leaf server "IP:127.0.0.1,DNS:localhost" serverAuth
leaf other "DNS:other.example" serverAuth
leaf client "DNS:client" clientAuth

key expired.key
openssl req -new -key expired.key -subj "/CN=expired" -out expired.csr
mkdir -p ca.db
: > ca.db/index.txt
echo 1000 > ca.db/serial
cat > ca.cnf <<EOF
[ca]
default_ca = test_ca
[test_ca]
database = ca.db/index.txt
serial = ca.db/serial
new_certs_dir = ca.db
default_md = sha256
policy = any
unique_subject = no
x509_extensions = leaf
[any]
commonName = supplied
[leaf]
subjectAltName = IP:127.0.0.1,DNS:localhost
extendedKeyUsage = serverAuth
basicConstraints = CA:FALSE
EOF
openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr -out expired.pem \
  -startdate 20200101000000Z -enddate 20200102000000Z -notext 2>/dev/null

for k in signing other-signing; do
  openssl genpkey -algorithm ed25519 -out "$k.key"
  openssl pkey -in "$k.key" -pubout -out "$k.pub"
done
cat signing.pub other-signing.pub > both.pub
openssl pkey -in server.key -pubout -out ec.pub
