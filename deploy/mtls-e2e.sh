#!/usr/bin/env bash
# Mutual TLS end to end with the tools a client uses: openssl makes the client's RSA-2048 key and
# CSR, the operator signs it with `samla ca sign`, curl calls GET /health and an API route on
# the mTLS listener with the key and certificate; then a 1024-bit CSR is refused, a call without
# a certificate fails its handshake, and a revoked certificate gets 401 while Samla runs.
#
#   SAMLA=bin/samla deploy/mtls-e2e.sh
#
# Settings (environment): SAMLA (the binary, default samla on PATH), SAMLA_DATA_DIR (default a
# fresh temporary dir), SAMLA_HTTP_ADDR, SAMLA_OPS_ADDR, SAMLA_MTLS_ADDR (defaults
# 127.0.0.1:18080, :19090, :18443). The data dir gets a CA if it has none.
set -euo pipefail

SAMLA=${SAMLA:-samla}
work=$(mktemp -d)
export SAMLA_DATA_DIR=${SAMLA_DATA_DIR:-$work/data}
export SAMLA_HTTP_ADDR=${SAMLA_HTTP_ADDR:-127.0.0.1:18080}
export SAMLA_OPS_ADDR=${SAMLA_OPS_ADDR:-127.0.0.1:19090}
export SAMLA_MTLS_ADDR=${SAMLA_MTLS_ADDR:-127.0.0.1:18443}
export SAMLA_ENVIRONMENT=test
mtls="https://$SAMLA_MTLS_ADDR"
ca="$SAMLA_DATA_DIR/ca/ca.crt"
pid=""

cleanup() {
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "mtls-e2e: FAIL: $*" >&2
  if [ -f "$work/samla.log" ]; then tail -n 20 "$work/samla.log" >&2; fi
  exit 1
}
step() { echo "mtls-e2e: $*"; }

# The operator: a CA (unless the data dir has one) and a client.
if [ ! -f "$ca" ]; then
  $SAMLA ca init >/dev/null
fi
client="mtls-e2e-$RANDOM"
key=$($SAMLA clients create --id "$client" --name "mTLS e2e" 2>/dev/null | sed -n 's/.*(shown once): //p') ||
  fail "samla clients create"
[ -n "$key" ] || fail "no API key from samla clients create"
step "client $client created"

# The client: an RSA-2048 key and a CSR, as the spec asks.
openssl req -new -newkey rsa:2048 -nodes -keyout "$work/client.key" -out "$work/client.csr" \
  -subj "/CN=$client" 2>/dev/null
# The operator signs it.
$SAMLA ca sign --client "$client" --env test --csr "$work/client.csr" --out "$work/client.crt" >/dev/null 2>&1 \
  || fail "samla ca sign refused an RSA-2048 CSR"
serial=$(openssl x509 -in "$work/client.crt" -noout -serial | cut -d= -f2)
openssl x509 -in "$work/client.crt" -noout -subject | grep -q "OU *= *test" || fail "the certificate names no test environment"
step "certificate $serial signed"

# A 1024-bit key is refused with a message naming its size.
openssl req -new -newkey rsa:1024 -nodes -keyout "$work/weak.key" -out "$work/weak.csr" -subj "/CN=$client" 2>/dev/null
if out=$($SAMLA ca sign --client "$client" --env test --csr "$work/weak.csr" 2>&1 >/dev/null); then
  fail "samla ca sign signed a 1024-bit key"
fi
echo "$out" | grep -q "RSA 1024 bits" || fail "the refusal does not name the key size: $out"
step "a 1024-bit CSR is refused"

$SAMLA run >"$work/samla.log" 2>&1 &
pid=$!

call() { # call PATH [curl args…]: prints the status code and keeps the body in $work/body
  local path=$1
  shift
  curl -s -o "$work/body" -w '%{http_code}' --cacert "$ca" --cert "$work/client.crt" --key "$work/client.key" "$@" "$mtls$path"
}

# /health with the key and certificate; the certificate reaches the read model within seconds.
for _ in $(seq 1 150); do
  code=$(call /health || true)
  [ "$code" = 200 ] && break
  kill -0 "$pid" 2>/dev/null || fail "samla run stopped"
  sleep 0.2
done
[ "$code" = 200 ] || fail "GET /health on the mTLS listener: $code $(cat "$work/body" 2>/dev/null)"
grep -q '"status":"healthy"' "$work/body" || fail "GET /health: $(cat "$work/body")"
step "GET $mtls/health → $(cat "$work/body")"

code=$(call /companies -H "Authorization-token: $key")
[ "$code" = 200 ] || fail "GET /companies with the client's key: $code $(cat "$work/body")"
step "GET /companies with the API key → 200"

if curl -s -o /dev/null --cacert "$ca" "$mtls/health"; then
  fail "a call without a client certificate was served"
fi
step "without a client certificate the handshake fails"

$SAMLA ca revoke --serial "$serial" >/dev/null 2>&1 || fail "samla ca revoke"
for _ in $(seq 1 75); do
  code=$(call /health || true)
  [ "$code" = 401 ] && break
  sleep 0.2
done
[ "$code" = 401 ] && grep -q CERTIFICATE_REVOKED "$work/body" || fail "a revoked certificate: $code $(cat "$work/body")"
step "revoked while running → 401 CERTIFICATE_REVOKED"
echo "mtls-e2e: PASS"
