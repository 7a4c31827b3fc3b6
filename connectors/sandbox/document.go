package sandbox

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"

	"github.com/samla/samla/connectors/pdfletter"
)

// PDF_UPLOAD: the session waits in DOCUMENT_REQUIRED for
//
//	POST …/sessions/{sessionId}/document
//
// with the PDF as the body (Content-Type application/pdf), as multipart/form-data (part "file")
// or as JSON {"contentBase64","fileName"?}. The company reads the letter and answers with the
// session: AUTHENTICATED with the parsed insurance (or pension) under "document", or FAILED with
// PDF_PARSE_FAILED (a letter of the known layout with an unreadable field) or PDF_UNSUPPORTED
// (anything else). Insurers take insurance letters; the French pension-information service
// takes pension letters.

// documentOutcome is what the company read from an upload.
type documentOutcome struct {
	status     string // PARSED, PARSE_FAILED, UNSUPPORTED
	message    string
	insurances []insurance
	pensions   []pension
}

type documentView struct {
	Status     string      `json:"status"`
	Message    string      `json:"message,omitempty"`
	Insurances []insurance `json:"insurances,omitempty"`
	Pensions   []pension   `json:"pensions,omitempty"`
}

func (d *documentOutcome) view() *documentView {
	return &documentView{Status: d.status, Message: d.message, Insurances: d.insurances, Pensions: d.pensions}
}

// letterProducts are the insurer's product codes for the letter's insurance types.
var letterProducts = map[string]string{
	pdfletter.TypeHome: "home", pdfletter.TypeHouse: "house", pdfletter.TypeCar: "motor",
	pdfletter.TypeAccident: "accident", pdfletter.TypePet: "pet", pdfletter.TypeLife: "life",
	pdfletter.TypeTravel: "travel",
}

var letterFrequencies = map[string]string{pdfletter.Monthly: "monthly", pdfletter.Quarterly: "quarterly", pdfletter.Yearly: "yearly"}

func (s *Sandbox) uploadDocument(w http.ResponseWriter, r *http.Request) {
	ls, co, ok := s.session(w, r)
	if !ok {
		return
	}
	pdf, err := readUpload(r)
	if errors.Is(err, errTooLarge) {
		writeError(w, http.StatusRequestEntityTooLarge, "DOCUMENT_TOO_LARGE", "The document is larger than 10 MiB.")
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "Send the PDF as application/pdf, multipart/form-data (file) or JSON {contentBase64}.")
		return
	}
	// Parsing takes a while and needs no lock.
	outcome := readLetter(co, pdf)
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advance(ls, co, now)
	if ls.state != stateDocumentRequired {
		writeError(w, http.StatusConflict, "NOT_AWAITING_DOCUMENT", "The session is not waiting for a document.")
		return
	}
	ls.document = outcome
	switch outcome.status {
	case "PARSED":
		ls.enter(stateAuthenticated, now)
	case "PARSE_FAILED":
		ls.fail(reasonPDFParseFailed, now)
	default:
		ls.fail(reasonPDFUnsupported, now)
	}
	s.opts.logger.Debug("sandbox document read", "company", co.id, "session", ls.id, "outcome", outcome.status)
	writeJSON(w, http.StatusOK, s.view(ls, co, now, s.companyBase(r, co.id)))
}

func readLetter(co *demoCompany, pdf []byte) *documentOutcome {
	l, err := pdfletter.Parse(pdf)
	var fe *pdfletter.FieldError
	switch {
	case errors.As(err, &fe):
		return &documentOutcome{status: "PARSE_FAILED", message: "The letter's " + string(fe.Field) + " could not be read."}
	case err != nil:
		return &documentOutcome{status: "UNSUPPORTED", message: "The document is not an insurance letter we can read."}
	}
	sum := sha256.Sum256([]byte(l.InsuranceNumber))
	id := "pdf-" + hex.EncodeToString(sum[:6])
	if !co.insurer() {
		if l.InsuranceType != pdfletter.TypePension {
			return &documentOutcome{status: "UNSUPPORTED", message: "Only pension letters can be read here."}
		}
		return &documentOutcome{status: "PARSED", pensions: []pension{{ID: id, Name: ptr("Pensionsförsäkring"),
			PensionType: "PRIVATE", PolicyNumber: ptr(l.InsuranceNumber), InsuredPersonName: ptr(l.Holder)}}}
	}
	product, ok := letterProducts[l.InsuranceType]
	if !ok {
		return &documentOutcome{status: "UNSUPPORTED", message: "Pension letters are not insurance letters."}
	}
	return &documentOutcome{status: "PARSED", insurances: []insurance{{
		ID: id, Product: product, PolicyNumber: ptr(l.InsuranceNumber),
		Premium:      &premium{Amount: ptr(l.Premium.Amount), Currency: l.Premium.Currency, Frequency: ptr(letterFrequencies[l.Premium.Frequency])},
		RenewalDate:  ptr(l.RenewalDate),
		PolicyHolder: &holder{Name: l.Holder},
	}}}
}

var errTooLarge = errors.New("document too large")

// readUpload takes the PDF out of any of the three request shapes.
func readUpload(r *http.Request) ([]byte, error) {
	limit := int64(pdfletter.MaxSize)
	body := http.MaxBytesReader(nil, r.Body, limit*2) // base64 and multipart overhead
	mediaType, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var pdf []byte
	var err error
	switch mediaType {
	case "application/pdf", "application/octet-stream":
		pdf, err = io.ReadAll(body)
	case "multipart/form-data":
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, perr := mr.NextPart()
			if perr != nil {
				return nil, errors.New("no file part")
			}
			if p.FormName() == "file" {
				pdf, err = io.ReadAll(p)
				break
			}
		}
	case "application/json":
		var req struct {
			ContentBase64 string `json:"contentBase64"`
			FileName      string `json:"fileName"`
		}
		if err = json.NewDecoder(body).Decode(&req); err == nil {
			pdf, err = base64.StdEncoding.DecodeString(strings.TrimSpace(req.ContentBase64))
		}
	default:
		return nil, errors.New("unsupported content type")
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) || int64(len(pdf)) > limit {
		return nil, errTooLarge
	}
	if err != nil {
		return nil, err
	}
	if len(pdf) == 0 {
		return nil, errors.New("empty document")
	}
	return pdf, nil
}
