package signing_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/samla/samla/connectors/signing"
	"github.com/samla/samla/connectors/worker"
)

func signed(apiKey string, t int64, body string) string {
	m := hmac.New(sha256.New, []byte(apiKey))
	m.Write([]byte(strconv.FormatInt(t, 10) + "." + body))
	return hex.EncodeToString(m.Sum(nil))
}

func TestVerifyCallbackHeaderForms(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ts := now.Unix() - 30
	body := `{"eventId":"e-1","processId":"p-1","reference":"doc-1","state":"SIGNED","sealed":true,"at":"2027-01-15T08:00:00Z"}`
	good := signed(key, ts, body)
	tsStr := strconv.FormatInt(ts, 10)
	cases := []struct {
		name   string
		header []string
		body   string
		apiKey string
		want   error
	}{
		{"valid", []string{"t=" + tsStr + ",v1=" + good}, body, key, nil},
		{"valid among rotated signatures", []string{"t=" + tsStr + ",v1=" + signed("old", ts, body) + ",v1=" + good + ",v0=x"}, body, key, nil},
		{"no header", nil, body, key, signing.ErrCallbackSignatureMissing},
		{"two headers", []string{"t=" + tsStr + ",v1=" + good, "t=1,v1=" + good}, body, key, signing.ErrCallbackSignatureMissing},
		{"no timestamp", []string{"v1=" + good}, body, key, signing.ErrCallbackSignatureMissing},
		{"no signature", []string{"t=" + tsStr}, body, key, signing.ErrCallbackSignatureMissing},
		{"a timestamp twice", []string{"t=" + tsStr + ",t=" + tsStr + ",v1=" + good}, body, key, signing.ErrCallbackSignatureMissing},
		{"a signature not in hex", []string{"t=" + tsStr + ",v1=zz"}, body, key, signing.ErrCallbackSignatureMissing},
		{"a short signature", []string{"t=" + tsStr + ",v1=" + good[:32]}, body, key, signing.ErrCallbackSignatureMissing},
		{"a timestamp not a number", []string{"t=yesterday,v1=" + good}, body, key, signing.ErrCallbackSignatureMissing},
		{"a changed timestamp", []string{"t=" + strconv.FormatInt(ts+1, 10) + ",v1=" + good}, body, key, signing.ErrCallbackSignatureInvalid},
		{"an empty key", []string{"t=" + tsStr + ",v1=" + signed("", ts, body)}, body, "", signing.ErrCallbackSignatureInvalid},
		{"from the future", []string{"t=" + strconv.FormatInt(now.Unix()+600, 10) + ",v1=" + signed(key, now.Unix()+600, body)}, body, key, signing.ErrCallbackStale},
		{"an unknown state", []string{"t=" + tsStr + ",v1=" + signed(key, ts, strings.Replace(body, "SIGNED", "DONE", 1))},
			strings.Replace(body, "SIGNED", "DONE", 1), key, signing.ErrCallbackMalformed},
		{"not JSON", []string{"t=" + tsStr + ",v1=" + signed(key, ts, "ok")}, "ok", key, signing.ErrCallbackMalformed},
		{"no event id", []string{"t=" + tsStr + ",v1=" + signed(key, ts, `{"processId":"p","state":"SIGNED","at":"2027-01-15T08:00:00Z"}`)},
			`{"processId":"p","state":"SIGNED","at":"2027-01-15T08:00:00Z"}`, key, signing.ErrCallbackMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range c.header {
				h.Add(signing.SignatureHeader, v)
			}
			cb, err := signing.VerifyCallback(c.apiKey, h, []byte(c.body), now, time.Minute)
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				want := signing.Callback{EventID: "e-1", ProcessID: "p-1", Reference: "doc-1", State: worker.SigningSigned, Sealed: true,
					At: time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)}
				if cb != want {
					t.Fatalf("%+v", cb)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

func TestVerifyCallbackDefaultTolerance(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body := `{"eventId":"e","processId":"p","reference":"r","state":"EXPIRED","sealed":false,"at":"2027-01-15T08:00:00Z"}`
	for _, c := range []struct {
		age  time.Duration
		want error
	}{{4 * time.Minute, nil}, {6 * time.Minute, signing.ErrCallbackStale}} {
		ts := now.Add(-c.age).Unix()
		h := http.Header{signing.SignatureHeader: {"t=" + strconv.FormatInt(ts, 10) + ",v1=" + signed(key, ts, body)}}
		if _, err := signing.VerifyCallback(key, h, []byte(body), now, 0); !errors.Is(err, c.want) {
			t.Errorf("%v old: got %v, want %v", c.age, err, c.want)
		}
	}
}
