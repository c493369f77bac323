// Command barehttp is the peer normsim's start-up is measured against: a
// bare net/http server that answers 200 on /readyz, listening on -addr,
// and shuts down on SIGINT or SIGTERM. It does nothing else.
package main

import (
	"context"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	version := flag.Bool("version", false, "print a version and exit (the exec-only peer of normsim version)")
	flag.Parse()
	if *version {
		os.Stdout.WriteString("barehttp\n")
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		os.Stderr.WriteString("barehttp: " + err.Error() + "\n")
		os.Exit(1)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})}
	go srv.Serve(ln)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	srv.Shutdown(sctx)
}
