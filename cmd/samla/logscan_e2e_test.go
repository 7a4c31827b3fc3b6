package main

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Logs hold no personal data and no secrets (issue 10): the whole process runs with its log,
// at debug level, captured (the default logger and the standard log package too), through a
// flow that touches every kind of personal data and secret Samla handles, and the log is then
// searched for each of them.

// logBuffer is a log destination shared by the process's goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// sandboxPersonalNumbers are the personas of SANDBOX.md; the test adds any the file lists that
// are not here, when the file is beside the repository.
var sandboxPersonalNumbers = []string{
	"191212121212", "199001010017", "199001010025", "199001010033", "199001010041", "199001010058",
	"199001010066", "199001010074", "199001010082", "199001010090", "199001010108", "199001010116",
	"199001010124", "199001010132", "199001010140", "199001010157", "199001010165", "199001010173",
	"199001010181", "199001010199", "199001010207", "199001010215", "198001010019",
}

// personalNumberForms are the spellings of a 12-digit personal number a log line might carry:
// the 12 digits, with the dash, and the 10-digit forms.
func personalNumberForms(pn string) []string {
	return []string{pn, pn[:8] + "-" + pn[8:], pn[2:], pn[2:8] + "-" + pn[8:], pn[2:8] + "+" + pn[8:]}
}

func TestLogScanHoldsNoPersonalDataOrSecrets(t *testing.T) {
	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// Whatever logs through the default logger or the log package lands there too. Tests of
	// this package that run in parallel wait until this one has finished.
	prevDefault, prevWriter, prevFlags := slog.Default(), log.Writer(), log.Flags()
	slog.SetDefault(logger)
	defer func() {
		slog.SetDefault(prevDefault)
		log.SetOutput(prevWriter)
		log.SetFlags(prevFlags)
	}()

	dir := t.TempDir()
	cfg := testConfig(t, dir)
	svc, err := Start(context.Background(), cfg, AllRoles(), logger)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			stop(t, svc)
		}
	}()
	c := apiClient{t: t, base: "http://" + svc.HTTPAddr(), key: testAPIKey}
	v2h := map[string]string{"Service-Version": v2}

	secrets := map[string]string{} // what must not be logged → what it is
	secret := func(what string, values ...string) {
		for _, v := range values {
			if v != "" {
				secrets[v] = what
			}
		}
	}
	secret("an API key", testAPIKey, strings.TrimPrefix(testAPIKey, "samla_sandbox_"))
	secret("the sandbox's signing provider key", SandboxSigningKey)

	// Users, and a session token used as a client would.
	const extHolder, extErased = "logscan-holder-ext-5d1e", "logscan-erased-ext-90ab"
	secret("an externalId", extHolder, extErased)
	holder, erased := c.createUser(extHolder), c.createUser(extErased)
	token, _ := c.createSession(holder)
	secret("a session token", token)
	if parts := strings.Split(token, "."); len(parts) == 3 {
		secret("a session token's claims", parts[1])
		secret("a session token's signature", parts[2])
	}
	c.session(token).expect("GET", "/users/"+holder, nil, http.StatusOK, "")
	c.session(token).expect("GET", "/users/"+holder+"/collections", nil, http.StatusOK, "")

	// Collections: the richest persona for the user, the pension with the account owner's name,
	// a 2025-01-01 one, the contact form and the requested input (e-mail and phone), an EID
	// login whose QR data the client reads, and personas that fail in different places.
	insurance := c.completed(collectionRequest{company: "se-demo-insurer", pn: "191212121212", userUUID: holder})
	c.data("/collections/"+insurance+"/insurance/data", v2)
	pension := c.completed(collectionRequest{company: "se-demo-pension", pn: "191212121212", ownerName: "Tolvan Tolvansson"})
	c.data("/collections/"+pension+"/wealth/data", v2)
	c.data("/collections/"+pension+"/wealth/data", "2025-01-01")
	// The short spelling with a dash (stored as 199001010058), through a two-factor step.
	old := c.mustStart(collectionRequest{version: "2025-01-01", company: "se-demo-insurer", pn: "900101-0058"})

	const contactEmail, contactPhone, inputEmail = "holder.contact@example.se", "46701234567", "input.holder@example.se"
	secret("an e-mail address", contactEmail, inputEmail)
	secret("a phone number", contactPhone, "0701234567")
	contact := c.mustStart(collectionRequest{company: "se-demo-insurer", pn: "199001010066"})
	c.waitStatus(contact, 10*time.Second, is("CONTACT_FORM_PENDING"))
	if code, raw := c.supplement(contact, map[string]any{"inputs": []map[string]string{
		{"type": "EMAIL", "value": contactEmail}, {"type": "MOBILE_PHONE_NUMBER", "value": contactPhone}}}); code != http.StatusAccepted {
		t.Fatalf("contact data = %d %s", code, raw)
	}
	input := c.mustStart(collectionRequest{company: "se-demo-insurer", pn: "199001010074"})
	c.waitStatus(input, 10*time.Second, is("COLLECTION_INPUT_PENDING"))
	if code, raw := c.supplement(input, map[string]any{"inputs": []map[string]string{{"type": "EMAIL", "value": inputEmail}}}); code != http.StatusAccepted {
		t.Fatalf("input = %d %s", code, raw)
	}
	// A malformed e-mail is refused; its value must not be logged either.
	const badEmail = "not-an-email-logscan"
	secret("a refused e-mail", badEmail)
	if code, raw := c.supplement(input, map[string]any{"inputs": []map[string]string{{"type": "EMAIL", "value": badEmail}}}); code < 400 {
		t.Fatalf("bad e-mail = %d %s", code, raw)
	}
	eid := c.mustStart(collectionRequest{company: "se-demo-insurer", pn: "199001010017", loginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE"})
	waiting := c.waitStatus(eid, 10*time.Second, is("WAITING_FOR_USER_ACTION"))
	c.waitFor("the QR data", func() bool {
		waiting = c.statusAs(eid, v2)
		_, ok := waiting.ExtraInformation["SWEDISH_MOBILE_EID_ANIMATED_QR_DATA"]
		return ok
	})
	secretQR := func(what, qr string) {
		// bankid.<qrStartToken>.<t>.<hmac>: the token and the HMAC; the whole string too.
		secret(what, qr)
		if parts := strings.Split(qr, "."); len(parts) == 4 {
			secret(what+"'s start token", parts[1])
			secret(what+"'s HMAC", parts[3])
		}
	}
	for k, v := range waiting.ExtraInformation {
		if s, ok := v.(string); ok {
			secretQR("a collection's "+k, s)
		}
	}
	signEID(t, c.base, `{"collectionId":"`+eid+`"}`)
	for _, id := range []string{old, contact, input, eid} {
		if final := c.waitStatus(id, 15*time.Second, finalStatus); final.Status != "COMPLETED" {
			t.Fatalf("%s ended %s", id, final.Status)
		}
	}
	c.data("/data?collectionId="+old, "2025-01-01")
	for _, pn := range []string{"199001010082", "199001010157", "199001010041"} {
		id := c.mustStart(collectionRequest{company: "se-demo-insurer", pn: pn})
		c.waitStatus(id, 15*time.Second, finalStatus)
	}
	// A request refused for its personal number: the number is not logged.
	if code, out := c.start(collectionRequest{company: "se-demo-insurer", pn: "199001010018"}); code != http.StatusBadRequest {
		t.Fatalf("a bad personal number = %d %v", code, out)
	}
	secret("a refused personal number", "199001010018", "9001010018")

	// A consent signed in the EID app: its QR data and autostart token are secrets.
	consentID := c.createConsent(consentRequest(holder, "se-demo-bank", consentLogin, "191212121212"))
	pending := c.waitConsentStatus(consentID, 10*time.Second, func(st consentStatusBody) bool { return st.AuthInstructions["qrData"] != "" })
	secretQR("a consent's QR data", pending.AuthInstructions["qrData"])
	secret("a consent's autostart token", pending.AuthInstructions["autoStartToken"])
	c.signConsent(consentID)
	if st := c.waitConsentStatus(consentID, 10*time.Second, consentSettled); st.Status != "AUTHORIZED" {
		t.Fatalf("consent ended %+v", st)
	}

	// Cancellations by e-mail and by SMS.
	const cancelEmail, cancelPhone = "tolvan.cancels@example.se", "46709876543"
	secret("an e-mail address", cancelEmail)
	secret("a phone number", cancelPhone)
	docs := c.cancel(map[string]any{"collectionId": insurance, "insuranceIds": []string{"sdi-home-121212"}, "deliveryMethod": "EMAIL", "email": cancelEmail})
	for k, v := range c.cancel(map[string]any{"collectionId": insurance, "insuranceIds": []string{"sdi-car-121212"}, "deliveryMethod": "SMS", "phoneNumber": cancelPhone}) {
		docs[k] = v
	}
	for _, doc := range docs {
		c.waitCancellation(doc, 10*time.Second, cancellationIs("PENDING"))
	}
	// The holder signs one (the sealed PDF is fetched and recorded); the client withdraws the
	// other.
	holderActs(t, c.base, docs["sdi-home-121212"], "sign")
	c.waitCancellation(docs["sdi-home-121212"], 10*time.Second, sealed)
	if code, body, _ := c.do("GET", "/cancellations/"+docs["sdi-home-121212"]+"/pdf", nil, nil); code != http.StatusOK {
		t.Fatalf("the signed PDF = %d %s", code, body)
	}
	if code, body, _ := c.do("DELETE", "/cancellations/"+docs["sdi-car-121212"], nil, nil); code != http.StatusOK {
		t.Fatalf("withdraw = %d %s", code, body)
	}
	c.waitCancellation(docs["sdi-car-121212"], 10*time.Second, cancellationIs("CANCELED"))

	// An erasure.
	if code, body, _ := c.do("DELETE", "/users/"+erased, nil, v2h); code != http.StatusNoContent {
		t.Fatalf("DELETE user = %d %s", code, body)
	}

	// The secrets of the data dir.
	for _, name := range []string{FingerprintKeyFile, "bootstrap-api-key"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil && len(bytes.TrimSpace(b)) >= 16 {
			secret("the data dir's "+name, string(bytes.TrimSpace(b)))
		}
	}

	stop(t, svc) // every role has logged what it will
	stopped = true

	// Every persona of SANDBOX.md, in every spelling; the holder's names.
	pns := append([]string(nil), sandboxPersonalNumbers...)
	if b, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "SANDBOX.md")); err == nil {
		pns = append(pns, regexp.MustCompile(`\b(?:19|20)\d{10}\b`).FindAllString(string(b), -1)...)
	}
	for _, pn := range pns {
		for _, form := range personalNumberForms(pn) {
			secret("a personal number", form)
		}
	}

	text := logs.String()
	if !strings.Contains(text, "http request") || strings.Count(text, "\n") < 50 {
		t.Fatalf("the log was not captured: %d bytes", len(text))
	}
	// The control: the log names what happened by Samla's own ids, so a value that is
	// there is found.
	for _, id := range []string{insurance, consentID, docs["sdi-home-121212"]} {
		if !strings.Contains(text, id) {
			t.Errorf("the log does not name %s: the scan would not see what it looks for", id)
		}
	}
	lower := strings.ToLower(text)
	for _, name := range []string{"tolvan", "tølvan", "tolvansson", "elin "} {
		if i := strings.Index(lower, name); i >= 0 {
			t.Errorf("the log holds a name (%q): %s", name, lineAt(text, i))
		}
	}
	for v, what := range secrets {
		if i := strings.Index(text, v); i >= 0 {
			t.Errorf("the log holds %s (%q): %s", what, v, lineAt(text, i))
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("%d log lines, %d bytes, %d values searched", strings.Count(text, "\n"), len(text), len(secrets))
	}
}

// signEID is the sandbox's user scanning the QR code and signing.
func signEID(t *testing.T, base, body string) {
	t.Helper()
	res, err := http.Post(base+"/sandbox/eid/sign", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("sign %s: %d %s", body, res.StatusCode, b)
	}
}

// lineAt is the log line around byte i, for the failure message.
func lineAt(text string, i int) string {
	start := strings.LastIndexByte(text[:i], '\n') + 1
	end := strings.IndexByte(text[i:], '\n')
	if end < 0 {
		end = len(text) - i
	}
	line := text[start : i+end]
	if len(line) > 600 {
		line = line[:600] + "…"
	}
	return line
}
