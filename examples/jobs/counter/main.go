// Command counter is normsim's example job: it sends a sequence number to its
// output at a steady rate and hands over at an exact position (see package
// counterjob for the details and the env it reads).
package main

import "github.com/normsim/normsim/examples/jobs/internal/counterjob"

func main() { counterjob.Main("") }
