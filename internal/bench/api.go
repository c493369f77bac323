package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/normsim/normsim/apiclient"
)

// API is the API client (package apiclient) with a transport sized for load:
// it keeps enough connections open that a thousand concurrent handovers do
// not churn through ephemeral ports.
type API struct {
	*apiclient.Client
	hc *http.Client
	// d drives the jobs as every client of this module does: a handover
	// refused NOT_CONNECTED is asked again once the source is connected
	// (it never is refused so after hello-ack; see LaunchConnected), and a
	// migration's end is read without its logs.
	d apiclient.Driver
}

// NewAPI returns a client of the sim at base (http://host:port) that keeps
// up to conns connections open.
func NewAPI(base string, conns int) *API {
	if conns < 2 {
		conns = 2
	}
	tr := &http.Transport{
		Proxy:               nil, // the sim is local: never through $HTTP_PROXY
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		IdleConnTimeout:     30 * time.Second,
	}
	hc := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	c := apiclient.New(base, hc)
	return &API{Client: c, hc: hc, d: apiclient.Driver{C: c, Retry: apiclient.DefaultRetry, Fetch: apiclient.FetchTimeline}}
}

// Close drops the idle connections.
func (a *API) Close() { a.hc.CloseIdleConnections() }

// WaitReady polls url until it answers 200 or ctx ends.
func WaitReady(ctx context.Context, url string) error {
	c := &http.Client{Timeout: time.Second}
	for {
		if resp, err := c.Get(url); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("%s never answered 200: %w", url, ctx.Err())
		}
	}
}
