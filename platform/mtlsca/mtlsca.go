// Package mtlsca is the operator's certificate authority for mutual TLS: it creates the CA (an
// ECDSA P-256 key and a self-signed certificate, kept in two PEM files), checks the clients'
// certificate signing requests (a valid self-signature and an RSA key of exactly 2048 bits, as
// the specification asks), signs client certificates, issues the mTLS listener's own server
// certificate, and builds the listener's tls.Config. Pure crypto and files: it knows nothing of
// clients beyond the id it writes into a certificate.
//
// A client certificate names its client in the subject's common name and its environment
// (test or production) in the subject's organizational unit: CN=<client id>, OU=<environment>,
// O=Samla client. The certificate's serial (128 random bits) is what the mTLS listener looks up
// in the read model; the environment there, recorded when the certificate was signed, is the one
// that counts.
package mtlsca

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Environments a client certificate is signed for.
const (
	EnvironmentTest       = "test"
	EnvironmentProduction = "production"
)

// ValidEnvironment reports whether env is test or production.
func ValidEnvironment(env string) bool {
	return env == EnvironmentTest || env == EnvironmentProduction
}

// Limits and defaults.
const (
	// ClientKeyBits is the only RSA key size a client certificate may have (the spec's limit).
	ClientKeyBits = 2048
	// DefaultClientValidity is a client certificate's lifetime unless the operator says otherwise.
	DefaultClientValidity = 365 * 24 * time.Hour
	// MaxClientValidity bounds it: 825 days, the longest the CA/Browser Forum ever allowed.
	MaxClientValidity = 825 * 24 * time.Hour
	// CAValidity is the CA certificate's lifetime.
	CAValidity = 10 * 365 * 24 * time.Hour
	// ServerValidity is the lifetime of a server certificate the CA issues for the listener.
	ServerValidity = 397 * 24 * time.Hour
	// MaxCSRBytes bounds a CSR file; a 2048-bit request is about 1 KiB of PEM.
	MaxCSRBytes = 64 << 10
	// clockSkew backdates NotBefore so that a peer whose clock is a little behind accepts a
	// certificate issued a moment ago.
	clockSkew = 5 * time.Minute
)

// ClientOrganization is the subject's O of every client certificate.
const ClientOrganization = "Samla client"

var (
	// ErrCAExists refuses to overwrite an existing CA.
	ErrCAExists = errors.New("a CA exists already")
	// ErrNoCA is a CA file that does not exist.
	ErrNoCA = errors.New("no CA")
	// ErrCSR is a certificate signing request Samla does not sign; the message says why.
	ErrCSR = errors.New("certificate signing request refused")
)

// CA is the operator's certificate authority. Key is nil when only the certificate was loaded:
// enough to verify clients, not to sign.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// Files names where a CA is kept.
type Files struct {
	Cert string // PEM certificate, mode 0644
	Key  string // PEM PKCS #8 private key, mode 0600
}

// DefaultFiles is the CA under a data directory: <dir>/ca/ca.crt and <dir>/ca/ca.key.
func DefaultFiles(dataDir string) Files {
	return Files{Cert: filepath.Join(dataDir, "ca", "ca.crt"), Key: filepath.Join(dataDir, "ca", "ca.key")}
}

// Exists reports whether the CA certificate file exists.
func (f Files) Exists() (bool, error) {
	_, err := os.Stat(f.Cert)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("CA certificate %s: %w", f.Cert, err)
	}
}

// Init creates a CA and writes it to files, refusing (ErrCAExists) when either file exists:
// a CA replaced by accident would orphan every certificate it signed.
func Init(files Files, commonName string, now time.Time) (*CA, error) {
	for _, p := range []string{files.Cert, files.Key} {
		if _, err := os.Stat(p); err == nil {
			return nil, fmt.Errorf("%s: %w; remove it first to create a new CA (every certificate the old one signed stops working)", p, ErrCAExists)
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	ca, certPEM, keyPEM, err := Generate(commonName, now)
	if err != nil {
		return nil, err
	}
	for _, p := range []string{files.Cert, files.Key} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", filepath.Dir(p), err)
		}
	}
	// The key first and exclusively: two racing inits cannot both write one.
	if err := writeNew(files.Key, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := writeNew(files.Cert, certPEM, 0o644); err != nil {
		_ = os.Remove(files.Key)
		return nil, err
	}
	return ca, nil
}

func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s: %w", path, ErrCAExists)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// Generate makes a CA in memory: an ECDSA P-256 key and a self-signed certificate valid for
// CAValidity that may sign end-entity certificates only (path length 0).
func Generate(commonName string, now time.Time) (ca *CA, certPEM, keyPEM []byte, err error) {
	if commonName == "" {
		commonName = "Samla operator CA"
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"Samla"}},
		NotBefore:             now.Add(-clockSkew).UTC().Truncate(time.Second),
		NotAfter:              now.Add(CAValidity).UTC().Truncate(time.Second),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("self-sign the CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return &CA{Cert: cert, Key: key}, pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", keyDER), nil
}

// Load reads a CA: its certificate and, when keyFile is not empty, its private key, which must
// belong to the certificate.
func Load(files Files) (*CA, error) {
	cert, err := LoadCertificate(files.Cert)
	if err != nil {
		return nil, err
	}
	ca := &CA{Cert: cert}
	if files.Key == "" {
		return ca, nil
	}
	b, err := os.ReadFile(files.Key)
	if err != nil {
		return nil, fmt.Errorf("read the CA key: %w", err)
	}
	key, err := parsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("CA key %s: %w", files.Key, err)
	}
	if !publicKeysEqual(key.Public(), cert.PublicKey) {
		return nil, fmt.Errorf("CA key %s does not belong to the certificate %s", files.Key, files.Cert)
	}
	ca.Key = key
	return ca, nil
}

// LoadCertificate reads the CA certificate (ErrNoCA when the file does not exist), which must be
// a CA.
func LoadCertificate(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w (samla ca init creates one)", path, ErrNoCA)
	}
	if err != nil {
		return nil, fmt.Errorf("read the CA certificate: %w", err)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("CA certificate %s: no PEM CERTIFICATE block", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("CA certificate %s: %w", path, err)
	}
	if !cert.IsCA || !cert.BasicConstraintsValid {
		return nil, fmt.Errorf("CA certificate %s is not a CA certificate", path)
	}
	return cert, nil
}

// Pool is a certificate pool holding only the CA: the mTLS listener trusts nothing else.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// ParseCSR reads a PEM certificate signing request and checks it: the key must be RSA of exactly
// ClientKeyBits bits, and the request's self-signature must verify (whoever made it holds the
// key). Every refusal wraps ErrCSR and says what the request had.
func ParseCSR(pemBytes []byte) (*x509.CertificateRequest, error) {
	if len(pemBytes) > MaxCSRBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrCSR, MaxCSRBytes)
	}
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, fmt.Errorf("%w: no PEM block (want -----BEGIN CERTIFICATE REQUEST-----)", ErrCSR)
	}
	if block.Type != "CERTIFICATE REQUEST" && block.Type != "NEW CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("%w: a PEM %q block, not a CERTIFICATE REQUEST", ErrCSR, block.Type)
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCSR, err)
	}
	switch pub := csr.PublicKey.(type) {
	case *rsa.PublicKey:
		if bits := pub.N.BitLen(); bits != ClientKeyBits {
			return nil, fmt.Errorf("%w: the key is RSA %d bits; Samla signs RSA keys of exactly %d bits", ErrCSR, bits, ClientKeyBits)
		}
	default:
		return nil, fmt.Errorf("%w: the key is %s; Samla signs RSA keys of exactly %d bits", ErrCSR, describeKey(csr.PublicKey), ClientKeyBits)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("%w: its signature does not verify with its own key: %v", ErrCSR, err)
	}
	return csr, nil
}

func describeKey(pub any) string {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		return "ECDSA " + k.Curve.Params().Name
	case ed25519.PublicKey:
		return "Ed25519"
	case *rsa.PublicKey:
		return fmt.Sprintf("RSA %d bits", k.N.BitLen())
	case nil:
		return "of an unknown type"
	default:
		return fmt.Sprintf("of type %T", pub)
	}
}

// Issued is a certificate the CA signed.
type Issued struct {
	Cert *x509.Certificate
	PEM  []byte
	// Serial is the serial in lowercase hex without leading zeros (Serial(Cert)).
	Serial string
	// Fingerprint is the hex SHA-256 of the DER certificate.
	Fingerprint string
}

// SignClient signs a client certificate for the request's key: CN=<clientID>,
// OU=<environment>, O=Samla client, for TLS client authentication only, valid from now (less a
// few minutes of clock skew) for validity (DefaultClientValidity when 0), with a random 128-bit
// serial. The request's subject and extensions are not copied: the CA decides what the
// certificate says. csr must come from ParseCSR.
func (ca *CA) SignClient(csr *x509.CertificateRequest, clientID, environment string, validity time.Duration, now time.Time) (*Issued, error) {
	if ca.Key == nil {
		return nil, errors.New("the CA's key is not loaded")
	}
	if !ValidEnvironment(environment) {
		return nil, fmt.Errorf("environment %q: must be %s or %s", environment, EnvironmentTest, EnvironmentProduction)
	}
	if clientID == "" {
		return nil, errors.New("a client id is required")
	}
	if validity == 0 {
		validity = DefaultClientValidity
	}
	if validity < time.Hour || validity > MaxClientValidity {
		return nil, fmt.Errorf("validity %s: must be an hour to %d days", validity, int(MaxClientValidity/(24*time.Hour)))
	}
	if pub, ok := csr.PublicKey.(*rsa.PublicKey); !ok || pub.N.BitLen() != ClientKeyBits {
		return nil, fmt.Errorf("%w: the key is %s; Samla signs RSA keys of exactly %d bits", ErrCSR, describeKey(csr.PublicKey), ClientKeyBits)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	notBefore := now.Add(-clockSkew).UTC().Truncate(time.Second)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{CommonName: clientID, OrganizationalUnit: []string{environment},
			Organization: []string{ClientOrganization}},
		NotBefore:             notBefore,
		NotAfter:              now.Add(validity).UTC().Truncate(time.Second),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	return ca.sign(tmpl, csr.PublicKey)
}

// IssueServer issues a server certificate for hosts (DNS names or IP addresses) with a new ECDSA
// P-256 key, valid for ServerValidity, and returns the certificate and key PEM.
func (ca *CA) IssueServer(hosts []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	if ca.Key == nil {
		return nil, nil, errors.New("the CA's key is not loaded")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate the server key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "Samla mTLS listener", Organization: []string{"Samla"}},
		NotBefore:             now.Add(-clockSkew).UTC().Truncate(time.Second),
		NotAfter:              now.Add(ServerValidity).UTC().Truncate(time.Second),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	issued, err := ca.sign(tmpl, &key.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return issued.PEM, pemBlock("PRIVATE KEY", keyDER), nil
}

func (ca *CA) sign(tmpl *x509.Certificate, pub any) (*Issued, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("sign the certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Issued{Cert: cert, PEM: pemBlock("CERTIFICATE", der), Serial: Serial(cert), Fingerprint: Fingerprint(der)}, nil
}

// Serial is a certificate's serial as Samla records it: lowercase hex without leading zeros.
func Serial(cert *x509.Certificate) string { return cert.SerialNumber.Text(16) }

// Fingerprint is the hex SHA-256 of a DER certificate.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// Environment is the environment a client certificate names in its OU ("" when none).
func Environment(cert *x509.Certificate) string {
	for _, ou := range cert.Subject.OrganizationalUnit {
		if ValidEnvironment(ou) {
			return ou
		}
	}
	return ""
}

// NormalizeSerial accepts a serial as people copy it (openssl's "serial=0A1B…", upper case,
// colons, a 0x prefix, leading zeros) and returns it as Serial writes it.
func NormalizeSerial(s string) (string, error) {
	in := s
	s = strings.TrimSpace(strings.ToLower(s))
	s = strings.TrimPrefix(s, "serial=")
	s = strings.TrimPrefix(s, "0x")
	s = strings.ReplaceAll(s, ":", "")
	n, ok := new(big.Int).SetString(s, 16)
	if s == "" || !ok || n.Sign() <= 0 || n.BitLen() > 160 {
		return "", fmt.Errorf("serial %q: want the certificate's serial in hex", in)
	}
	return n.Text(16), nil
}

// randomSerial is a positive serial of 128 random bits (RFC 5280 allows up to 20 octets).
func randomSerial() (*big.Int, error) {
	for {
		n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
		if err != nil {
			return nil, fmt.Errorf("generate a serial: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func parsePrivateKey(b []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	var (
		key any
		err error
	)
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("a PEM %q block, not a private key", block.Type)
	}
	if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a %T cannot sign", key)
	}
	return signer, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}

// ServerTLSConfig is the mTLS listener's configuration: TLS 1.2 or later (Go prefers 1.3 when
// the client has it), only ECDHE key exchange with AEAD ciphers on 1.2 (TLS 1.3's suites are all
// AEAD), and a client certificate that chains to clientCAs required on every connection: a
// handshake without one fails.
func ServerTLSConfig(serverCert tls.Certificate, clientCAs *x509.CertPool) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
		Certificates: []tls.Certificate{serverCert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clientCAs,
	}
}

// ServerCertificateUsable reports why a server certificate should not be used (nil: usable):
// it must chain to the CA for every host, and stay valid for at least minRemaining.
func ServerCertificateUsable(cert tls.Certificate, ca *x509.Certificate, hosts []string, minRemaining time.Duration, now time.Time) error {
	if len(cert.Certificate) == 0 {
		return errors.New("no certificate")
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return err
	}
	if leaf.NotAfter.Before(now.Add(minRemaining)) {
		return fmt.Errorf("it expires at %s", leaf.NotAfter.Format(time.RFC3339))
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, h := range hosts {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: h, Roots: pool, CurrentTime: now,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			return err
		}
	}
	return nil
}
