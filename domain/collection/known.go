package collection

// The spec's rule 5: "Missing or null data points mean the value is unknown, not zero or empty".
// Companies send "" for what they do not know, and events recorded before the adapters dropped
// such values carry it, so an empty string is unknown like nil. This file is the rule's one home:
// the adapters that map a company's answer, the data read model that accumulates reports and the
// presenters that render them all ask it.

// Known is v when it holds a known value, nil when v is nil or "". It returns v itself, not a
// copy.
func Known(v *string) *string {
	if v == nil || *v == "" {
		return nil
	}
	return v
}

// Known returns what p knows: a copy with only its known values, without an address that knows
// nothing, and nil when nothing is known (also when p is nil). The copy shares p's strings.
func (p *PersonalInformation) Known() *PersonalInformation {
	if p == nil {
		return nil
	}
	out := PersonalInformation{PersonalNumber: Known(p.PersonalNumber), Name: Known(p.Name),
		FirstName: Known(p.FirstName), LastName: Known(p.LastName), Address: p.Address.Known(),
		Email: Known(p.Email), PhoneNumber: Known(p.PhoneNumber)}
	if out == (PersonalInformation{}) {
		return nil
	}
	return &out
}

// Known returns what a knows: a copy with only its known values, nil when nothing is known
// (also when a is nil).
func (a *Address) Known() *Address {
	if a == nil {
		return nil
	}
	out := Address{Street: Known(a.Street), PostalCode: Known(a.PostalCode), City: Known(a.City), Country: Known(a.Country)}
	if out == (Address{}) {
		return nil
	}
	return &out
}
