// Package httpcmd holds the write side's HTTP handlers: they negotiate the request shape of the
// client's Service-Version, validate it strictly, translate it into an application command and
// map the outcome to the API contract (API.md).
package httpcmd

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/samla/samla/command/app"
	"github.com/samla/samla/domain"
	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/company"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/domain/personnummer"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/uuids"
)

// Problem codes of the collection commands.
const (
	CodeCompanyUnavailable   = "COMPANY_UNAVAILABLE"
	CodeIdempotencyKeyReused = "IDEMPOTENCY_KEY_REUSED"
	// CodeUnknownUser is a userUuid that is not a live user of the client (422).
	CodeUnknownUser = "UNKNOWN_USER"
	// CodeConsentInvalid is a Psd2AisConsentParameter whose consent the collection may not use
	// (422, with the problem's reason).
	CodeConsentInvalid = "CONSENT_INVALID"
	// CodeNoStoredConsent is a reuseStoredConsent with no usable consent of the user (422).
	CodeNoStoredConsent = "NO_STORED_CONSENT"
)

// Size limits of POST /collections.
const (
	// MaxPDFBytes is the largest PDF a PdfDocumentParameter (or 2025-01-01's PDF_DOCUMENT)
	// may carry, decoded: the domain's bound of a document.
	MaxPDFBytes = collection.MaxPDFBytes
	// MaxCreateCollectionBodyBytes must fit a maximal PDF in base64 (4 bytes per 3, so 10 MiB
	// become 13.33 MiB) plus the rest of the request; 14 MiB leaves about 650 KiB for that.
	MaxCreateCollectionBodyBytes int64 = 14 << 20
	// maxNameLength bounds AccountOwnerName; real names are far shorter.
	maxNameLength = 300
	// maxFileNameLength bounds PdfDocumentParameter.fileName.
	maxFileNameLength = 255
	// MaxParameters bounds the 2026-04-01 parameters: each type may appear once, and there are
	// five; the margin lets a client with a repeated type learn which one.
	MaxParameters = 10
	// maxInputs bounds the 2025-01-01 input map, which knows three keys.
	maxInputs = 10
)

// startLimits bound the shape of a POST /collections body of either version before anything
// of it is decoded: a body that breaks one is refused at the first violation, whatever its size.
var startLimits = httpapi.Limits{Paths: map[string]httpapi.PathLimits{
	"parameters":                 {MaxItems: MaxParameters},
	"parameters[].contentBase64": {MaxStringBytes: base64.StdEncoding.EncodedLen(MaxPDFBytes)},
	"input":                      {MaxMembers: maxInputs},
	// A name of maxNameLength runes takes at most four bytes a rune.
	"input.*":                   {MaxStringBytes: 4 * maxNameLength},
	"input." + InputPDFDocument: {MaxStringBytes: base64.StdEncoding.EncodedLen(MaxPDFBytes)},
}}

// parameterLimits bound one 2026-04-01 parameter object, decoded on its own once its type is
// known: what startLimits held it to inside the body.
var parameterLimits = startLimits.Sub("parameters[]")

// Parameter type discriminators of the 2026-04-01 request.
const (
	ParamSwedishPersonalNumber = "SwedishPersonalNumberParameter"
	ParamAccountOwnerName      = "AccountOwnerNameParameter"
	ParamSwedishEid            = "SwedishEidParameter"
	ParamPsd2AisConsent        = "Psd2AisConsentParameter"
	ParamPdfDocument           = "PdfDocumentParameter"
)

// Input keys of the 2025-01-01 request.
const (
	InputSwedishPersonalNumber = "SWEDISH_PERSONAL_NUMBER"
	InputAccountOwnerName      = "ACCOUNT_OWNER_NAME"
	// InputPDFDocument carries the PDF of a PDF_UPLOAD collection, in standard base64, with the
	// limits of PdfDocumentParameter (API.md).
	InputPDFDocument = "PDF_DOCUMENT"
)

// knownInputs are the 2025-01-01 input keys, in the order errors name them.
var knownInputs = []string{InputSwedishPersonalNumber, InputAccountOwnerName, InputPDFDocument}

// CollectionCommands is the application service the handlers drive (app.CollectionService).
type CollectionCommands interface {
	Start(ctx context.Context, cmd app.StartCollection) (app.Created, error)
	SupplyInfo(ctx context.Context, cmd app.SupplyInfo) (app.Supplied, error)
}

// Deps are what the command routes need.
type Deps struct {
	Collections CollectionCommands
	// Users serves POST /users and DELETE /users/{userUuid} (users.go); they are mounted only
	// when it is set.
	Users UserCommands
	// FingerprintKey is the server secret of the requests' idempotency fingerprints (at least
	// MinFingerprintKeyBytes). Every replica that serves the commands must have the same key, and
	// it must stay the same across restarts: a retry fingerprinted under another key is taken
	// for a different request reusing its Idempotency-Key.
	FingerprintKey []byte
	// Now is the clock used to read short personal numbers (YYMMDD-NNNN); nil means time.Now.
	Now func() time.Time
	// CollectionUsers tells whose a collection is, so that a user's session may supply input to
	// its own collections (sessions.go); without it, supplement-info refuses sessions.
	CollectionUsers CollectionUsers
	// UserDeletions makes DELETE /users/{userUuid} answer only once the deletion ends the user's
	// sessions (users.go); without it, the DELETE answers as soon as the user is erased.
	UserDeletions *DeletionWatch
	// Consents serves POST /consents and DELETE /consents/{consentId} (consents.go); they are
	// mounted only when it is set.
	Consents ConsentCommands
	// Cancellations serves POST /cancellations and DELETE /cancellations/{documentId}
	// (cancellations.go); they are mounted only when it is set.
	Cancellations CancellationCommands
	// CallbackVerifier checks the signing provider's callbacks; the callback route is mounted
	// only when it and Cancellations are set.
	CallbackVerifier CallbackVerifier
}

// MinFingerprintKeyBytes is the shortest FingerprintKey: 256 bits, the strength of the hash.
const MinFingerprintKeyBytes = 32

// RegisterRoutes mounts the command routes. r must carry httpapi's middleware (NewEngine's
// engine, or a group of it): the handlers rely on its authentication and version negotiation.
func RegisterRoutes(r gin.IRoutes, d Deps) {
	if d.Collections == nil {
		panic("httpcmd.RegisterRoutes: Deps.Collections is required")
	}
	if len(d.FingerprintKey) < MinFingerprintKeyBytes {
		panic(fmt.Sprintf("httpcmd.RegisterRoutes: Deps.FingerprintKey must have at least %d bytes", MinFingerprintKeyBytes))
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	h := &handlers{deps: d}
	// A user's session may start a collection for its own user (startCollection checks the
	// body's userUuid) and supply input to its own collections.
	r.POST("/collections", httpapi.AllowSessionsCheckedByHandler, httpapi.MaxBody(MaxCreateCollectionBodyBytes), h.startCollection)
	if d.CollectionUsers != nil {
		r.POST("/collections/:collectionId/supplement-info", httpapi.AllowSessionsCheckedByHandler,
			httpapi.MaxBody(MaxSupplementInfoBodyBytes), h.supplementInfo)
	} else {
		r.POST("/collections/:collectionId/supplement-info", httpapi.MaxBody(MaxSupplementInfoBodyBytes), h.supplementInfo)
	}
	// The spec: "A collection cannot be forcibly terminated by the client." A DELETE gets a
	// problem that says so instead of the generic 404 of an unknown route.
	r.DELETE("/collections/:collectionId", cannotCancel)
	if d.Users != nil {
		h.registerUsers(r)
	}
	if d.Consents != nil {
		h.registerConsents(r)
	}
	if d.Cancellations != nil {
		h.registerCancellations(r)
	}
}

type handlers struct{ deps Deps }

// startRequestV2 is the 2026-04-01 body. Parameters are kept raw until their type is known.
type startRequestV2 struct {
	Company     string            `json:"company"`
	LoginMethod string            `json:"loginMethod"`
	Parameters  []json.RawMessage `json:"parameters"`
	UserUUID    *string           `json:"userUuid"`
}

// startRequestV1 is the 2025-01-01 body. Input values are kept raw so that a non-string value is
// reported at its key (input.X) rather than at the whole map.
type startRequestV1 struct {
	Company     string                     `json:"company"`
	LoginMethod string                     `json:"loginMethod"`
	Input       map[string]json.RawMessage `json:"input"`
}

// Typed parameters. Pointers tell an absent member from an empty one.

// personalNumberParam is SwedishPersonalNumberParameter, and SwedishEidParameter too: both carry
// just a personal number (required in the former, optional in the latter).
type personalNumberParam struct {
	Type           string  `json:"type"`
	PersonalNumber *string `json:"personalNumber"`
}

type accountOwnerNameParam struct {
	Type string  `json:"type"`
	Name *string `json:"name"`
}

type psd2AisConsentParam struct {
	Type               string  `json:"type"`
	ConsentID          *string `json:"consentId"`
	ReuseStoredConsent *bool   `json:"reuseStoredConsent"`
}

type pdfDocumentParam struct {
	Type          string  `json:"type"`
	ContentBase64 *string `json:"contentBase64"`
	FileName      *string `json:"fileName"`
}

// startInput is a request of either version, validated, ready for the command.
type startInput struct {
	company, loginMethod, userUUID string
	personalNumber                 personnummer.Number // parsed here, once; zero when none was given
	accountOwnerName               string
	pdf                            *app.PDFUpload
	consent                        *app.ConsentChoice
	// paths maps the service's field names (app.StartCollection's members) to where the
	// request carried them, for those that differ (the PDF is a parameter of its own).
	paths     map[string]string
	canonical any // what the request hash covers
}

// createdResponse is the 201 body of POST /collections.
type createdResponse struct {
	CollectionID string `json:"collectionId"`
	Company      string `json:"company"`
	LoginMethod  string `json:"loginMethod"`
	Status       string `json:"status"`
	CreatedAt    string `json:"createdAt"`
}

func (h *handlers) startCollection(c *gin.Context) {
	key, ferr := httpapi.IdempotencyKey(c)
	if ferr != nil {
		httpapi.AbortValidation(c, "The Idempotency-Key header is invalid.", *ferr)
		return
	}
	version := httpapi.ServiceVersion(c)
	var (
		in   startInput
		errs []httpapi.FieldError
	)
	switch version {
	case httpapi.V20250101:
		var req startRequestV1
		if !httpapi.DecodeJSON(c, &req, startLimits) {
			return
		}
		in, errs = validateV1(req, h.deps.Now())
	default:
		var req startRequestV2
		if !httpapi.DecodeJSON(c, &req, startLimits) {
			return
		}
		in, errs = validateV2(req, h.deps.Now())
	}
	if len(errs) > 0 {
		httpapi.AbortValidation(c, "The collection request is invalid.", errs...)
		return
	}
	// A session starts collections of its own user only, never one of no user.
	if !httpapi.RequireSessionUser(c, in.userUUID) {
		return
	}
	hash, err := h.requestHash(c, version, in.canonical)
	if err != nil {
		httpapi.AbortInternal(c, err)
		return
	}

	ctx := c.Request.Context()
	created, err := h.deps.Collections.Start(ctx, app.StartCollection{
		Tenant: httpapi.ClientID(c), APIVersion: string(version), IdempotencyKey: key,
		Company: in.company, LoginMethod: in.loginMethod, UserUUID: in.userUUID,
		PersonalNumber: in.personalNumber, AccountOwnerName: in.accountOwnerName, PDF: in.pdf, Consent: in.consent,
		RequestHash: hash.current, LegacyRequestHash: hash.legacy,
		CorrelationID: httpapi.CorrelationID(ctx), RequestID: httpapi.RequestID(ctx),
	})
	if err != nil {
		writeStartError(c, err, in)
		return
	}
	c.Header("Location", "/collections/"+created.CollectionID+"/status")
	if created.Replayed {
		// Lets a client (and its logs) see that this is the first request's answer.
		c.Header("Idempotent-Replayed", "true")
	}
	c.JSON(http.StatusCreated, createdResponse{
		CollectionID: created.CollectionID, Company: created.Company, LoginMethod: created.LoginMethod,
		Status: string(created.Status), CreatedAt: httpapi.FormatTime(created.CreatedAt),
	})
}

// validateCommon checks the members both versions share.
func validateCommon(companyID, loginMethod string) []httpapi.FieldError {
	var errs []httpapi.FieldError
	if strings.TrimSpace(companyID) == "" {
		errs = append(errs, httpapi.FieldError{Field: "company", Message: "is required"})
	}
	switch {
	case loginMethod == "":
		errs = append(errs, httpapi.FieldError{Field: "loginMethod", Message: "is required"})
	case !slices.Contains(company.KnownLoginMethods(), loginMethod):
		// Only unknown identifiers are refused here. A known method the company does not support is
		// accepted: the collection then ends in LOGIN_METHOD_NOT_APPLICABLE, as the spec says.
		errs = append(errs, httpapi.FieldError{Field: "loginMethod",
			Message: "must be one of " + strings.Join(company.KnownLoginMethods(), ", ")})
	}
	return errs
}

// parsePersonalNumber parses a personal number the request carried at field, once: the value
// travels on, and a rule it breaks is a field error at that path (which never quotes it).
func parsePersonalNumber(field, raw string, now time.Time) (personnummer.Number, *httpapi.FieldError) {
	n, err := personnummer.Parse(raw, now)
	if err == nil {
		return n, nil
	}
	var fe *domain.FieldError
	if errors.As(err, &fe) {
		return personnummer.Number{}, &httpapi.FieldError{Field: field, Message: fe.Reason}
	}
	return personnummer.Number{}, &httpapi.FieldError{Field: field, Message: "is not a personal number"}
}

func validateV1(req startRequestV1, now time.Time) (startInput, []httpapi.FieldError) {
	errs := validateCommon(req.Company, req.LoginMethod)
	in := startInput{company: req.Company, loginMethod: req.LoginMethod}
	values := map[string]string{}
	keys := make([]string, 0, len(req.Input))
	for k := range req.Input {
		keys = append(keys, k)
	}
	slices.Sort(keys) // errors in a stable order
	for _, k := range keys {
		field := "input." + k
		if !slices.Contains(knownInputs, k) {
			errs = append(errs, httpapi.FieldError{Field: field,
				Message: "is not a known input; known inputs are " + strings.Join(knownInputs, ", ")})
			continue
		}
		var v string
		if err := json.Unmarshal(req.Input[k], &v); err != nil || string(req.Input[k]) == "null" {
			errs = append(errs, httpapi.FieldError{Field: field, Message: "must be a string"})
			continue
		}
		values[k] = v
	}
	if v, ok := values[InputSwedishPersonalNumber]; ok {
		field := "input." + InputSwedishPersonalNumber
		if v == "" {
			errs = append(errs, httpapi.FieldError{Field: field, Message: "must not be empty"})
		} else if pn, fe := parsePersonalNumber(field, v, now); fe != nil {
			errs = append(errs, *fe)
		} else {
			in.personalNumber = pn
		}
	}
	if v, ok := values[InputAccountOwnerName]; ok {
		if fe := checkName("input."+InputAccountOwnerName, v); fe != nil {
			errs = append(errs, *fe)
		}
		in.accountOwnerName = strings.TrimSpace(v)
	}
	pdfField := "input." + InputPDFDocument
	if v, ok := values[InputPDFDocument]; ok {
		content, fe := decodePDF(pdfField, &v)
		if fe != nil {
			errs = append(errs, *fe)
		} else {
			in.pdf = &app.PDFUpload{Content: content}
			in.paths = map[string]string{collection.FieldPDF: pdfField}
		}
	}
	if fe := checkPDFFits(req.LoginMethod, pdfField, InputPDFDocument, hasKey(req.Input, InputPDFDocument)); fe != nil {
		errs = append(errs, *fe)
	}
	in.canonical = struct {
		Company     string            `json:"company"`
		LoginMethod string            `json:"loginMethod"`
		Input       map[string]string `json:"input"`
	}{req.Company, req.LoginMethod, values}
	return in, errs
}

func checkName(field, name string) *httpapi.FieldError {
	switch n := strings.TrimSpace(name); {
	case n == "":
		return &httpapi.FieldError{Field: field, Message: "must not be empty"}
	case len([]rune(n)) > maxNameLength:
		return &httpapi.FieldError{Field: field, Message: fmt.Sprintf("must have at most %d characters", maxNameLength)}
	case strings.ContainsRune(n, utf8.RuneError) || strings.IndexFunc(n, unicode.IsControl) >= 0:
		// The decoder turns bytes that are not UTF-8, and lone surrogate escapes, into U+FFFD: a
		// name that holds one was not text, and matching it against insured persons' names
		// would compare garbage.
		return &httpapi.FieldError{Field: field, Message: "must be text (UTF-8, no control characters)"}
	}
	return nil
}

func validateV2(req startRequestV2, now time.Time) (startInput, []httpapi.FieldError) {
	errs := validateCommon(req.Company, req.LoginMethod)
	in := startInput{company: req.Company, loginMethod: req.LoginMethod}
	if req.UserUUID != nil {
		// One spelling per user, whatever case the client sent: a session's own user in
		// uppercase is still its own user, and the request hash covers the user, not the case.
		id, ok := uuids.Canonical(*req.UserUUID)
		if !ok {
			errs = append(errs, httpapi.FieldError{Field: "userUuid", Message: "must be a UUID"})
		}
		in.userUUID = id
	}

	canonical := make([]any, 0, len(req.Parameters))
	seen := map[string]int{}
	var eidNumber personnummer.Number // the EID parameter's person, when it names one validly
	eidIndex, pdfIndex := -1, -1
	for i, raw := range req.Parameters {
		prefix := fmt.Sprintf("parameters[%d]", i)
		var head struct {
			Type *string `json:"type"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			errs = append(errs, httpapi.FieldError{Field: prefix, Message: "must be an object with a string type"})
			continue
		}
		if head.Type == nil || *head.Type == "" {
			errs = append(errs, httpapi.FieldError{Field: prefix + ".type", Message: "is required"})
			continue
		}
		typ := *head.Type
		if first, dup := seen[typ]; dup {
			errs = append(errs, httpapi.FieldError{Field: prefix + ".type",
				Message: fmt.Sprintf("%s already given at parameters[%d]; each type may appear once", typ, first)})
			continue
		}
		seen[typ] = i
		decode := func(dst any) bool {
			if err := httpapi.StrictUnmarshal(raw, dst, parameterLimits); err != nil {
				if fe, ok := httpapi.JSONFieldError(prefix, err); ok {
					errs = append(errs, fe)
				} else {
					errs = append(errs, httpapi.FieldError{Field: prefix, Message: "is not a valid parameter object"})
				}
				return false
			}
			canonical = append(canonical, dst)
			return true
		}
		switch typ {
		case ParamSwedishPersonalNumber:
			var p personalNumberParam
			if !decode(&p) {
				continue
			}
			if p.PersonalNumber == nil || *p.PersonalNumber == "" {
				errs = append(errs, httpapi.FieldError{Field: prefix + ".personalNumber", Message: "is required"})
				continue
			}
			pn, fe := parsePersonalNumber(prefix+".personalNumber", *p.PersonalNumber, now)
			if fe != nil {
				errs = append(errs, *fe)
				continue
			}
			in.personalNumber = pn
		case ParamAccountOwnerName:
			var p accountOwnerNameParam
			if !decode(&p) {
				continue
			}
			if p.Name == nil {
				errs = append(errs, httpapi.FieldError{Field: prefix + ".name", Message: "is required"})
				continue
			}
			if fe := checkName(prefix+".name", *p.Name); fe != nil {
				errs = append(errs, *fe)
				continue
			}
			in.accountOwnerName = strings.TrimSpace(*p.Name)
		case ParamSwedishEid:
			var p personalNumberParam
			if !decode(&p) {
				continue
			}
			eidIndex = i
			if p.PersonalNumber == nil {
				continue
			}
			if *p.PersonalNumber == "" {
				errs = append(errs, httpapi.FieldError{Field: prefix + ".personalNumber", Message: "must not be empty when given"})
				continue
			}
			pn, fe := parsePersonalNumber(prefix+".personalNumber", *p.PersonalNumber, now)
			if fe != nil {
				errs = append(errs, *fe)
				continue
			}
			eidNumber = pn
		case ParamPsd2AisConsent:
			var p psd2AisConsentParam
			if !decode(&p) {
				continue
			}
			if p.ReuseStoredConsent == nil {
				if p.ConsentID == nil {
					errs = append(errs, httpapi.FieldError{Field: prefix + ".reuseStoredConsent", Message: "is required without a consentId"})
				} else {
					// {"consentId"} alone names the consent (API.md, Consents): the flag reads
					// false, and the request hash covers it so, one request in either spelling.
					reuse := false
					p.ReuseStoredConsent = &reuse
				}
			}
			choice := &app.ConsentChoice{ReuseStored: p.ReuseStoredConsent != nil && *p.ReuseStoredConsent}
			if p.ConsentID != nil {
				// One spelling per consent, as for users: the request hash covers the consent.
				id, ok := uuids.Canonical(*p.ConsentID)
				switch {
				case *p.ConsentID == "":
					errs = append(errs, httpapi.FieldError{Field: prefix + ".consentId", Message: "must not be empty when given"})
				case !ok:
					errs = append(errs, httpapi.FieldError{Field: prefix + ".consentId", Message: "must be a UUID"})
				default:
					*p.ConsentID = id
					choice.ConsentID = id
				}
			}
			in.consent = choice
			if in.paths == nil {
				in.paths = map[string]string{}
			}
			in.paths[app.FieldConsentID] = prefix + ".consentId"
			// A consent is its user's: the collection must name that user.
			if (choice.ConsentID != "" || choice.ReuseStored) && req.UserUUID == nil {
				errs = append(errs, httpapi.FieldError{Field: "userUuid", Message: "is required with a " + ParamPsd2AisConsent})
			}
		case ParamPdfDocument:
			var p pdfDocumentParam
			if !decode(&p) {
				continue
			}
			pdfIndex = i
			content, fe := decodePDF(prefix+".contentBase64", p.ContentBase64)
			if fe == nil && p.FileName != nil && (*p.FileName == "" || len(*p.FileName) > maxFileNameLength) {
				fe = &httpapi.FieldError{Field: prefix + ".fileName", Message: fmt.Sprintf("must have 1 to %d characters when given", maxFileNameLength)}
			}
			if fe != nil {
				errs = append(errs, *fe)
				continue
			}
			in.pdf = &app.PDFUpload{Content: content}
			if p.FileName != nil {
				in.pdf.FileName = *p.FileName
			}
			if in.paths == nil {
				in.paths = map[string]string{}
			}
			in.paths[collection.FieldPDF] = prefix + ".contentBase64"
		default:
			errs = append(errs, httpapi.FieldError{Field: prefix + ".type", Message: "must be one of " + strings.Join([]string{
				ParamSwedishPersonalNumber, ParamAccountOwnerName, ParamSwedishEid, ParamPsd2AisConsent, ParamPdfDocument}, ", ")})
		}
	}

	// The EID parameter may name the person instead of, or as well as, the personal-number
	// parameter; both must then be the same person, which the parsed values tell whatever the
	// spelling of each.
	if !eidNumber.IsZero() {
		switch {
		case in.personalNumber.IsZero():
			in.personalNumber = eidNumber
		case in.personalNumber != eidNumber:
			errs = append(errs, httpapi.FieldError{Field: fmt.Sprintf("parameters[%d].personalNumber", eidIndex),
				Message: "must be the same person as the " + ParamSwedishPersonalNumber})
		}
	}
	pdfField := "parameters"
	if pdfIndex >= 0 {
		pdfField = fmt.Sprintf("parameters[%d].type", pdfIndex)
	}
	if fe := checkPDFFits(req.LoginMethod, pdfField, ParamPdfDocument, pdfIndex >= 0); fe != nil {
		errs = append(errs, *fe)
	}

	in.canonical = struct {
		Company     string `json:"company"`
		LoginMethod string `json:"loginMethod"`
		UserUUID    string `json:"userUuid"`
		Parameters  []any  `json:"parameters"`
	}{req.Company, req.LoginMethod, in.userUUID, canonical}
	return in, errs
}

// decodePDF checks a document's encoding and size and returns its decoded content. Whether it
// is a PDF the connector can read is the connector's call (FAILED_PDF_USER_INPUT), not a
// request-validation rule.
func decodePDF(field string, contentBase64 *string) ([]byte, *httpapi.FieldError) {
	if contentBase64 == nil || *contentBase64 == "" {
		return nil, &httpapi.FieldError{Field: field, Message: "is required"}
	}
	content := *contentBase64
	if base64.StdEncoding.DecodedLen(len(content)) > MaxPDFBytes+2 { // +2: padding makes DecodedLen an upper bound
		return nil, &httpapi.FieldError{Field: field, Message: fmt.Sprintf("must decode to at most %d bytes", MaxPDFBytes)}
	}
	decoded, err := base64.StdEncoding.DecodeString(content)
	if err != nil {
		return nil, &httpapi.FieldError{Field: field, Message: "must be standard base64"}
	}
	if len(decoded) == 0 || len(decoded) > MaxPDFBytes {
		return nil, &httpapi.FieldError{Field: field, Message: fmt.Sprintf("must decode to 1 to %d bytes", MaxPDFBytes)}
	}
	return decoded, nil
}

// checkPDFFits is the rule of both versions: PDF_UPLOAD collects from the uploaded document and
// nothing else, so it needs one (a 400, not a collection that fails later); other login methods
// have no use for a document. field is where the error points, what names the member that
// carries a document in the request's version.
func checkPDFFits(loginMethod, field, what string, hasPDF bool) *httpapi.FieldError {
	switch {
	case loginMethod == company.LoginPDFUpload && !hasPDF:
		return &httpapi.FieldError{Field: field, Message: "loginMethod PDF_UPLOAD needs a " + what}
	case loginMethod != company.LoginPDFUpload && hasPDF:
		return &httpapi.FieldError{Field: field, Message: what + " is only for loginMethod PDF_UPLOAD"}
	}
	return nil
}

func hasKey[V any](m map[string]V, key string) bool {
	_, ok := m[key]
	return ok
}

// FingerprintScheme prefixes every request fingerprint, so that a stored one says how it was
// made and a later change of scheme is recognisable.
const FingerprintScheme = "hmac-sha256/v2:"

// legacyFingerprintScheme prefixes the fingerprints of the scheme before FingerprintScheme,
// which did not bind the client. Older builds stored them; a retry of such a request is
// recognised by its fingerprint in that scheme, which is computed for the comparison only and
// never stored.
const legacyFingerprintScheme = "hmac-sha256:"

// requestFingerprint is a request's idempotency fingerprint in the current scheme, and in the
// scheme before it (for requests an older build recorded).
type requestFingerprint struct {
	current, legacy string
}

// requestHash is a request's idempotency fingerprint: an HMAC-SHA256, under the server's key, of
// the client, the version and the decoded request re-encoded, so that whitespace and member
// order do not matter but every value does. It is keyed because the request's only unknown part
// may be a personal number or an e-mail address: a plain hash could be reversed by trying every
// candidate. It binds the client, so that two clients' requests for one person, or one person's
// users at two clients, never share a fingerprint. The events keep it sealed with the person's
// data (it is personal data: whoever may retry could confirm a guess with it), so it is erased
// with them.
func (h *handlers) requestHash(c *gin.Context, version httpapi.Version, canonical any) (requestFingerprint, error) {
	current, err := fingerprint(h.deps.FingerprintKey, httpapi.ClientID(c), version, canonical)
	if err != nil {
		return requestFingerprint{}, err
	}
	legacy, err := legacyFingerprint(h.deps.FingerprintKey, version, canonical)
	if err != nil {
		return requestFingerprint{}, err
	}
	return requestFingerprint{current: current, legacy: legacy}, nil
}

func fingerprint(key []byte, client string, version httpapi.Version, canonical any) (string, error) {
	body, err := json.Marshal(canonical)
	if err != nil {
		return "", fmt.Errorf("request hash: %w", err)
	}
	mac := hmac.New(sha256.New, key)
	// No client id and no version holds a NUL, so the parts cannot run into each other.
	mac.Write([]byte(client))
	mac.Write([]byte{0})
	mac.Write([]byte(version))
	mac.Write([]byte{0})
	mac.Write(body)
	return FingerprintScheme + hex.EncodeToString(mac.Sum(nil)), nil
}

// legacyFingerprint is fingerprint in the scheme before the client was bound.
func legacyFingerprint(key []byte, version httpapi.Version, canonical any) (string, error) {
	body, err := json.Marshal(canonical)
	if err != nil {
		return "", fmt.Errorf("request hash: %w", err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(version))
	mac.Write([]byte{0})
	mac.Write(body)
	return legacyFingerprintScheme + hex.EncodeToString(mac.Sum(nil)), nil
}

// writeStartError maps the service's typed errors to the contract's problems. A field error
// names an app.StartCollection member; in.paths says where the request carried the members
// whose path differs from their name.
func writeStartError(c *gin.Context, err error, in startInput) {
	var (
		unavailable    *app.CompanyUnavailableError
		invalidConsent *app.ConsentInvalidError
	)
	switch fields := domain.FieldErrors(err); {
	case len(fields) > 0:
		errs := make([]httpapi.FieldError, len(fields))
		for i, f := range fields {
			path := in.paths[f.Field]
			if path == "" {
				path = f.Field
			}
			errs[i] = httpapi.FieldError{Field: path, Message: f.Reason}
		}
		httpapi.AbortValidation(c, "The collection request is invalid.", errs...)
	case errors.Is(err, app.ErrUnknownUser):
		httpapi.AbortProblem(c, http.StatusUnprocessableEntity, CodeUnknownUser,
			"userUuid is not a user of this client, or the user was deleted; create the user with POST /users first.")
	case errors.As(err, &invalidConsent):
		p := httpapi.NewProblem(http.StatusUnprocessableEntity, CodeConsentInvalid, consentInvalidDetail(invalidConsent.Reason))
		p.Reason = string(invalidConsent.Reason)
		httpapi.WriteProblem(c, p)
	case errors.Is(err, app.ErrNoStoredConsent):
		httpapi.AbortProblem(c, http.StatusUnprocessableEntity, CodeNoStoredConsent,
			"The user has no authorized, unexpired consent for this company; create one with POST /consents.")
	case errors.Is(err, collection.ErrConsentNotSupported):
		httpapi.AbortProblem(c, http.StatusUnprocessableEntity, CodeConsentNotSupported,
			"The company reads no data under consents; leave out the "+ParamPsd2AisConsent+".")
	case errors.As(err, &unavailable):
		detail := fmt.Sprintf("Company %s is not available; check its availability and try again later.", unavailable.Company)
		if unavailable.Message != "" {
			detail += " " + unavailable.Message
		}
		httpapi.AbortProblem(c, http.StatusConflict, CodeCompanyUnavailable, detail)
	default:
		writeCommandError(c, err, "The collection request is invalid.")
	}
}

// consentInvalidDetail says what a CONSENT_INVALID reason asks of the client.
func consentInvalidDetail(reason consent.Reason) string {
	switch reason {
	case consent.ReasonExpired:
		return "The consent has expired; ask the user for a new one with POST /consents."
	case consent.ReasonRevoked:
		return "The consent was revoked; ask the user for a new one with POST /consents."
	case consent.ReasonOtherUser:
		return "The consent is another user's; use a consent of the collection's userUuid."
	case consent.ReasonOtherCompany:
		return "The consent is for another company; use a consent for this company."
	default:
		return "The consent is not authorized, or not a consent of this client; poll its status until AUTHORIZED."
	}
}

// writeCommandError maps the errors every command shares, after each handler mapped its own:
// a reused Idempotency-Key, the domain's error kinds, and anything else as a 500.
func writeCommandError(c *gin.Context, err error, invalidDetail string) {
	switch {
	case errors.Is(err, app.ErrIdempotencyKeyReused):
		httpapi.AbortProblem(c, http.StatusUnprocessableEntity, CodeIdempotencyKeyReused,
			"This Idempotency-Key was already used for a different request; use a new key for a new request.")
	case errors.Is(err, domain.ErrInvalid):
		httpapi.AbortProblem(c, http.StatusBadRequest, httpapi.CodeValidationFailed, invalidDetail)
	case errors.Is(err, domain.ErrConflict):
		httpapi.AbortProblem(c, http.StatusConflict, httpapi.CodeConflict, "The request conflicts with the current state.")
	case errors.Is(err, domain.ErrRefused):
		httpapi.AbortProblem(c, http.StatusUnprocessableEntity, httpapi.CodeRefused, "The request was refused by a rule.")
	default:
		httpapi.AbortInternal(c, err)
	}
}
