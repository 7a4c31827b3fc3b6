// samla keys report: how much personal data the event store still holds in plain text.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"

	"github.com/samla/samla/eventschema"
)

// PlainPersonalReport counts the events whose personal data is not sealed: every event written
// before crypto-shredding existed. Nothing seals them afterwards (an event is immutable, and
// rewriting the log would be a migration of its own), so they stay readable until the data
// dir or the event store is retired; the report says how many there are.
//
// What is personal is what the current schema version of an event's type keeps in its personal
// member: an event of an older version is counted as the registry upcasts it, so the personal
// number in a v1 collection.started's input, the instructions in a v1
// collection.status-changed's public part and the records a v1 collection of insurances or
// wealth kept outside its personal member are plain personal fields too. An event whose personal
// member is sealed (or the erased marker) but whose older version kept some personal fields in
// its public part counts as plain, with those fields.
type PlainPersonalReport struct {
	Events int // every event read
	Sealed int // events whose personal member is sealed
	Plain  int // events whose personal member is plain text
	// PlainFields counts the members of the plain personal members (a personal number, a name,
	// a document's content …), the fields an erasure cannot reach.
	PlainFields int
	ByType      map[string]int // plain events by type
}

// ReportPlainPersonal reads the whole event store and counts its plain personal data.
func ReportPlainPersonal(ctx context.Context, cfg *Config) (PlainPersonalReport, error) {
	report := PlainPersonalReport{ByType: map[string]int{}}
	release, err := lockDataDir(cfg, useBeside)
	if err != nil {
		return report, err
	}
	defer func() { _ = release() }()
	store, err := openStore(cfg)
	if err != nil {
		return report, err
	}
	defer store.Close()
	reg, err := eventschema.NewRegistry()
	if err != nil {
		return report, err
	}
	var after uint64
	for {
		batch, err := store.ReadAll(ctx, after, 1000)
		if err != nil {
			return report, fmt.Errorf("read the event store after position %d: %w", after, err)
		}
		if len(batch) == 0 {
			return report, nil
		}
		for _, env := range batch {
			report.Events++
			sealed, plain, fields, err := inspectStored(reg, env)
			if err != nil {
				return report, fmt.Errorf("event %s (%s v%d) at position %d: %w", env.EventID, env.Type, env.SchemaVersion, env.Position, err)
			}
			switch {
			case plain:
				report.Plain++
				report.ByType[env.Type]++
				report.PlainFields += fields
			case sealed:
				report.Sealed++
			}
		}
		after = batch[len(batch)-1].Position
	}
}

// inspectStored tells what a stored event holds of personal data, as its type's current schema
// version defines it: whether its personal member is sealed, whether it holds personal data in
// plain text, and how many plain personal fields. The personal member is judged as stored; the
// payload of an older version is upcast first, so that what that version kept outside the
// personal member (and the current one keeps in it) is found. A sealed or erased personal member
// is replaced by an empty one before the upcast, so that only the fields an upcaster moves into
// it are counted, and no upcaster reads a sealed form as if it were plain.
func inspectStored(reg *eventschema.Registry, env eventschema.Envelope) (sealed, plain bool, fields int, err error) {
	current, err := reg.CurrentVersion(env.Type)
	if err != nil {
		return false, false, 0, err
	}
	sealed = eventschema.PersonalSealed(env.Payload)
	if env.SchemaVersion == current {
		if eventschema.PlainPersonal(env.Payload) {
			return sealed, true, personalFields(env.Payload), nil
		}
		return sealed, false, 0, nil
	}
	payload := env.Payload
	hidden := sealed || eventschema.PersonalErased(env.Payload)
	if hidden {
		if payload, err = withEmptyPersonal(payload); err != nil {
			return false, false, 0, err
		}
	}
	payload, err = reg.Upcast(env.Type, env.SchemaVersion, payload)
	if err != nil {
		return false, false, 0, err
	}
	fields = personalFields(payload)
	if hidden {
		return sealed, fields > 0, fields, nil
	}
	return sealed, eventschema.PlainPersonal(payload), fields, nil
}

// withEmptyPersonal returns payload with an empty personal member in place of its own.
func withEmptyPersonal(payload []byte) ([]byte, error) {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(payload, &f); err != nil {
		return nil, err
	}
	if f == nil {
		return nil, fmt.Errorf("payload is not a JSON object: %.40s", payload)
	}
	f[eventschema.PersonalMember] = json.RawMessage(`{}`)
	return json.Marshal(f)
}

// personalFields counts the members of a payload's personal member.
func personalFields(payload []byte) int {
	var p struct {
		Personal map[string]json.RawMessage `json:"personal"`
	}
	if err := json.Unmarshal(payload, &p); err != nil {
		return 0
	}
	return len(p.Personal)
}

// Print writes the report for an operator.
func (r PlainPersonalReport) Print(w io.Writer) {
	fmt.Fprintf(w, "events read: %d\n", r.Events)
	fmt.Fprintf(w, "events with sealed personal data: %d\n", r.Sealed)
	fmt.Fprintf(w, "events with personal data in plain text: %d (%d personal fields)\n", r.Plain, r.PlainFields)
	types := make([]string, 0, len(r.ByType))
	for t := range r.ByType {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		fmt.Fprintf(w, "  %-40s %d\n", t, r.ByType[t])
	}
	fmt.Fprintln(w, "Nothing is encrypted retroactively: events written before sealing keep their personal data in plain text,")
	fmt.Fprintln(w, "in the event store and in the Kafka log, and an erasure cannot reach it.")
}

func keysCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "Crypto-shredding: the per-subject keys that seal personal data"}
	report := &cobra.Command{Use: "report", Short: "Count the events whose personal data is still in plain text (written before sealing); encrypts nothing", Args: cobra.NoArgs}
	cfg := bindConfig(report.Flags())
	report.RunE = func(cmd *cobra.Command, _ []string) error {
		if _, err := setUp(cfg, stderr); err != nil {
			return err
		}
		ctx, stop := signalContext()
		defer stop()
		r, err := ReportPlainPersonal(ctx, cfg)
		if err != nil {
			return err
		}
		r.Print(stdout)
		return nil
	}
	cmd.AddCommand(report)
	return cmd
}
