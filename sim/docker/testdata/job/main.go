// Command job is the docker runtime tests' stand-in for a job: it prints
// what the launch contract gives it, resolves the job socket's host, then
// serves until SIGTERM.
//
//	GREETING, NORSK_WORKER_WS_URL  printed as NAME=value
//	JOB_RESOLVE=a,b                the hosts to resolve and print as host=addrs
//	                               (default host.docker.internal)
//	JOB_EXIT=n                     exit with code n at once (after printing)
//	JOB_LISTEN=:port               serve HTTP ("hello from <GREETING>")
//	JOB_READ=path                  print the file's content
//	JOB_IGNORE_TERM=1              ignore SIGTERM (a stop must kill it)
//	job health                     exit 0: a healthcheck that passes
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "health" {
		os.Exit(0)
	}
	// First thing: as PID 1 in a container, a SIGTERM that comes before
	// the handler is in place is dropped by the kernel, not fatal.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	if os.Getenv("JOB_IGNORE_TERM") == "1" {
		signal.Reset(syscall.SIGTERM, syscall.SIGINT)
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
	}
	fmt.Printf("GREETING=%s\n", os.Getenv("GREETING"))
	fmt.Printf("NORSK_WORKER_WS_URL=%s\n", os.Getenv("NORSK_WORKER_WS_URL"))
	hosts := os.Getenv("JOB_RESOLVE")
	if hosts == "" {
		hosts = "host.docker.internal"
	}
	for _, h := range strings.Split(hosts, ",") {
		addrs, err := net.LookupHost(h)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", h, err)
			continue
		}
		fmt.Printf("%s=%s\n", h, strings.Join(addrs, ","))
	}
	if p := os.Getenv("JOB_READ"); p != "" {
		b, err := os.ReadFile(p)
		fmt.Printf("read %s: %q %v\n", p, b, err)
	}
	if v := os.Getenv("JOB_EXIT"); v != "" {
		code, _ := strconv.Atoi(v)
		fmt.Fprintf(os.Stderr, "exiting with code %d\n", code)
		os.Exit(code)
	}
	if addr := os.Getenv("JOB_LISTEN"); addr != "" {
		greeting := os.Getenv("GREETING")
		go http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "hello from %s", greeting)
		}))
	}
	fmt.Printf("received %v\n", <-sig)
	os.Exit(0)
}
