package cli

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/normsim/normsim/sim/template"
)

// TestValidateReturnsWhenInterruptedMidLoad (issue 34, a fresh attack's
// F4): interrupted while a load is inside a step that does not look at
// the context (compose-go), validate exits 130 at once instead of waiting
// for the step to end.
func TestValidateReturnsWhenInterruptedMidLoad(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	validatePaths = func(ctx context.Context, paths []string) ([]template.Result, []string, error) {
		<-release // deaf to ctx, as compose-go is
		return nil, nil, nil
	}
	defer func() { validatePaths = template.ValidatePaths }()
	ctx, cancel := context.WithCancel(context.Background())
	root := NewRoot(Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})
	root.SetArgs([]string{"validate", "somewhere"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	cancel()
	select {
	case err := <-done:
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != 130 {
			t.Fatalf("err %v, want exit 130", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("validate waited for a load that does not stop")
	}
}
