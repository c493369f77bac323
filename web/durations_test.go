package web_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/normsim/normsim/scenario"
	"github.com/normsim/normsim/sim"
)

// TestDurationsReadAsInTheCLI: the migration page shows a migration's
// total and its events' times exactly as `normsim ci` prints them (the
// summary's "after …" and the timeline's first column).
func TestDurationsReadAsInTheCLI(t *testing.T) {
	m := completedMigration()
	total := 12345.6 // past ten seconds, where the two once parted
	*m.Durations.TotalMs = total
	end := m.StartedAt.Add(time.Duration(total * float64(time.Millisecond)))
	m.EndedAt = &end
	m.Events[len(m.Events)-1].At = end
	m.Events[3].At = m.StartedAt.Add(1234567 * time.Microsecond)

	f := newFake()
	f.addMig(m)
	r := get(t, newServer(t, f, nil), "/migrations/mig-ok")

	after := regexp.MustCompile(`after (.+?)(:|\n)`).FindStringSubmatch(scenario.Summary(m))
	if after == nil {
		t.Fatalf("no total in the CLI summary: %q", scenario.Summary(m))
	}
	mustContain(t, r, `id="d-total">`+after[1]+`<`)
	for _, line := range strings.Split(strings.TrimSpace(sim.TimelineText(m)), "\n") {
		at := strings.Fields(line)
		mustContain(t, r, `<td class="num mono">`+at[0]+" "+at[1]+`</td>`)
	}
}
