// Command normsim simulates a Norsk manager and worker nodes on one machine
// so job migration and handover code can be tested locally and in CI.
package main

import (
	"embed"
	"io/fs"
	"os"

	"github.com/normsim/normsim/cli"
	"github.com/normsim/normsim/internal/initgc"
)

// The product templates ship inside the binary, so `normsim up` on a fresh
// machine (no ./templates) still has something to launch.
//
//go:embed all:templates
var templates embed.FS

func main() {
	initgc.Start()
	sub, err := fs.Sub(templates, "templates")
	if err != nil {
		panic(err)
	}
	os.Exit(cli.Main(os.Args[1:], cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, Templates: sub, CollectorOn: initgc.Restore}))
}
