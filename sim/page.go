package sim

// Page is part of a list, and how long the whole list is, so that a client
// knows whether there is more: the API sends Total as X-Total-Count.
type Page[T any] struct {
	Items []T
	Total int
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
