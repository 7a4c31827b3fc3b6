package collectiondata

import (
	"maps"
	"slices"

	"github.com/samla/samla/domain/collection"
	"github.com/samla/samla/domain/consent"
)

// A collection can record its data in several events (a company read in parts, a retried
// page). They accumulate: each list keeps every item reported, an item reported again under the
// same id is replaced by the newer report in its original place, and a data point a later
// event does not mention is left as it was, since a missing data point means unknown, not gone.

// addInsurances folds an InsurancesCollected into the row.
func (r *Row) addInsurances(ev collection.InsurancesCollected) {
	r.Content.Insurances = upsertByID(r.Content.Insurances, ev.Insurances(), func(i collection.Insurance) string { return i.ID })
	if ev.Personal != nil {
		r.Personal.HolderNames = mergeNames(r.Personal.HolderNames, ev.Personal.HolderNames)
	}
}

// addWealth folds a WealthCollected into the row.
func (r *Row) addWealth(ev collection.WealthCollected) {
	if ev.Personal != nil {
		c, w := &r.Content, ev.Personal
		c.Pensions = upsertByID(c.Pensions, w.Pensions, func(p collection.Pension) string { return p.ID })
		c.Investments = upsertByID(c.Investments, w.Investments, func(i collection.Investment) string { return i.ID })
		c.Loans = upsertByID(c.Loans, w.Loans, func(l collection.Loan) string { return l.ID })
		c.Savings = upsertByID(c.Savings, w.Savings, func(s collection.Saving) string { return s.ID })
		c.CheckingAccounts = upsertByID(c.CheckingAccounts, w.CheckingAccounts, func(a collection.PSD2Account) string { return a.ID })
		c.SavingsAccounts = upsertByID(c.SavingsAccounts, w.SavingsAccounts, func(a collection.PSD2Account) string { return a.ID })
		c.CreditCards = upsertByID(c.CreditCards, w.CreditCards, func(cc collection.PSD2CreditCard) string { return cc.ID })
		r.Personal.InsuredPersonNames = mergeNames(r.Personal.InsuredPersonNames, ev.Personal.InsuredPersonNames)
		r.Personal.PersonalInformation = mergePersonalInformation(r.Personal.PersonalInformation, ev.Personal.PersonalInformation)
	}
	if ev.PSD2Read != nil {
		read := slices.Clone(r.Content.PSD2Read)
		if read == nil {
			read = []consent.Scope{}
		}
		for _, s := range ev.PSD2Read {
			if !slices.Contains(read, s) {
				read = append(read, s)
			}
		}
		slices.Sort(read)
		r.Content.PSD2Read = read
	}
}

// upsertByID appends items to list, replacing in place an item whose id is already there. It
// never returns an empty non-nil slice, so that "none" has one form (nil) before and after a
// round trip through the store.
func upsertByID[T any](list, items []T, id func(T) string) []T {
	if len(items) == 0 {
		return list
	}
	index := make(map[string]int, len(list)+len(items))
	out := make([]T, len(list), len(list)+len(items))
	copy(out, list)
	for i, it := range out {
		index[id(it)] = i
	}
	for _, it := range items {
		if i, ok := index[id(it)]; ok {
			out[i] = it
			continue
		}
		index[id(it)] = len(out)
		out = append(out, it)
	}
	return out
}

// mergeNames adds names to have, the newer name winning for the same id; nil when both are
// empty.
func mergeNames(have, names map[string]string) map[string]string {
	if len(names) == 0 {
		return have
	}
	out := make(map[string]string, len(have)+len(names))
	maps.Copy(out, have)
	maps.Copy(out, names)
	return out
}

// mergePersonalInformation takes every data point the newer report knows and keeps the older
// report's others that are known (collection.PersonalInformation.Known says what is: an empty
// string is not). Personal information with nothing known stays nil.
func mergePersonalInformation(have, next *collection.PersonalInformation) *collection.PersonalInformation {
	next = next.Known()
	if next == nil {
		return have
	}
	out := collection.PersonalInformation{}
	if known := have.Known(); known != nil {
		out = *known
	}
	overlay(&out.PersonalNumber, next.PersonalNumber)
	overlay(&out.Name, next.Name)
	overlay(&out.FirstName, next.FirstName)
	overlay(&out.LastName, next.LastName)
	overlay(&out.Email, next.Email)
	overlay(&out.PhoneNumber, next.PhoneNumber)
	if next.Address != nil {
		addr := collection.Address{}
		if out.Address != nil {
			addr = *out.Address
		}
		overlay(&addr.Street, next.Address.Street)
		overlay(&addr.PostalCode, next.Address.PostalCode)
		overlay(&addr.City, next.Address.City)
		overlay(&addr.Country, next.Address.Country)
		out.Address = &addr
	}
	return &out
}

// overlay sets *dst to v when the newer report mentions v.
func overlay(dst **string, v *string) {
	if v != nil {
		*dst = v
	}
}
