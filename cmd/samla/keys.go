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
			switch {
			case eventschema.PersonalSealed(env.Payload):
				report.Sealed++
			case eventschema.PlainPersonal(env.Payload):
				report.Plain++
				report.ByType[env.Type]++
				report.PlainFields += personalFields(env.Payload)
			}
		}
		after = batch[len(batch)-1].Position
	}
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
