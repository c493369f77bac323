package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/normsim/normsim/protocol"
	"github.com/normsim/normsim/sim"
)

// BareSim is the peer a handover's cost is measured against, as RawRelay
// is the cutover's: a server that does only what the bench's jobs and API
// calls need of a sim, over the same sockets and libraries (net/http,
// coder/websocket, the protocol package's frames): it launches, answers
// each job's hello, drives the handover sequence, closes the source and
// says the migration completed. It keeps no record, store, timeline or
// log, checks nothing a well-behaved bench job could break, and times
// nothing out. What the sim costs beyond it is what its fidelity costs.
type BareSim struct {
	api, sockets *http.Server
	apiURL       string
	socketPort   int
	wg           sync.WaitGroup

	mu         sync.Mutex
	next       int
	instances  map[string]*bareInstance // by ID
	byToken    map[string]*bareInstance
	migrations map[string]*bareMigration
}

type bareInstance struct {
	id, job, node, token string
	// migration is the migration the instance is in (a job's frames do
	// not name it: the worker knows), as its source or its target.
	migration *bareMigration
	conn      *websocket.Conn
}

type bareMigration struct {
	doc            sim.Migration // under BareSim.mu
	source, target *bareInstance
	state          json.RawMessage
	done           chan struct{} // closed when it ends
}

// bareNodes are the two nodes; both share one job-socket listener.
var bareNodes = [2]string{"a", "b"}

// OpenBareSim listens on two free loopback ports, one for the API and one
// for the job sockets, and serves.
func OpenBareSim() (*BareSim, error) {
	apiLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	sockLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		apiLn.Close()
		return nil, err
	}
	b := &BareSim{
		apiURL:     "http://" + apiLn.Addr().String(),
		socketPort: sockLn.Addr().(*net.TCPAddr).Port,
		instances:  map[string]*bareInstance{},
		byToken:    map[string]*bareInstance{},
		migrations: map[string]*bareMigration{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/nodes", b.nodes)
	mux.HandleFunc("POST /api/v1/instances", b.launch)
	mux.HandleFunc("DELETE /api/v1/instances/{id}", b.remove)
	mux.HandleFunc("POST /api/v1/instances/{id}/migrate", b.migrate)
	mux.HandleFunc("GET /api/v1/migrations/{id}", b.migration)
	b.api = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	b.sockets = &http.Server{Handler: http.HandlerFunc(b.socket), ReadHeaderTimeout: 5 * time.Second}
	for srv, ln := range map[*http.Server]net.Listener{b.api: apiLn, b.sockets: sockLn} {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			srv.Serve(ln)
		}()
	}
	return b, nil
}

// URL is the API's base URL.
func (b *BareSim) URL() string { return b.apiURL }

// Close stops serving and drops every job's connection.
func (b *BareSim) Close() error {
	err := errors.Join(b.api.Close(), b.sockets.Close())
	b.mu.Lock()
	for _, in := range b.instances {
		if in.conn != nil {
			in.conn.CloseNow()
		}
	}
	b.mu.Unlock()
	b.wg.Wait()
	return err
}

func (b *BareSim) nodes(w http.ResponseWriter, r *http.Request) {
	out := make([]sim.NodeView, 0, len(bareNodes))
	for _, n := range bareNodes {
		out = append(out, sim.NodeView{Name: n, Socket: &sim.SocketView{URL: fmt.Sprintf("ws://127.0.0.1:%d", b.socketPort)}})
	}
	bareJSON(w, http.StatusOK, out)
}

// newInstanceLocked places an external instance of job on node.
func (b *BareSim) newInstanceLocked(job, node string) *bareInstance {
	b.next++
	n := strconv.Itoa(b.next)
	in := &bareInstance{id: "bare-" + n, job: job, node: node, token: "token-" + n}
	if in.job == "" {
		in.job = "job-" + n
	}
	b.instances[in.id] = in
	b.byToken[in.token] = in
	return in
}

// env is the launch contract's env of the instance's one service.
func (b *BareSim) env(in *bareInstance) map[string]map[string]string {
	return map[string]map[string]string{"job": {
		protocol.EnvURL:   protocol.URL("127.0.0.1", b.socketPort, in.job, in.id),
		protocol.EnvToken: in.token,
	}}
}

func (b *BareSim) launch(w http.ResponseWriter, r *http.Request) {
	var req sim.LaunchRequest
	if !bareDecode(w, r, &req) {
		return
	}
	b.mu.Lock()
	in := b.newInstanceLocked("", req.Node)
	b.mu.Unlock()
	bareJSON(w, http.StatusCreated, sim.Instance{ID: in.id, JobID: in.job, Node: in.node, Template: req.Template,
		Runtime: sim.RuntimeExternal, State: sim.InstanceRunning, Env: b.env(in)})
}

func (b *BareSim) remove(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	in := b.instances[r.PathValue("id")]
	if in != nil {
		delete(b.instances, in.id)
		delete(b.byToken, in.token)
	}
	b.mu.Unlock()
	if in == nil {
		bareError(w, http.StatusNotFound, "no such instance")
		return
	}
	if in.conn != nil {
		in.conn.Close(websocket.StatusNormalClosure, "instance stopped")
	}
	w.WriteHeader(http.StatusNoContent)
}

func (b *BareSim) migrate(w http.ResponseWriter, r *http.Request) {
	var req sim.MigrateRequest
	if !bareDecode(w, r, &req) {
		return
	}
	b.mu.Lock()
	src := b.instances[r.PathValue("id")]
	if src == nil || src.conn == nil {
		b.mu.Unlock()
		bareError(w, http.StatusConflict, "no such connected instance")
		return
	}
	b.next++
	m := &bareMigration{source: src, done: make(chan struct{}), doc: sim.Migration{
		ID: "mig-" + strconv.Itoa(b.next), JobID: src.job, Strategy: sim.Handover, State: sim.MigrationRunning,
		Source: sim.MigrationEndpoint{Instance: src.id, Node: src.node, Runtime: sim.RuntimeExternal},
		Target: sim.MigrationEndpoint{Node: req.To, Runtime: sim.RuntimeExternal}, StartedAt: time.Now()}}
	b.migrations[m.doc.ID] = m
	src.migration = m
	doc := m.doc
	b.mu.Unlock()
	if err := bareSend(r.Context(), src.conn, protocol.WorkerFrame{Type: protocol.TypeGetState, MigrationID: doc.ID}); err != nil {
		bareError(w, http.StatusBadGateway, err.Error())
		return
	}
	bareJSON(w, http.StatusCreated, doc)
}

// migration answers with the migration's document; with ?wait, once it
// has ended or the wait ran out (the bench waits only for the end).
func (b *BareSim) migration(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	m := b.migrations[r.PathValue("id")]
	b.mu.Unlock()
	if m == nil {
		bareError(w, http.StatusNotFound, "no such migration")
		return
	}
	if wait, err := time.ParseDuration(r.URL.Query().Get("wait")); err == nil && wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-m.done:
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
	}
	b.mu.Lock()
	doc := m.doc
	b.mu.Unlock()
	bareJSON(w, http.StatusOK, doc)
}

// socket serves one job: its hello, then the frames of its handovers.
func (b *BareSim) socket(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true, CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return
	}
	c.SetReadLimit(protocol.MaxFrameBytes + 1)
	ctx := context.WithoutCancel(r.Context())
	hello, err := bareRead(ctx, c)
	if err != nil || hello.Type != protocol.TypeHello {
		c.Close(websocket.StatusPolicyViolation, "hello first")
		return
	}
	b.mu.Lock()
	in := b.byToken[hello.Token]
	if in != nil {
		in.conn = c
	}
	b.mu.Unlock()
	if in == nil {
		c.Close(websocket.StatusPolicyViolation, "unknown token")
		return
	}
	b.mu.Lock()
	m := in.migration // a target's; a source's comes with a migrate request
	b.mu.Unlock()
	ack := protocol.WorkerFrame{Type: protocol.TypeHelloAck}
	if m != nil {
		ack.Migration = &protocol.MigrationRef{ID: m.doc.ID, Side: "target"}
	}
	if bareSend(ctx, c, ack) != nil {
		return
	}
	if m != nil {
		if bareSend(ctx, c, protocol.WorkerFrame{Type: protocol.TypeInitialState, MigrationID: m.doc.ID, Payload: m.state}) != nil {
			return
		}
	}
	for {
		f, err := bareRead(ctx, c)
		if err != nil {
			return
		}
		b.step(ctx, in, f)
	}
}

// step takes one frame of a handover from the job of in.
func (b *BareSim) step(ctx context.Context, in *bareInstance, f protocol.JobFrame) {
	b.mu.Lock()
	m := in.migration
	b.mu.Unlock()
	if m == nil {
		return
	}
	switch f.Type {
	case protocol.TypeState: // from the source: place the target
		b.mu.Lock()
		m.state = f.Payload
		tgt := b.newInstanceLocked(m.source.job, m.doc.Target.Node)
		tgt.migration, m.target = m, tgt
		m.doc.Target.Instance, m.doc.Target.Env = tgt.id, b.env(tgt)
		b.mu.Unlock()
	case protocol.TypeTargetReady:
		bareSend(ctx, m.source.conn, protocol.WorkerFrame{Type: protocol.TypeCutoverReady, MigrationID: m.doc.ID})
	case protocol.TypeSourceStoppedOutput:
		bareSend(ctx, m.target.conn, protocol.WorkerFrame{Type: protocol.TypeCutoverApply, MigrationID: m.doc.ID, Payload: f.Payload})
	case protocol.TypeTargetApplied:
		m.source.conn.Close(websocket.StatusNormalClosure, "")
		b.mu.Lock()
		now := time.Now()
		m.doc.State, m.doc.Phase, m.doc.EndedAt = sim.MigrationCompleted, sim.PhaseStopSource, &now
		m.doc.Result.Applied = f.Applied
		b.mu.Unlock()
		close(m.done)
	}
}

func bareRead(ctx context.Context, c *websocket.Conn) (protocol.JobFrame, error) {
	_, data, err := c.Read(ctx)
	if err != nil {
		return protocol.JobFrame{}, err
	}
	return protocol.ParseJobFrame(data)
}

func bareSend(ctx context.Context, c *websocket.Conn, f protocol.WorkerFrame) error {
	data, err := f.Marshal()
	if err != nil {
		return err
	}
	return c.Write(ctx, websocket.MessageText, data)
}

// bareDecode reads the request's JSON body into v, or answers 400.
func bareDecode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		bareError(w, http.StatusBadRequest, err.Error())
		return false
	}
	return true
}

func bareError(w http.ResponseWriter, status int, msg string) {
	bareJSON(w, status, map[string]string{"error": msg})
}

func bareJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
