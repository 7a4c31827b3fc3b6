package sandbox

import (
	"fmt"
	"strings"
	"time"
)

// The demo companies' data, in their wire formats. Pointers are sent as null or left out: the
// company does not know that value (never 0 or "").

type money struct {
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
}

func sekp(a float64) *money { return &money{Amount: a, Currency: "SEK"} }
func eurp(a float64) *money { return &money{Amount: a, Currency: "EUR"} }

type insurance struct {
	ID           string   `json:"id"`
	Product      string   `json:"product"` // home, motor, accident, pet, life, health, pension
	Name         *string  `json:"name"`
	PolicyNumber *string  `json:"policyNumber,omitempty"`
	Premium      *premium `json:"premium,omitempty"`
	RenewalDate  *string  `json:"renewalDate,omitempty"`
	StartDate    *string  `json:"startDate"`
	PolicyHolder *holder  `json:"policyHolder,omitempty"`
}

type premium struct {
	Amount    *float64 `json:"amount"`
	Currency  string   `json:"currency"`
	Frequency *string  `json:"frequency"` // monthly, quarterly, yearly
}

type holder struct {
	Name string `json:"name"`
}

type pension struct {
	ID                string  `json:"id"`
	Name              *string `json:"name"`
	PensionType       string  `json:"pensionType"` // OCCUPATIONAL, PRIVATE, PREMIUM_PENSION, NATIONAL, SUPPLEMENTARY
	PolicyNumber      *string `json:"policyNumber,omitempty"`
	InsuredPersonName *string `json:"insuredPersonName,omitempty"`
	// OtherInsuredPerson is the company's own conclusion, sent only when it has one.
	OtherInsuredPerson *bool   `json:"otherInsuredPerson,omitempty"`
	Value              *money  `json:"value,omitempty"`
	MonthlyPayout      *money  `json:"monthlyPayout,omitempty"`
	PayoutStartDate    *string `json:"payoutStartDate,omitempty"`
	Employer           *string `json:"employer,omitempty"`
}

type investment struct {
	ID            string    `json:"id"`
	Name          *string   `json:"name"`
	AccountType   string    `json:"accountType"` // ISK, KF, DEPOT
	AccountNumber *string   `json:"accountNumber,omitempty"`
	Value         *money    `json:"value,omitempty"`
	Holdings      []holding `json:"holdings,omitempty"`
}

type holding struct {
	Name     string   `json:"name"`
	ISIN     *string  `json:"isin,omitempty"`
	Quantity *float64 `json:"quantity,omitempty"`
	Value    *money   `json:"value,omitempty"`
}

// PSD2 records follow the Berlin Group's account-information shapes: amounts are strings.
type psd2Amount struct {
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

type psd2Balance struct {
	BalanceType   string     `json:"balanceType"` // closingBooked, interimAvailable, interimBooked
	BalanceAmount psd2Amount `json:"balanceAmount"`
}

type psd2Account struct {
	ResourceID      string        `json:"resourceId"`
	Name            *string       `json:"name,omitempty"`
	Product         *string       `json:"product,omitempty"`
	CashAccountType string        `json:"cashAccountType"` // CACC checking, SVGS savings
	IBAN            *string       `json:"iban,omitempty"`
	BBAN            *string       `json:"bban,omitempty"`
	Currency        string        `json:"currency"`
	Balances        []psd2Balance `json:"balances"`
}

type psd2Card struct {
	ResourceID  string        `json:"resourceId"`
	MaskedPan   *string       `json:"maskedPan,omitempty"`
	Name        *string       `json:"name,omitempty"`
	Product     *string       `json:"product,omitempty"`
	Currency    string        `json:"currency"`
	CreditLimit *psd2Amount   `json:"creditLimit,omitempty"`
	Balances    []psd2Balance `json:"balances"`
}

type loan struct {
	ID             string   `json:"id"`
	Name           *string  `json:"name"`
	LoanType       string   `json:"loanType"` // MORTGAGE, CAR, CONSUMER, STUDENT
	Outstanding    *money   `json:"outstanding,omitempty"`
	InterestRate   *float64 `json:"interestRate,omitempty"` // percent a year
	MonthlyPayment *money   `json:"monthlyPayment,omitempty"`
}

type saving struct {
	ID           string   `json:"id"`
	Name         *string  `json:"name"`
	SavingType   string   `json:"savingType"` // FIXED_TERM_DEPOSIT, SAVINGS_PLAN
	Balance      *money   `json:"balance,omitempty"`
	InterestRate *float64 `json:"interestRate,omitempty"`
	MaturityDate *string  `json:"maturityDate,omitempty"`
}

type personalInformation struct {
	PersonalNumber *string  `json:"personalNumber,omitempty"`
	Name           *string  `json:"name,omitempty"`
	FirstName      *string  `json:"firstName,omitempty"`
	LastName       *string  `json:"lastName,omitempty"`
	Address        *address `json:"address,omitempty"`
	Email          *string  `json:"email,omitempty"`
	PhoneNumber    *string  `json:"phoneNumber,omitempty"`
}

type address struct {
	Street     *string `json:"street,omitempty"`
	PostalCode *string `json:"postalCode,omitempty"`
	City       *string `json:"city,omitempty"`
	Country    *string `json:"country,omitempty"`
}

func ptr[T any](v T) *T { return &v }

// nextAnniversary is the first month/day on or after now, so that renewal dates stay in the
// future however long the sandbox lives.
func nextAnniversary(now time.Time, month time.Month, day int) *string {
	d := time.Date(now.Year(), month, day, 0, 0, 0, 0, time.UTC)
	if d.Before(now.UTC().Truncate(24 * time.Hour)) {
		d = d.AddDate(1, 0, 0)
	}
	return ptr(d.Format(time.DateOnly))
}

func sek(amount float64, frequency string) *premium {
	return &premium{Amount: ptr(amount), Currency: "SEK", Frequency: ptr(frequency)}
}

// owner is whose data a session shows: the person who authenticated.
type owner struct {
	persona        *persona
	personalNumber string // the real one, also for numbers that behave like the default persona
}

// suffix makes ids differ between people of the same data set.
func (o owner) suffix() string {
	if len(o.personalNumber) >= 6 {
		return o.personalNumber[len(o.personalNumber)-6:]
	}
	return "000000"
}

func insurancesOf(o owner, now time.Time) []insurance {
	h := &holder{Name: o.persona.name()}
	switch o.persona.data {
	case dataNone:
		return []insurance{}
	case dataRich:
		return []insurance{
			{ID: "sdi-home-121212", Product: "home", Name: ptr("Hemförsäkring Stor"),
				PolicyNumber: ptr("H-4471-1212"), Premium: sek(289, "monthly"),
				RenewalDate: nextAnniversary(now, time.September, 1), StartDate: ptr("2015-09-01"), PolicyHolder: h},
			// Start date unknown: the insurer migrated the policy from an older system.
			{ID: "sdi-car-121212", Product: "motor", Name: ptr("Bilförsäkring Halv ABC123"),
				PolicyNumber: ptr("B-2093-1212"), Premium: sek(4860, "yearly"),
				RenewalDate: nextAnniversary(now, time.March, 15), StartDate: nil, PolicyHolder: h},
			{ID: "sdi-accident-121212", Product: "accident", Name: ptr("Olycksfallsförsäkring"),
				PolicyNumber: ptr("O-7310-1212"), Premium: sek(129, "quarterly"),
				RenewalDate: nextAnniversary(now, time.January, 1), StartDate: ptr("2019-01-01"), PolicyHolder: h},
			// No product name on file.
			{ID: "sdi-pet-121212", Product: "pet", Name: nil,
				PolicyNumber: ptr("D-8810-1212"), Premium: sek(312, "monthly"),
				RenewalDate: nextAnniversary(now, time.June, 30), StartDate: nil, PolicyHolder: h},
			// Premium and renewal unknown: paid through the employer's group agreement.
			{ID: "sdi-life-121212", Product: "life", Name: ptr("Livförsäkring Grupp"),
				PolicyNumber: ptr("L-5150-1212"), Premium: &premium{Currency: "SEK"},
				StartDate: ptr("2012-12-12"), PolicyHolder: h},
		}
	}
	s := o.suffix()
	return []insurance{{
		ID: "sdi-home-" + s, Product: "home", Name: ptr("Hemförsäkring Bas"),
		PolicyNumber: ptr("H-" + s), Premium: sek(245, "monthly"),
		RenewalDate: nextAnniversary(now, time.April, 1), StartDate: ptr("2020-04-01"), PolicyHolder: h,
	}}
}

// groupInsurancesOf are insurances through an employer's or a union's group agreement, which
// the insurer keeps in a separate system (and which is the product that times out for the
// partial persona).
func groupInsurancesOf(o owner, now time.Time) []insurance {
	if o.persona.data != dataRich {
		return []insurance{}
	}
	return []insurance{{
		ID: "sdi-health-121212", Product: "health", Name: ptr("Sjukvårdsförsäkring via arbetsgivaren"),
		PolicyNumber: ptr("G-3300-1212"), RenewalDate: nextAnniversary(now, time.January, 1), StartDate: nil,
		PolicyHolder: &holder{Name: o.persona.name()},
	}}
}

// pensionsOf: the rich persona's P1–P7 are SANDBOX.md's table exactly: the company supplies
// otherInsuredPerson only for P6 (true), and the insured person's name is written as listed.
func pensionsOf(o owner) []pension {
	switch o.persona.data {
	case dataNone:
		return []pension{}
	case dataRich:
		return []pension{
			{ID: "P1", Name: ptr("ITP 1"), PensionType: "OCCUPATIONAL", PolicyNumber: ptr("TP-100-1212"),
				InsuredPersonName: ptr("Tolvan Tolvansson"), Value: sekp(412345.67), PayoutStartDate: ptr("2077-01-01"),
				Employer: ptr("Tolvans Bygg AB")},
			{ID: "P2", Name: ptr("Privat pensionsförsäkring"), PensionType: "PRIVATE", PolicyNumber: ptr("PP-200-1212"),
				InsuredPersonName: ptr("TOLVANSSON, TOLVAN"), Value: sekp(85000), MonthlyPayout: sekp(410)},
			// Payout start unknown: the employer has not reported the agreed pension age.
			{ID: "P3", Name: ptr("Avtalspension SAF-LO"), PensionType: "OCCUPATIONAL", PolicyNumber: ptr("TP-300-1212"),
				InsuredPersonName: ptr("Tolvan Karl Tolvansson"), Value: sekp(120500.25), Employer: ptr("Tolvans Måleri AB")},
			{ID: "P4", Name: ptr("ITPK"), PensionType: "OCCUPATIONAL", PolicyNumber: ptr("TP-400-1212"),
				InsuredPersonName: ptr("Tolvan Tolvanson"), Value: sekp(64210)},
			{ID: "P5", Name: ptr("Tjänstepension med fullmakt"), PensionType: "OCCUPATIONAL", PolicyNumber: ptr("TP-500-1212"),
				InsuredPersonName: ptr("Elin Tolvansson"), Value: sekp(230000)},
			// The company knows this policy is held under a power of attorney.
			{ID: "P6", Name: ptr("Kapitalpension (fullmakt)"), PensionType: "PRIVATE", PolicyNumber: ptr("PP-600-1212"),
				InsuredPersonName: ptr("Tolvan Tolvansson"), OtherInsuredPerson: ptr(true), Value: sekp(51000)},
			// Moved over from a Norwegian insurer, whose register wrote the name in capitals and with ø.
			{ID: "P7", Name: ptr("Pensjonskonto"), PensionType: "PRIVATE", PolicyNumber: ptr("PK-700-1212"),
				InsuredPersonName: ptr("TØLVAN TOLVANSSØN"), Value: sekp(12750)},
		}
	}
	s := o.suffix()
	return []pension{{ID: "sdp-itp1-" + s, Name: ptr("ITP 1"), PensionType: "OCCUPATIONAL", PolicyNumber: ptr("TP-" + s),
		InsuredPersonName: ptr(o.persona.name()), Value: sekp(98765.43)}}
}

func investmentsOf(o owner) []investment {
	switch o.persona.data {
	case dataNone:
		return []investment{}
	case dataRich:
		return []investment{
			{ID: "sdinv-isk-121212", Name: ptr("Investeringssparkonto"), AccountType: "ISK", AccountNumber: ptr("9960-121 212 1"),
				Value: sekp(187420.5), Holdings: []holding{
					{Name: "Demo Global Indexfond", ISIN: ptr("SE0000000012"), Quantity: ptr(512.3456), Value: sekp(120340.1)},
					{Name: "Demo Sverige Småbolag", ISIN: ptr("SE0000000020"), Quantity: ptr(210.0), Value: sekp(67080.4)},
				}},
			// Holdings unknown: the insurer reports only the total of a capital insurance.
			{ID: "sdinv-kf-121212", Name: ptr("Kapitalförsäkring"), AccountType: "KF", Value: sekp(45000)},
			// Value unknown: the custody account's prices are not updated yet today.
			{ID: "sdinv-depot-121212", Name: ptr("Depå"), AccountType: "DEPOT", AccountNumber: ptr("9960-121 212 2"),
				Holdings: []holding{{Name: "Demo Industri AB ser. B", ISIN: ptr("SE0000000038"), Quantity: ptr(100.0)}}},
		}
	}
	s := o.suffix()
	return []investment{{ID: "sdinv-isk-" + s, Name: ptr("Investeringssparkonto"), AccountType: "ISK",
		AccountNumber: ptr("9960-" + s), Value: sekp(25310)}}
}

func balances(booked, available string) []psd2Balance {
	out := []psd2Balance{{BalanceType: "closingBooked", BalanceAmount: psd2Amount{booked, "SEK"}}}
	if available != "" {
		out = append(out, psd2Balance{BalanceType: "interimAvailable", BalanceAmount: psd2Amount{available, "SEK"}})
	}
	return out
}

func accountsOf(o owner) []psd2Account {
	switch o.persona.data {
	case dataNone:
		return []psd2Account{}
	case dataRich:
		return []psd2Account{
			{ResourceID: "acc-121212-1", Name: ptr("Lönekonto"), Product: ptr("Privatkonto"), CashAccountType: "CACC",
				IBAN: ptr("SE4550000000058398257466"), BBAN: ptr("5000 0000 5839 8257 466"), Currency: "SEK",
				Balances: balances("23456.78", "21034.50")},
			{ResourceID: "acc-121212-2", Name: ptr("Buffert"), Product: ptr("Sparkonto"), CashAccountType: "SVGS",
				IBAN: ptr("SE3550000000054910000003"), Currency: "SEK", Balances: balances("150000.00", "")},
			// A savings account with no name given by the holder.
			{ResourceID: "acc-121212-3", Product: ptr("Fasträntekonto"), CashAccountType: "SVGS",
				BBAN: ptr("5000 0000 5491 0000 011"), Currency: "SEK", Balances: balances("50000.00", "")},
		}
	}
	s := o.suffix()
	return []psd2Account{{ResourceID: "acc-" + s + "-1", Name: ptr("Lönekonto"), Product: ptr("Privatkonto"), CashAccountType: "CACC",
		BBAN: ptr("5000 0000 " + s), Currency: "SEK", Balances: balances("8120.00", "8120.00")}}
}

func cardsOf(o owner) []psd2Card {
	switch o.persona.data {
	case dataNone:
		return []psd2Card{}
	case dataRich:
		return []psd2Card{
			{ResourceID: "card-121212-1", MaskedPan: ptr("5555 55** **** 1212"), Name: ptr("Demo Mastercard"),
				Product: ptr("Kreditkort Guld"), Currency: "SEK", CreditLimit: &psd2Amount{"50000.00", "SEK"},
				Balances: []psd2Balance{{BalanceType: "interimBooked", BalanceAmount: psd2Amount{"-4312.90", "SEK"}}}},
			// Credit limit unknown: a charge card without a fixed limit.
			{ResourceID: "card-121212-2", MaskedPan: ptr("4111 11** **** 1213"), Name: ptr("Demo Resekort"),
				Currency: "EUR", Balances: []psd2Balance{{BalanceType: "interimBooked", BalanceAmount: psd2Amount{"-120.00", "EUR"}}}},
		}
	}
	s := o.suffix()
	return []psd2Card{{ResourceID: "card-" + s, MaskedPan: ptr("5555 55** **** " + s[2:]), Name: ptr("Demo Mastercard"),
		Currency: "SEK", CreditLimit: &psd2Amount{"20000.00", "SEK"},
		Balances: []psd2Balance{{BalanceType: "interimBooked", BalanceAmount: psd2Amount{"-980.00", "SEK"}}}}}
}

func loansOf(o owner) []loan {
	switch o.persona.data {
	case dataNone:
		return []loan{}
	case dataRich:
		return []loan{
			{ID: "loan-121212-1", Name: ptr("Bolån Tolvgatan 12"), LoanType: "MORTGAGE", Outstanding: sekp(2350000),
				InterestRate: ptr(3.45), MonthlyPayment: sekp(9850)},
			// Interest rate unknown: the car loan is at a partner bank.
			{ID: "loan-121212-2", Name: ptr("Billån ABC123"), LoanType: "CAR", Outstanding: sekp(86400), MonthlyPayment: sekp(2400)},
		}
	}
	return []loan{}
}

func savingsOf(o owner) []saving {
	switch o.persona.data {
	case dataNone:
		return []saving{}
	case dataRich:
		return []saving{
			{ID: "sav-121212-1", Name: ptr("Fasträntesparande 12 mån"), SavingType: "FIXED_TERM_DEPOSIT", Balance: sekp(100000),
				InterestRate: ptr(2.75), MaturityDate: ptr("2027-03-31")},
			{ID: "sav-121212-2", Name: ptr("Månadssparande fonder"), SavingType: "SAVINGS_PLAN", Balance: sekp(36500)},
		}
	}
	s := o.suffix()
	return []saving{{ID: "sav-" + s, Name: ptr("Månadssparande"), SavingType: "SAVINGS_PLAN", Balance: sekp(12000)}}
}

// frenchPensionsOf are the pension schemes a French pension-information service reports.
func frenchPensionsOf(o owner) []pension {
	switch o.persona.data {
	case dataNone:
		return []pension{}
	case dataRich:
		return []pension{
			{ID: "frp-cnav-121212", Name: ptr("Retraite de base (CNAV)"), PensionType: "NATIONAL",
				InsuredPersonName: ptr("TOLVANSSON Tolvan"), MonthlyPayout: eurp(612.40), PayoutStartDate: ptr("2079-01-01")},
			// Points are known, their euro value is not estimated before age 55.
			{ID: "frp-agirc-121212", Name: ptr("Retraite complémentaire (Agirc-Arrco)"), PensionType: "SUPPLEMENTARY",
				InsuredPersonName: ptr("TOLVANSSON Tolvan")},
		}
	}
	return []pension{{ID: "frp-cnav-" + o.suffix(), Name: ptr("Retraite de base (CNAV)"), PensionType: "NATIONAL",
		InsuredPersonName: ptr(o.persona.name()), MonthlyPayout: eurp(150)}}
}

// personalInformationOf is what a company knows of the person, nil for a person it has nothing
// on. Companies know different things: the French service does not know a Swedish personal
// number, the insurer has no e-mail address on file.
func personalInformationOf(companyID string, o owner) *personalInformation {
	if o.persona.data == dataNone {
		return nil
	}
	p := o.persona
	pi := &personalInformation{
		PersonalNumber: ptr(o.personalNumber), Name: ptr(p.name()), FirstName: ptr(p.givenName), LastName: ptr(p.surname),
	}
	street, postal, city := "Testvägen 1", "11122", "Stockholm"
	if p.data == dataRich {
		street, postal, city = "Tolvgatan 12", "12345", "Tolvsta"
	}
	switch companyID {
	case "se-demo-insurer", "se-demo-maintenance":
		// The postal code was never captured by the insurer's old system.
		pi.Address = &address{Street: ptr(street), City: ptr(city), Country: ptr("SE")}
	case "se-demo-pension":
		pi.Address = &address{Street: ptr(street), PostalCode: ptr(postal), City: ptr(city), Country: ptr("SE")}
	case "se-demo-bank":
		pi.Address = &address{Street: ptr(street), PostalCode: ptr(postal), City: ptr(city), Country: ptr("SE")}
		pi.Email = ptr(fmt.Sprintf("%s.%s@example.se", asciiLower(p.givenName), asciiLower(p.surname)))
		pi.PhoneNumber = ptr("46701" + o.suffix())
	case "fr-demo-pension-info":
		pi.PersonalNumber = nil
		pi.Name = ptr(strings.ToUpper(p.surname) + " " + p.givenName)
	}
	return pi
}

func asciiLower(s string) string {
	out := make([]rune, 0, len(s))
	for _, r := range s {
		switch r {
		case 'å', 'ä', 'Å', 'Ä':
			r = 'a'
		case 'ö', 'Ö':
			r = 'o'
		}
		if r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		out = append(out, r)
	}
	return string(out)
}
