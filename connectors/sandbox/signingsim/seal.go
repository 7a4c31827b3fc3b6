package signingsim

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"
	"sync"
	"time"

	dpdf "github.com/digitorus/pdf"
	"github.com/digitorus/pdfsign/sign"
	"github.com/go-pdf/fpdf"
	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"golang.org/x/text/encoding/charmap"

	"github.com/samla/samla/connectors/pdfletter"
)

// SealerName is who the seal and the signature page name as the sealing party.
const SealerName = "Samla Sandbox Signing"

// sealer holds the provider's sealing identity: a self-signed CA and the seal certificate it
// issued, both made in memory at New. ECDSA P-256 because generating it costs microseconds
// (every sandbox.New makes one) and poppler's NSS backend verifies it like RSA.
type sealer struct {
	ca      *x509.Certificate
	cert    *x509.Certificate
	key     crypto.Signer
	created time.Time
}

func newSealer(now time.Time) (*sealer, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("signing simulator CA key: %w", err)
	}
	// Backdated an hour so that a seal made right away is inside the validity even when the
	// verifier's clock is a little behind; valid for ten years, as a CA in a sandbox may be.
	notBefore := now.Add(-time.Hour).UTC()
	caTmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: SealerName + " Root CA", Organization: []string{"Samla Sandbox"}, Country: []string{"SE"}},
		NotBefore:             notBefore,
		NotAfter:              notBefore.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("signing simulator CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("signing simulator CA certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("signing simulator seal key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: SealerName, Organization: []string{"Samla Sandbox"}, Country: []string{"SE"}},
		NotBefore:    notBefore,
		NotAfter:     notBefore.AddDate(5, 0, 0),
		// No extended key usage: poppler's NSS backend does not know id-kp-documentSigning
		// (RFC 9336) and then reports the certificate as corrupted instead of merely untrusted.
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageContentCommitment,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("signing simulator seal certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("signing simulator seal certificate: %w", err)
	}
	return &sealer{ca: ca, cert: cert, key: key, created: now}, nil
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		// crypto/rand does not fail on supported platforms (Go 1.24+ panics itself instead).
		panic(err)
	}
	return n.Add(n, big.NewInt(1))
}

// sealInfo is what the signature page says.
type sealInfo struct {
	ProcessID       string
	Reference       string
	Title           string
	SignerName      string
	SignedAt        time.Time
	SignatureMethod string
	SealedAt        time.Time
}

// pdfcpuOnce turns off pdfcpu's configuration directory once per process: by default its first
// use writes a config.yml under the user's config dir, which a server must not do.
var pdfcpuOnce sync.Once

func pdfcpuConfig() *model.Configuration {
	pdfcpuOnce.Do(api.DisableConfigDir)
	conf := model.NewDefaultConfiguration()
	conf.ValidationMode = model.ValidationRelaxed
	conf.Offline = true
	return conf
}

// errUnreadable marks a document the provider cannot parse as a PDF.
var errUnreadable = errors.New("not a readable PDF")

// checkPDF is the provider's intake check: pdfcpu must read and validate the document (the same
// library merges it at sealing time, so what passes here can be sealed), and its text layer is
// returned for the tester markers.
func checkPDF(doc []byte) (text string, err error) {
	if !bytes.HasPrefix(doc, []byte("%PDF-")) {
		return "", errUnreadable
	}
	// Both readers were written for well-formed files and may panic on a damaged one.
	defer func() {
		if r := recover(); r != nil {
			text, err = "", fmt.Errorf("%w: %v", errUnreadable, r)
		}
	}()
	ctx, err := api.ReadAndValidate(bytes.NewReader(doc), pdfcpuConfig())
	if err != nil {
		return "", fmt.Errorf("%w: %w", errUnreadable, err)
	}
	if ctx.PageCount < 1 || ctx.PageCount > MaxPages {
		return "", fmt.Errorf("%w: %d pages (1..%d accepted)", errUnreadable, ctx.PageCount, MaxPages)
	}
	if ctx.Encrypt != nil {
		return "", fmt.Errorf("%w: encrypted", errUnreadable)
	}
	// The text layer as Samla's own PDF reading sees it (one text run per line).
	return pdfletter.Text(doc)
}

// seal makes the signed PDF: the original pages, one signature page, and a PDF digital
// signature (adbe.pkcs7.detached, certifying: no later change allowed) by the seal certificate
// over the whole file.
func (s *sealer) seal(original []byte, info sealInfo) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("seal: %v", r)
		}
	}()
	page, err := signaturePage(info)
	if err != nil {
		return nil, err
	}
	var merged bytes.Buffer
	if err := api.MergeRaw([]io.ReadSeeker{bytes.NewReader(original), bytes.NewReader(page)}, &merged, false, pdfcpuConfig()); err != nil {
		return nil, fmt.Errorf("seal: append the signature page: %w", err)
	}
	in := bytes.NewReader(merged.Bytes())
	rdr, err := dpdf.NewReader(in, in.Size())
	if err != nil {
		return nil, fmt.Errorf("seal: read the merged document: %w", err)
	}
	var signed bytes.Buffer
	signed.Grow(merged.Len() + 32<<10)
	err = sign.Sign(in, &signed, rdr, in.Size(), sign.SignData{
		Signature: sign.SignDataSignature{
			Info: sign.SignDataSignatureInfo{
				Name:     SealerName,
				Location: "Samla Sandbox",
				Reason:   "Signed by the holder (" + info.SignatureMethod + "); sealed by " + SealerName,
				Date:     info.SealedAt,
			},
			CertType:   sign.CertificationSignature,
			DocMDPPerm: sign.DoNotAllowAnyChangesPerms,
		},
		Signer:            s.key,
		DigestAlgorithm:   crypto.SHA256,
		Certificate:       s.cert,
		CertificateChains: [][]*x509.Certificate{{s.cert, s.ca}},
	})
	if err != nil {
		return nil, fmt.Errorf("seal: sign: %w", err)
	}
	return signed.Bytes(), nil
}

// signaturePage renders the page appended to the signed document. One text run per line, so
// that text extraction reads each line whole.
func signaturePage(info sealInfo) ([]byte, error) {
	p := fpdf.New("P", "mm", "A4", "")
	p.SetMargins(20, 20, 20)
	p.SetAutoPageBreak(true, 20)
	p.SetCreator(SealerName, true)
	p.SetTitle("Signature certificate", true)
	p.AddPage()
	p.SetFont("Helvetica", "B", 18)
	p.CellFormat(0, 10, "Signature certificate", "", 1, "L", false, 0, "")
	p.Ln(6)
	p.SetFont("Helvetica", "", 11)
	name := info.SignerName
	if name == "" {
		name = "(name not given)"
	}
	lines := [][2]string{
		{"Document", info.Title},
		{"Reference", info.Reference},
		{"Signing process", info.ProcessID},
		{"Signed by", name},
		{"Signed at", info.SignedAt.UTC().Format("2006-01-02 15:04:05") + " UTC"},
		{"Signature method", info.SignatureMethod},
	}
	p.SetDrawColor(180, 180, 180)
	for _, l := range lines {
		p.CellFormat(0, 9, win1252(l[0]+": "+l[1]), "B", 1, "L", false, 0, "")
	}
	p.Ln(10)
	p.SetFont("Helvetica", "B", 11)
	p.CellFormat(0, 7, "Sealed by "+SealerName, "", 1, "L", false, 0, "")
	p.SetFont("Helvetica", "", 9)
	p.SetTextColor(90, 90, 90)
	p.CellFormat(0, 5, win1252("Sealed at "+info.SealedAt.UTC().Format("2006-01-02 15:04:05")+" UTC with a PDF digital signature; "+
		"any change to this file invalidates it."), "", 1, "L", false, 0, "")
	var b bytes.Buffer
	if err := p.Output(&b); err != nil {
		return nil, fmt.Errorf("seal: render the signature page: %w", err)
	}
	return b.Bytes(), nil
}

// win1252 prepares text for the standard PDF fonts, which carry Windows-1252 (Swedish names
// fit); a character outside it prints as "?" rather than failing the seal of a signed document.
func win1252(s string) string {
	var b strings.Builder
	for _, r := range s {
		if c, ok := charmap.Windows1252.EncodeRune(r); ok {
			b.WriteByte(c)
		} else {
			b.WriteByte('?')
		}
	}
	return b.String()
}
