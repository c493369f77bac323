package web_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/normsim/normsim/internal/testenv"
	"github.com/normsim/normsim/sim"
)

// brokenMigrations answers every migration list with an error of its
// store that is no sim.Error: the API can only say "internal error".
type brokenMigrations struct{ *fakeService }

func (brokenMigrations) MigrationPage(context.Context, sim.MigrationFilter) (sim.Page[*sim.Migration], error) {
	return sim.Page[*sim.Migration]{}, errors.New("decode migration: invalid character 'o' in literal null")
}

// TestAnInternalErrorIsLogged (attack round 10a, M3): a damaged record made
// the API answer 500 "internal error" and left nothing in the log; the
// dashboard's failures were logged. Every internal error the API answers
// is logged with what went wrong and the request.
func TestAnInternalErrorIsLogged(t *testing.T) {
	var logged testenv.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	h := newServer(t, brokenMigrations{newFake()}, log)
	r := get(t, h, "/api/v1/migrations")
	if r.Status != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", r.Status)
	}
	if s := logged.String(); !strings.Contains(s, "request failed") || !strings.Contains(s, "path=/api/v1/migrations") || !strings.Contains(s, "invalid character 'o'") {
		t.Fatalf("the log says:\n%s\nwant the failed request and its error", s)
	}
}
