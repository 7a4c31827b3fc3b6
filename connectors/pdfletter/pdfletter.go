// Package pdfletter writes and reads insurance letters ("försäkringsbrev") in one fixed layout:
// a real PDF with a text layer naming the insurer, the insurance type, the insurance number, the
// holder, the premium (amount, currency, frequency) and the renewal date. The sandbox's
// PDF_UPLOAD login method parses what `samla sandbox pdf` writes, so the upload flow runs on
// real PDFs end to end.
//
// Parse tells three outcomes apart, as the collection statuses do: a letter of this layout with
// every field readable (the insurance), a letter of this layout with a field that cannot be read
// (ErrParseFailed, a *FieldError: FAILED_PDF_PARSE), and anything else, including bytes that
// are not a PDF at all (ErrUnsupported: FAILED_PDF_USER_INPUT).
package pdfletter

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"
)

// Insurance types a letter can name, with the Swedish name printed on it.
const (
	TypeHome     = "HOME"
	TypeHouse    = "HOUSE"
	TypeCar      = "CAR"
	TypeAccident = "ACCIDENT"
	TypePet      = "PET"
	TypeLife     = "LIFE"
	TypeTravel   = "TRAVEL"
	TypePension  = "PENSION"
)

var typeNames = map[string]string{
	TypeHome: "Hemförsäkring", TypeHouse: "Villaförsäkring", TypeCar: "Bilförsäkring",
	TypeAccident: "Olycksfallsförsäkring", TypePet: "Djurförsäkring", TypeLife: "Livförsäkring",
	TypeTravel: "Reseförsäkring", TypePension: "Pensionsförsäkring",
}

// Premium frequencies.
const (
	Monthly   = "MONTHLY"
	Quarterly = "QUARTERLY"
	Yearly    = "YEARLY"
)

var frequencyNames = map[string]string{Monthly: "per månad", Quarterly: "per kvartal", Yearly: "per år"}

// Letter is the content of an insurance letter.
type Letter struct {
	Company         string // the insurer, as printed
	InsuranceType   string // one of the Type constants
	InsuranceNumber string
	Holder          string // personal data
	Premium         Premium
	RenewalDate     string // YYYY-MM-DD
}

// Premium is what the holder pays. Amounts are printed and read with two decimals.
type Premium struct {
	Amount    float64
	Currency  string // ISO 4217, e.g. SEK
	Frequency string // Monthly, Quarterly or Yearly
}

// Field names a line of the layout, in FieldError and WriteBroken.
type Field string

const (
	FieldCompany         Field = "company"
	FieldInsuranceType   Field = "insuranceType"
	FieldInsuranceNumber Field = "insuranceNumber"
	FieldHolder          Field = "holder"
	FieldPremium         Field = "premium"
	FieldRenewalDate     Field = "renewalDate"
)

// Fields lists the layout's fields in print order.
func Fields() []Field {
	return []Field{FieldCompany, FieldInsuranceType, FieldInsuranceNumber, FieldHolder, FieldPremium, FieldRenewalDate}
}

// labels are the printed labels of the fields; a line is "<label>: <value>".
var labels = map[Field]string{
	FieldCompany: "Försäkringsgivare", FieldInsuranceType: "Försäkringstyp", FieldInsuranceNumber: "Försäkringsnummer",
	FieldHolder: "Försäkringstagare", FieldPremium: "Premie", FieldRenewalDate: "Förnyelsedatum",
}

// The layout is recognised by its title together with its form number, as a mail-room scanner
// recognises a company's form: the title alone is common to every insurer's letters.
const (
	title      = "Försäkringsbrev"
	formNumber = "Blankett SFB-1"
)

var (
	// ErrUnsupported: not an insurance letter of this layout (or not a PDF at all).
	ErrUnsupported = errors.New("not an insurance letter of a supported layout")
	// ErrNotPDF: the bytes are not a readable PDF; it is also ErrUnsupported.
	ErrNotPDF = fmt.Errorf("not a PDF: %w", ErrUnsupported)
	// ErrParseFailed: a letter of this layout whose fields cannot all be read.
	ErrParseFailed = errors.New("insurance letter could not be read")
	// ErrInvalidLetter: Write refuses a letter it could not print faithfully.
	ErrInvalidLetter = errors.New("invalid insurance letter")
)

// FieldError is a field of a recognised letter that could not be read; it is ErrParseFailed.
type FieldError struct {
	Field  Field
	Reason string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("insurance letter field %s: %s", e.Field, e.Reason)
}

func (e *FieldError) Unwrap() error { return ErrParseFailed }

var (
	currencyPattern = regexp.MustCompile(`^[A-Z]{3}$`)
	// premiumPattern reads "1 234,50 SEK per månad"; the thousands separator may be a space or
	// a no-break space, the decimal separator is a comma.
	premiumPattern = regexp.MustCompile(`^([0-9][0-9  ]*,[0-9]{2}) ([A-Z]{3}) (per [a-zåäö]+)$`)
)

func (l Letter) validate() error {
	var problems []string
	for f, v := range map[Field]string{FieldCompany: l.Company, FieldInsuranceNumber: l.InsuranceNumber, FieldHolder: l.Holder} {
		if strings.TrimSpace(v) == "" || strings.ContainsAny(v, "\r\n") {
			problems = append(problems, fmt.Sprintf("%s must be one non-empty line", f))
		}
	}
	if _, ok := typeNames[l.InsuranceType]; !ok {
		problems = append(problems, fmt.Sprintf("insurance type %q is unknown", l.InsuranceType))
	}
	if a := l.Premium.Amount; a < 0 || math.IsNaN(a) || math.IsInf(a, 0) || a >= 1e12 {
		problems = append(problems, "premium amount must be a finite amount from 0")
	}
	if !currencyPattern.MatchString(l.Premium.Currency) {
		problems = append(problems, "premium currency must be an ISO 4217 code")
	}
	if _, ok := frequencyNames[l.Premium.Frequency]; !ok {
		problems = append(problems, fmt.Sprintf("premium frequency %q is unknown", l.Premium.Frequency))
	}
	if _, err := time.Parse(time.DateOnly, l.RenewalDate); err != nil {
		problems = append(problems, "renewal date must be YYYY-MM-DD")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidLetter, strings.Join(problems, "; "))
	}
	return nil
}

// values are the printed values of a valid letter.
func (l Letter) values() map[Field]string {
	return map[Field]string{
		FieldCompany:         l.Company,
		FieldInsuranceType:   typeNames[l.InsuranceType],
		FieldInsuranceNumber: l.InsuranceNumber,
		FieldHolder:          l.Holder,
		FieldPremium:         formatAmount(l.Premium.Amount) + " " + l.Premium.Currency + " " + frequencyNames[l.Premium.Frequency],
		FieldRenewalDate:     l.RenewalDate,
	}
}

// formatAmount prints 1234.5 as "1 234,50", the Swedish way.
func formatAmount(a float64) string {
	cents := int64(math.Round(a * 100))
	whole, frac := cents/100, cents%100
	digits := fmt.Sprint(whole)
	var b strings.Builder
	for i, d := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(d)
	}
	return fmt.Sprintf("%s,%02d", b.String(), frac)
}

func parseValue(f Field, v string) (func(*Letter), error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, &FieldError{Field: f, Reason: "empty"}
	}
	switch f {
	case FieldCompany:
		return func(l *Letter) { l.Company = v }, nil
	case FieldInsuranceNumber:
		return func(l *Letter) { l.InsuranceNumber = v }, nil
	case FieldHolder:
		return func(l *Letter) { l.Holder = v }, nil
	case FieldInsuranceType:
		for code, name := range typeNames {
			if strings.EqualFold(name, v) {
				return func(l *Letter) { l.InsuranceType = code }, nil
			}
		}
		return nil, &FieldError{Field: f, Reason: "not a known insurance type"}
	case FieldPremium:
		m := premiumPattern.FindStringSubmatch(v)
		if m == nil {
			return nil, &FieldError{Field: f, Reason: "not an amount, currency and frequency"}
		}
		var a float64
		num := strings.NewReplacer(" ", "", "\u00a0", "", ",", ".").Replace(m[1])
		if _, err := fmt.Sscanf(num, "%g", &a); err != nil {
			return nil, &FieldError{Field: f, Reason: "unreadable amount"}
		}
		freq := ""
		for code, name := range frequencyNames {
			if name == m[3] {
				freq = code
			}
		}
		if freq == "" {
			return nil, &FieldError{Field: f, Reason: "unknown frequency"}
		}
		return func(l *Letter) { l.Premium = Premium{Amount: a, Currency: m[2], Frequency: freq} }, nil
	case FieldRenewalDate:
		if _, err := time.Parse(time.DateOnly, v); err != nil {
			return nil, &FieldError{Field: f, Reason: "not a date (YYYY-MM-DD)"}
		}
		return func(l *Letter) { l.RenewalDate = v }, nil
	}
	return nil, &FieldError{Field: f, Reason: "unknown field"}
}
