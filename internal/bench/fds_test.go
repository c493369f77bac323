package bench

import (
	"strings"
	"testing"
)

func TestFitConcurrency(t *testing.T) {
	for _, c := range []struct {
		jobs, asked, limit int
		want               int
		note, err          string
	}{
		{jobs: 1000, asked: 0, limit: 20000, want: 1000},
		{jobs: 1000, asked: 200, limit: 20000, want: 200},
		{jobs: 1000, asked: 5000, limit: 20000, want: 1000}, // more than jobs: all
		{jobs: 10000, asked: 0, limit: 20000, want: 9488, note: "9488 of 10000 handovers in flight"},
		{jobs: 10000, asked: 9000, limit: 20000, want: 9000},
		{jobs: 10000, asked: 9600, limit: 20000, err: "at most 9488 fit"},
		{jobs: 20000, asked: 0, limit: 20000, err: "20000 jobs need at least 20513 open files"},
		{jobs: 10000, asked: 0, limit: 0, want: 10000}, // limit unknown
	} {
		n, note, err := fitConcurrency(c.jobs, c.asked, c.limit)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: err %v, want one saying %q", c, err, c.err)
			}
			continue
		}
		if err != nil || n != c.want || !strings.Contains(note, c.note) || (c.note == "" && note != "") {
			t.Errorf("%+v: %d, %q, %v; want %d and a note saying %q", c, n, note, err, c.want, c.note)
		}
	}
}
