package presenter

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/query"
)

const (
	qrToken  = "67df3917-fa0d-44e5-b327-edcc928297f8"
	qrSecret = "d28db9a7-4cde-429e-a983-359be676944c"
)

var orderStart = time.Date(2026, 11, 22, 10, 0, 0, 250_000_000, time.UTC)

func waitingView() query.StatusView {
	return query.StatusView{CollectionID: "c1", Status: "WAITING_FOR_USER_ACTION", LoginMethod: "SWEDISH_MOBILE_EID_OTHER_DEVICE",
		Message: "Open the EID app", QRStartSecret: qrSecret,
		EIDOrder: &query.EIDOrderView{QRStartToken: qrToken, AutoStartToken: "auto-1", StartedAt: orderStart}}
}

// wantQR is the algorithm of SANDBOX.md written out independently of domain/eid.
func wantQR(t int64) string {
	mac := hmac.New(sha256.New, []byte(qrSecret))
	fmt.Fprintf(mac, "%d", t)
	return "bankid." + qrToken + "." + fmt.Sprint(t) + "." + hex.EncodeToString(mac.Sum(nil))
}

func TestAnimatedQRDataChangesEverySecond(t *testing.T) {
	v := waitingView()
	poll1 := ExtraInformation(v, orderStart.Add(4*time.Second+100*time.Millisecond))
	poll2 := ExtraInformation(v, orderStart.Add(5*time.Second+100*time.Millisecond))
	if poll1[ExtraAnimatedQRData] != wantQR(4) || poll2[ExtraAnimatedQRData] != wantQR(5) {
		t.Fatalf("QR data = %v then %v, want %s then %s", poll1[ExtraAnimatedQRData], poll2[ExtraAnimatedQRData], wantQR(4), wantQR(5))
	}
	if poll1[ExtraAnimatedQRData] == poll2[ExtraAnimatedQRData] {
		t.Fatal("the QR data did not change between polls a second apart")
	}
	// The published vector for t = 0 (see domain/eid).
	if got := ExtraInformation(v, orderStart)[ExtraAnimatedQRData]; got != "bankid."+qrToken+".0.dc69358e712458a66a7525beef148ae8526b1c71610eff2c16cdffb4cdac9bf8" {
		t.Fatalf("t=0: %v", got)
	}
	if poll1[ExtraAutoStartToken] != "auto-1" || poll1[ExtraMessage] != "Open the EID app" {
		t.Fatalf("extra = %v", poll1)
	}
	raw, _ := json.Marshal(poll1)
	if strings.Contains(string(raw), qrSecret) {
		t.Fatal("the QR secret is in the extra information")
	}
}

func TestExtraInformationDetails(t *testing.T) {
	body := `{"a":1}`
	v := query.StatusView{Status: "CONTACT_FORM_PENDING", RequiredInputTypes: []string{"EMAIL", "MOBILE_PHONE_NUMBER"},
		Instructions: []query.InstructionView{
			{RequestID: "r1", Method: "POST", URL: "https://company.example/a", Headers: map[string]string{"X": "y"}, Body: &body},
			{RequestID: "r2", Method: "GET", URL: "https://company.example/b"},
		},
		ExtraInformation: map[string]any{"MESSAGE": "from the connector", "OTHER": 1.0}}
	got := ExtraInformation(v, orderStart)
	raw, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"INSTRUCTIONS":[{"requestId":"r1","method":"POST","url":"https://company.example/a","headers":{"X":"y"},"body":"{\"a\":1}"},` +
		`{"requestId":"r2","method":"GET","url":"https://company.example/b","headers":{}}],` +
		`"MESSAGE":"from the connector","OTHER":1,"REQUIRED_INPUT_TYPES":["EMAIL","MOBILE_PHONE_NUMBER"]}`
	if string(raw) != want {
		t.Fatalf("got  %s\nwant %s", raw, want)
	}
	if v.ExtraInformation["REQUIRED_INPUT_TYPES"] != nil {
		t.Fatal("the view's map was modified")
	}
	// The status's own message wins over the free-form one.
	v.Message = "typed"
	if got := ExtraInformation(v, orderStart)[ExtraMessage]; got != "typed" {
		t.Fatalf("MESSAGE = %v", got)
	}
	// Nothing to say is an empty object, never null.
	if got := ExtraInformation(query.StatusView{Status: "COLLECTING"}, orderStart); got == nil || len(got) != 0 {
		t.Fatalf("no details = %#v", got)
	}
}

func TestFinalStatusAsksNothing(t *testing.T) {
	v := waitingView()
	v.Status = "AUTHENTICATION_TIMEOUT"
	v.RequiredInputTypes = []string{"EMAIL"}
	v.Instructions = []query.InstructionView{{RequestID: "r1", Method: "GET", URL: "https://x"}}
	v.ExtraInformation = map[string]any{ExtraAnimatedQRData: "bankid.stale", ExtraAutoStartToken: "stale"}
	v.Message = "The user did not act before the deadline."
	got := ExtraInformation(v, orderStart.Add(time.Second))
	if !reflect.DeepEqual(got, map[string]any{ExtraMessage: v.Message}) {
		t.Fatalf("final status extra = %v", got)
	}
}

func TestNoQRWithoutSecretOrToken(t *testing.T) {
	v := waitingView()
	v.QRStartSecret = ""
	if got := ExtraInformation(v, orderStart); got[ExtraAnimatedQRData] != nil || got[ExtraAutoStartToken] != "auto-1" {
		t.Fatalf("without a secret: %v", got)
	}
	v = waitingView()
	v.EIDOrder.QRStartToken = ""
	if got := ExtraInformation(v, orderStart); got[ExtraAnimatedQRData] != nil {
		t.Fatalf("without a QR token: %v", got)
	}
}
