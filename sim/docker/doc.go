// Package docker implements sim.Runtime on a local Docker engine through
// the Compose SDK (github.com/docker/compose/v5), the library the
// `docker compose` command is built on: each instance's LaunchSpec carries
// its whole compose project, which the SDK creates, starts (depends_on
// conditions included), stops and removes exactly as `docker compose`
// would, so a product template behaves here as it does under the real
// system. A spec built by hand, without a project, is turned into the
// project its services describe and takes the same path.
//
// The package owns everything it creates: containers, networks and named
// volumes carry the label io.normsim.managed=true (beside compose's own
// com.docker.compose.* labels) next to the launch
// contract's io.normsim.* labels, which is how a later run finds the
// leftovers of an earlier one: its sim.Recoverer adopts what still runs of
// the same store's runs (the owner label) and removes the rest, and
// RemoveOrphans what normsims that are gone left behind. A goroutine
// owned by the Runtime follows the engine's event stream for those labels
// and turns container starts, health changes and deaths into
// sim.RuntimeEvents.
//
// BuildScratchImage builds the FROM-scratch images the examples run in: the
// machines normsim targets have no registry, so images are made locally from
// statically linked binaries.
package docker
