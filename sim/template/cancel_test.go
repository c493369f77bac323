package template

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// countdown is a context that ends at its n-th look (a call of Err or
// Done), wherever in a load that is: a test can stop a load at each point
// it looks, one after the other, without timing anything.
type countdown struct {
	context.Context // Background: no deadline, no values
	mu              sync.Mutex
	left, after     int // looks until it ends; looks since
	done            chan struct{}
}

func newCountdown(n int) *countdown {
	return &countdown{Context: context.Background(), left: n, done: make(chan struct{})}
}

func (c *countdown) look() {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.left > 1:
		c.left--
	case c.left == 1:
		c.left = 0
		close(c.done)
	default:
		c.after++
	}
}

func (c *countdown) Done() <-chan struct{} { c.look(); return c.done }

func (c *countdown) Err() error {
	c.look()
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}

func (c *countdown) looksAfter() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.after
}

// slowTemplate is a valid template whose compose file interpolates n
// ${GREETING} values, so that both compose passes run.
func slowTemplate(tb testing.TB, dir, name string, n int) string {
	tb.Helper()
	var env strings.Builder
	for i := range n {
		fmt.Fprintf(&env, "      V%d: ${GREETING}\n", i)
	}
	p := filepath.Join(dir, name)
	writeFiles(tb, p, tpl("services:\n  app:\n    image: busybox\n    environment:\n"+env.String(),
		"parameters:\n  - name: GREETING\n    purpose: what to say\n    default: hello\n"))
	return p
}

// TestLoadStopsWhereverItIsCancelled (issue 34 item 1): a load cancelled
// at any point where it looks at its context returns context.Canceled and
// no template, whether it was between passes or interpolating compose.yml
// string by string. Past that point it only fails the strings compose-go
// has left to interpolate (its walk goes on past a failed one), one look
// each, and looks once more: it starts no further pass.
func TestLoadStopsWhereverItIsCancelled(t *testing.T) {
	t.Parallel()
	const interpolated = 40
	const strs = interpolated + 1 // and the image
	p := slowTemplate(t, t.TempDir(), "slow", interpolated)
	looks := 0
	for n := 1; ; n++ {
		ctx := newCountdown(n)
		l, err := LoadContext(ctx, p)
		if err == nil {
			if !l.Valid() {
				t.Fatalf("the template is invalid: %v", l.Problems)
			}
			looks = n - 1
			break
		}
		if !errors.Is(err, context.Canceled) || l != nil {
			t.Fatalf("cancelled at look %d: %v, %v; want no template and context.Canceled", n, l, err)
		}
		if a := ctx.looksAfter(); a > strs {
			t.Fatalf("cancelled at look %d, it looked %d more times before returning; want at most %d", n, a, strs)
		}
	}
	// Each interpolated string is a place to stop, so a slow compose
	// load stops part way rather than at its end.
	if looks < interpolated {
		t.Fatalf("the load looked at its context %d times, fewer than the %d strings it interpolates", looks, interpolated)
	}
}

// TestValidatePathsStopsWhenCancelled (issue 34 item 1): cancelled while
// judging several templates, ValidatePaths returns context.Canceled and
// no results, and starts no further template (see
// TestLoadStopsWhereverItIsCancelled for the looks it may take).
func TestValidatePathsStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	const strs = 5 + 1
	dir := t.TempDir()
	var paths []string
	for i := range 3 {
		paths = append(paths, slowTemplate(t, dir, fmt.Sprintf("t%d", i), strs-1))
	}
	for n := 1; ; n++ {
		ctx := newCountdown(n)
		res, _, err := ValidatePaths(ctx, paths)
		if err == nil {
			if len(res) != 3 {
				t.Fatalf("results: %+v", res)
			}
			if n-1 < len(paths)*strs {
				t.Fatalf("ValidatePaths looked at its context %d times for %d templates of %d strings each", n-1, len(paths), strs)
			}
			return
		}
		if !errors.Is(err, context.Canceled) || res != nil {
			t.Fatalf("cancelled at look %d: %+v, %v; want no results and context.Canceled", n, res, err)
		}
		if a := ctx.looksAfter(); a > strs {
			t.Fatalf("cancelled at look %d, it looked %d more times before returning; want at most %d", n, a, strs)
		}
	}
}

// TestSourcesNameTemplatesAsLoadDoes: a catalog keys templates by the
// names Sources gives before loading them; Load must agree.
func TestSourcesNameTemplatesAsLoadDoes(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeFiles(t, filepath.Join(root, "adir"), tpl(oneService, ""))
	tar := writeTar(t, filepath.Join(root, "adir"), "packed.tgz", "", true)
	if err := os.Rename(tar, filepath.Join(root, "packed.tgz")); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, root, map[string]string{"README.md": "# templates\n"})
	srcs, err := Sources(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range srcs {
		names = append(names, s.Name)
		if l := Load(s.Path); l.Template.Name != s.Name {
			t.Errorf("%s: Sources names it %q, Load %q", s.Path, s.Name, l.Template.Name)
		}
	}
	if got := strings.Join(names, ","); got != "adir,packed" {
		t.Errorf("names = %s, want adir,packed", got)
	}
}
