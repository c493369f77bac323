package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/coder/websocket"

	"github.com/normsim/normsim/apiclient"
	"github.com/normsim/normsim/internal/jobplay"
	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// Handover is one handover as the two jobs saw it.
type Handover struct {
	MigrationID string
	// TargetID is the target instance; TargetJob is its open connection.
	TargetID  string
	TargetEnv map[string]string
	TargetJob *jobplay.Job
	// Cutover is the relay at the heart of the handover: from the source
	// writing source-stopped-output to the target reading cutover-apply.
	Cutover time.Duration
	// Wall is the whole handover from the jobs' side: from sending the
	// migrate request to the worker closing the source's socket because the
	// source was stopped after target-applied.
	Wall time.Duration
	// Migration is the ended migration as the API shows it (its
	// Durations.TotalMs is the sim's own requested -> ended); only its
	// ID, state and, as Reason, why there is no more when the sim's
	// --keep-migrations dropped its record before it was read.
	Migration *sim.Migration
}

// HandoverOptions adjust PlayHandover.
type HandoverOptions struct {
	// To is the target node; empty lets the sim choose.
	To string
	// BeforeCutover, when set, runs right before the source writes
	// source-stopped-output: a peer measured there sees the machine exactly
	// as the cutover relay does.
	BeforeCutover func()
	// WithoutTimeline reads the ended migration without its timeline
	// (Handover.Migration.Events nil): a load run needs only how each of
	// thousands ended.
	WithoutTimeline bool
}

// PlayHandover migrates the external instance srcID, whose job is
// connected as src, to node opts.To and plays both jobs through every step
// of a handover: state, initial-state, target-ready, cutover-ready,
// source-stopped-output, cutover-apply, target-applied. The target is
// dialled with the env the migration shows for it. On success the source's socket has been closed by the worker and
// the target's job is connected, and the migration has ended completed; the
// caller owns h.TargetJob. On error h, when not nil, names the migration.
func PlayHandover(ctx context.Context, api *API, srcID string, src *jobplay.Job, opts HandoverOptions) (*Handover, error) {
	h := &Handover{}
	start := time.Now()
	m, err := api.d.Migrate(ctx, srcID, sim.MigrateRequest{To: opts.To, Strategy: string(sim.Handover)})
	if err != nil {
		return nil, fmt.Errorf("migrate %s: %w", srcID, err)
	}
	h.MigrationID = m.ID
	fail := func(step string, err error) (*Handover, error) {
		if h.TargetJob != nil {
			h.TargetJob.Close()
			h.TargetJob = nil
		}
		return h, fmt.Errorf("migration %s: %s: %w", m.ID, step, err)
	}
	if _, err := src.Expect(ctx, protocol.TypeGetState); err != nil {
		return fail("source", err)
	}
	state := json.RawMessage(`{"next":` + strconv.FormatInt(start.UnixNano(), 10) + `}`)
	if err := src.Send(ctx, protocol.JobFrame{Type: protocol.TypeState, Payload: state}); err != nil {
		return fail("source", err)
	}
	h.TargetID, h.TargetEnv, err = targetEnv(ctx, api, m.ID)
	if err != nil {
		return fail("target placement", err)
	}
	tgt, err := jobplay.DialEnv(ctx, h.TargetEnv)
	if err != nil {
		return fail("target dial", err)
	}
	h.TargetJob = tgt
	if tgt.Ack.Migration == nil || tgt.Ack.Migration.ID != m.ID {
		return fail("target", fmt.Errorf("hello-ack names migration %+v, want %s", tgt.Ack.Migration, m.ID))
	}
	is, err := tgt.Expect(ctx, protocol.TypeInitialState)
	if err != nil {
		return fail("target", err)
	}
	if string(is.Payload) != string(state) {
		return fail("target", fmt.Errorf("initial-state payload %s, want %s", is.Payload, state))
	}
	if err := tgt.Send(ctx, protocol.JobFrame{Type: protocol.TypeTargetReady, Payload: json.RawMessage(`{"ready":true}`)}); err != nil {
		return fail("target", err)
	}
	if _, err := src.Expect(ctx, protocol.TypeCutoverReady); err != nil {
		return fail("source", err)
	}
	if opts.BeforeCutover != nil {
		opts.BeforeCutover()
	}
	stopped := json.RawMessage(`{"last":` + strconv.FormatInt(time.Now().UnixNano(), 10) + `}`)
	t0 := time.Now()
	if err := src.Send(ctx, protocol.JobFrame{Type: protocol.TypeSourceStoppedOutput, Payload: stopped}); err != nil {
		return fail("source", err)
	}
	ca, err := tgt.Expect(ctx, protocol.TypeCutoverApply)
	h.Cutover = time.Since(t0)
	if err != nil {
		return fail("target", err)
	}
	if string(ca.Payload) != string(stopped) {
		return fail("target", fmt.Errorf("cutover-apply payload %s, want %s", ca.Payload, stopped))
	}
	if err := tgt.Send(ctx, protocol.JobFrame{Type: protocol.TypeTargetApplied, Applied: []string{"counter"}}); err != nil {
		return fail("target", err)
	}
	code, _, err := src.Closed(ctx)
	h.Wall = time.Since(start)
	if err != nil {
		return fail("source close", err)
	}
	if code != websocket.StatusNormalClosure {
		return fail("source close", fmt.Errorf("the source's socket closed with %d, want 1000 (source stopped)", code))
	}
	// The source is stopped just before the migration ends: wait for the
	// end, so the job can migrate again at once.
	end := api.d
	if opts.WithoutTimeline {
		end.Fetch = apiclient.FetchSummary
	}
	done, err := end.WaitEnd(ctx, m, nil)
	var gone *apiclient.Error
	if errors.As(err, &gone) && gone.Code == sim.EGone {
		// More migrations ended after it than the sim keeps (up
		// --keep-migrations): only how it ended is left to read.
		done, err = &sim.Migration{ID: m.ID, JobID: m.JobID, Strategy: m.Strategy, State: gone.Ended, Reason: gone.Message}, nil
	}
	if err != nil {
		return fail("end", err)
	}
	if done.State != sim.MigrationCompleted {
		return fail("end", fmt.Errorf("ended %s in phase %s: %s", done.State, done.Phase, done.Reason))
	}
	h.Migration = done
	return h, nil
}

// targetEnv polls the migration, without its logs or its timeline, until
// it shows the target's env (the external runtime shows it so the
// developer can start the target).
func targetEnv(ctx context.Context, api *API, id string) (string, map[string]string, error) {
	delay := 200 * time.Microsecond
	for {
		m, err := api.MigrationSummary(ctx, id)
		if err != nil {
			return "", nil, err
		}
		for _, env := range m.Target.Env {
			if env[protocol.EnvURL] != "" {
				return m.Target.Instance, env, nil
			}
		}
		if m.State.Ended() {
			return "", nil, fmt.Errorf("migration ended %s (%s) before placing a target", m.State, m.Reason)
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return "", nil, fmt.Errorf("no target placed: %w", ctx.Err())
		}
		delay = min(2*delay, 20*time.Millisecond)
	}
}

// LaunchConnected launches template on node on the external runtime and
// connects its job: it returns once the job has read hello-ack, as a real
// job would, and the sim takes a migrate request from then on, even before
// the API shows the instance connected (manager's
// TestMigrateRightAfterHelloAck and TestMigrateWhileItsStartEnds).
func LaunchConnected(ctx context.Context, api *API, template, node string) (sim.Instance, *jobplay.Job, error) {
	// Up, for a job the bench plays itself, is when it has read hello-ack:
	// the driver only places it.
	inp, err := api.d.LaunchUp(ctx, sim.LaunchRequest{Template: template, Node: node, Runtime: sim.RuntimeExternal}, "")
	if err != nil {
		return sim.Instance{}, nil, fmt.Errorf("launch %s on %s: %w", template, node, err)
	}
	in := *inp
	for _, env := range in.Env {
		j, err := jobplay.DialEnv(ctx, env)
		if err != nil {
			return in, nil, fmt.Errorf("connect %s: %w", in.ID, err)
		}
		return in, j, nil
	}
	return in, nil, fmt.Errorf("instance %s shows no env; is it on the external runtime?", in.ID)
}
