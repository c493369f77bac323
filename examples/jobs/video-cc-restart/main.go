// Command video-cc-restart is the video example job made to misbehave on purpose: the target starts its continuity counters at 0 without setting the discontinuity_indicator.
// It exists so normsim's media seam checks have a real defect to find.
package main

import "github.com/normsim/normsim/examples/jobs/internal/videojob"

func main() { videojob.Main("cc-restart") }
