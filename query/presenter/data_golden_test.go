package presenter

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/query"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of the data bodies")

// fullWealthView has every data point of every wealth product known, next to items with none
// known and known zeros, so that the golden bodies pin every key, its order, and what is left out.
func fullWealthView() query.DataView {
	m := func(a float64, c string) *collection.Money { return &collection.Money{Amount: a, Currency: c} }
	return query.DataView{
		CollectionID: "c-full", Tenant: "acme", Company: "se-demo-bank", Product: "WEALTH", Status: "COMPLETED",
		Pensions: []query.PensionView{
			{Pension: collection.Pension{ID: "P1", Name: dataStr("ITP1"), PensionType: dataStr("OCCUPATIONAL"),
				PolicyNumber: dataStr("PN-1"), Value: m(512345.5, "SEK"), MonthlyPayout: m(4321, "SEK"),
				PayoutStartDate: dataStr("2040-01-01"), OtherInsuredPerson: dataBool(true)},
				InsuredPersonName: dataStr("Tolvan Tolvansson")},
			{Pension: collection.Pension{ID: "P2", OtherInsuredPerson: dataBool(false), Value: m(0, "SEK")}},
			{Pension: collection.Pension{ID: "P3"}},
		},
		Investments: []collection.Investment{
			{ID: "I1", Name: dataStr("ISK"), InvestmentType: dataStr("ISK"), AccountNumber: dataStr("9020-1"),
				Value: m(1000.25, "SEK"), Holdings: []collection.Holding{
					{Name: "Global", ISIN: dataStr("SE0000000001"), Quantity: dataNum(12.5), Value: m(800, "SEK")},
					{Name: "Bare"}, {Name: "Zero", Quantity: dataNum(0)}}},
			{ID: "I2"},
		},
		Loans: []collection.Loan{
			{ID: "L1", Name: dataStr("Bolån"), LoanType: dataStr("MORTGAGE"), Outstanding: m(2500000, "SEK"),
				InterestRate: dataNum(3.95), MonthlyPayment: m(9000, "SEK")},
			{ID: "L2", InterestRate: dataNum(0)},
		},
		Savings: []collection.Saving{
			{ID: "S1", Name: dataStr("Sparkonto"), Balance: m(25000, "SEK"), InterestRate: dataNum(1.5)},
			{ID: "S2"},
		},
		CheckingAccounts: []collection.PSD2Account{
			{ID: "A1", Name: dataStr("Lönekonto"), IBAN: dataStr("SE4550000000058398257466"), BBAN: dataStr("5000 0000 0583 9825 7466"),
				Currency: dataStr("SEK"), Balance: m(1234.5, "SEK"), AvailableBalance: m(1200, "SEK")},
			{ID: "A2"},
		},
		SavingsAccounts: []collection.PSD2Account{{ID: "A3", IBAN: dataStr("SE12"), Balance: m(0, "EUR")}},
		CreditCards: []collection.PSD2CreditCard{
			{ID: "C1", Name: dataStr("Kort"), MaskedPAN: dataStr("**** 1234"), Currency: dataStr("SEK"),
				Balance: m(-500, "SEK"), CreditLimit: m(20000, "SEK")},
			{ID: "C2"},
		},
		PersonalInformation: &collection.PersonalInformation{PersonalNumber: dataStr("191212121212"),
			Name: dataStr("Tolvan Tolvansson"), FirstName: dataStr("Tolvan"), LastName: dataStr("Tolvansson"),
			Email: dataStr("t@example.se"), PhoneNumber: dataStr("46701234567"),
			Address: &collection.Address{Street: dataStr("Gatan 1"), PostalCode: dataStr("11122"),
				City: dataStr("Stockholm"), Country: dataStr("SE")}},
	}
}

func fullInsuranceView() query.DataView {
	return query.DataView{CollectionID: "c-ins", Tenant: "acme", Company: "se-demo-insurer", Product: "INSURANCE",
		Status: "COMPLETED", Insurances: []query.InsuranceView{
			{Insurance: collection.Insurance{ID: "i1", InsuranceType: "HOME", InsuranceNumber: dataStr("H-1"),
				DisplayName: dataStr("Hem"), Premium: dataNum(123.45), PremiumFrequency: dataStr("MONTHLY"),
				Currency: dataStr("SEK"), RenewalDate: dataStr("2026-12-01"), StartDate: dataStr("2020-01-01")},
				HolderName: dataStr("Tolvan")},
			{Insurance: collection.Insurance{ID: "i2", InsuranceType: "PET", Premium: dataNum(0)}},
			{Insurance: collection.Insurance{ID: "i3", InsuranceType: ""}},
		}}
}

// TestDataGolden pins the exact bytes of every data body in every version. The bodies marshal the
// domain's records (collection.Pension, …) directly, so a change to their JSON tags, which are
// also the stored event schema, shows here as a change of the HTTP contract. Run with -update to
// rewrite the files only after a deliberate change of the contract.
func TestDataGolden(t *testing.T) {
	pi := fullWealthView()
	pi.PersonalInformation = &collection.PersonalInformation{Name: dataStr(""), Address: &collection.Address{}}
	fr := query.DataView{CollectionID: "0196a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a99", Company: "fr-demo-pension-info",
		Product: "WEALTH", Status: "COMPLETED", Pensions: []query.PensionView{{Pension: collection.Pension{ID: "P1"}}},
		CareerStatement: &query.DocumentInfo{Kind: collection.DocumentFrenchCareerStatement, ContentType: "application/pdf",
			FileName: "releve-de-carriere.pdf", Size: 48213, At: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}}
	bodies := map[string]any{
		"insurance":                          InsuranceData(fullInsuranceView()),
		"insurance-empty":                    InsuranceData(query.DataView{CollectionID: "c0", Company: "x", Product: "INSURANCE"}),
		"wealth-2025-01-01":                  WealthData("2025-01-01", fullWealthView()),
		"wealth-2026-04-01":                  WealthData("2026-04-01", fullWealthView()),
		"wealth-empty-2025-01-01":            WealthData("2025-01-01", query.DataView{CollectionID: "c0", Company: "x", Product: "WEALTH"}),
		"wealth-empty-2026-04-01":            WealthData("2026-04-01", query.DataView{CollectionID: "c0", Company: "x", Product: "WEALTH"}),
		"wealth-partial-personal-2025-01-01": WealthData("2025-01-01", pi),
		"wealth-partial-personal-2026-04-01": WealthData("2026-04-01", pi),
		"legacy-insurance":                   LegacyData(fullInsuranceView()),
		"legacy-wealth":                      LegacyData(fullWealthView()),
		"wealth-career-statement-2025-01-01": WealthData("2025-01-01", fr),
		"wealth-career-statement-2026-04-01": WealthData("2026-04-01", fr),
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			got, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "data-"+name+".json")
			if *updateGolden {
				if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got)+"\n" != string(want) {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
		})
	}
}
