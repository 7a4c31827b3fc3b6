package eid_test

import (
	"testing"
	"time"

	"github.com/samla/samla/domain/eid"
)

// The vectors were computed outside Go, with
// printf "$t" | openssl dgst -sha256 -hmac "d28db9a7-4cde-429e-a983-359be676944c";
// t = 0 is also the example of the EID provider's relying-party documentation.
func TestQRDataKnownVectors(t *testing.T) {
	const token, secret = "67df3917-fa0d-44e5-b327-edcc928297f8", "d28db9a7-4cde-429e-a983-359be676944c"
	start := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		after time.Duration
		want  string
	}{
		{0, "bankid." + token + ".0.dc69358e712458a66a7525beef148ae8526b1c71610eff2c16cdffb4cdac9bf8"},
		{999 * time.Millisecond, "bankid." + token + ".0.dc69358e712458a66a7525beef148ae8526b1c71610eff2c16cdffb4cdac9bf8"},
		{1500 * time.Millisecond, "bankid." + token + ".1.949d559bf23403952a94d103e67743126381eda00f0b3cbddbf7c96b1adcbce2"},
		{10 * time.Second, "bankid." + token + ".10.2822ca616ce1e64a1c171df69154ebc5adef4011244c867d6ad88a02db178962"},
		{-3 * time.Second, "bankid." + token + ".0.dc69358e712458a66a7525beef148ae8526b1c71610eff2c16cdffb4cdac9bf8"},
	}
	for _, tc := range cases {
		if got := eid.QRData(token, secret, start, start.Add(tc.after)); got != tc.want {
			t.Errorf("after %v: %s, want %s", tc.after, got, tc.want)
		}
	}
}

func TestQRDataChangesEverySecond(t *testing.T) {
	start := time.Now()
	a := eid.QRData("tok", "sec", start, start.Add(2*time.Second))
	b := eid.QRData("tok", "sec", start, start.Add(3*time.Second))
	if a == b {
		t.Fatal("the QR data must change every second")
	}
}
