// Command restarts-at-zero is the counter example job made to misbehave on purpose: it numbers its output from 0 whenever it starts, and as a migration target ignores the position it is handed.
// normsim's scenario examples/scenarios/misbehaving-restarts-at-zero.yaml proves normsim catches it.
package main

import "github.com/normsim/normsim/examples/jobs/internal/counterjob"

func main() { counterjob.Main("restart-at-zero") }
