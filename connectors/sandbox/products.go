package sandbox

import (
	"bytes"
	"net/http"
	"slices"
	"time"
)

// getProduct serves GET …/sessions/{sessionId}/{product} of an authenticated session, with the
// session's access token:
//
//	insurances, group-insurances → {"insurances":[…]}
//	pensions                     → {"pensions":[…]}
//	investments                  → {"investments":[…]}
//	accounts, cards              → 403 CONSENT_REQUIRED at a company with consents: PSD2
//	                               data is read under a consent (consent.go), never a session
//	loans                        → {"loans":[…]}
//	savings                      → {"savings":[…]}
//	personal-information         → {"personalInformation":{…}|null}
//	career-statement             → application/pdf; 404 NO_CAREER_STATEMENT when there is none
//
// The partial persona's slow product answers 504 UPSTREAM_TIMEOUT after the product timeout:
// the company's own backend gave up.
func (s *Sandbox) getProduct(w http.ResponseWriter, r *http.Request) {
	ls, co, ok := s.session(w, r)
	if !ok {
		return
	}
	product := r.PathValue("product")
	now := s.now()
	s.mu.Lock()
	s.advance(ls, co, now)
	state, products, doc, who := ls.state, ls.products(co), ls.document, ls.owner
	s.mu.Unlock()
	if state != stateAuthenticated {
		writeError(w, http.StatusConflict, "NOT_AUTHENTICATED", "The session is not authenticated.")
		return
	}
	if !authorized(r, ls.accessToken) {
		writeError(w, http.StatusUnauthorized, "INVALID_TOKEN", "A valid access token is required.")
		return
	}
	if co.consents && (product == productAccounts || product == productCards) {
		writeError(w, http.StatusForbidden, "CONSENT_REQUIRED",
			"Accounts and cards are PSD2 data, read under a consent: GET /v1/accounts or /v1/card-accounts with a Consent-ID header.")
		return
	}
	if !slices.Contains(products, product) {
		writeError(w, http.StatusNotFound, "UNKNOWN_PRODUCT", "This company has no such data for the session.")
		return
	}
	if doc != nil {
		switch product {
		case productInsurances:
			writeJSON(w, http.StatusOK, map[string]any{"insurances": doc.insurances})
		default:
			writeJSON(w, http.StatusOK, map[string]any{"pensions": doc.pensions})
		}
		return
	}
	if who == nil || ls.persona.collectionFails {
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR", "Something went wrong on our side.")
		return
	}
	if who.persona.partial && product == co.slowProduct {
		t := time.NewTimer(s.opts.productTimeout)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
		writeError(w, http.StatusGatewayTimeout, "UPSTREAM_TIMEOUT", "The "+product+" service did not answer in time.")
		return
	}
	o := *who
	switch product {
	case productInsurances:
		writeJSON(w, http.StatusOK, map[string]any{"insurances": insurancesOf(o, now)})
	case productGroupInsurances:
		writeJSON(w, http.StatusOK, map[string]any{"insurances": groupInsurancesOf(o, now)})
	case productPensions:
		if co.id == "fr-demo-pension-info" {
			writeJSON(w, http.StatusOK, map[string]any{"pensions": frenchPensionsOf(o)})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"pensions": pensionsOf(o)})
	case productInvestments:
		writeJSON(w, http.StatusOK, map[string]any{"investments": investmentsOf(o)})
	case productLoans:
		writeJSON(w, http.StatusOK, map[string]any{"loans": loansOf(o)})
	case productSavings:
		writeJSON(w, http.StatusOK, map[string]any{"savings": savingsOf(o)})
	case productPersonalInformation:
		writeJSON(w, http.StatusOK, map[string]any{"personalInformation": personalInformationOf(co.id, o)})
	case productCareerStatement:
		if o.persona.data == dataNone {
			writeError(w, http.StatusNotFound, "NO_CAREER_STATEMENT", "There is no career statement for this person.")
			return
		}
		var b bytes.Buffer
		if err := writeCareerStatement(&b, o, now); err != nil {
			s.opts.logger.Error("career statement not written", "error", err)
			writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR", "Something went wrong on our side.")
			return
		}
		w.Header().Set("Content-Type", "application/pdf")
		w.Header().Set("Content-Disposition", `attachment; filename="releve-de-carriere.pdf"`)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b.Bytes())
	default:
		writeError(w, http.StatusNotFound, "UNKNOWN_PRODUCT", "This company has no such data for the session.")
	}
}
