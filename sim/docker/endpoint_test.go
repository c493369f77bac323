package docker

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// inChild runs the test again in a fresh process and reports whether this
// is that process: the docker CLI reads DOCKER_CONFIG once per process.
func inChild(t *testing.T) bool {
	t.Helper()
	if os.Getenv("NORMSIM_CONTEXT_CHILD") == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), "NORMSIM_CONTEXT_CHILD="+t.Name())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return false
}

// useContext writes a docker context named normsim-test for host into a
// fresh DOCKER_CONFIG, with TLS files (ca.pem, cert.pem, key.pem) when
// given, and makes it the current one, as `docker context create` and
// `docker context use` would.
func useContext(t *testing.T, host string, tlsFiles map[string][]byte) {
	t.Helper()
	cfg, name := t.TempDir(), "normsim-test"
	sum := sha256.Sum256([]byte(name))
	id := hex.EncodeToString(sum[:])
	meta := filepath.Join(cfg, "contexts", "meta", id)
	must(t, os.MkdirAll(meta, 0o755))
	b, _ := json.Marshal(map[string]any{"Name": name, "Metadata": map[string]any{},
		"Endpoints": map[string]any{"docker": map[string]any{"Host": host, "SkipTLSVerify": false}}})
	must(t, os.WriteFile(filepath.Join(meta, "meta.json"), b, 0o644))
	if len(tlsFiles) > 0 {
		dir := filepath.Join(cfg, "contexts", "tls", id, "docker")
		must(t, os.MkdirAll(dir, 0o700))
		for f, data := range tlsFiles {
			must(t, os.WriteFile(filepath.Join(dir, f), data, 0o600))
		}
	}
	b, _ = json.Marshal(map[string]any{"currentContext": name})
	must(t, os.WriteFile(filepath.Join(cfg, "config.json"), b, 0o644))
	t.Setenv("DOCKER_CONFIG", cfg)
	t.Setenv("DOCKER_HOST", "")
	os.Unsetenv("DOCKER_HOST")
	os.Unsetenv("DOCKER_CONTEXT")
	t.Setenv("DOCKER_API_VERSION", "")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// selfSigned is a certificate for 127.0.0.1 and its key, PEM-encoded.
func selfSigned(t *testing.T, cn string) (certPEM, keyPEM []byte, cert tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	cert, err = tls.X509KeyPair(certPEM, keyPEM)
	must(t, err)
	return certPEM, keyPEM, cert
}

// A context whose engine needs mutual TLS (Docker's tcp://…:2376 set-up,
// as `docker context create --docker host=…,ca=…,cert=…,key=…` writes it)
// is reached with the context's certificates.
func TestDockerTLSContextIsReached(t *testing.T) {
	if !inChild(t) {
		return
	}
	serverPEM, _, serverCert := selfSigned(t, "engine")
	clientPEM, clientKey, _ := selfSigned(t, "normsim")
	clients := x509.NewCertPool()
	clients.AppendCertsFromPEM(clientPEM)
	srv := httptest.NewUnstartedServer(&fakeEngine{})
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clients}
	srv.StartTLS()
	defer srv.Close()
	host := "tcp://" + strings.TrimPrefix(srv.URL, "https://")
	useContext(t, host, map[string][]byte{"ca.pem": serverPEM, "cert.pem": clientPEM, "key.pem": clientKey})

	r, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background(), true)
	if err := r.Ping(t.Context()); err != nil {
		t.Fatalf("the TLS context's engine: %v", err)
	}
	if got := r.Client().DaemonHost(); got != host || r.dockerCli.CurrentContext() != "normsim-test" {
		t.Errorf("engine %s of context %s, want %s of normsim-test", got, r.dockerCli.CurrentContext(), host)
	}
}

// A context on ssh:// is reached as the docker CLI reaches it: `ssh HOST
// docker system dial-stdio`, here an ssh on PATH that bridges its stdio to
// the engine.
func TestDockerSSHContextIsReached(t *testing.T) {
	if addr := os.Getenv("NORMSIM_FAKE_SSH_TO"); addr != "" {
		bridge(addr) // this process is the fake ssh
	}
	if !inChild(t) {
		return
	}
	srv := httptest.NewServer(&fakeEngine{})
	defer srv.Close()
	bin := t.TempDir()
	script := "#!/bin/sh\necho \"$@\" >> " + filepath.Join(bin, "args") + "\nNORMSIM_FAKE_SSH_TO=" + strings.TrimPrefix(srv.URL, "http://") +
		" exec " + os.Args[0] + " -test.run=^TestDockerSSHContextIsReached$\n"
	must(t, os.WriteFile(filepath.Join(bin, "ssh"), []byte(script), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	useContext(t, "ssh://builder@engine.example", nil)

	r, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background(), true)
	if err := r.Ping(t.Context()); err != nil {
		t.Fatalf("the ssh context's engine: %v", err)
	}
	args, _ := os.ReadFile(filepath.Join(bin, "args"))
	if !strings.Contains(string(args), "-l builder") || !strings.Contains(string(args), "engine.example docker system dial-stdio") {
		t.Errorf("ssh was run as %q, want the docker CLI's dial-stdio to builder@engine.example", args)
	}
}

// bridge copies stdin to addr and addr to stdout, then exits: what `docker
// system dial-stdio` does on the far side of ssh.
func bridge(addr string) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		os.Exit(1)
	}
	go func() {
		io.Copy(c, os.Stdin)
		c.(*net.TCPConn).CloseWrite()
	}()
	io.Copy(os.Stdout, c)
	os.Exit(0)
}
