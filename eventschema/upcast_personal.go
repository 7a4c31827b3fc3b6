package eventschema

import (
	"encoding/json"
	"fmt"
)

// The upcasters of the schema versions that moved what identifies a person into the sealed
// "personal" member: request fingerprints and Idempotency-Keys (collection.started v3,
// collection.input-supplied v2, user.created v2), the holders of externalId reservations
// (externalid.* v2), every collected record (collection.insurances-collected v2,
// collection.wealth-collected v2) and documents' file names and digests (collection.document-*
// v2). Events written before keep those members in the public part, as they were stored; reading
// them today puts them where the current version has them.
//
// A payload without a personal member is ambiguous: its personal data was erased, or it never
// had any. Where an event always had personal data when written (a user's creation, accepted
// input, a document), no personal member means erased, and what moves into it is dropped: the
// erasure took it. A collection.started may have had none (a start without a personal number),
// but its fingerprint is dropped too: kept, it would let anyone who may retry the request
// confirm a guessed personal number of an erased person, whereas dropping it only makes the
// retry of such a start across the upgrade a key collision (422). Collected records are moved
// whatever: in events of the old versions they sit in plain text in the store anyway, and the
// read models keep them only sealed under their subject, which an erasure destroys.

// fields is a payload's top-level members, in a form that keeps every value as it was written.
type fields map[string]json.RawMessage

func parseFields(raw json.RawMessage) (fields, error) {
	var f fields
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, err
	}
	if f == nil {
		return nil, fmt.Errorf("payload is not a JSON object: %.40s", raw)
	}
	return f, nil
}

// personal returns the payload's personal member as members, and whether it has one (null is
// none).
func (f fields) personal() (fields, bool, error) {
	raw, ok := f[PersonalMember]
	if !ok || string(raw) == "null" {
		return nil, false, nil
	}
	var p fields
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, false, fmt.Errorf("personal: %w", err)
	}
	if p == nil {
		p = fields{}
	}
	return p, true, nil
}

// moveIntoPersonal moves the named members into the personal member, creating it when create
// is set and the payload has none; without create, a payload without personal member loses
// them (see above). Empty strings are not moved: the current versions leave such members out.
func moveIntoPersonal(raw json.RawMessage, create bool, names ...string) (json.RawMessage, error) {
	f, err := parseFields(raw)
	if err != nil {
		return nil, err
	}
	return f.moveIntoPersonal(create, names...)
}

// moveIntoPersonal is the function of that name on parsed members.
func (f fields) moveIntoPersonal(create bool, names ...string) (json.RawMessage, error) {
	p, has, err := f.personal()
	if err != nil {
		return nil, err
	}
	if !has && create {
		p, has = fields{}, true
	}
	for _, name := range names {
		v, ok := f[name]
		delete(f, name)
		if !ok || !has || string(v) == `""` || string(v) == "null" {
			continue
		}
		p[name] = v
	}
	if has && len(p) > 0 {
		b, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		f[PersonalMember] = b
	}
	return json.Marshal(f)
}

// upcastCollectionStartedV2: the request fingerprint moves into personal; a payload without
// personal member loses it.
func upcastCollectionStartedV2(raw json.RawMessage) (json.RawMessage, error) {
	return moveIntoPersonal(raw, false, "requestHash")
}

// upcastInputSuppliedV1: the Idempotency-Key and the fingerprint move into personal, which
// accepted input always had; a payload without it was erased and loses them.
func upcastInputSuppliedV1(raw json.RawMessage) (json.RawMessage, error) {
	return moveIntoPersonal(raw, false, "idempotencyKey", "requestHash")
}

// upcastUserCreatedV1: the fingerprint moves into personal, which a creation always had (the
// externalId); a payload without it was erased and loses it.
func upcastUserCreatedV1(raw json.RawMessage) (json.RawMessage, error) {
	return moveIntoPersonal(raw, false, "requestHash")
}

// upcastExternalIDReservedV1: the holder and its fingerprint move into a personal member of
// their own (version 1 had none).
func upcastExternalIDReservedV1(raw json.RawMessage) (json.RawMessage, error) {
	return moveIntoPersonal(raw, true, "userUuid", "requestHash")
}

// upcastExternalIDReleasedV1: the holder moves into a personal member of its own.
func upcastExternalIDReleasedV1(raw json.RawMessage) (json.RawMessage, error) {
	return moveIntoPersonal(raw, true, "userUuid")
}

// upcastDocumentV1: the file name and digest move into personal beside the content, which a
// recorded document always had; a payload without it was erased and loses them.
func upcastDocumentV1(raw json.RawMessage) (json.RawMessage, error) {
	return moveIntoPersonal(raw, false, "fileName", "sha256")
}

// upcastInsurancesCollectedV1: the insurances move into personal beside their holders' names,
// and their number stays public.
func upcastInsurancesCollectedV1(raw json.RawMessage) (json.RawMessage, error) {
	f, err := parseFields(raw)
	if err != nil {
		return nil, err
	}
	var insurances []json.RawMessage
	if v, ok := f["insurances"]; ok {
		if err := json.Unmarshal(v, &insurances); err != nil {
			return nil, fmt.Errorf("insurances: %w", err)
		}
	}
	if f["insuranceCount"], err = json.Marshal(len(insurances)); err != nil {
		return nil, err
	}
	if len(insurances) == 0 {
		// Nothing collected: no personal member, as the current writer records it.
		delete(f, "insurances")
		delete(f, PersonalMember)
		return json.Marshal(f)
	}
	return f.moveIntoPersonal(true, "insurances")
}

// wealthLists are the record lists of collection.wealth-collected, by their member names.
var wealthLists = []string{"pensions", "investments", "loans", "savings", "psd2CheckingAccounts",
	"psd2SavingsAccounts", "psd2CreditCards"}

// upcastWealthCollectedV1: the records move into personal beside the personal information and
// the insured persons' names, and how many of each kind there are stays public.
func upcastWealthCollectedV1(raw json.RawMessage) (json.RawMessage, error) {
	f, err := parseFields(raw)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	collected := false
	for _, name := range wealthLists {
		var list []json.RawMessage
		if v, ok := f[name]; ok {
			if err := json.Unmarshal(v, &list); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		counts[name] = len(list)
		if len(list) == 0 {
			delete(f, name) // the current writer leaves an empty list out
		}
		collected = collected || len(list) > 0
	}
	if f["counts"], err = json.Marshal(counts); err != nil {
		return nil, err
	}
	return f.moveIntoPersonal(collected, wealthLists...)
}

// upcastWealthCollectedV2: version 3 adds psd2Read, the PSD2 products the connector read. A v2
// event did not record them, and nothing in it tells which were read (before consents every
// PSD2 product of the bank's login session was; afterwards only a consent's), so it stays
// absent: not recorded, which readers treat as they did before v3. Every other member is kept.
func upcastWealthCollectedV2(raw json.RawMessage) (json.RawMessage, error) {
	if _, err := parseFields(raw); err != nil {
		return nil, err
	}
	return raw, nil
}
