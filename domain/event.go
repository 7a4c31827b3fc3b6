// Package domain is Samla's pure model: aggregates, their commands, events and rules. It does no
// I/O and imports nothing of the project's adapters.
package domain

// Event is a domain fact. Its type name is stable and explicit, never derived by reflection,
// because stored events outlive the Go types that wrote them.
type Event interface {
	EventType() string
}
