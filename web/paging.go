package web

import (
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/normsim/normsim/sim"
)

// The dashboard shows long lists a page at a time, rendered on the server:
// with 10,000 instances a page of every one of them took seconds to render
// and megabytes to send, and the live refresh fetched it all again after
// every event.

// Page sizes of the dashboard's lists.
const (
	// overviewPageSize is how many of a node's instances its card shows.
	overviewPageSize = 50
	// migrationsPageSize is how many migrations the history shows.
	migrationsPageSize = 100
	// overviewRunning is how many running migrations the overview's
	// banner names; it counts the others and links them.
	overviewRunning = 10
	// jobSuggestions is how many of the newest instances' jobs the history's
	// job filter suggests, beside those of the migrations it shows.
	jobSuggestions = 100
)

// pager is the links of a list shown a page at a time.
type pager struct {
	// From and To are the rows shown (1-based) of Total.
	From, To, Total int
	Page, Pages     int
	// First, Prev, Next and Last are links; empty where there is none.
	First, Prev, Next, Last string
	// ID names the pager (for the links' ids); Label says what it pages.
	ID, Label string
}

// pageOf is the page to show of total rows, size a page, when page was
// asked for: past the last it is the last (the list shrank under a page
// left open).
func pageOf(asked, total, size int) (page, pages, offset int) {
	pages = max(1, (total+size-1)/size)
	page = min(max(asked, 1), pages)
	return page, pages, (page - 1) * size
}

// pageOffset is where page (from 1) starts, size rows a page. A page so
// far past any list that its offset would wrap round an int starts at the
// largest int instead: past the end, which is what it is (page=MaxInt
// wrapped to a negative offset and showed the first page's rows under
// the last page's pager).
func pageOffset(page, size int) int {
	if page-1 > math.MaxInt/size {
		return math.MaxInt
	}
	return (max(page, 1) - 1) * size
}

// newPager describes page of pages over total rows, size a page, shown
// rows long; link is the address of another page.
func newPager(id, label string, page, pages, total, size, shown int, link func(page int) string) pager {
	p := pager{ID: id, Label: label, Total: total, Page: page, Pages: pages}
	if shown > 0 {
		p.From = (page-1)*size + 1
		p.To = p.From + shown - 1
	}
	if page > 1 {
		p.First, p.Prev = link(1), link(page-1)
	}
	if page < pages {
		p.Next, p.Last = link(page+1), link(pages)
	}
	return p
}

// pageParam reads a dashboard page number (absent: 1).
func pageParam(q url.Values, name string) (int, error) {
	v := q.Get(name)
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 1, sim.Errorf(sim.EInvalid, "%s: must be a page number from 1; got %q", name, v)
	}
	return n, nil
}

// withPage is path with q, name set to page (dropped for page 1).
func withPage(path string, q url.Values, name string, page int) string {
	q2 := url.Values{}
	for k, v := range q {
		q2[k] = v
	}
	if page > 1 {
		q2.Set(name, strconv.Itoa(page))
	} else {
		q2.Del(name)
	}
	if len(q2) == 0 {
		return path
	}
	return path + "?" + q2.Encode()
}

// stateList is the migration states a filter takes, for its errors.
func stateList() string {
	names := make([]string, len(sim.MigrationStates))
	for i, s := range sim.MigrationStates {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// thousands writes n with thousands separators (10,000).
func thousands(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
