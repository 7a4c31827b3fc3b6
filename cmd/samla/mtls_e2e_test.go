package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/samla/samla/command/clients"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/mtlsca"
)

// mtlsWait bounds how long a change (a new certificate, a revocation, a setting) takes to reach
// the listener: the projection's lag plus httpapi.DefaultMTLSCacheTTL, with room for a slow
// machine.
const mtlsWait = 15 * time.Second

// clientCSR makes an RSA key of bits and a CSR for it, as a client does, and writes the CSR to
// dir; it returns the CSR's path and the key's PEM.
func clientCSR(t *testing.T, dir, name string, bits int) (string, []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}}, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".csr")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

type mtlsAnswer struct {
	status int
	body   []byte
	err    error
}

func (a mtlsAnswer) code() string {
	var p httpapi.Problem
	_ = json.Unmarshal(a.body, &p)
	return p.Code
}

func (a mtlsAnswer) String() string {
	if a.err != nil {
		return a.err.Error()
	}
	return fmt.Sprintf("%d %s", a.status, a.body)
}

// mtlsCaller calls base over TLS trusting only the CA, with cert when not nil.
type mtlsCaller struct {
	t    *testing.T
	base string
	ca   *x509.CertPool
}

func (m mtlsCaller) get(cert *tls.Certificate, path, apiKey string) mtlsAnswer {
	m.t.Helper()
	cfg := &tls.Config{RootCAs: m.ca, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, m.base+path, nil)
	if err != nil {
		m.t.Fatal(err)
	}
	if apiKey != "" {
		req.Header.Set(httpapi.HeaderAPIKey, apiKey)
	}
	res, err := c.Do(req)
	if err != nil {
		return mtlsAnswer{err: err}
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return mtlsAnswer{status: res.StatusCode, body: body, err: err}
}

// eventually calls until done accepts the answer or mtlsWait passes, and returns the last
// answer and how long it took.
func eventually(t *testing.T, call func() mtlsAnswer, done func(mtlsAnswer) bool) (mtlsAnswer, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		a := call()
		if done(a) || time.Since(start) > mtlsWait {
			return a, time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func status(want int, code string) func(mtlsAnswer) bool {
	return func(a mtlsAnswer) bool { return a.err == nil && a.status == want && (code == "" || a.code() == code) }
}

// TestMutualTLSEndToEnd is issue 10's mutual TLS over real TLS: the operator's CA signs CSRs made
// here (RSA 2048) for two clients and both environments; the service started as the test
// environment serves /health to the test certificate, refuses a handshake without one, the
// production certificate (401) and another client's certificate with this client's key (401
// CERTIFICATE_CLIENT_MISMATCH); a revocation while it runs takes effect within seconds; an
// mTLS-only client is refused on the plain listener and served on the mTLS one.
func TestMutualTLSEndToEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testConfig(t, t.TempDir())
	cfg.MTLSAddr = "127.0.0.1:0"
	cfg.Environment = "test"
	logger := testLogger(t)
	if _, _, err := InitCA(cfg); err != nil {
		t.Fatal(err)
	}
	if _, _, err := InitCA(cfg); !errors.Is(err, mtlsca.ErrCAExists) {
		t.Fatalf("a second ca init: %v", err)
	}
	keys := map[string]string{}
	for _, id := range []string{"acme", "beta"} {
		key, err := CreateClient(ctx, cfg, logger, id, strings.ToUpper(id)+" AB")
		if err != nil {
			t.Fatal(err)
		}
		keys[id] = key
	}

	files := t.TempDir()
	certs := map[string]*tls.Certificate{}
	serials := map[string]string{}
	for _, c := range []struct{ client, env string }{{"acme", "test"}, {"acme", "production"}, {"beta", "test"}} {
		name := c.client + "-" + c.env
		csr, keyPEM := clientCSR(t, files, name, 2048)
		ev, certPEM, err := SignClientCertificate(ctx, cfg, logger, c.client, c.env, csr, 0)
		if err != nil {
			t.Fatalf("sign %s: %v", name, err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		certs[name], serials[name] = &pair, ev.Serial
	}
	// Refused with nothing recorded: a key of another size, a client that does not exist.
	weak, _ := clientCSR(t, files, "weak", 1024)
	if _, _, err := SignClientCertificate(ctx, cfg, logger, "acme", "test", weak, 0); err == nil || !strings.Contains(err.Error(), "RSA 1024 bits") {
		t.Fatalf("a 1024-bit CSR: %v", err)
	}
	good, _ := clientCSR(t, files, "nobody", 2048)
	if _, _, err := SignClientCertificate(ctx, cfg, logger, "nobody", "test", good, 0); err == nil {
		t.Fatal("a certificate was signed for a client that does not exist")
	}
	if _, err := ClientCertificates(ctx, cfg, "nobody"); !errors.Is(err, clients.ErrUnknownClient) {
		t.Fatalf("certificates of a client that does not exist: %v", err)
	}
	listed, err := ClientCertificates(ctx, cfg, "acme")
	if err != nil || len(listed) != 2 || listed[0].Serial != serials["acme-test"] || listed[1].Environment != "production" {
		t.Fatalf("acme's certificates = %+v, %v", listed, err)
	}

	svc := start(t, cfg)
	defer stop(t, svc)
	if svc.MTLSAddr() == "" {
		t.Fatal("no mutual-TLS listener with a CA in the data dir")
	}
	caCert, err := mtlsca.LoadCertificate(cfg.CAFiles().Cert)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	m := mtlsCaller{t: t, base: "https://" + svc.MTLSAddr(), ca: pool}

	// The certificates reach the read model within moments of the start.
	health, took := eventually(t, func() mtlsAnswer { return m.get(certs["acme-test"], "/health", "") }, status(200, ""))
	if health.err != nil || health.status != 200 || string(health.body) != `{"status":"healthy"}` {
		t.Fatalf("GET /health with acme's test certificate: %s", health)
	}
	t.Logf("the certificates were served %s after the start", took.Round(time.Millisecond))
	if a := m.get(certs["acme-test"], "/companies", keys["acme"]); a.err != nil || a.status != 200 {
		t.Fatalf("GET /companies with acme's certificate and key: %s", a)
	}
	if a := m.get(nil, "/health", ""); a.err == nil {
		t.Fatalf("a call without a client certificate was answered: %s", a)
	}
	for name, tc := range map[string]struct {
		cert, key, path, code string
	}{
		"the production certificate on the test listener": {"acme-production", "acme", "/companies", httpapi.CodeCertificateWrongEnvironment},
		"the production certificate on /health":           {"acme-production", "", "/health", httpapi.CodeCertificateWrongEnvironment},
		"beta's certificate with acme's key":              {"beta-test", "acme", "/companies", httpapi.CodeCertificateClientMismatch},
		"acme's certificate with beta's key":              {"acme-test", "beta", "/companies", httpapi.CodeCertificateClientMismatch},
	} {
		if a := m.get(certs[tc.cert], tc.path, keys[tc.key]); a.err != nil || a.status != 401 || a.code() != tc.code {
			t.Errorf("%s: %s, want 401 %s", name, a, tc.code)
		}
	}

	// A revocation while the service runs, by the operator's CLI, with no restart.
	if _, serial, err := RevokeClientCertificate(ctx, cfg, logger, strings.ToUpper(serials["acme-test"]), ""); err != nil || serial != serials["acme-test"] {
		t.Fatalf("revoke: %s, %v", serial, err)
	}
	revoked, took := eventually(t, func() mtlsAnswer { return m.get(certs["acme-test"], "/companies", keys["acme"]) },
		status(401, httpapi.CodeCertificateRevoked))
	if !status(401, httpapi.CodeCertificateRevoked)(revoked) {
		t.Fatalf("the revoked certificate after %s: %s", took, revoked)
	}
	t.Logf("the revocation took effect after %s", took.Round(time.Millisecond))
	if a := m.get(certs["beta-test"], "/companies", keys["beta"]); a.err != nil || a.status != 200 {
		t.Fatalf("beta's certificate after acme's revocation: %s", a)
	}
	if n := mtlsStreamLimit(t, svc.MTLSAddr(), pool, certs["beta-test"]); n != mtlsMaxConcurrentStreams {
		t.Fatalf("the listener offers %d concurrent HTTP/2 streams, want %d", n, mtlsMaxConcurrentStreams)
	}

	// mTLS-only: refused on the plain listener, served on the mTLS one.
	on := true
	if _, err := SetClientSettings(ctx, cfg, logger, "beta", nil, nil, &on); err != nil {
		t.Fatal(err)
	}
	plain := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: keys["beta"]}
	refused, took := eventually(t, func() mtlsAnswer {
		code, body, _ := plain.do(http.MethodGet, "/companies", nil, nil)
		return mtlsAnswer{status: code, body: body}
	}, status(401, httpapi.CodeMTLSRequired))
	if !status(401, httpapi.CodeMTLSRequired)(refused) {
		t.Fatalf("beta on the plain listener after %s: %s", took, refused)
	}
	if a := m.get(certs["beta-test"], "/companies", keys["beta"]); a.err != nil || a.status != 200 {
		t.Fatalf("mTLS-only beta on the mTLS listener: %s", a)
	}
	if code, body, _ := (apiClient{t: t, base: plain.base, key: keys["acme"]}).do(http.MethodGet, "/companies", nil, nil); code != 200 {
		t.Fatalf("acme on the plain listener: %d %s", code, body)
	}
}

// TestMTLSListenerIsOffWithoutCA: without a CA the service starts as before, without the
// listener.
func TestMTLSListenerIsOffWithoutCA(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.MTLSAddr = "127.0.0.1:0"
	svc := start(t, cfg)
	defer stop(t, svc)
	if svc.MTLSAddr() != "" {
		t.Fatalf("a mutual-TLS listener at %s without a CA", svc.MTLSAddr())
	}
}

// TestSamlaCLIHelper is no test: TestMTLSScript runs the test binary as the samla command
// through it (SAMLA_CLI_HELPER=1, the arguments after --), which spares building the binary.
func TestSamlaCLIHelper(t *testing.T) {
	if os.Getenv("SAMLA_CLI_HELPER") != "1" {
		t.Skip("the samla command of TestMTLSScript")
	}
	code := 0
	root := newRoot(os.Stdout, os.Stderr)
	root.SetArgs(flag.Args())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "samla:", err)
		code = 1
	}
	os.Exit(code)
}

// TestMTLSScript runs deploy/mtls-e2e.sh (openssl req, samla ca sign, curl --cert) against
// `samla run`. Without openssl or curl it skips, unless SAMLA_REQUIRE_INTEGRATION is set.
func TestMTLSScript(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "openssl", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("SAMLA_REQUIRE_INTEGRATION") != "" {
				t.Fatalf("%s is required for the mutual-TLS script: %v", tool, err)
			}
			t.Skipf("%s not installed; the mutual-TLS script is skipped", tool)
		}
	}
	self, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	wrapper := filepath.Join(dir, "samla")
	script := fmt.Sprintf("#!/bin/sh\nSAMLA_CLI_HELPER=1 exec '%s' -test.run='^TestSamlaCLIHelper$' -- \"$@\"\n", self)
	if err := os.WriteFile(wrapper, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	// Only this test's SAMLA_* settings: none of the caller's (a ClickHouse DSN, say).
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SAMLA_") {
			env = append(env, kv)
		}
	}
	env = append(env, "SAMLA="+wrapper, "SAMLA_DATA_DIR="+filepath.Join(dir, "data"),
		"SAMLA_HTTP_ADDR="+freeAddr(t), "SAMLA_OPS_ADDR="+freeAddr(t), "SAMLA_MTLS_ADDR="+freeAddr(t),
		"SAMLA_SANDBOX_ADDR=127.0.0.1:0", "SAMLA_LOG_LEVEL=warn")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join("..", "..", "deploy", "mtls-e2e.sh"))
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "mtls-e2e: PASS") {
		t.Fatalf("deploy/mtls-e2e.sh: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestCACommandsAndClientsSet drives the operator's commands as a shell would: ca init (once),
// clients set with only the flags given, ca sign to a file, ca list, ca revoke.
func TestCACommandsAndClientsSet(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := func(args ...string) (string, error) {
		t.Helper()
		var out, errOut strings.Builder
		root := newRoot(&out, &errOut)
		root.SetArgs(append(args, "--data-dir", dir, "--log-level", "error"))
		err := root.Execute()
		return out.String() + errOut.String(), err
	}
	if out, err := run("ca", "init"); err != nil || !strings.Contains(out, "CA created") {
		t.Fatalf("ca init: %v %s", err, out)
	}
	if _, err := run("ca", "init"); !errors.Is(err, mtlsca.ErrCAExists) {
		t.Fatalf("a second ca init: %v", err)
	}
	if out, err := run("clients", "create", "--id", "acme", "--name", "Acme"); err != nil {
		t.Fatalf("clients create: %v %s", err, out)
	}
	if out, err := run("clients", "set", "--id", "acme", "--rate-limit", "200", "--mtls-only"); err != nil ||
		!strings.Contains(out, "rate limit 200/s, burst default, mTLS-only true") {
		t.Fatalf("clients set: %v %s", err, out)
	}
	if out, err := run("clients", "set", "--id", "acme", "--burst", "500", "--mtls-only=false"); err != nil ||
		!strings.Contains(out, "rate limit 200/s, burst 500, mTLS-only false") {
		t.Fatalf("clients set again: %v %s", err, out)
	}
	for _, args := range [][]string{{"--id", "acme"}, {"--id", "acme", "--burst", "0"}, {"--id", "nobody", "--mtls-only"}} {
		if out, err := run(append([]string{"clients", "set"}, args...)...); err == nil {
			t.Fatalf("clients set %v: %s", args, out)
		}
	}
	csr, _ := clientCSR(t, dir, "acme", 2048)
	certFile := filepath.Join(dir, "acme.crt")
	if out, err := run("ca", "sign", "--client", "acme", "--env", "production", "--csr", csr, "--out", certFile, "--days", "30"); err != nil {
		t.Fatalf("ca sign: %v %s", err, out)
	}
	b, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil || cert.Subject.CommonName != "acme" || mtlsca.Environment(cert) != "production" ||
		cert.NotAfter.Sub(cert.NotBefore) > 31*24*time.Hour {
		t.Fatalf("the certificate written: %v %v", cert.Subject, err)
	}
	for _, args := range [][]string{{"--env", "staging"}, {"--env", "test", "--days", "0"}, {"--env", "test", "--days", "900"}} {
		if out, err := run(append([]string{"ca", "sign", "--client", "acme", "--csr", csr}, args...)...); err == nil {
			t.Fatalf("ca sign %v: %s", args, out)
		}
	}
	serial := mtlsca.Serial(cert)
	if out, err := run("ca", "list", "--client", "acme"); err != nil || !strings.Contains(out, serial+"  production") || !strings.Contains(out, "  no") {
		t.Fatalf("ca list: %v\n%s", err, out)
	}
	if out, err := run("ca", "revoke", "--serial", "serial="+strings.ToUpper(serial)); err != nil || !strings.Contains(out, "client acme: certificate "+serial+" revoked") {
		t.Fatalf("ca revoke: %v %s", err, out)
	}
	if out, err := run("ca", "revoke", "--serial", "abcdef"); !errors.Is(err, clients.ErrCertificateNotFound) {
		t.Fatalf("revoking an unknown serial: %v %s", err, out)
	}
	if out, err := run("ca", "list", "--client", "acme"); err != nil || strings.Contains(out, "  no\n") {
		t.Fatalf("ca list after the revocation: %v\n%s", err, out)
	}
}

// TestMTLSConfiguration: the environment is test or production, and a listener certificate
// comes with its key.
func TestMTLSConfiguration(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	if cfg.Environment != "test" || cfg.validate() != nil {
		t.Fatalf("default environment %q: %v", cfg.Environment, cfg.validate())
	}
	if files := cfg.CAFiles(); files != mtlsca.DefaultFiles(cfg.DataDir) {
		t.Fatalf("CA files %+v", files)
	}
	for name, mutate := range map[string]func(*Config){
		"--environment": func(c *Config) { c.Environment = "staging" },
		"go together":   func(c *Config) { c.MTLSCertFile = "server.crt" },
		"--mtls-addr":   func(c *Config) { c.MTLSAddr = "8443" },
	} {
		c := *cfg
		mutate(&c)
		if err := c.validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
	off := *cfg
	off.MTLSAddr = ""
	if err := off.validate(); err != nil {
		t.Fatalf("no mTLS listener: %v", err)
	}
}

// mtlsStreamLimit negotiates HTTP/2 with the mutual-TLS listener and returns the
// SETTINGS_MAX_CONCURRENT_STREAMS its first SETTINGS frame announces (0: none announced).
func mtlsStreamLimit(t *testing.T, addr string, ca *x509.CertPool, cert *tls.Certificate) uint32 {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca, Certificates: []tls.Certificate{*cert},
		NextProtos: []string{http2.NextProtoTLS}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if p := conn.ConnectionState().NegotiatedProtocol; p != http2.NextProtoTLS {
		t.Fatalf("negotiated %q, want h2", p)
	}
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	framer := http2.NewFramer(conn, conn)
	if err := framer.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := framer.ReadFrame()
		if err != nil {
			t.Fatalf("read the server's SETTINGS: %v", err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			v, _ := sf.Value(http2.SettingMaxConcurrentStreams)
			return v
		}
	}
}
