package eidsim

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/samla/samla/domain/eid"
)

// Handler serves the simulator under prefix (e.g. "/sandbox/eid"):
//
// The relying-party API, shaped like the real provider's (errors are 400/404 with
// {"errorCode","details"}):
//
//	POST {prefix}/rp/v6.0/auth     {"endUserIp","requirement"?:{"personalNumber"},"reference"?}
//	                               → {"orderRef","autoStartToken","qrStartToken","qrStartSecret"}
//	POST {prefix}/rp/v6.0/collect  {"orderRef"} → {"orderRef","status","hintCode"?,"completionData"?}
//	POST {prefix}/rp/v6.0/cancel   {"orderRef"} → {}
//
// The simulated user, for testers (errors {"code","message"}):
//
//	POST {prefix}/sign    {"collectionId"|"consentId"|"reference"} → 200 collect result;
//	                      404 NO_PENDING_ORDER, 409 USER_WILL_NOT_SIGN
//	POST {prefix}/cancel  the same body; the user cancels in the app
func (s *Simulator) Handler(prefix string, now func() time.Time) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+prefix+"/rp/v6.0/auth", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			EndUserIP   string `json:"endUserIp"`
			Requirement *struct {
				PersonalNumber string `json:"personalNumber"`
			} `json:"requirement"`
			Reference string `json:"reference"`
		}
		if err := decode(r, &req); err != nil || req.EndUserIP == "" {
			rpError(w, http.StatusBadRequest, "invalidParameters", "endUserIp is required")
			return
		}
		ar := AuthRequest{Reference: req.Reference}
		if req.Requirement != nil {
			ar.PersonalNumber = req.Requirement.PersonalNumber
		}
		o, err := s.Auth(ar, now())
		if errors.Is(err, ErrAlreadyInProgress) {
			rpError(w, http.StatusBadRequest, eid.ErrorAlreadyInProgress, "An order for this user is already in progress.")
			return
		}
		if err != nil {
			rpError(w, http.StatusInternalServerError, "internalError", "")
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"orderRef": o.OrderRef, "autoStartToken": o.AutoStartToken,
			"qrStartToken": o.QRStartToken, "qrStartSecret": o.QRStartSecret})
	})
	mux.HandleFunc("POST "+prefix+"/rp/v6.0/collect", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			OrderRef string `json:"orderRef"`
		}
		if err := decode(r, &req); err != nil || req.OrderRef == "" {
			rpError(w, http.StatusBadRequest, "invalidParameters", "orderRef is required")
			return
		}
		res, err := s.Collect(req.OrderRef, now())
		if err != nil {
			rpError(w, http.StatusBadRequest, "invalidParameters", "No such order")
			return
		}
		writeJSON(w, http.StatusOK, res)
	})
	mux.HandleFunc("POST "+prefix+"/rp/v6.0/cancel", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			OrderRef string `json:"orderRef"`
		}
		if err := decode(r, &req); err != nil || req.OrderRef == "" {
			rpError(w, http.StatusBadRequest, "invalidParameters", "orderRef is required")
			return
		}
		if err := s.Cancel(req.OrderRef, now()); err != nil {
			rpError(w, http.StatusBadRequest, "invalidParameters", "No such order")
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	})
	userAct := func(act func(string, time.Time) (CollectResult, error)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				CollectionID string `json:"collectionId"`
				ConsentID    string `json:"consentId"`
				Reference    string `json:"reference"`
			}
			if err := decode(r, &req); err != nil {
				userError(w, http.StatusBadRequest, "INVALID_REQUEST", "The body must be {\"collectionId\"} or {\"consentId\"}.")
				return
			}
			ref := firstNonEmpty(req.CollectionID, req.ConsentID, req.Reference)
			if ref == "" {
				userError(w, http.StatusBadRequest, "INVALID_REQUEST", "collectionId or consentId is required.")
				return
			}
			res, err := act(ref, now())
			switch {
			case errors.Is(err, ErrNoPendingOrder):
				userError(w, http.StatusNotFound, "NO_PENDING_ORDER", "No EID order is waiting for that id.")
			case errors.Is(err, ErrUserWillNotSign):
				userError(w, http.StatusConflict, "USER_WILL_NOT_SIGN", "This persona never signs; the order will expire.")
			case err != nil:
				userError(w, http.StatusInternalServerError, "INTERNAL_ERROR", "")
			default:
				writeJSON(w, http.StatusOK, res)
			}
		}
	}
	mux.HandleFunc("POST "+prefix+"/sign", userAct(s.SignByReference))
	mux.HandleFunc("POST "+prefix+"/cancel", userAct(s.CancelByReference))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		userError(w, http.StatusNotFound, "NOT_FOUND", "No such resource.")
	})
	return mux
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func decode(r *http.Request, v any) error {
	return json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(v)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func rpError(w http.ResponseWriter, code int, errorCode, details string) {
	writeJSON(w, code, map[string]string{"errorCode": errorCode, "details": details})
}

func userError(w http.ResponseWriter, code int, errCode, message string) {
	writeJSON(w, code, map[string]string{"code": errCode, "message": message})
}
