// Package docker implements sim.Runtime on a local Docker engine: each
// instance's LaunchSpec becomes a per-instance bridge network and one
// container per service, created and started the way `docker compose up -d`
// would (names, network aliases, depends_on conditions), so a product
// template behaves here as it does under the real system.
//
// The package owns everything it creates: containers, networks and named
// volumes carry the label io.normsim.managed=true next to the launch
// contract's io.normsim.* labels, which is how a later run finds the
// leftovers of an earlier one (Owned, Adopt, RemoveInstance). A goroutine
// owned by the Runtime follows the engine's event stream for those labels
// and turns container starts, health changes and deaths into
// sim.RuntimeEvents.
//
// BuildScratchImage builds the FROM-scratch images the examples run in: the
// machines normsim targets have no registry, so images are made locally from
// statically linked binaries.
package docker
