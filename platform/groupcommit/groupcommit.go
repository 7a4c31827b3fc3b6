// Package groupcommit holds what the group-committing writers (the SQLite event store and key
// store) share: one writer goroutine takes a request, then every request queued meanwhile, and
// commits them in one transaction.
package groupcommit

// Drain appends to batch whatever queue holds now, without waiting, until batch has limit
// requests: the requests that queued during the previous commit share the next one.
func Drain[T any](batch []T, queue <-chan T, limit int) []T {
	for len(batch) < limit {
		select {
		case r := <-queue:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}
