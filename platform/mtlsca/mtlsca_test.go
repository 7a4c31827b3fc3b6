package mtlsca_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/platform/mtlsca"
)

var now = time.Now()

func csrPEM(t *testing.T, key crypto.Signer) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "whoever"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func rsaKey(t testing.TB, bits int) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newCA(t *testing.T) *mtlsca.CA {
	t.Helper()
	ca, _, _, err := mtlsca.Generate("", now)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestInitWritesTheCAOnceAndLoadReadsIt(t *testing.T) {
	dir := t.TempDir()
	files := mtlsca.DefaultFiles(dir)
	if ok, err := files.Exists(); ok || err != nil {
		t.Fatalf("Exists before init = %v, %v", ok, err)
	}
	if _, err := mtlsca.LoadCertificate(files.Cert); !errors.Is(err, mtlsca.ErrNoCA) {
		t.Fatalf("LoadCertificate without a CA: %v", err)
	}
	ca, err := mtlsca.Init(files, "Test CA", now)
	if err != nil {
		t.Fatal(err)
	}
	for path, mode := range map[string]os.FileMode{files.Key: 0o600, files.Cert: 0o644} {
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != mode {
			t.Fatalf("%s: %v, mode %v; want %v", path, err, st.Mode().Perm(), mode)
		}
	}
	if !ca.Cert.IsCA || ca.Cert.Subject.CommonName != "Test CA" || !ca.Cert.MaxPathLenZero {
		t.Fatalf("CA certificate %+v", ca.Cert.Subject)
	}
	if _, ok := ca.Key.Public().(*ecdsa.PublicKey); !ok {
		t.Fatalf("CA key %T, want ECDSA", ca.Key.Public())
	}
	before, _ := os.ReadFile(files.Key)
	if _, err := mtlsca.Init(files, "", now); !errors.Is(err, mtlsca.ErrCAExists) {
		t.Fatalf("second init: %v, want ErrCAExists", err)
	}
	// Only the key left behind is refused too.
	if _, err := mtlsca.Init(mtlsca.Files{Cert: filepath.Join(dir, "other.crt"), Key: files.Key}, "", now); !errors.Is(err, mtlsca.ErrCAExists) {
		t.Fatalf("init over a key: %v", err)
	}
	if after, _ := os.ReadFile(files.Key); string(after) != string(before) {
		t.Fatal("a refused init changed the key")
	}
	loaded, err := mtlsca.Load(files)
	if err != nil || !loaded.Cert.Equal(ca.Cert) || loaded.Key == nil {
		t.Fatalf("Load: %v", err)
	}
	certOnly, err := mtlsca.Load(mtlsca.Files{Cert: files.Cert})
	if err != nil || certOnly.Key != nil {
		t.Fatalf("Load of the certificate only: %v", err)
	}
	// A key of another CA is refused.
	other := mtlsca.DefaultFiles(t.TempDir())
	if _, err := mtlsca.Init(other, "", now); err != nil {
		t.Fatal(err)
	}
	if _, err := mtlsca.Load(mtlsca.Files{Cert: files.Cert, Key: other.Key}); err == nil || !strings.Contains(err.Error(), "does not belong") {
		t.Fatalf("a foreign key: %v", err)
	}
}

func TestParseCSRTakesExactlyRSA2048(t *testing.T) {
	rsa4096, err := os.ReadFile("testdata/rsa4096.csr") // generating a 4096-bit key takes seconds
	if err != nil {
		t.Fatal(err)
	}
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	for name, tc := range map[string]struct {
		csr  []byte
		want string // "" accepted, else part of the refusal
	}{
		"RSA 2048":   {csrPEM(t, rsaKey(t, 2048)), ""},
		"RSA 1024":   {csrPEM(t, rsaKey(t, 1024)), "RSA 1024 bits"},
		"RSA 4096":   {rsa4096, "RSA 4096 bits"},
		"ECDSA":      {csrPEM(t, ecKey), "ECDSA P-256"},
		"Ed25519":    {csrPEM(t, edKey), "Ed25519"},
		"not PEM":    {[]byte("hello"), "no PEM block"},
		"a key":      {pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}), `"PRIVATE KEY"`},
		"not a CSR":  {pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{1, 2, 3}}), "refused"},
		"oversize":   {make([]byte, mtlsca.MaxCSRBytes+1), "larger than"},
		"empty file": {nil, "no PEM block"},
	} {
		t.Run(name, func(t *testing.T) {
			csr, err := mtlsca.ParseCSR(tc.csr)
			if tc.want == "" {
				if err != nil || csr == nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, mtlsca.ErrCSR) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrCSR naming %q", err, tc.want)
			}
			if strings.HasPrefix(name, "RSA") || name == "ECDSA" || name == "Ed25519" {
				if !strings.Contains(err.Error(), "exactly 2048 bits") {
					t.Fatalf("err = %v does not say what is accepted", err)
				}
			}
		})
	}
}

func TestParseCSRRefusesABrokenSignature(t *testing.T) {
	good := csrPEM(t, rsaKey(t, 2048))
	block, _ := pem.Decode(good)
	der := append([]byte(nil), block.Bytes...)
	der[len(der)-10] ^= 0xff // inside the signature, the last member
	broken := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	if _, err := mtlsca.ParseCSR(broken); !errors.Is(err, mtlsca.ErrCSR) || !strings.Contains(err.Error(), "signature") {
		t.Fatalf("broken signature: %v", err)
	}

	// A request whose signature is another key's: the key in it is RSA 2048, but whoever sent
	// it does not hold it.
	csr := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "x"}}
	der1, _ := x509.CreateCertificateRequest(rand.Reader, csr, rsaKey(t, 2048))
	der2, _ := x509.CreateCertificateRequest(rand.Reader, csr, rsaKey(t, 2048))
	parsed1, _ := x509.ParseCertificateRequest(der1)
	parsed2, _ := x509.ParseCertificateRequest(der2)
	swapped := append([]byte(nil), der1...)
	copy(swapped[len(swapped)-len(parsed2.Signature):], parsed2.Signature)
	if len(parsed1.Signature) != len(parsed2.Signature) {
		t.Fatal("signatures of different lengths")
	}
	if _, err := mtlsca.ParseCSR(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: swapped})); !errors.Is(err, mtlsca.ErrCSR) {
		t.Fatalf("another key's signature: %v", err)
	}
}

func TestSignClient(t *testing.T) {
	ca := newCA(t)
	key := rsaKey(t, 2048)
	csr, err := mtlsca.ParseCSR(csrPEM(t, key))
	if err != nil {
		t.Fatal(err)
	}
	issued, err := ca.SignClient(csr, "acme", mtlsca.EnvironmentProduction, 0, now)
	if err != nil {
		t.Fatal(err)
	}
	c := issued.Cert
	if c.Subject.CommonName != "acme" || mtlsca.Environment(c) != "production" || c.Subject.Organization[0] != mtlsca.ClientOrganization {
		t.Fatalf("subject %v", c.Subject)
	}
	if len(c.ExtKeyUsage) != 1 || c.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth || c.IsCA {
		t.Fatalf("usage %v, CA %v", c.ExtKeyUsage, c.IsCA)
	}
	if got := c.NotAfter.Sub(now); got < mtlsca.DefaultClientValidity-time.Second || got > mtlsca.DefaultClientValidity {
		t.Fatalf("validity %s", got)
	}
	if c.SerialNumber.BitLen() > 128 || c.SerialNumber.Sign() <= 0 || issued.Serial != c.SerialNumber.Text(16) {
		t.Fatalf("serial %s / %s", c.SerialNumber, issued.Serial)
	}
	if len(issued.Fingerprint) != 64 || issued.Fingerprint != mtlsca.Fingerprint(c.Raw) {
		t.Fatalf("fingerprint %s", issued.Fingerprint)
	}
	if !c.PublicKey.(*rsa.PublicKey).Equal(&key.PublicKey) {
		t.Fatal("the certificate is not for the request's key")
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("does not verify against the CA: %v", err)
	}
	again, _ := ca.SignClient(csr, "acme", mtlsca.EnvironmentTest, 24*time.Hour, now)
	if again.Serial == issued.Serial {
		t.Fatal("two certificates with one serial")
	}
	for name, f := range map[string]func() error{
		"environment": func() error { _, err := ca.SignClient(csr, "acme", "staging", 0, now); return err },
		"validity":    func() error { _, err := ca.SignClient(csr, "acme", "test", 1000*24*time.Hour, now); return err },
		"client":      func() error { _, err := ca.SignClient(csr, "", "test", 0, now); return err },
		"no key": func() error {
			_, err := (&mtlsca.CA{Cert: ca.Cert}).SignClient(csr, "acme", "test", 0, now)
			return err
		},
	} {
		if f() == nil {
			t.Errorf("%s: signed", name)
		}
	}
}

func TestNormalizeSerial(t *testing.T) {
	for in, want := range map[string]string{"0A1B": "a1b", "serial=00FF": "ff", "0x1f": "1f", "0a:1b": "a1b", " abc \n": "abc"} {
		if got, err := mtlsca.NormalizeSerial(in); err != nil || got != want {
			t.Errorf("NormalizeSerial(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "xyz", "-1", strings.Repeat("f", 41)} {
		if got, err := mtlsca.NormalizeSerial(in); err == nil {
			t.Errorf("NormalizeSerial(%q) = %q", in, got)
		}
	}
}

// TestServerTLSConfigRequiresAClientCertificate serves the listener's configuration over real
// TLS: a client of the CA completes the request; a client without a certificate, with one of
// another CA, or offering only TLS 1.1 fails.
func TestServerTLSConfigRequiresAClientCertificate(t *testing.T) {
	ca := newCA(t)
	hosts := []string{"localhost", "127.0.0.1"}
	certPEM, keyPEM, err := ca.IssueServer(hosts, now)
	if err != nil {
		t.Fatal(err)
	}
	serverCert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if err := mtlsca.ServerCertificateUsable(serverCert, ca.Cert, hosts, 24*time.Hour, now); err != nil {
		t.Fatalf("a fresh server certificate is not usable: %v", err)
	}
	if err := mtlsca.ServerCertificateUsable(serverCert, ca.Cert, hosts, 400*24*time.Hour, now); err == nil {
		t.Fatal("a certificate that expires within the margin is usable")
	}
	if err := mtlsca.ServerCertificateUsable(serverCert, ca.Cert, []string{"example.com"}, time.Hour, now); err == nil {
		t.Fatal("a certificate for other hosts is usable")
	}

	ln, err := tls.Listen("tcp", "127.0.0.1:0", mtlsca.ServerTLSConfig(serverCert, ca.Pool()))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "https://" + ln.Addr().String() + "/"

	clientCert := func(ca *mtlsca.CA) tls.Certificate {
		key := rsaKey(t, 2048)
		csr, err := mtlsca.ParseCSR(csrPEM(t, key))
		if err != nil {
			t.Fatal(err)
		}
		issued, err := ca.SignClient(csr, "acme", "test", 0, now)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
		c, err := tls.X509KeyPair(issued.PEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	get := func(cfg *tls.Config) (string, error) {
		cfg.RootCAs = ca.Pool()
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
		defer c.CloseIdleConnections()
		res, err := c.Get(url)
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return string(b), err
	}
	if body, err := get(&tls.Config{Certificates: []tls.Certificate{clientCert(ca)}}); err != nil || body != "acme" {
		t.Fatalf("with the CA's certificate: %q, %v", body, err)
	}
	if body, err := get(&tls.Config{Certificates: []tls.Certificate{clientCert(ca)}, MaxVersion: tls.VersionTLS12}); err != nil || body != "acme" {
		t.Fatalf("over TLS 1.2: %q, %v", body, err)
	}
	if _, err := get(&tls.Config{}); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	if _, err := get(&tls.Config{Certificates: []tls.Certificate{clientCert(newCA(t))}}); err == nil {
		t.Fatal("a certificate of another CA was accepted")
	}
	if _, err := get(&tls.Config{Certificates: []tls.Certificate{clientCert(ca)}, MaxVersion: tls.VersionTLS11}); err == nil {
		t.Fatal("TLS 1.1 was accepted")
	}
	// A TLS 1.2 client offering only CBC suites finds none in common.
	if _, err := get(&tls.Config{Certificates: []tls.Certificate{clientCert(ca)}, MaxVersion: tls.VersionTLS12,
		CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}); err == nil {
		t.Fatal("a CBC suite was negotiated")
	}
}
