//go:build !unix

package kafka

// lockDir is a no-op where flock is unavailable: there, running two brokers on one data
// directory is left to the operator to avoid.
func lockDir(string) (func(), error) { return func() {}, nil }
