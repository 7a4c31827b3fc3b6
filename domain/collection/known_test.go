package collection_test

import (
	"encoding/json"
	"testing"

	"github.com/samla/samla/domain/collection"
)

func knownStr(s string) *string { return &s }

func TestKnownString(t *testing.T) {
	if collection.Known(nil) != nil {
		t.Error("nil is known")
	}
	if collection.Known(knownStr("")) != nil {
		t.Error(`"" is known`)
	}
	v := knownStr("x")
	if collection.Known(v) != v {
		t.Error(`"x" is not known as itself`)
	}
}

// TestKnownPersonalInformation: an empty string is unknown like nil, an address that knows
// nothing is absent, personal information that knows nothing is nil, and p is not changed.
func TestKnownPersonalInformation(t *testing.T) {
	tests := []struct {
		name string
		in   *collection.PersonalInformation
		want string // JSON of in.Known()
	}{
		{"nil", nil, `null`},
		{"empty", &collection.PersonalInformation{}, `null`},
		{"empty strings and an empty address", &collection.PersonalInformation{Name: knownStr(""), Email: knownStr(""),
			Address: &collection.Address{}}, `null`},
		{"an address of empty strings", &collection.PersonalInformation{Address: &collection.Address{City: knownStr(""),
			Country: knownStr("")}}, `null`},
		{"known values beside unknown ones", &collection.PersonalInformation{PersonalNumber: knownStr("191212121212"),
			Name: knownStr(""), PhoneNumber: knownStr("+46701234567"),
			Address: &collection.Address{Street: knownStr(""), City: knownStr("Stockholm")}},
			`{"personalNumber":"191212121212","address":{"city":"Stockholm"},"phoneNumber":"+46701234567"}`},
		{"everything known", &collection.PersonalInformation{PersonalNumber: knownStr("191212121212"), Name: knownStr("Tolvan"),
			FirstName: knownStr("Tolvan"), LastName: knownStr("Tolvansson"), Email: knownStr("t@example.se"),
			PhoneNumber: knownStr("+46701234567"), Address: &collection.Address{Street: knownStr("Gatan 1"),
				PostalCode: knownStr("11122"), City: knownStr("Stockholm"), Country: knownStr("SE")}},
			`{"personalNumber":"191212121212","name":"Tolvan","firstName":"Tolvan","lastName":"Tolvansson",` +
				`"address":{"street":"Gatan 1","postalCode":"11122","city":"Stockholm","country":"SE"},` +
				`"email":"t@example.se","phoneNumber":"+46701234567"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := knownJSON(t, tc.in)
			if got := knownJSON(t, tc.in.Known()); got != tc.want {
				t.Errorf("Known() = %s, want %s", got, tc.want)
			}
			if after := knownJSON(t, tc.in); after != before {
				t.Errorf("Known changed its receiver: %s, was %s", after, before)
			}
		})
	}
}

func knownJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
