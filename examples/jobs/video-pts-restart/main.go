// Command video-pts-restart is the video example job made to misbehave on purpose: the target starts at the frame it was handed but restarts the PTS at 0.
// It exists so normsim's media seam checks have a real defect to find.
package main

import "github.com/normsim/normsim/examples/jobs/internal/videojob"

func main() { videojob.Main("pts-restart") }
