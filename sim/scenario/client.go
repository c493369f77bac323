package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/normsim/normsim/sim"
)

// APIError is a refusal of the simulator's API.
type APIError struct {
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *APIError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// client calls a simulator's HTTP API.
type client struct {
	base string
	http *http.Client
}

func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.base, "/")+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var eb struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
			return &APIError{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message}
		}
		return &APIError{Status: resp.StatusCode, Code: http.StatusText(resp.StatusCode), Message: strings.TrimSpace(string(data))}
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}

func (c *client) templates(ctx context.Context) ([]sim.Template, error) {
	var out []sim.Template
	return out, c.do(ctx, http.MethodGet, "/api/v1/templates", nil, &out)
}

func (c *client) launch(ctx context.Context, req sim.LaunchRequest) (*sim.Instance, error) {
	var in sim.Instance
	if err := c.do(ctx, http.MethodPost, "/api/v1/instances", req, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

func (c *client) instance(ctx context.Context, id string) (*sim.Instance, error) {
	var in sim.Instance
	if err := c.do(ctx, http.MethodGet, "/api/v1/instances/"+url.PathEscape(id), nil, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

func (c *client) instances(ctx context.Context) ([]sim.Instance, error) {
	var out []sim.Instance
	return out, c.do(ctx, http.MethodGet, "/api/v1/instances", nil, &out)
}

func (c *client) stop(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/instances/"+url.PathEscape(id), nil, nil)
}

func (c *client) migrate(ctx context.Context, id string, body MigrateBody) (*sim.Migration, error) {
	var m sim.Migration
	if err := c.do(ctx, http.MethodPost, "/api/v1/instances/"+url.PathEscape(id)+"/migrate", body, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

func (c *client) migration(ctx context.Context, id string) (*sim.Migration, error) {
	var m sim.Migration
	if err := c.do(ctx, http.MethodGet, "/api/v1/migrations/"+url.PathEscape(id), nil, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

func (c *client) migrations(ctx context.Context, state sim.MigrationState) ([]sim.Migration, error) {
	var out []sim.Migration
	return out, c.do(ctx, http.MethodGet, "/api/v1/migrations?state="+url.QueryEscape(string(state)), nil, &out)
}
