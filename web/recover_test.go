package web_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/normsim/normsim/sim"
)

// panickyService panics where a handler asks for the nodes.
type panickyService struct{ *fakeService }

func (panickyService) Nodes() []sim.Node { panic("nodes exploded") }

// A handler that panics answers 500 with the API's error shape and a logged
// stack; the server goes on serving.
func TestHandlerPanicIsA500(t *testing.T) {
	var logs bytes.Buffer
	h := newServer(t, panickyService{newFake()}, slog.New(slog.NewTextHandler(&logs, nil)))
	resp := get(t, h, "/api/v1/nodes")
	if resp.Status != http.StatusInternalServerError || !strings.Contains(resp.Body, `"code": "`+sim.EInternal+`"`) {
		t.Fatalf("panicking handler: %d %s", resp.Status, resp.Body)
	}
	if !strings.Contains(logs.String(), "nodes exploded") || !strings.Contains(logs.String(), "goroutine") {
		t.Fatalf("log lacks the panic and its stack:\n%s", logs.String())
	}
	if resp := get(t, h, "/api/v1/templates"); resp.Status != http.StatusOK {
		t.Fatalf("after the panic: %d %s", resp.Status, resp.Body)
	}
}
