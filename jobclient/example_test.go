package jobclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/signal"

	"github.com/normsim/normsim/jobclient"
)

// A job that can hand its output position over to a copy of itself on
// another node. Without NORSK_WORKER_WS_URL and NORSK_WORKER_TOKEN the client
// does nothing and the job simply runs.
func ExampleConnect() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))

	var position int64 // where this job's output is; a real job knows better

	c := jobclient.Connect(ctx, jobclient.Handler{
		GetState: func(ctx context.Context, migrationID string) (json.RawMessage, error) {
			if position < 0 {
				return nil, &jobclient.Refusal{Reason: "not producing output yet"}
			}
			return json.Marshal(map[string]int64{"position": position})
		},
		CutoverReady: func(ctx context.Context, migrationID string, targetReady json.RawMessage) (json.RawMessage, error) {
			// Stop output here, then say exactly where it stopped.
			return json.Marshal(map[string]int64{"stoppedAt": position})
		},
		InitialState: func(ctx context.Context, migrationID string, state json.RawMessage) (json.RawMessage, error) {
			var s struct{ Position int64 }
			if err := json.Unmarshal(state, &s); err != nil {
				return nil, errors.New("unreadable state") // aborts the migration
			}
			position = s.Position
			return nil, nil // ready
		},
		CutoverApply: func(ctx context.Context, migrationID string, stoppedAt json.RawMessage) (jobclient.Applied, error) {
			// Start output from exactly stoppedAt.
			return jobclient.Applied{Applied: []string{"output"}}, nil
		},
		Abort: func(migrationID, reason string) {
			logger.Info("handover rolled back", "migration", migrationID, "reason", reason)
			// A source resumes its output here.
		},
	}, jobclient.Options{Logger: logger})
	defer c.Close()

	select {
	case <-ctx.Done():
	case <-c.Done():
		// Replaced by a newer copy of this job (or refused): leave.
		if !errors.Is(c.Err(), jobclient.ErrDisabled) {
			logger.Warn("job socket stopped", "err", c.Err())
		}
		<-ctx.Done()
	}
}
