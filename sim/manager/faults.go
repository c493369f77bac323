package manager

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// Fault kinds (docs/faults.md).
const (
	faultKill            = "kill"
	faultStop            = "stop"
	faultPause           = "pause"
	faultDropSocket      = "drop-socket"
	faultWorkerAbort     = "worker-abort"
	faultTargetFailStart = "target-fail-start"
	faultDelayFrame      = "delay-frame"
	faultDropFrame       = "drop-frame"
	faultDuplicateFrame  = "duplicate-frame"
	faultCorruptFrame    = "corrupt-frame"
)

// faultKinds says what each kind needs: a side, an On frame, a Frame.
var faultKinds = map[string]struct{ side, on, frame, signal bool }{
	faultKill:            {side: true, on: true, signal: true},
	faultStop:            {side: true, on: true, signal: true},
	faultPause:           {side: true, on: true, signal: true},
	faultDropSocket:      {side: true, on: true},
	faultWorkerAbort:     {on: true},
	faultTargetFailStart: {},
	faultDelayFrame:      {frame: true},
	faultDropFrame:       {frame: true},
	faultDuplicateFrame:  {frame: true},
	faultCorruptFrame:    {frame: true},
}

var jobFrames = map[string]bool{protocol.TypeHello: true, protocol.TypeState: true, protocol.TypeStateRefused: true,
	protocol.TypeTargetReady: true, protocol.TypeSourceStoppedOutput: true, protocol.TypeTargetApplied: true, protocol.TypeAbort: true}

var workerFrames = map[string]bool{protocol.TypeHelloAck: true, protocol.TypeGetState: true, protocol.TypeInitialState: true,
	protocol.TypeCutoverReady: true, protocol.TypeCutoverApply: true, protocol.TypeAbort: true}

// listenerFrames are the frames the node's listener exchanges as a job
// connects (hello; hello-ack and initial-state in answer): they never pass
// a migration's relay, so no frame fault can act on them.
var listenerFrames = map[string]bool{protocol.TypeHello: true, protocol.TypeHelloAck: true, protocol.TypeInitialState: true}

// armsAtHello says whether any of faults fires on a frame a connection
// begins with (fireAtHelloLocked).
func armsAtHello(faults []sim.Fault) bool {
	for _, f := range faults {
		if faultKinds[f.Kind].on && listenerFrames[f.On] {
			return true
		}
	}
	return false
}

// frameDirection is the direction a frame type travels: in (job → worker)
// or out (worker → job); "" for abort, which travels both ways.
func frameDirection(typ string) string {
	switch {
	case jobFrames[typ] && workerFrames[typ]:
		return ""
	case jobFrames[typ]:
		return dirIn
	case workerFrames[typ]:
		return dirOut
	}
	return ""
}

// validateFaults checks each fault names what its kind needs, that a held
// frame or a paused job is held no longer than one timeout past its phase,
// and that the runtimes can deliver the signals it sends.
func validateFaults(fs []sim.Fault, timeouts sim.Timeouts, srcRuntime, tgtRuntime sim.Runtime) error {
	for i := range fs {
		f := &fs[i]
		at := fmt.Sprintf("faults[%d]", i)
		need, ok := faultKinds[f.Kind]
		if !ok {
			return sim.Errorf(sim.EUnprocessable, "%s.kind: must be one of kill, stop, pause, drop-socket, worker-abort, target-fail-start, delay-frame, drop-frame, duplicate-frame, corrupt-frame; got %q", at, f.Kind)
		}
		if f.Side != "" && f.Side != sideSource && f.Side != sideTarget {
			return sim.Errorf(sim.EUnprocessable, "%s.side: must be source or target; got %q", at, f.Side)
		}
		if need.side && f.Side == "" {
			return sim.Errorf(sim.EUnprocessable, "%s.side: required for %s (source or target)", at, f.Kind)
		}
		if need.on {
			if f.On == "" {
				return sim.Errorf(sim.EUnprocessable, "%s.on: required for %s: the frame type whose passage fires it (e.g. target-ready)", at, f.Kind)
			}
			if !jobFrames[f.On] && !workerFrames[f.On] {
				return sim.Errorf(sim.EUnprocessable, "%s.on: %q is not a frame type of the job socket", at, f.On)
			}
		} else if f.On != "" {
			return sim.Errorf(sim.EUnprocessable, "%s.on: %s fires on its frame, not on another; remove on", at, f.Kind)
		}
		if need.frame {
			if !jobFrames[f.Frame] && !workerFrames[f.Frame] {
				return sim.Errorf(sim.EUnprocessable, "%s.frame: required for %s: a frame type of the job socket; got %q", at, f.Kind, f.Frame)
			}
			if listenerFrames[f.Frame] {
				return sim.Errorf(sim.EUnprocessable, "%s.frame: %s is exchanged by the node's listener as a job connects, before the migration relays anything, so %s cannot act on it; frame faults act on get-state, state, state-refused, target-ready, cutover-ready, source-stopped-output, cutover-apply, target-applied and abort (kill, stop, pause and drop-socket may be armed on: %s)",
					at, f.Frame, f.Kind, f.Frame)
			}
			want := frameDirection(f.Frame)
			switch {
			case f.Direction == "" && want == "":
				return sim.Errorf(sim.EUnprocessable, "%s.direction: required for %s of %s (in or out)", at, f.Kind, f.Frame)
			case f.Direction == "":
				f.Direction = want
			case f.Direction != dirIn && f.Direction != dirOut:
				return sim.Errorf(sim.EUnprocessable, "%s.direction: must be in or out; got %q", at, f.Direction)
			case want != "" && f.Direction != want:
				return sim.Errorf(sim.EUnprocessable, "%s.direction: %s only travels %s", at, f.Frame, want)
			}
		}
		if f.Kind == faultDelayFrame {
			// A frame held past its phase's timeout arrives after the
			// phase gave up on it: the late frame a job and the worker
			// must survive. Held longer than one timeout more, it only
			// ties a goroutine up (a typo of 10m for 10s).
			limit, name := sim.FrameTimeout(f.Frame, timeouts)
			if d := faultDelay(f); d > 2*limit {
				return sim.Errorf(sim.EUnprocessable, "%s.delay: %s is longer than twice the %s timeout (%s) of the phase %s belongs to; a held frame may arrive at most one timeout late (raise timeouts.%s to hold it longer)",
					at, d, name, limit, f.Frame, name)
			}
		}
		if f.Kind == faultPause && f.Delay > 0 {
			// The delay-frame rule, of the phase the frame it is armed on
			// belongs to: a job may stay frozen one timeout past it, which
			// is what a pause is for; more is a typo (1000h for 1s), and
			// the migration's end resumes the job anyway. An unset delay
			// keeps its 1s default.
			limit, name := sim.FrameTimeout(f.On, timeouts)
			if d := f.Delay.D(); d > 2*limit {
				return sim.Errorf(sim.EUnprocessable, "%s.delay: %s is longer than twice the %s timeout (%s) of the phase %s belongs to; a pause may hold a job at most one timeout past its phase (give a delay of at most %s, or raise timeouts.%s to pause longer)",
					at, d, name, limit, f.On, 2*limit, name)
			}
		}
		if need.signal {
			rt := srcRuntime
			if f.Side == sideTarget {
				rt = tgtRuntime
			}
			if _, ok := rt.(sim.Signaler); !ok {
				return sim.Errorf(sim.EUnprocessable, "%s: %s needs a runtime that can signal the %s; %s cannot", at, f.Kind, f.Side, rt.Name())
			}
		}
	}
	return nil
}

func faultDelay(f *sim.Fault) time.Duration {
	if f.Delay > 0 {
		return f.Delay.D()
	}
	return time.Second
}

// frameWay carries one frame on in its direction, as passLocked decides.
type frameWay interface {
	// arrived puts the frame on the timeline as it reached the manager,
	// once; a frame the worker sends goes on it as it is sent instead.
	arrived()
	// pass sends the frame on; faulted says a frame fault acts on it.
	pass(faulted bool) error
	// corrupt sends it on broken.
	corrupt() error
	// hold sends it on once d has passed.
	hold(d time.Duration, what string)
}

// passLocked takes a frame past the armed faults, in either direction, as
// planPassage decides: the faults that strike its side fire first (and one
// that lands loses the frame with its job), then a frame fault drops,
// doubles, corrupts or holds it, then the faults armed on it that strike
// elsewhere fire: here for a frame the worker sends, as it is handled
// (handleSocket) for one a job sent.
func (r *run) passLocked(p passage, w frameWay) error {
	plan := planPassage(r.faults, r.fired, p)
	if len(plan.hits) > 0 {
		// The frame has arrived before the fault armed on it fires: it
		// goes on the timeline first.
		w.arrived()
		if r.hitLocked(p, plan.hits) {
			r.fireLocked(plan.after, p.typ)
			return nil
		}
	}
	var err error
	if plan.frame < 0 {
		err = w.pass(false)
	} else {
		r.fireFaultLocked(plan.frame, p.side)
		f := &r.faults[plan.frame]
		w.arrived()
		r.noteLocked(sim.TimelineFault, r.mig.Phase, sideManager, frameFaultNote(f, p))
		switch f.Kind {
		case faultDropFrame:
		case faultDuplicateFrame:
			if err = w.pass(true); err == nil {
				err = w.pass(true)
			}
		case faultCorruptFrame:
			err = w.corrupt()
		case faultDelayFrame:
			w.hold(faultDelay(f), p.what())
		}
	}
	if p.dir == dirOut {
		r.fireLocked(plan.after, p.typ)
	}
	return err
}

// fireFaultLocked marks fault i fired, and side struck by it: the job it
// strikes, the side a frame fault's frame came from or went to, the target
// whose start it fails. A worker-abort strikes both: the worker's abort
// reaches either job. A side's breach is then excused (stepBroken), the
// other side's is not.
func (r *run) fireFaultLocked(i int, side string) {
	r.fired[i] = true
	if r.faultOn == nil {
		r.faultOn = map[string]bool{}
	}
	if r.faults[i].Kind == faultWorkerAbort || side == "" {
		r.faultOn[sideSource], r.faultOn[sideTarget] = true, true
		return
	}
	r.faultOn[side] = true
}

// hitLocked fires, synchronously, the faults that strike the job on a
// passage's side, and reports whether the frame is lost with the job
// (killed, stopped, or its socket dropped): it is then neither delivered
// nor acted on.
func (r *run) hitLocked(p passage, hits []int) (lost bool) {
	for _, i := range hits {
		f := r.faults[i]
		r.fireFaultLocked(i, f.Side)
		r.noteLocked(sim.TimelineFault, r.mig.Phase, sideManager, fmt.Sprintf("fault: %s the %s (armed on %s)", f.Kind, f.Side, p.typ))
		if r.actLocked(f) && losesFrame(f.Kind) {
			lost = true
		}
	}
	if lost {
		r.recordLocked(r.mig.Phase, sideManager, fmt.Sprintf("%s is lost with the %s", p.typ, p.side), nil)
	}
	return lost
}

// fireOnLocked fires every fault still armed on the passage of a frame
// type (armedOn).
func (r *run) fireOnLocked(typ string) { r.fireLocked(armedOn(r.faults, r.fired, typ), typ) }

// fireLocked fires faults armed on the passage of a frame type that do not
// lose it: those striking a job (actLocked), and worker-abort.
func (r *run) fireLocked(idx []int, typ string) { r.fireEachLocked(idx, typ, false) }

// fireAtHelloLocked fires the faults armed on the frames a connection
// begins with (hello, hello-ack, a target's initial-state) as the listener
// has read the hello and before it writes the answer (sim.SocketHello).
// One that strikes a job lands there and then, so the job never reads
// hello-ack first: queued behind frames, as fireLocked does, it landed
// only after a quick job might have answered. The listener holds the
// job's socket meanwhile; nothing is written to it here.
func (r *run) fireAtHelloLocked(side string) {
	types := []string{protocol.TypeHello, protocol.TypeHelloAck}
	if side == sideTarget && r.initialState != nil {
		types = append(types, protocol.TypeInitialState)
	}
	for _, typ := range types {
		r.fireEachLocked(armedOn(r.faults, r.fired, typ), typ, true)
	}
}

// fireEachLocked is fireLocked; with now, a fault striking a job lands at
// once instead of in line with the frames queued to be written.
func (r *run) fireEachLocked(idx []int, typ string, now bool) {
	for _, i := range idx {
		f := r.faults[i]
		r.fireFaultLocked(i, f.Side)
		who := "the " + f.Side
		if f.Side == "" {
			who = "the migration"
		}
		r.noteLocked(sim.TimelineFault, r.mig.Phase, sideManager, fmt.Sprintf("fault: %s %s (armed on %s)", f.Kind, who, typ))
		if f.Kind == faultWorkerAbort {
			// The worker decides here: an answer relayed after this
			// would be a point of no return the worker never allowed.
			r.decideLocked(input{kind: inBound})
			r.toSteps(runEvent{kind: evFault, reason: "the worker aborted (fault armed on " + f.On + ")"})
			continue
		}
		// The job it strikes is the one there now; it strikes in line
		// with the frames, after those decided before it were written
		// (flushWrites).
		role, node, ok := r.faultSideLocked(f)
		switch {
		case !ok:
		case now:
			r.actOnLocked(f, role, node)
		default:
			r.queueWriteLocked(&pendingWrite{strikeLocked: func() { r.actOnLocked(f, role, node) }})
		}
	}
}

// faultSideLocked is the instance a fault strikes now and its node; ok is
// false, and the timeline says the fault was skipped, while there is none
// (a target not yet placed).
func (r *run) faultSideLocked(f sim.Fault) (role string, node *Node, ok bool) {
	role, node = r.src.ID, r.srcNode
	if f.Side == sideTarget {
		role, node = r.mig.Target.Instance, r.tgtNode
	}
	if role == "" {
		r.recordLocked(r.mig.Phase, sideManager, "fault "+f.Kind+" skipped: there is no "+f.Side+" yet", nil)
		return "", nil, false
	}
	return role, node, true
}

// actLocked carries out a fault on the job it strikes now and reports
// whether it landed.
func (r *run) actLocked(f sim.Fault) bool {
	role, node, ok := r.faultSideLocked(f)
	return ok && r.actOnLocked(f, role, node)
}

// actOnLocked carries out a fault on the instance role and reports whether
// it landed. A pause thaws the job again after its delay, in the
// background.
func (r *run) actOnLocked(f sim.Fault, role string, node *Node) bool {
	// Looked up only for the faults that signal: validateFaults made sure
	// their side's runtime can.
	signaler := func() sim.Signaler {
		if f.Side == sideTarget {
			return r.rt.(sim.Signaler)
		}
		return r.m.runtimes().Runtimes[r.src.Runtime].(sim.Signaler)
	}
	ctx, cancel := context.WithTimeout(r.m.ctx, 10*time.Second)
	defer cancel()
	var err error
	switch f.Kind {
	case faultDropSocket:
		conn := node.Socket.Drop(r.src.JobID, role)
		if conn == 0 {
			r.recordLocked(r.mig.Phase, sideManager, "fault drop-socket did nothing: the "+f.Side+" is not connected", nil)
			return false
		}
		r.cut = append(r.cut, cutConn{role, conn})
	case faultKill:
		err = signaler().Signal(ctx, role, syscall.SIGKILL)
	case faultStop:
		err = signaler().Signal(ctx, role, syscall.SIGTERM)
	case faultPause:
		if r.pausesOver {
			r.recordLocked(r.mig.Phase, sideManager, "fault pause skipped: the migration is ending, and a pause does not outlive it", nil)
			return false
		}
		sg := signaler()
		if err = sg.Signal(ctx, role, syscall.SIGSTOP); err == nil {
			d := faultDelay(&f)
			r.recordLocked(r.mig.Phase, f.Side, fmt.Sprintf("paused for %s", d), nil)
			p := &heldPause{role: role, side: f.Side, sg: sg, ended: make(chan struct{})}
			r.pauses = append(r.pauses, p)
			r.m.wg.Add(1)
			go func() {
				defer r.m.wg.Done()
				t := time.NewTimer(d)
				defer t.Stop()
				select {
				case <-t.C:
				case <-r.m.ctx.Done():
				case <-p.ended:
					// The migration's end resumed the job already: a
					// second SIGCONT could thaw a later migration's pause.
					return
				}
				if !r.claimPause(p) {
					return
				}
				err := sg.Signal(context.Background(), role, syscall.SIGCONT)
				r.post(runEvent{kind: evCall, call: func() {
					if err != nil {
						r.recordHere(sideManager, "could not resume the "+f.Side+": "+err.Error(), nil)
						return
					}
					r.recordHere(f.Side, "resumed", nil)
				}})
			}()
		}
	}
	if err != nil {
		r.recordLocked(r.mig.Phase, sideManager, fmt.Sprintf("fault %s could not be delivered: %v", f.Kind, err), nil)
		return false
	}
	if f.Side == sideSource && (f.Kind == faultKill || f.Kind == faultStop) {
		r.sourceSignalled = true
	}
	if f.Kind != faultPause && r.struck == "" {
		r.struck = f.Kind + " struck the " + f.Side
	}
	return true
}

// heldPause is a pause fault that landed on a job: resumed once, by the
// end of its delay or by the end of its migration, whichever comes first.
type heldPause struct {
	role, side string
	sg         sim.Signaler
	done       bool          // claimed for its resume (guarded by the run's mu)
	ended      chan struct{} // closed as the migration's end claims it
}

// claimPause takes p's resume for the caller; false when it was taken.
func (r *run) claimPause(p *heldPause) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.done {
		return false
	}
	p.done = true
	return true
}

// resumePaused resumes every job a pause fault of the migration still
// holds, as it ends: a simulated fault must not outlive its migration,
// and a frozen job the record calls running would be a lie. A job whose
// instance is gone or ended is left alone.
func (r *run) resumePaused() {
	r.mu.Lock()
	r.pausesOver = true
	var held []*heldPause
	for _, p := range r.pauses {
		if !p.done {
			p.done = true
			close(p.ended)
			held = append(held, p)
		}
	}
	r.mu.Unlock()
	resumed := map[string]bool{}
	for _, p := range held {
		if resumed[p.role] {
			continue // one SIGCONT thaws every pause of the job
		}
		resumed[p.role] = true
		r.m.mu.Lock()
		in := r.m.instances[p.role]
		alive := in != nil && !in.State.Terminal()
		r.m.mu.Unlock()
		if !alive {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := p.sg.Signal(ctx, p.role, syscall.SIGCONT)
		cancel()
		if err != nil {
			r.recordHere(sideManager, "could not resume the "+p.side+" as the migration ended: "+err.Error(), nil)
			continue
		}
		r.recordHere(p.side, "resumed: the migration ended while its pause fault held the "+p.side, nil)
	}
}
