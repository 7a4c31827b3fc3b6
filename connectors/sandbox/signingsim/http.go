package signingsim

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// maxStartBody bounds the body of a start request: the base64 of the largest document plus
// room for the other fields.
var maxStartBody = int64(base64.StdEncoding.EncodedLen(MaxDocumentSize) + 64<<10)

// Handler serves the provider under prefix (e.g. "/sandbox/signing"). Bodies are JSON; errors
// are {"code","message"}.
//
// The provider's API, for clients (header Authorization: Bearer <provider API key>):
//
//	POST {prefix}/api/v1/processes    {"reference","title","documentBase64","delivery":{"method":
//	                                  "EMAIL"|"SMS","email"?,"phoneNumber"?},"signer":{"name"?,
//	                                  "personalNumber"?},"expiresAt"?,"callbackUrl"?}
//	                                  → 201 process; 200 and the same process for a repeated
//	                                  (key, reference); 400 INVALID_REQUEST, 401 UNAUTHORIZED,
//	                                  413 DOCUMENT_TOO_LARGE, 422 DOCUMENT_REFUSED,
//	                                  503 CAPACITY_EXCEEDED (Retry-After)
//	GET  {prefix}/api/v1/processes/{processId}           → process; 404 PROCESS_NOT_FOUND
//	GET  {prefix}/api/v1/processes/{processId}/document  → the sealed application/pdf;
//	                                                       409 NOT_SEALED before
//	POST {prefix}/api/v1/processes/{processId}/cancel    → process (CANCELED, or unchanged when
//	                                                       already final)
//
// A process is {"processId","reference","state","sentAt","signedAt"?,"expiresAt"?,"sealed",
// "signatureMethod"?,"error"?{"code","message"}}, state PENDING | SIGNED | REJECTED | CANCELED
// | EXPIRED | FAILED.
//
// The simulated holder, for testers (no auth):
//
//	POST {prefix}/{reference}/sign    → 200 process (SIGNED; sealed after the seal delay)
//	POST {prefix}/{reference}/reject  → 200 process (REJECTED)
//	                                    404 PROCESS_NOT_FOUND, 409 NOT_PENDING
func (p *Provider) Handler(prefix string) http.Handler {
	prefix = strings.TrimRight(prefix, "/")
	api := prefix + "/api/v1/processes"
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+api, p.handleStart)
	mux.HandleFunc("GET "+api+"/{processId}", func(w http.ResponseWriter, r *http.Request) {
		pr, err := p.Get(bearer(r), r.PathValue("processId"))
		respond(w, http.StatusOK, pr, err)
	})
	mux.HandleFunc("GET "+api+"/{processId}/document", func(w http.ResponseWriter, r *http.Request) {
		doc, err := p.Document(bearer(r), r.PathValue("processId"))
		if err != nil {
			respond(w, 0, nil, err)
			return
		}
		w.Header().Set("Content-Type", "application/pdf")
		w.Header().Set("Content-Disposition", `attachment; filename="signed.pdf"`)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(doc)
	})
	mux.HandleFunc("POST "+api+"/{processId}/cancel", func(w http.ResponseWriter, r *http.Request) {
		pr, err := p.Cancel(bearer(r), r.PathValue("processId"))
		respond(w, http.StatusOK, pr, err)
	})
	mux.HandleFunc("POST "+prefix+"/{reference}/sign", func(w http.ResponseWriter, r *http.Request) {
		pr, err := p.Sign(r.PathValue("reference"))
		respond(w, http.StatusOK, pr, err)
	})
	mux.HandleFunc("POST "+prefix+"/{reference}/reject", func(w http.ResponseWriter, r *http.Request) {
		pr, err := p.Reject(r.PathValue("reference"))
		respond(w, http.StatusOK, pr, err)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "No such resource.")
	})
	return mux
}

// OutboxHandler serves the messages sent, wherever it is mounted (the sandbox: /sandbox/outbox):
//
//	GET ?reference=&to=  → {"messages":[{"id","channel":"EMAIL"|"SMS","to","subject"?,"body",
//	                        "reference","sentAt"}]}, oldest first
func (p *Provider) OutboxHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "Only GET.")
			return
		}
		q := r.URL.Query()
		writeJSON(w, http.StatusOK, map[string][]Message{"messages": p.Outbox(q.Get("reference"), q.Get("to"))})
	})
}

func (p *Provider) handleStart(w http.ResponseWriter, r *http.Request) {
	key := bearer(r)
	// The key is checked before the body is read: an unknown caller does not get to upload.
	if !Authorized(key) {
		respond(w, 0, nil, ErrUnauthorized)
		return
	}
	var req StartRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxStartBody))
	if err := dec.Decode(&req); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			respond(w, 0, nil, ErrDocumentTooLarge)
			return
		}
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "The body is not a JSON process request.")
		return
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", "The body has data after the JSON object.")
		return
	}
	pr, created, err := p.Start(key, req)
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	respond(w, code, pr, err)
}

// bearer is the key of "Authorization: Bearer <key>" ("" when absent or of another scheme).
func bearer(r *http.Request) string {
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(key)
}

func respond(w http.ResponseWriter, code int, v any, err error) {
	var inv *InvalidError
	switch {
	case err == nil:
		writeJSON(w, code, v)
	case errors.As(err, &inv):
		writeError(w, http.StatusBadRequest, "INVALID_REQUEST", inv.Error())
	case errors.Is(err, ErrUnauthorized):
		w.Header().Set("WWW-Authenticate", `Bearer realm="signing"`)
		writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "A valid API key is required (Authorization: Bearer <key>).")
	case errors.Is(err, ErrDocumentTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, "DOCUMENT_TOO_LARGE", "The document is larger than 10 MiB.")
	case errors.Is(err, ErrDocumentRefused):
		writeError(w, http.StatusUnprocessableEntity, "DOCUMENT_REFUSED", "The document is not a PDF the provider accepts.")
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, "PROCESS_NOT_FOUND", "No such signing process.")
	case errors.Is(err, ErrNotSealed):
		writeError(w, http.StatusConflict, "NOT_SEALED", "The signed document is not sealed yet.")
	case errors.Is(err, ErrNotPending):
		writeError(w, http.StatusConflict, "NOT_PENDING", "The signing process is not waiting for a signature.")
	case errors.Is(err, ErrCapacity):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "CAPACITY_EXCEEDED", "The provider stores no more documents now.")
	case errors.Is(err, ErrClosed):
		writeError(w, http.StatusServiceUnavailable, "SHUTTING_DOWN", "The provider is shutting down.")
	default:
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR", "")
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, errCode, message string) {
	writeJSON(w, code, map[string]string{"code": errCode, "message": message})
}
