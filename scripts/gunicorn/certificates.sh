#!/usr/bin/env bash
# Throwaway certificates for scripts/gunicorn-check.sh --tls:
#
#   scripts/gunicorn/certificates.sh DIR
#
# makes, with openssl, in DIR (which must exist): a CA (ca.pem, ca.key)
# and a certificate for 127.0.0.1 signed by it (server.pem, server.key),
# ECDSA P-256 keys, valid two days. The address is an IP SAN, which
# rustls needs to accept a certificate for an address (it reads no CN).
# Prints what went wrong and exits 1 if openssl fails.
set -euo pipefail
dir=$1
cat > "$dir/openssl.cnf" << 'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = gunicorn-check throwaway CA
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[leaf]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1
authorityKeyIdentifier = keyid
EOF
key=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
{
  openssl req -x509 -new "${key[@]}" -keyout "$dir/ca.key" -out "$dir/ca.pem" -days 2 \
    -config "$dir/openssl.cnf" -extensions ca &&
  openssl req -new "${key[@]}" -keyout "$dir/server.key" -out "$dir/server.csr" \
    -subj /CN=127.0.0.1 -config "$dir/openssl.cnf" &&
  openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -set_serial 2 \
    -days 2 -out "$dir/server.pem" -extfile "$dir/openssl.cnf" -extensions leaf
} > "$dir/openssl.log" 2>&1 || { cat "$dir/openssl.log" >&2; exit 1; }
