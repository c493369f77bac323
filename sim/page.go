package sim

import "fmt"

// Page is part of a list, and how long the whole list is, so that a client
// knows whether there is more: the API sends Total as X-Total-Count.
type Page[T any] struct {
	Items []T
	Total int
	// Unreadable counts the records of the page that the store holds but
	// could not read (a damaged or edited store file), left out of Items
	// and still counted in Total; Damage says what the first one was and
	// what to do. The API sends them as X-Unreadable-Count and
	// X-Unreadable.
	Unreadable int
	Damage     string
}

// UnreadableRecords is the error of a store's list some of whose records
// could not be read: the list it returns with it holds the rest. It counts
// the ones left out and says what the first was (the store's error, which
// names the file, the record and the fix).
type UnreadableRecords struct {
	Count int
	First error
}

func (e *UnreadableRecords) Error() string {
	return fmt.Sprintf("%d record(s) could not be read and were left out; the first: %v", e.Count, e.First)
}

func (e *UnreadableRecords) Unwrap() error { return e.First }

// Add counts one more record left out, err saying what it was; on nil it
// starts the count. Use: u = u.Add(err).
func (e *UnreadableRecords) Add(err error) *UnreadableRecords {
	if e == nil {
		e = &UnreadableRecords{First: err}
	}
	e.Count++
	return e
}

// Err is e as an error: nil when no record was left out (a nil
// *UnreadableRecords in an error would not be nil).
func (e *UnreadableRecords) Err() error {
	if e == nil {
		return nil
	}
	return e
}

// InstanceFilter narrows an instance list, oldest first: to one node when
// Node is set, then to Limit instances (0: every one) after the first
// Offset.
type InstanceFilter struct {
	Node          string
	Limit, Offset int
}

// PageOf cuts all to the limit items after the first offset (limit 0:
// every one from there), and says how many all holds.
func PageOf[T any](all []T, offset, limit int) Page[T] {
	lo := min(max(offset, 0), len(all))
	return Page[T]{Items: all[lo:PageEnd(lo, limit, len(all))], Total: len(all)}
}

// PageEnd is where a page of limit items (0: every one) from lo ends in a
// list of total: never past total, and never wrapping round, however
// large the limit a client asks for.
func PageEnd(lo, limit, total int) int {
	if limit > 0 && limit < total-lo {
		return lo + limit
	}
	return total
}
