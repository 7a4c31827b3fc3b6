package presenter

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/query"
)

func dataStr(s string) *string            { return &s }
func dataNum(f float64) *float64          { return &f }
func dataBool(b bool) *bool               { return &b }
func dataSEK(a float64) *collection.Money { return &collection.Money{Amount: a, Currency: "SEK"} }

// wealthView has one of every wealth product, with some data points unknown and some known to
// be zero or false.
func wealthView() query.DataView {
	return query.DataView{
		CollectionID: "c1", Tenant: "acme", Company: "se-demo-pension", Product: "WEALTH", Status: "COMPLETED",
		Pensions: []query.PensionView{
			{Pension: collection.Pension{ID: "P1", Name: dataStr("ITP1"), Value: dataSEK(512345.5),
				OtherInsuredPerson: dataBool(false)}, InsuredPersonName: dataStr("Tolvan Tolvansson")},
			{Pension: collection.Pension{ID: "P2"}},
		},
		Investments: []collection.Investment{{ID: "I1", Value: dataSEK(0),
			Holdings: []collection.Holding{{Name: "Global", Quantity: dataNum(12.5)}}}},
		Loans:            []collection.Loan{{ID: "L1", InterestRate: dataNum(0)}},
		Savings:          []collection.Saving{{ID: "S1", Balance: dataSEK(25000)}},
		CheckingAccounts: []collection.PSD2Account{{ID: "A1", IBAN: dataStr("SE45")}},
		CreditCards:      []collection.PSD2CreditCard{{ID: "C1", MaskedPAN: dataStr("**** 1234")}},
		PersonalInformation: &collection.PersonalInformation{PersonalNumber: dataStr("191212121212"),
			Name: dataStr("Tolvan Tolvansson"), Address: &collection.Address{City: dataStr("Stockholm")}},
	}
}

func dataJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return string(b)
}

func TestWealthDataPerVersion(t *testing.T) {
	const pensions = `"pensions":[{"id":"P1","name":"ITP1","value":{"amount":512345.5,"currency":"SEK"},` +
		`"otherInsuredPerson":false,"insuredPersonName":"Tolvan Tolvansson"},{"id":"P2"}],` +
		`"investments":[{"id":"I1","value":{"amount":0,"currency":"SEK"},"holdings":[{"name":"Global","quantity":12.5}]}]`
	noPersonal := wealthView()
	noPersonal.PersonalInformation = nil
	empty := query.DataView{CollectionID: "c2", Company: "se-demo-bank", Product: "WEALTH", Status: "COMPLETED_EMPTY"}
	tests := []struct {
		name    string
		version httpapi.Version
		view    query.DataView
		want    string
	}{
		{"stable: map, pensions and investments only", httpapi.V20250101, wealthView(),
			`{"collectionId":"c1","company":"se-demo-pension","personalInformation":{"ADDRESS_CITY":"Stockholm",` +
				`"NAME":"Tolvan Tolvansson","PERSONAL_NUMBER":"191212121212"},` + pensions + `}`},
		{"preview: typed object and every product", httpapi.V20260401, wealthView(),
			`{"collectionId":"c1","company":"se-demo-pension","personalInformation":{"personalNumber":"191212121212",` +
				`"name":"Tolvan Tolvansson","address":{"city":"Stockholm"}},` + pensions +
				`,"loans":[{"id":"L1","interestRate":0}],"savings":[{"id":"S1","balance":{"amount":25000,"currency":"SEK"}}],` +
				`"psd2CheckingAccounts":[{"id":"A1","iban":"SE45"}],"psd2SavingsAccounts":[],` +
				`"psd2CreditCards":[{"id":"C1","maskedPan":"**** 1234"}]}`},
		{"stable without personal information: empty map", httpapi.V20250101, noPersonal,
			`{"collectionId":"c1","company":"se-demo-pension","personalInformation":{},` + pensions + `}`},
		{"preview without personal information: null", httpapi.V20260401, noPersonal,
			`{"collectionId":"c1","company":"se-demo-pension","personalInformation":null,` + pensions +
				`,"loans":[{"id":"L1","interestRate":0}],"savings":[{"id":"S1","balance":{"amount":25000,"currency":"SEK"}}],` +
				`"psd2CheckingAccounts":[{"id":"A1","iban":"SE45"}],"psd2SavingsAccounts":[],` +
				`"psd2CreditCards":[{"id":"C1","maskedPan":"**** 1234"}]}`},
		{"stable with nothing collected: empty lists", httpapi.V20250101, empty,
			`{"collectionId":"c2","company":"se-demo-bank","personalInformation":{},"pensions":[],"investments":[]}`},
		{"preview with nothing collected: empty lists", httpapi.V20260401, empty,
			`{"collectionId":"c2","company":"se-demo-bank","personalInformation":null,"pensions":[],"investments":[],` +
				`"loans":[],"savings":[],"psd2CheckingAccounts":[],"psd2SavingsAccounts":[],"psd2CreditCards":[]}`},
		{"an older version than the stable one is presented as it", "2024-06-01", empty,
			`{"collectionId":"c2","company":"se-demo-bank","personalInformation":{},"pensions":[],"investments":[]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := dataJSON(t, WealthData(tc.version, tc.view)); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestUnreadPSD2ProductsAreAbsent: on 2026-04-01 a PSD2 list the collection did not read (no
// consent, outside its scope) is absent, one read and found empty is [], and data that did not
// record what was read (from before) shows every list as before; 2025-01-01 has none of them.
func TestUnreadPSD2ProductsAreAbsent(t *testing.T) {
	const lists = `"loans":[{"id":"L1","interestRate":0}],"savings":[{"id":"S1","balance":{"amount":25000,"currency":"SEK"}}]`
	for _, tc := range []struct {
		name string
		read []consent.Scope
		want string
	}{
		{"not recorded: every list", nil,
			`"psd2CheckingAccounts":[{"id":"A1","iban":"SE45"}],"psd2SavingsAccounts":[],"psd2CreditCards":[{"id":"C1","maskedPan":"**** 1234"}]`},
		{"none read: none shown", []consent.Scope{}, ``},
		{"checking accounts only", []consent.Scope{consent.ScopeCheckingAccounts},
			`"psd2CheckingAccounts":[{"id":"A1","iban":"SE45"}]`},
		{"savings accounts read and found empty, cards", []consent.Scope{consent.ScopeCreditCards, consent.ScopeSavingsAccounts},
			`"psd2SavingsAccounts":[],"psd2CreditCards":[{"id":"C1","maskedPan":"**** 1234"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := wealthView()
			v.PSD2Read = tc.read
			got := dataJSON(t, WealthData(httpapi.V20260401, v))
			want := lists
			if tc.want != "" {
				want += "," + tc.want
			}
			if !strings.HasSuffix(got, want+"}") {
				t.Fatalf("got  %s\nwant it to end with %s}", got, want)
			}
			if stable := dataJSON(t, WealthData(httpapi.V20250101, v)); strings.Contains(stable, "psd2") {
				t.Fatalf("2025-01-01: %s", stable)
			}
		})
	}
}

func TestInsuranceData(t *testing.T) {
	tests := []struct {
		name string
		view query.DataView
		want string
	}{
		{"every data point", query.DataView{CollectionID: "c1", Company: "se-demo-insurer", Product: "INSURANCE",
			Insurances: []query.InsuranceView{{Insurance: collection.Insurance{ID: "i1", InsuranceType: "HOME",
				InsuranceNumber: dataStr("H-1"), DisplayName: dataStr("Hem"), Premium: dataNum(123.45),
				PremiumFrequency: dataStr("MONTHLY"), Currency: dataStr("SEK"), RenewalDate: dataStr("2026-12-01"),
				StartDate: dataStr("2020-01-01")}, HolderName: dataStr("Tolvan")}}},
			`{"collectionId":"c1","company":"se-demo-insurer","insurances":[{"id":"i1","insuranceType":"HOME",` +
				`"insuranceNumber":"H-1","displayName":"Hem","premium":123.45,"premiumFrequency":"MONTHLY","currency":"SEK",` +
				`"renewalDate":"2026-12-01","startDate":"2020-01-01","holderName":"Tolvan"}]}`},
		{"unknown absent, a known zero kept", query.DataView{CollectionID: "c1", Company: "se-demo-insurer",
			Insurances: []query.InsuranceView{{Insurance: collection.Insurance{ID: "i1", InsuranceType: "CAR"}},
				{Insurance: collection.Insurance{ID: "i2", InsuranceType: "PET", Premium: dataNum(0)}}}},
			`{"collectionId":"c1","company":"se-demo-insurer","insurances":[{"id":"i1","insuranceType":"CAR"},` +
				`{"id":"i2","insuranceType":"PET","premium":0}]}`},
		{"none collected", query.DataView{CollectionID: "c1", Company: "se-demo-insurer"},
			`{"collectionId":"c1","company":"se-demo-insurer","insurances":[]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The insurance shape is the same in every version.
			if got := dataJSON(t, InsuranceData(tc.view)); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestLegacyData(t *testing.T) {
	ins := query.DataView{CollectionID: "c1", Company: "se-demo-insurer", Product: "INSURANCE",
		Insurances: []query.InsuranceView{{Insurance: collection.Insurance{ID: "i1", InsuranceType: "HOME"}}}}
	tests := []struct {
		name string
		view query.DataView
		want string
	}{
		{"insurance", ins, `{"collectionId":"c1","company":"se-demo-insurer","product":"INSURANCE",` +
			`"insurances":[{"id":"i1","insuranceType":"HOME"}]}`},
		{"wealth", wealthView(), `{"collectionId":"c1","company":"se-demo-pension","product":"WEALTH",` +
			`"personalInformation":{"ADDRESS_CITY":"Stockholm","NAME":"Tolvan Tolvansson","PERSONAL_NUMBER":"191212121212"},` +
			`"pensions":[{"id":"P1","name":"ITP1","value":{"amount":512345.5,"currency":"SEK"},"otherInsuredPerson":false,` +
			`"insuredPersonName":"Tolvan Tolvansson"},{"id":"P2"}],"investments":[{"id":"I1","value":{"amount":0,` +
			`"currency":"SEK"},"holdings":[{"name":"Global","quantity":12.5}]}]}`},
		{"empty wealth", query.DataView{CollectionID: "c2", Company: "se-demo-bank", Product: "WEALTH"},
			`{"collectionId":"c2","company":"se-demo-bank","product":"WEALTH","personalInformation":{},"pensions":[],"investments":[]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := dataJSON(t, LegacyData(tc.view))
			if got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			if strings.Contains(got, "loans") || strings.Contains(got, "psd2") {
				t.Fatal("2025-01-01 data carries products of 2026-04-01")
			}
		})
	}
}

func TestPersonalInformationMap(t *testing.T) {
	all := &collection.PersonalInformation{PersonalNumber: dataStr("191212121212"), Name: dataStr("Tolvan Tolvansson"),
		FirstName: dataStr("Tolvan"), LastName: dataStr("Tolvansson"), Email: dataStr("t@example.se"),
		PhoneNumber: dataStr("46701234567"), Address: &collection.Address{Street: dataStr("Gatan 1"),
			PostalCode: dataStr("11122"), City: dataStr("Stockholm"), Country: dataStr("SE")}}
	tests := []struct {
		name string
		in   *collection.PersonalInformation
		want map[string]string
	}{
		{"nil", nil, map[string]string{}},
		{"empty", &collection.PersonalInformation{}, map[string]string{}},
		{"an empty string is not a value", &collection.PersonalInformation{Name: dataStr("")}, map[string]string{}},
		{"every key", all, map[string]string{
			PersonalKeyPersonalNumber: "191212121212", PersonalKeyName: "Tolvan Tolvansson",
			PersonalKeyFirstName: "Tolvan", PersonalKeyLastName: "Tolvansson", PersonalKeyEmail: "t@example.se",
			PersonalKeyPhoneNumber: "46701234567", PersonalKeyAddressStreet: "Gatan 1",
			PersonalKeyAddressPostalCode: "11122", PersonalKeyAddressCity: "Stockholm", PersonalKeyAddressCountry: "SE"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := PersonalInformationMap(tc.in)
			if dataJSON(t, got) != dataJSON(t, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	// The typed object and the map carry the same facts.
	typed := dataJSON(t, WealthDataPreview(query.DataView{PersonalInformation: all}).PersonalInformation)
	for _, v := range PersonalInformationMap(all) {
		if !strings.Contains(typed, `"`+v+`"`) {
			t.Errorf("the typed object lacks %q: %s", v, typed)
		}
	}
}

// TestUnknownPersonalInformationIsAbsent: on 2026-04-01 an empty string and an empty address are
// unknown like nil, so they are left out, and personal information with nothing known is null;
// on 2025-01-01 the map has no key for them. The view is not changed.
func TestUnknownPersonalInformationIsAbsent(t *testing.T) {
	tests := []struct {
		name      string
		in        *collection.PersonalInformation
		want2026  string
		want2025  string
		unchanged string
	}{
		{"nothing known", &collection.PersonalInformation{Name: dataStr(""), Email: dataStr(""), Address: &collection.Address{}},
			`null`, `{}`, `{"name":"","address":{},"email":""}`},
		{"an address of empty strings", &collection.PersonalInformation{Address: &collection.Address{City: dataStr(""), Country: dataStr("")}},
			`null`, `{}`, `{"address":{"city":"","country":""}}`},
		{"known values beside unknown ones", &collection.PersonalInformation{PersonalNumber: dataStr("191212121212"), Name: dataStr(""),
			Address: &collection.Address{Street: dataStr(""), City: dataStr("Stockholm")}},
			`{"personalNumber":"191212121212","address":{"city":"Stockholm"}}`,
			`{"ADDRESS_CITY":"Stockholm","PERSONAL_NUMBER":"191212121212"}`,
			`{"personalNumber":"191212121212","name":"","address":{"street":"","city":"Stockholm"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := query.DataView{PersonalInformation: tc.in}
			if got := dataJSON(t, WealthDataPreview(v).PersonalInformation); got != tc.want2026 {
				t.Errorf("2026-04-01: %s, want %s", got, tc.want2026)
			}
			if got := dataJSON(t, WealthDataStable(v).PersonalInformation); got != tc.want2025 {
				t.Errorf("2025-01-01: %s, want %s", got, tc.want2025)
			}
			if got := dataJSON(t, tc.in); got != tc.unchanged {
				t.Errorf("the view changed: %s", got)
			}
		})
	}
}

// TestCareerStatementInWealthData: a wealth body names the career statement on both versions and
// in the legacy GET /data, with the path that serves it; a nameless file takes the download's
// name; without a statement the member is absent.
func TestCareerStatementInWealthData(t *testing.T) {
	v := wealthView()
	v.CollectionID = "0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a99"
	v.CareerStatement = &query.DocumentInfo{Kind: collection.DocumentFrenchCareerStatement, ContentType: "application/pdf", Size: 48213}
	want := `"careerStatement":{"fileName":"career-statement.pdf","contentType":"application/pdf","sizeBytes":48213,` +
		`"href":"/collections/0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a99/wealth/career-statement"}`
	for name, body := range map[string]any{"2025-01-01": WealthData(httpapi.V20250101, v), "2026-04-01": WealthData(httpapi.V20260401, v),
		"legacy": LegacyData(v)} {
		if got := dataJSON(t, body); !strings.Contains(got, want) {
			t.Errorf("%s: %s lacks %s", name, got, want)
		}
	}
	v.CareerStatement = nil
	for name, body := range map[string]any{"2025-01-01": WealthData(httpapi.V20250101, v), "2026-04-01": WealthData(httpapi.V20260401, v),
		"legacy": LegacyData(v)} {
		if got := dataJSON(t, body); strings.Contains(got, "careerStatement") {
			t.Errorf("%s without a statement: %s", name, got)
		}
	}
}
