#!/usr/bin/env bash
# Makes the test PKI of the TLS tests (tests/server_tls_test.cc) in this folder: keys and
# certificates for tests only, valid for 100 years, never for real use.
#   ca.pem             the test CA (its key is not kept)
#   server.pem/.key    CN=localhost, SAN DNS:localhost, IP:127.0.0.1, signed by ca.pem
#   client.pem/.key    CN=remex-test-client, extendedKeyUsage clientAuth, signed by ca.pem
#   other-ca.pem       an unrelated CA (a client trusting only it must refuse the server)
#   wrong-name.pem/.key  SAN DNS:elsewhere.example only, signed by ca.pem (hostname check)
# Usage: tests/data/tls/make-certs.sh   (needs the openssl command)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
days=36500
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

key "$work/ca.key"
openssl req -x509 -new -key "$work/ca.key" -subj "/CN=Remex test CA" -days $days -out ca.pem \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
key "$work/other-ca.key"
openssl req -x509 -new -key "$work/other-ca.key" -subj "/CN=Unrelated test CA" -days $days -out other-ca.pem \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"

sign() {  # NAME SUBJECT EXTENSIONS
  key "$1.key"
  openssl req -new -key "$1.key" -subj "$2" -out "$work/$1.csr"
  printf '%s\n' "$3" > "$work/$1.ext"
  openssl x509 -req -in "$work/$1.csr" -CA ca.pem -CAkey "$work/ca.key" -CAcreateserial \
    -CAserial "$work/ca.srl" -days $days -extfile "$work/$1.ext" -out "$1.pem" 2>/dev/null
}
sign server "/CN=localhost" "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
sign client "/CN=remex-test-client" "extendedKeyUsage=clientAuth"
sign wrong-name "/CN=elsewhere.example" "subjectAltName=DNS:elsewhere.example
extendedKeyUsage=serverAuth"
chmod 600 ./*.key
echo "made: $(ls ./*.pem ./*.key | tr '\n' ' ')"
