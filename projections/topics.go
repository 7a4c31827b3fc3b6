package projections

import "github.com/samla/samla/eventschema"

// categorized is a Projector that folds the events of some categories only (Categories):
// its consumer then reads only their topics. Every partition of every topic a consumer group
// reads is a fetch loop against the broker, so a projector reading all six topics for the
// one or two it folds multiplied the broker's work and the consumers' decoding.
type categorized interface {
	Categories() []string
}

// Topics returns the topics p's consumer reads: those of the categories it folds, or every
// event topic when it does not say (the audit history folds them all).
func Topics(p Projector) []string {
	c, ok := p.(categorized)
	if !ok || len(c.Categories()) == 0 {
		return eventschema.Topics()
	}
	out := make([]string, 0, len(c.Categories()))
	for _, category := range c.Categories() {
		out = append(out, eventschema.Topic(category))
	}
	return out
}
