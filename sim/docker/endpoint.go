package docker

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/docker/cli/cli/connhelper"
	"github.com/docker/cli/cli/context/docker"
	"github.com/docker/docker/client"
)

// endpointOpts are the engine client's options for the endpoint the docker
// CLI resolved (DOCKER_HOST and its TLS variables, or a context), reached
// the way the CLI reaches it: ssh:// through `ssh … docker system
// dial-stdio`, tcp:// with the context's TLS material, a socket as is. The
// CLI builds its own client from the same endpoint, but of another client
// module (github.com/moby/moby/client), so this one is built alike here.
func endpointOpts(ep docker.Endpoint) ([]client.Opt, error) {
	if ep.Host == "" {
		return nil, nil
	}
	helper, err := connhelper.GetConnectionHelper(ep.Host)
	if err != nil {
		return nil, err
	}
	if helper != nil {
		return []client.Opt{
			client.WithHTTPClient(&http.Client{Transport: &http.Transport{DialContext: helper.Dialer}}),
			client.WithHost(helper.Host),
			client.WithDialContext(helper.Dialer),
		}, nil
	}
	opts := []client.Opt{client.WithHost(ep.Host)}
	if strings.HasPrefix(ep.Host, "unix://") || strings.HasPrefix(ep.Host, "npipe://") {
		return opts, nil // a socket needs no TLS
	}
	cfg, err := endpointTLS(ep)
	if err != nil || cfg == nil {
		return opts, err
	}
	return append([]client.Opt{client.WithHTTPClient(&http.Client{
		Transport: &http.Transport{
			TLSClientConfig: cfg,
			DialContext:     (&net.Dialer{KeepAlive: 30 * time.Second, Timeout: 30 * time.Second}).DialContext,
		},
		CheckRedirect: client.CheckRedirect,
	})}, opts...), nil
}

// endpointTLS is the TLS configuration of an endpoint's material (a
// context's ca.pem, cert.pem and key.pem, or DOCKER_CERT_PATH's), nil when
// it has none and verifies.
func endpointTLS(ep docker.Endpoint) (*tls.Config, error) {
	if ep.TLSData == nil && !ep.SkipTLSVerify {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: ep.SkipTLSVerify} //nolint:gosec // the context asks for it
	if d := ep.TLSData; d != nil {
		if d.CA != nil {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(d.CA) {
				return nil, errors.New("the docker endpoint's ca.pem holds no certificate")
			}
			cfg.RootCAs = pool
		}
		if d.Cert != nil && d.Key != nil {
			pair, err := tls.X509KeyPair(d.Cert, d.Key)
			if err != nil {
				return nil, fmt.Errorf("the docker endpoint's cert.pem and key.pem: %w", err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
	}
	return cfg, nil
}
