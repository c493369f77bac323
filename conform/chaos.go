package conform

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// Seeded chaos, FoundationDB style: every run draws a fault schedule from
// (seed, run) alone, so a run is replayed exactly by its seed and index on
// any machine, and is judged by invariants rather than by one expected
// outcome. A run that breaks one is minimised: faults are taken away while
// the same invariant still breaks.

// The invariants a chaos run checks (docs/conform.md).
const (
	InvariantEnds       = "every migration ends in a defined state within its timeouts"
	InvariantRollback   = "before the point of no return the target is removed and the source keeps producing"
	InvariantNoReturn   = "after the point of no return nothing rolls back"
	InvariantKnown      = "no instance runs that the manager does not know"
	InvariantHandsAgain = "the job can hand over cleanly afterwards"
	// InvariantPromises holds every move, whatever its end state, to the
	// promises its record is judged by (sim.Judge).
	InvariantPromises = "no move hands over a wrong position, has two producers, or leaves a rolled-back target producing"
)

// Invariants lists them in the order they are checked.
var Invariants = []string{InvariantEnds, InvariantRollback, InvariantNoReturn, InvariantPromises, InvariantKnown, InvariantHandsAgain}

// chaosKinds are the faults a schedule draws from: every kind the engine
// has.
var chaosKinds = []string{"kill", "stop", "pause", "drop-socket", "worker-abort", "target-fail-start",
	"delay-frame", "drop-frame", "duplicate-frame", "corrupt-frame"}

// chaosOn are the frames a fault that strikes a job may be armed on.
var chaosOn = []string{protocol.TypeGetState, protocol.TypeState, protocol.TypeHello, protocol.TypeInitialState,
	protocol.TypeTargetReady, protocol.TypeCutoverReady, protocol.TypeSourceStoppedOutput, protocol.TypeCutoverApply,
	protocol.TypeTargetApplied}

// chaosFrames are the frames a frame fault may act on: those a migration
// relays (the listener's hello, hello-ack and initial-state are not).
var chaosFrames = []string{protocol.TypeGetState, protocol.TypeState, protocol.TypeTargetReady, protocol.TypeCutoverReady,
	protocol.TypeSourceStoppedOutput, protocol.TypeCutoverApply, protocol.TypeTargetApplied}

// MaxChaosMoves bounds the migrations in a row one run draws.
const MaxChaosMoves = 3

// Draw is the schedule of run of seed: one to MaxChaosMoves migrations,
// the first with one or two faults, each later one with none to two.
// Delays are drawn in 100 ms steps up to what the fault plan allows under
// t (a held frame up to twice its phase's timeout, a pause up to that or 1.5 s).
// The same (seed, run, t) draws the same schedule everywhere: PCG and
// the draws made from it are specified bit for bit.
func Draw(seed uint64, run int, t sim.Timeouts) Schedule {
	t = t.WithDefaults()
	rng := rand.New(rand.NewPCG(seed, uint64(run)))
	pick := func(list []string) string { return list[rng.IntN(len(list))] }
	side := func() string { return []string{sideSource, sideTarget}[rng.IntN(2)] }
	steps := func(limit time.Duration) sim.Duration {
		n := max(int(limit/(100*time.Millisecond)), 1)
		return sim.Duration(time.Duration(rng.IntN(n)+1) * 100 * time.Millisecond)
	}
	var s Schedule
	moves := 1 + rng.IntN(MaxChaosMoves)
	for i := range moves {
		n := rng.IntN(3)
		if i == 0 {
			n = max(n, 1)
		}
		var mv Move
		for range n {
			f := sim.Fault{Kind: pick(chaosKinds)}
			switch f.Kind {
			case "kill", "stop", "drop-socket":
				f.Side, f.On = side(), pick(chaosOn)
			case "pause":
				// Within the bound the fault plan sets (twice the
				// timeout of the phase of its frame).
				f.Side, f.On = side(), pick(chaosOn)
				limit, _ := sim.FrameTimeout(f.On, t)
				f.Delay = steps(min(1500*time.Millisecond, 2*limit))
			case "worker-abort":
				f.On = pick(chaosOn)
			case "delay-frame":
				// Up to one timeout late, as the fault plan allows: a
				// frame that arrives after its phase gave up on it too.
				f.Frame = pick(chaosFrames)
				limit, _ := sim.FrameTimeout(f.Frame, t)
				f.Delay = steps(2 * limit)
			case "drop-frame", "duplicate-frame", "corrupt-frame":
				f.Frame = pick(chaosFrames)
			}
			mv.Faults = append(mv.Faults, f)
		}
		s.Moves = append(s.Moves, mv)
	}
	return s
}

// Faults counts a schedule's faults.
func (s Schedule) Faults() int {
	n := 0
	for _, mv := range s.Moves {
		n += len(mv.Faults)
	}
	return n
}

// String is a schedule on one line: "move 1: kill target on target-ready;
// move 2: none".
func (s Schedule) String() string {
	var parts []string
	for i, mv := range s.Moves {
		var fs []string
		for _, f := range mv.Faults {
			fs = append(fs, faultText(f))
		}
		if len(fs) == 0 {
			fs = []string{"no fault"}
		}
		parts = append(parts, fmt.Sprintf("move %d: %s", i+1, strings.Join(fs, ", ")))
	}
	return strings.Join(parts, "; ")
}

func faultText(f sim.Fault) string {
	s := f.Kind
	if f.Side != "" {
		s += " " + f.Side
	}
	if f.On != "" {
		s += " on " + f.On
	}
	if f.Frame != "" {
		s += " " + f.Frame
	}
	if f.Delay > 0 {
		s += " " + f.Delay.D().String()
	}
	return s
}

// ChaosConfig says which chaos runs to make.
type ChaosConfig struct {
	Seed uint64
	Runs int
	// Only replays run Only alone; -1 makes every run.
	Only int
	// Replay is the command line that repeats a run, given its seed and
	// index (the CLI's spelling, with the flags of this run).
	Replay func(seed uint64, run int) string
	// MaxMinimise bounds the trials one minimisation makes; default 40.
	MaxMinimise int
}

// Chaos makes the chaos runs, Parallel at a time, minimising every run
// that breaks an invariant. each (when not nil) is called as each run
// ends, one call at a time.
func (r *Runner) Chaos(ctx context.Context, cc ChaosConfig, each func(*Trial)) *ChaosReport {
	if cc.MaxMinimise <= 0 {
		cc.MaxMinimise = 40
	}
	rep := &ChaosReport{Seed: cc.Seed, Runs: cc.Runs, Only: cc.Only}
	runs := make([]int, 0, cc.Runs)
	if cc.Only >= 0 {
		runs = append(runs, cc.Only)
	} else {
		for i := range cc.Runs {
			runs = append(runs, i)
		}
	}
	trials := make([]*Trial, len(runs))
	var (
		mu     sync.Mutex
		broken []*Violation
		// minimised are the invariants a run has been minimised for:
		// later runs that break the same one are reported as drawn, since
		// minimising each would cost tens of runs and say the same.
		minimised = map[string]int{}
	)
	inParallel(ctx, r.cfg.Parallel, len(runs), func(i int) {
		run := runs[i]
		tr := r.trial(ctx, run, Draw(cc.Seed, run, r.timeouts))
		trials[i] = tr
		var v *Violation
		if len(tr.Broken) > 0 && ctx.Err() == nil {
			mu.Lock()
			first, seen := minimised[tr.Broken[0]]
			if !seen {
				minimised[tr.Broken[0]] = tr.Run
			}
			mu.Unlock()
			if seen {
				v = r.violation(tr, cc)
				v.Note = fmt.Sprintf("not minimised: run %d, which broke the same invariant, was", first)
			} else {
				v = r.minimise(ctx, tr, cc)
			}
		}
		mu.Lock()
		if v != nil {
			broken = append(broken, v)
		}
		r.chaosProgress(tr, v)
		if each != nil {
			each(tr)
		}
		mu.Unlock()
	})
	for _, tr := range trials {
		if tr != nil {
			rep.Trials = append(rep.Trials, tr)
		}
	}
	slices.SortFunc(broken, func(a, b *Violation) int { return a.Run - b.Run })
	rep.Violations = broken
	if rep.Violations == nil {
		rep.Violations = []*Violation{}
	}
	return rep
}

func (r *Runner) chaosProgress(tr *Trial, v *Violation) {
	switch {
	case tr.Error != "":
		fmt.Fprintf(r.cfg.Out, "ERROR    run %-4d %s: normsim could not carry it out: %s\n", tr.Run, tr.Schedule, tr.Error)
		return
	case v == nil:
		fmt.Fprintf(r.cfg.Out, "held     run %-4d %s (%.1fs)\n", tr.Run, tr.Schedule, tr.DurationMs/1000)
		return
	}
	minimised := "minimised to " + v.Minimised.String()
	if v.Note != "" {
		minimised = v.Note
	}
	fmt.Fprintf(r.cfg.Out, "BROKEN   run %-4d %s: %s\n         %s\n         replay: %s\n",
		tr.Run, tr.Schedule, v.Detail, minimised, v.Replay)
}

// minimise takes faults away from a broken run's schedule, whole moves
// first, while the same invariant still breaks, until no single step
// away keeps it broken (or the trials allowed are spent).
func (r *Runner) minimise(ctx context.Context, tr *Trial, cc ChaosConfig) *Violation {
	v := r.violation(tr, cc)
	inv := v.Invariant
	tries := 0
	for tries < cc.MaxMinimise && ctx.Err() == nil {
		shrunk := false
		for _, cand := range smaller(v.Minimised) {
			if tries >= cc.MaxMinimise || ctx.Err() != nil {
				break
			}
			tries++
			got := r.trial(ctx, tr.Run, cand)
			if slices.Contains(got.Broken, inv) {
				v.Minimised, v.Detail = cand, got.Detail
				shrunk = true
				break
			}
		}
		if !shrunk {
			break
		}
	}
	return v
}

// violation is a broken run as drawn, with its replay line.
func (r *Runner) violation(tr *Trial, cc ChaosConfig) *Violation {
	v := &Violation{Run: tr.Run, Invariant: tr.Broken[0], Detail: tr.Detail, Schedule: tr.Schedule, Minimised: tr.Schedule}
	if cc.Replay != nil {
		v.Replay = cc.Replay(cc.Seed, tr.Run)
	}
	return v
}

// smaller are the schedules one step smaller than s: each move left out
// (but the last), then each fault left out.
func smaller(s Schedule) []Schedule {
	var out []Schedule
	if len(s.Moves) > 1 {
		for i := range s.Moves {
			out = append(out, Schedule{Moves: slices.Delete(slices.Clone(s.Moves), i, i+1)})
		}
	}
	for i, mv := range s.Moves {
		for j := range mv.Faults {
			moves := slices.Clone(s.Moves)
			moves[i] = Move{Faults: slices.Delete(slices.Clone(mv.Faults), j, j+1)}
			out = append(out, Schedule{Moves: moves})
		}
	}
	return out
}

// trial makes one chaos run of a schedule and checks the invariants.
func (r *Runner) trial(ctx context.Context, run int, s Schedule) *Trial {
	tr := &Trial{Run: run, Schedule: s}
	start := r.cfg.Now()
	res := &Result{Case: Case{ID: fmt.Sprintf("chaos.%d", run), Strategy: sim.Handover, Kind: "chaos", Moves: s.Moves}, StartedAt: start}
	cr := &caseRun{r: r, res: res, seen: map[string]bool{}}
	err := cr.chaos(ctx, tr)
	done, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeouts.StopGrace.D()+30*time.Second)
	defer cancel()
	if cerr := cr.cleanup(done); cerr != nil && err == nil {
		err = cerr
	}
	cr.collectLogs(done)
	tr.Migrations, tr.Logs, tr.LogsOmitted = res.Migrations, res.Logs, res.LogsOmitted
	if err != nil && len(tr.Broken) == 0 {
		// normsim could not carry the run out: it says nothing of the
		// job, but it must not pass as held either.
		tr.Error = err.Error()
	}
	tr.DurationMs = ms(r.cfg.Now().Sub(start))
	return tr
}

// chaos runs a schedule's moves, checking the invariants after each, then
// a clean handover.
func (cr *caseRun) chaos(ctx context.Context, tr *Trial) error {
	r := cr.r
	nodes, err := r.nodes(ctx)
	if err != nil {
		return err
	}
	in, err := cr.launch(ctx, nodes[0], sim.Handover)
	if err != nil {
		return err
	}
	sendsOutput, err := cr.producing(ctx, in.ID, 3*time.Second)
	if err != nil {
		return err
	}
	ev := &evidence{sendsOutput: sendsOutput}
	breaks := func(inv, format string, a ...any) error {
		tr.Broken = append(tr.Broken, inv)
		tr.Detail = fmt.Sprintf(format, a...)
		return nil
	}
	cur := in.ID
	took := false // a fault killed or stopped a job: the job may be gone
	for i, mv := range tr.Schedule.Moves {
		from, err := r.c.Instance(ctx, cur)
		if err != nil {
			return err
		}
		to := nodes[0]
		if from.Node == nodes[0] {
			to = nodes[1]
		}
		m, err := cr.migrate(ctx, cur, to, mv.Faults)
		if err != nil {
			var notUp *notConnectedError
			var noEnd *noEndError
			if ctx.Err() == nil && errors.As(err, &notUp) {
				return breaks(InvariantHandsAgain, "move %d: the instance to move does not stay connected: %v", i+1, err)
			}
			if ctx.Err() == nil && errors.As(err, &noEnd) {
				return breaks(InvariantEnds, "move %d: %v", i+1, err)
			}
			return fmt.Errorf("move %d: %w", i+1, err)
		}
		ev.moves = append(ev.moves, m)
		if limit := r.timeouts.Longest() + 5*time.Second; m.EndedAt != nil && m.EndedAt.Sub(m.StartedAt) > limit {
			return breaks(InvariantEnds, "move %d took %s, longer than its timeouts allow (%s)", i+1, m.EndedAt.Sub(m.StartedAt).Round(time.Millisecond), limit)
		}
		if hitJob(m) {
			took = true
		}
		if err := cr.observe(ctx, ev, m); err != nil {
			return err
		}
		var cut error // the run was cancelled while checking
		producing := func(id string) bool {
			p, err := cr.producing(ctx, id, 2*time.Second)
			cut = cmp.Or(cut, err)
			return p
		}
		inv, detail := checkMove(m, ev, producing)
		if cut != nil {
			return cut
		}
		if inv != "" {
			return breaks(inv, "move %d (%s): %s", i+1, endOf(m), detail)
		}
		if detail, err := cr.unknownUnits(ctx); err != nil {
			return err
		} else if detail != "" {
			return breaks(InvariantKnown, "after move %d: %s", i+1, detail)
		}
		if len(ev.running) != 1 || !ev.connected {
			break // no one left to move on from
		}
		cur = ev.running[0].ID
	}
	tr.Observed = observed(ev)
	switch {
	case len(ev.running) == 0 && !took:
		return breaks(InvariantHandsAgain, "no instance of the job is left running, though no fault killed or stopped one")
	case len(ev.running) == 1 && ev.connected:
		sv := ev.running[0]
		to := nodes[0]
		if sv.Node == nodes[0] {
			to = nodes[1]
		}
		m, err := cr.migrate(ctx, sv.ID, to, nil)
		if err != nil {
			var notUp *notConnectedError
			if ctx.Err() == nil && errors.As(err, &notUp) {
				return breaks(InvariantHandsAgain, "the one instance left does not stay connected: %v", err)
			}
			return fmt.Errorf("the clean handover: %w", err)
		}
		ev.followUp = m
		tr.Observed = observed(ev)
		if m.State != sim.MigrationCompleted {
			return breaks(InvariantHandsAgain, "the clean handover after the faults %s", endOf(m))
		}
		if o := m.Output; wrongPosition(o) {
			return breaks(InvariantHandsAgain, "the clean handover after the faults: %s", seamText(o))
		}
		if ev.sendsOutput {
			p, err := cr.producing(ctx, m.Target.Instance, 2*time.Second)
			if err != nil {
				return err
			}
			if !p {
				return breaks(InvariantHandsAgain, "the job does not produce after the clean handover")
			}
		}
	}
	return nil
}

// checkMove checks one move against the rollback, no-return and promise
// invariants: the broken one and why, or "".
func checkMove(m *sim.Migration, ev *evidence, producing func(id string) bool) (string, string) {
	if inv, why := checkLifecycle(m, ev, producing); inv != "" {
		return inv, why
	}
	return checkPromises(m)
}

// checkPromises finds a broken promise in the move's judgement: the
// position, who produced, a rolled-back target's silence, and a picture
// that glitches at the seam (a media defect is a wrong position). A target
// whose output never reached the sink is not one of them here: a fault
// may have taken it, and whether the job produces afterwards is
// InvariantHandsAgain's.
func checkPromises(m *sim.Migration) (string, string) {
	j := m.Judged()
	for _, f := range j.Findings {
		if f.Grade != sim.GradeFail {
			continue
		}
		switch f.Check {
		case sim.CheckPosition, sim.CheckProducers, sim.CheckRollback, sim.CheckMedia:
			blame := ""
			if f.AtFault != "" {
				blame = " (at fault: the " + f.AtFault + ")"
			}
			return InvariantPromises, f.Detail + blame
		}
	}
	return "", ""
}

func checkLifecycle(m *sim.Migration, ev *evidence, producing func(id string) bool) (string, string) {
	past := pastNoReturn(m)
	if past && (m.State == sim.MigrationAborted || m.State == sim.MigrationRefused) {
		return InvariantNoReturn, "it passed the point of no return, yet ended " + string(m.State)
	}
	if past {
		for _, in := range ev.running {
			if in.ID == m.Source.Instance && ev.sendsOutput && producing(in.ID) {
				return InvariantNoReturn, "the source produces again after the point of no return"
			}
		}
		return "", ""
	}
	if m.State == sim.MigrationCompleted {
		return "", ""
	}
	for _, in := range ev.running {
		if in.ID == m.Target.Instance {
			return InvariantRollback, "the target " + in.ID + " still runs after the rollback"
		}
	}
	if hitSource(m) {
		return "", ""
	}
	if len(ev.running) == 0 {
		return InvariantRollback, "the source is gone after the rollback, though no fault took it"
	}
	if !inDoubt(m) && ev.producing != nil && !*ev.producing {
		return InvariantRollback, "the source stopped producing after the rollback"
	}
	return "", ""
}

// hitSource says a fault killed or stopped the source in the migration.
func hitSource(m *sim.Migration) bool { return hit(m, "the source") }

// hitJob says a fault killed or stopped either side in the migration.
func hitJob(m *sim.Migration) bool { return hit(m, "the source") || hit(m, "the target") }

func hit(m *sim.Migration, who string) bool {
	for _, d := range faultsFired(m) {
		if strings.HasPrefix(d, "fault: kill "+who) || strings.HasPrefix(d, "fault: stop "+who) {
			return true
		}
	}
	return false
}

// unknownUnits asks the census whether any of the run's instances runs
// where the manager does not hold it running; a unit on its way out is
// given a moment. "" when none.
func (cr *caseRun) unknownUnits(ctx context.Context) (string, error) {
	deadline := time.Now().Add(3 * time.Second)
	for {
		c, err := cr.r.c.Census(ctx)
		if err != nil {
			return "", fmt.Errorf("census: %w", err)
		}
		var stray []string
		for _, u := range c.Units {
			if cr.seen[u.Instance] && !u.Known {
				stray = append(stray, fmt.Sprintf("%s (%s %s, manager: %s)", u.Instance, u.Runtime, u.Ref, stateOr(u.State)))
			}
		}
		if len(stray) == 0 {
			return "", nil
		}
		if time.Now().After(deadline) {
			return strings.Join(stray, ", ") + " still running", nil
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return "", err
		}
	}
}

func stateOr(s sim.InstanceState) string {
	if s == "" {
		return "unknown"
	}
	return string(s)
}
