// Package web is normsim's HTTP face: the JSON API under /api/v1, the
// dashboard pages with their embedded assets, and the live event stream. It
// talks to the simulator through the Service interface and sim types only.
package web
